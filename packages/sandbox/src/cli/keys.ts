/**
 * The shared-service commands of the `sandbox` command line: `sandbox keys create|list|revoke`
 * manage the API keys of a `sandbox serve` node in its state directory (`<home>/serve/keys.json`, or
 * `--state-dir`), whether or not the server runs — a running server applies a change at its next request;
 * `sandbox preview <box> <port>` asks a REST server (`SANDBOX_URL`, `SANDBOX_API_KEY`) for a signed preview
 * URL of a box port.
 */
import { join } from 'node:path';
import { type Command, InvalidArgumentError } from 'commander';
import type { JsRuntime } from '../js-runtime.ts';
import { DEFAULT_KEY_PERMISSIONS, KEY_PERMISSIONS, KeyStore } from '../rest/tenancy/keys.ts';

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A lifetime (`90s`, `15m`, `12h`, `30d`) or an RFC 3339 time, as ms since the epoch from `now`.
 * @throws InvalidArgumentError naming the accepted forms.
 */
export function parseExpiry(value: string, now = Date.now()): number {
  const match = /^(\d+)([smhd])$/.exec(value.trim());
  if (match) return now + Number(match[1]) * UNIT_MS[match[2]!]!;
  const at = Date.parse(value);
  if (/^\d{4}-\d{2}-\d{2}T/.test(value) && !Number.isNaN(at)) return at;
  throw new InvalidArgumentError('must be a lifetime such as 90s, 15m, 12h, 30d, or an RFC 3339 time');
}

/** A lifetime (`90s`, `15m`, `12h`, `30d`) in ms. @throws InvalidArgumentError. */
function parseLifetime(value: string): number {
  const match = /^(\d+)([smhd])$/.exec(value.trim());
  if (!match) throw new InvalidArgumentError('must be a lifetime such as 90s, 15m, 12h or 7d');
  return Number(match[1]) * UNIT_MS[match[2]!]!;
}

function parsePermissions(value: string): string[] {
  const list = value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  for (const p of list) {
    if (!(KEY_PERMISSIONS as readonly string[]).includes(p))
      throw new InvalidArgumentError(`'${p}' is not one of ${KEY_PERMISSIONS.join(', ')}`);
  }
  if (list.length === 0) throw new InvalidArgumentError('must name at least one permission');
  return list;
}

/** What the commands need from the program: the default home directory and a runtime for `preview`. */
export interface KeyCommandDeps {
  /** The runtime home of `--home` / `SANDBOX_HOME` / the default. */
  homeDir(command: Command): string;
  /** The runtime the global options name (REST with `SANDBOX_URL`). */
  runtime(command: Command): JsRuntime;
}

/** Adds `keys` and `preview` to `program`. */
export function addKeyCommands(program: Command, deps: KeyCommandDeps): void {
  const store = (command: Command) => {
    const dir =
      command.optsWithGlobals<{ stateDir?: string }>().stateDir ?? join(deps.homeDir(command), 'serve');
    return new KeyStore(join(dir, 'keys.json'));
  };
  const keys = program
    .command('keys')
    .description('API keys of a sandbox serve node: each belongs to a tenant (shown once, stored hashed)')
    .option('--state-dir <dir>', "the server's state directory (default <home>/serve)");

  keys
    .command('create')
    .description('create a key for a tenant and print it (only this once)')
    .requiredOption('--tenant <tenant>', 'the tenant the key acts as')
    .option(
      '--permissions <list>',
      `comma-separated: ${KEY_PERMISSIONS.join(', ')} (default ${DEFAULT_KEY_PERMISSIONS.join(',')})`,
      parsePermissions,
    )
    .option('--expires <when>', 'lifetime (90s, 15m, 12h, 30d) or RFC 3339 time; default never', (v) =>
      parseExpiry(v),
    )
    .option('--json', 'print the key and its record as JSON')
    .action((opts, command: Command) => {
      const { key, info } = store(command).create({
        tenant: opts.tenant,
        ...(opts.permissions ? { permissions: opts.permissions } : {}),
        ...(opts.expires !== undefined ? { expiresAt: opts.expires } : {}),
      });
      if (opts.json) process.stdout.write(`${JSON.stringify({ key, ...info }, null, 2)}\n`);
      else
        process.stdout.write(
          `${key}\n(id ${info.id}, tenant ${info.tenant}, ${info.permissions.join(',')}, expires ${info.expiresAt ?? 'never'}; shown once)\n`,
        );
    });

  keys
    .command('list')
    .description('list keys by id and prefix (never the keys)')
    .option('--tenant <tenant>', 'only this tenant')
    .option('--json', 'print JSON')
    .action((opts, command: Command) => {
      const list = store(command).list(opts.tenant);
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
        return;
      }
      const rows = [['ID', 'PREFIX', 'TENANT', 'PERMISSIONS', 'EXPIRES', 'REVOKED']];
      for (const k of list)
        rows.push([
          k.id,
          k.prefix,
          k.tenant,
          k.permissions.join(','),
          k.expiresAt ?? 'never',
          k.revokedAt ?? '-',
        ]);
      const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
      process.stdout.write(
        `${rows
          .map((r) =>
            r
              .map((c, i) => c.padEnd(widths[i]!))
              .join('  ')
              .trimEnd(),
          )
          .join('\n')}\n`,
      );
    });

  keys
    .command('revoke')
    .description('revoke a key by id (applies at once, no restart)')
    .argument('<id>', 'key id')
    .action((id: string, _opts, command: Command) => {
      const info = store(command).revoke(id);
      process.stdout.write(`revoked ${info.id} (${info.prefix}…, tenant ${info.tenant})\n`);
    });

  program
    .command('preview')
    .description('print a signed preview URL of a box port (needs a REST runtime: SANDBOX_URL)')
    .argument('<box>', 'box id or name')
    .argument('<port>', 'TCP port in the box', (v) => {
      const port = Number(v);
      if (!Number.isInteger(port) || port < 1 || port > 65535)
        throw new InvalidArgumentError('must be 1-65535');
      return port;
    })
    .option('--expires <lifetime>', 'lifetime (90s, 15m, 12h, 7d); default 1h', parseLifetime)
    .action(async (boxName: string, port: number, opts, command: Command) => {
      const runtime = deps.runtime(command);
      const box = await runtime.get(boxName);
      if (!box) throw new InvalidArgumentError(`no box '${boxName}'`);
      const preview = await box.network.previewUrl(port, opts.expires ? { expiresIn: opts.expires } : {});
      process.stdout.write(`${preview.url}\n(expires ${preview.expiresAt}, id ${preview.id})\n`);
    });
}
