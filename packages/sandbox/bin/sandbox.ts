#!/usr/bin/env node
/**
 * `sandbox`: command line of the Sandbox SDK. Commands: `run`, `ps`, `exec`, `stop`, `rm`, `pull`,
 * `images`, `serve` (the REST runtime), `keys` and `preview` (shared service, src/cli/keys.ts), `doctor` and `setup` (rootless host preparation, src/cli); `--help` and `--version`. `run` and `exec` exit with the
 * command's own exit code; SDK errors exit with 125, usage errors with 2.
 *
 * Global options: `--home <dir>` (or `SANDBOX_HOME`; default `~/.sandbox`) and `--registry <url>`
 * (repeatable, or comma-separated in `SANDBOX_REGISTRIES`): `http://127.0.0.1:5000` adds a search registry
 * reached over plain HTTP, `https://host` over TLS.
 */
import module from 'node:module';
import { resolve } from 'node:path';
import pkg from '@seed/sandbox/package.json' with { type: 'json' };
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import type { JsExecution } from '../src/runtime/execution.ts';
import type { JsBoxOptions, JsImageRegistry, JsVolumeSpec } from '../src/types.ts';

// Cache the type-stripped modules between runs (cuts ~300 ms from every command), then load the SDK.
module.enableCompileCache?.();
const { BoxError } = await import('../src/errors.ts');
const { renderPullProgress } = await import('../src/images/index.ts');
const { labelFilter } = await import('../src/runtime/options.ts');
const { JsRuntime, defaultHomeDir } = await import('../src/js-runtime.ts');
const { addHostCommands } = await import('../src/cli/host-commands.ts');
const { addKeyCommands } = await import('../src/cli/keys.ts');
const { addMcpCommand } = await import('../src/cli/mcp.ts');
type JsRuntime = InstanceType<typeof JsRuntime>;

/** Exit status of an SDK failure (the command itself could not run), as `docker run` uses it. */
const EXIT_SDK_ERROR = 125;

interface GlobalOptions {
  home?: string;
  registry: string[];
}

/** The command words of `run`/`exec` without the `--` separator (kept by commander's pass-through). */
function commandWords(words: string[]): string[] {
  return words[0] === '--' ? words.slice(1) : words;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

/** `http://host:port` / `https://host` / `host` → a search registry. */
function parseRegistry(value: string): JsImageRegistry {
  const m = /^(?:(https?):\/\/)?([^/\s]+)\/?$/.exec(value.trim());
  if (!m)
    throw new InvalidArgumentError(`registry '${value}' must look like http://host:port or https://host`);
  return { host: m[2]!, transport: m[1] === 'http' ? 'http' : 'https', search: true };
}

function runtimeFrom(command: Command): JsRuntime {
  const opts = command.optsWithGlobals<GlobalOptions>();
  const registries = [
    ...opts.registry,
    ...(process.env.SANDBOX_REGISTRIES?.split(',').filter(Boolean) ?? []),
  ];
  const home = opts.home ?? process.env.SANDBOX_HOME;
  return new JsRuntime({
    ...(home ? { homeDir: home } : {}),
    imageRegistries: registries.map(parseRegistry),
  });
}

function parseEnv(values: string[], option = '--env'): { key: string; value: string }[] {
  return values.map((entry) => {
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new InvalidArgumentError(`${option} '${entry}' must be KEY=VALUE`);
    return { key: entry.slice(0, eq), value: entry.slice(eq + 1) };
  });
}

/** `host:guest[:ro|rw]`; a host part that is not a path (`data:/data`) names a managed volume. */
function parseVolume(value: string): JsVolumeSpec {
  const parts = value.split(':');
  const mode = parts.length === 3 ? parts.pop() : undefined;
  if (
    parts.length !== 2 ||
    !parts[0] ||
    !parts[1] ||
    (mode !== undefined && mode !== 'ro' && mode !== 'rw')
  ) {
    throw new InvalidArgumentError(
      `--volume '${value}' must be HOST_PATH:GUEST_PATH[:ro] or VOLUME_NAME:GUEST_PATH`,
    );
  }
  const [origin, guestPath] = parts as [string, string];
  const isPath = origin.startsWith('/') || origin.startsWith('.') || origin.startsWith('~');
  if (!isPath) return { managedVolume: origin, guestPath, ...(mode === 'ro' ? { readOnly: true } : {}) };
  return { hostPath: resolve(origin), guestPath, readOnly: mode === 'ro' };
}

function parseNumber(name: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a positive number`);
    return n;
  };
}

/** `512`, `512m`, `1g` → MiB. */
function parseMemory(value: string): number {
  const m = /^(\d+(?:\.\d+)?)([mMgG]?)i?[bB]?$/.exec(value);
  if (!m) throw new InvalidArgumentError('--memory must be MiB, or a size such as 512m or 1g');
  const mib = Number(m[1]) * (m[2]?.toLowerCase() === 'g' ? 1024 : 1);
  if (!Number.isInteger(mib) || mib <= 0)
    throw new InvalidArgumentError('--memory must be a whole number of MiB');
  return mib;
}

/**
 * Streams an execution to this process's stdout/stderr (stdin from ours with `interactive`), and resolves
 * with its exit code. Ctrl-C kills the command.
 */
async function attach(execution: JsExecution, interactive: boolean): Promise<number> {
  const { stdout, stderr, stdin } = execution.collect();
  if (interactive) {
    process.stdin.on('data', (chunk: Buffer) => {
      stdin.write(chunk).catch(() => {});
    });
    process.stdin.on('end', () => {
      stdin.close().catch(() => {});
    });
  } else {
    await stdin.close();
  }
  const onSignal = () => {
    execution.kill().catch(() => {});
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const [{ exitCode }] = await Promise.all([
      execution.wait(),
      stdout.drainTo((text) => process.stdout.write(text)),
      stderr.drainTo((text) => process.stderr.write(text)),
    ]);
    return exitCode;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (interactive) process.stdin.destroy();
  }
}

function pad(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('   ')
        .trimEnd(),
    )
    .join('\n');
}

function humanBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** Builds the `sandbox` program (exported so that further commands, e.g. `serve`, can be added). */
export function buildProgram(): Command {
  const program = new Command('sandbox')
    .description('Run commands in isolated boxes started from OCI images (Sandbox SDK, spec 002)')
    .version(pkg.version, '-V, --version', 'print the version')
    .option('--home <dir>', 'runtime data directory (default: $SANDBOX_HOME or ~/.sandbox)')
    .option('--registry <url>', 'search registry, e.g. http://127.0.0.1:5000 (repeatable)', collect, [])
    .enablePositionalOptions()
    .showHelpAfterError()
    .exitOverride();

  program
    .command('run')
    .description('create a box from IMAGE and run CMD in it; without CMD, start the box and print its id')
    .argument('<image>', 'OCI image reference, e.g. busybox:latest or python:slim')
    .argument('[cmd...]', 'command and arguments (put them after --)')
    .option('--rm', 'remove the box when the command exits (the box does not outlive this process)')
    .option('--name <name>', 'unique box name')
    .option('-e, --env <KEY=VALUE>', 'environment variable (repeatable)', collect, [])
    .option('-l, --label <KEY=VALUE>', 'label of the box (repeatable)', collect, [])
    .option(
      '-v, --volume <HOST:GUEST[:ro]>',
      'bind a host path, or NAME:GUEST for a managed volume (repeatable)',
      collect,
      [],
    )
    .option('--cpus <n>', 'CPU cores (default 1)', parseNumber('--cpus'))
    .option('--memory <size>', 'memory limit in MiB, or 512m / 1g (default 512)', parseMemory)
    .option('-w, --workdir <dir>', 'working directory in the box (default /root)')
    .addOption(new Option('--network <mode>', 'network mode').choices(['enabled', 'disabled']))
    .option('-i, --interactive', 'forward this process stdin to the command')
    .passThroughOptions()
    .action(async (image: string, words: string[], opts, command: Command) => {
      const cmd = commandWords(words);
      const runtime = runtimeFrom(command);
      const options: JsBoxOptions = {
        image,
        env: parseEnv(opts.env),
        volumes: (opts.volume as string[]).map(parseVolume),
        autoRemove: opts.rm === true,
        detach: opts.rm !== true,
      };
      if (opts.cpus !== undefined) options.cpus = opts.cpus;
      if (opts.memory !== undefined) options.memoryMib = opts.memory;
      if (opts.workdir !== undefined) options.workingDir = opts.workdir;
      if (opts.network !== undefined) options.network = { mode: opts.network };
      if (opts.label.length > 0) {
        options.labels = Object.fromEntries(
          parseEnv(opts.label, '--label').map(({ key, value }) => [key, value]),
        );
      }
      // Stored images resolve without network access; others are pulled here with a progress bar. A REST
      // runtime's server pulls the image itself when the box is created.
      if (runtime.url === null && !(await runtime.images.get(image))) {
        await runtime.images.pull(image, { onProgress: renderPullProgress(process.stderr) });
      }
      const box = await runtime.create(options, opts.name);
      if (cmd.length === 0) {
        process.stdout.write(`${box.id}\n`);
        return;
      }
      let exitCode: number;
      try {
        const execution = await box.exec(cmd[0]!, cmd.slice(1));
        exitCode = await attach(execution, opts.interactive === true);
      } finally {
        if (opts.rm) await runtime.remove(box.id, true);
      }
      process.exitCode = exitCode;
    });

  program
    .command('ps')
    .description('list boxes')
    .option('-q, --quiet', 'only ids')
    .option('--json', 'JSON array of JsBoxInfo')
    .option(
      '-l, --label <KEY[=VALUE]>',
      'only boxes with this label (repeatable: all must match)',
      collect,
      [],
    )
    .action(async (opts, command: Command) => {
      const matches = labelFilter(opts.label);
      const infos = (await runtimeFrom(command).listInfo()).filter(matches);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(infos, null, 2)}\n`);
      } else if (opts.quiet) {
        for (const info of infos) process.stdout.write(`${info.id}\n`);
      } else {
        // The LABELS column (`key=value,…`) is shown when a listed box has labels.
        const labelled = infos.some((i) => i.labels !== undefined);
        const rows = [
          ['ID', 'NAME', 'STATUS', 'IMAGE', 'CPUS', 'MEMORY', 'CREATED', ...(labelled ? ['LABELS'] : [])],
        ];
        for (const i of infos) {
          const labels = Object.entries(i.labels ?? {}).map(([key, value]) => `${key}=${value}`);
          rows.push([
            i.id,
            i.name ?? '',
            i.state.status,
            i.image,
            String(i.cpus),
            `${i.memoryMib} MiB`,
            i.createdAt,
            ...(labelled ? [labels.join(',')] : []),
          ]);
        }
        process.stdout.write(`${pad(rows)}\n`);
      }
    });

  program
    .command('exec')
    .description('run CMD in a running box; exits with its exit code')
    .argument('<box>', 'box id or name')
    .argument('<cmd...>', 'command and arguments (put them after --)')
    .option('-e, --env <KEY=VALUE>', 'environment variable (repeatable)', collect, [])
    .option('-w, --workdir <dir>', 'working directory of the command')
    .option('-u, --user <user>', 'user of the command (uid[:gid] or name)')
    .option('-i, --interactive', 'forward this process stdin to the command')
    .passThroughOptions()
    .action(async (idOrName: string, words: string[], opts, command: Command) => {
      const cmd = commandWords(words);
      if (cmd.length === 0) throw new InvalidArgumentError('exec needs a command after the box');
      const box = await runtimeFrom(command).get(idOrName);
      if (!box) throw new BoxError(`no box with id or name '${idOrName}'`, { code: 'not_found' });
      const env = Object.fromEntries(parseEnv(opts.env).map(({ key, value }) => [key, value]));
      const execution = await box.execWith(cmd[0]!, cmd.slice(1), env, {
        ...(opts.workdir ? { cwd: opts.workdir } : {}),
        ...(opts.user ? { user: opts.user } : {}),
      });
      process.exitCode = await attach(execution, opts.interactive === true);
    });

  program
    .command('stop')
    .description('stop boxes (boxes created with --rm are removed)')
    .argument('<box...>', 'box ids or names')
    .action(async (names: string[], _opts, command: Command) => {
      const runtime = runtimeFrom(command);
      for (const idOrName of names) {
        const box = await runtime.get(idOrName);
        if (!box) throw new BoxError(`no box with id or name '${idOrName}'`, { code: 'not_found' });
        await box.stop();
        process.stdout.write(`${idOrName}\n`);
      }
    });

  program
    .command('rm')
    .description('remove boxes')
    .argument('<box...>', 'box ids or names')
    .option('-f, --force', 'remove running boxes too (they are killed)')
    .action(async (names: string[], opts, command: Command) => {
      const runtime = runtimeFrom(command);
      for (const idOrName of names) {
        await runtime.remove(idOrName, opts.force === true);
        process.stdout.write(`${idOrName}\n`);
      }
    });

  program
    .command('pull')
    .description('pull an image into the store, with progress')
    .argument('<image>', 'OCI image reference')
    .action(async (image: string, _opts, command: Command) => {
      const prepared = await runtimeFrom(command).images.pull(image, {
        onProgress: renderPullProgress(process.stderr),
      });
      process.stdout.write(`${prepared.resolvedReference} ${prepared.digest}\n`);
    });

  program
    .command('images')
    .description('list images in the store')
    .option('-q, --quiet', 'only references')
    .action(async (opts, command: Command) => {
      const images = await runtimeFrom(command).images.list();
      if (opts.quiet) {
        for (const image of images) process.stdout.write(`${image.reference}\n`);
        return;
      }
      const rows = [['REFERENCE', 'DIGEST', 'SIZE']];
      for (const image of images)
        rows.push([image.reference, image.digest.slice(0, 19), humanBytes(image.sizeBytes)]);
      process.stdout.write(`${pad(rows)}\n`);
    });

  program
    .command('serve')
    .description(
      'serve the local runtime over HTTP: the REST runtime under /v1 (OpenAPI at /v1/openapi.json)',
    )
    .option('--host <host>', 'listen address; a non-loopback address needs an API key', '127.0.0.1')
    .option('--port <port>', 'TCP port', parsePort, 8100)
    .option('--api-key <key>', 'bearer API key clients must present (default: $SANDBOX_API_KEY)')
    .option('--jwks-url <url>', 'also accept access tokens of the auth service, verified with this JWKS')
    .option('--jwt-issuer <issuer>', 'required iss of access tokens')
    .option('--jwt-audience <audience>', 'required aud of access tokens')
    .option('--jwt-require-tenant', 'access tokens must carry a tenant claim (default: sub names the tenant)')
    .option(
      '--template <name=image>',
      'E2B template served by this image, beside base and code-interpreter-v1 (repeatable)',
      (value: string, previous: [string, string][]) => [...previous, parseTemplate(value)],
      [],
    )
    .option('--state-dir <dir>', 'keys, ownership, preview URLs and audit log (default <home>/serve)')
    .option('--limits <file>', 'per-tenant quotas and rates, node margins (JSON; re-read on change)')
    .option('--public-url <url>', 'base URL of preview URLs (default the listen URL)')
    .option('--preview-domain <domain>', 'serve preview URLs as <port>-<boxId>.<domain> (wildcard DNS)')
    .option(
      '--e2b-domain <domain>',
      'route Host names <port>-<sandboxId>.<domain> to sandboxes (E2B_DOMAIN of clients)',
    )
    .action(async (opts, command: Command) => {
      const { startRestServer } = await import('../src/rest/server.ts');
      const { ensureReaper } = await import('../src/runtime/reaper.ts');
      const global = command.optsWithGlobals<GlobalOptions>();
      const registries = [
        ...global.registry,
        ...(process.env.SANDBOX_REGISTRIES?.split(',').filter(Boolean) ?? []),
      ];
      // Always local (an explicit homeDir): the server must not follow SANDBOX_URL to another server.
      const runtime = new JsRuntime({
        homeDir: global.home ?? process.env.SANDBOX_HOME ?? defaultHomeDir(),
        imageRegistries: registries.map(parseRegistry),
      });
      const apiKey: string | undefined = opts.apiKey ?? (process.env.SANDBOX_API_KEY || undefined);
      const server = await startRestServer({
        runtime,
        host: opts.host,
        port: opts.port,
        ...(apiKey ? { apiKey } : {}),
        ...(opts.jwksUrl
          ? {
              jwt: {
                jwksUrl: opts.jwksUrl,
                ...(opts.jwtIssuer ? { issuer: opts.jwtIssuer } : {}),
                ...(opts.jwtAudience ? { audience: opts.jwtAudience } : {}),
                ...(opts.jwtRequireTenant ? { requireTenantClaim: true } : {}),
              },
            }
          : {}),
        e2b: {
          templates: Object.fromEntries(opts.template as [string, string][]),
          ...(opts.e2bDomain ? { domain: opts.e2bDomain } : {}),
        },
        ...(opts.stateDir ? { stateDir: opts.stateDir } : {}),
        ...(opts.limits ? { limitsFile: opts.limits } : {}),
        ...(opts.publicUrl ? { publicUrl: opts.publicUrl } : {}),
        ...(opts.previewDomain ? { previewDomain: opts.previewDomain } : {}),
        onLimitsError: (error: Error) =>
          process.stderr.write(`sandbox: limits file ignored: ${error.message}\n`),
        logger: { level: 'info' },
      });
      process.stderr.write(
        `sandbox: REST runtime on ${server.url}/v1 (home ${runtime.homeDir}, auth ${apiKey || opts.jwksUrl ? 'bearer' : 'loopback only'})\n`,
      );
      // Box lifetimes stored in the homeDir are enforced from now on (the reaper exits when none is left).
      ensureReaper(runtime.homeDir);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      });
      await server.close();
    });

  addHostCommands(program);
  addKeyCommands(program, {
    homeDir: (command) =>
      command.optsWithGlobals<GlobalOptions>().home ?? process.env.SANDBOX_HOME ?? defaultHomeDir(),
    runtime: runtimeFrom,
  });
  addMcpCommand(program, { runtime: runtimeFrom });
  return program;
}

/** `name=image` → `[name, image]` (an E2B template of `serve`). */
function parseTemplate(value: string): [string, string] {
  const at = value.indexOf('=');
  if (at < 1 || at === value.length - 1) {
    throw new InvalidArgumentError(`template '${value}' must look like name=image, e.g. python=python:slim`);
  }
  return [value.slice(0, at), value.slice(at + 1)];
}

/** `8100` → 8100 (0 for an ephemeral port). */
function parsePort(value: string): number {
  const port = Number(value);
  if (!/^\d+$/.test(value) || port > 65535)
    throw new InvalidArgumentError('--port must be an integer 0-65535');
  return port;
}

/** Parses `argv` and runs the command; resolves with the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`sandbox: error: ${message}\n`);
    return EXIT_SDK_ERROR;
  }
}

/** Runs the command line with `process.argv` and exits with its status. */
export async function runCli(): Promise<void> {
  const code = await main(process.argv);
  process.exitCode = code;
  // Open handles (engine helpers, stdin) must not keep a finished command alive.
  setImmediate(() => process.exit(code));
}

if (import.meta.main) await runCli();
