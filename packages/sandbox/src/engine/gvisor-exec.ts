/**
 * Commands in a running gVisor box: `runsc exec --internal-pid-file` with three pipes, the exit code
 * the command's own; `kill` signals the command's pid in the sandbox with `runsc kill --pid`.
 *
 * A terminal (`tty`): runsc 20221219 has no `exec --tty`; it takes the command as an OCI process
 * (`--process`, `terminal: true`) and, without a console socket, hands its own stdin terminal to the
 * Sentry, which makes it the command's controlling terminal. runsc therefore runs under script(1)
 * (a host pseudo-terminal sized with `stty` before runsc starts); the command reads and writes it
 * through the Sentry's terminal emulation, never as a host process. `resize` sets that host
 * terminal's size (`stty -F /proc/<runsc pid>/fd/0`): the kernel sends SIGWINCH to runsc, which
 * forwards it into the sandbox, and the Sentry reads the new size from the host terminal.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import {
  checkTerminalSize,
  commandProcess,
  execRequest,
  exitCode,
  ociExecProcess,
  scriptTerminal,
  setTerminalSize,
} from './exec-process.ts';
import type { GVisorBoxMeta } from './gvisor-bundle.ts';
import { alive, run } from './host-process.ts';
import type { EngineExecOptions, EngineProcess } from './types.ts';

/** Exit code of a command that could not be started (as in the container tier). */
export const EXEC_START_FAILED = 255;

/** What `gvisorExec` needs of its engine. */
export interface GVisorExecContext {
  /** The runsc command line before the subcommand: `[runsc, --root, …]`. */
  runtime: string[];
  /** Directory of the commands' pid files (`<id>.<node pid>.<n>.ipid`). */
  execDir: string;
  /** A number unique among this process's commands, for the pid file's name. */
  seq: number;
}

/** The capability bounding set of the box's init (its bundle's `config.json`), for a `--process` exec. */
function boxCapabilities(meta: GVisorBoxMeta): string[] | undefined {
  try {
    const config = JSON.parse(readFileSync(join(meta.boxDir, 'bundle', 'config.json'), 'utf8')) as {
      process?: { capabilities?: { bounding?: string[] } };
    };
    return config.process?.capabilities?.bounding;
  } catch {
    return undefined;
  }
}

/** The pid of the only child of `pid` (runsc under script(1)), or undefined. */
function onlyChild(pid: number): number | undefined {
  try {
    const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/);
    const child = Number(children[0]);
    return children.length === 1 && child > 0 ? child : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs a command in the running gVisor box `meta.id`; see `Engine.exec`. The command starts from the
 * box's environment, user and working directory, each overridden by `options`. The exit code is the
 * command's, 128 + signal when a signal ended it, or `EXEC_START_FAILED` (255) when it could not be
 * started (runsc's message on stderr). With `tty` the command gets a terminal of `ttySize` (default
 * 80×24) and the process a `resize`.
 * @throws BoxError when `cmd` is empty, `user` is unknown, `cwd` or `env` is malformed, `ttySize` is
 *   not positive integers, or `detach` is asked with `tty`; code `unsupported` when `tty` is asked
 *   without script(1) on the host;
 *   `exited` rejects with a BoxError when runsc cannot be spawned.
 */
export function gvisorExec(
  ctx: GVisorExecContext,
  meta: GVisorBoxMeta,
  options: EngineExecOptions,
): EngineProcess {
  const id = meta.id;
  const req = execRequest(meta.rootfs, meta, options);
  const base = join(ctx.execDir, `${id}.${process.pid}.${ctx.seq}`);
  const pidFile = `${base}.ipid`;
  const processFile = `${base}.process.json`;
  const [runsc, ...runscArgs] = ctx.runtime as [string, ...string[]];
  let file = runsc;
  let argv: string[];
  if (options.tty) {
    if (options.detach)
      throw new BoxError('detach: a background command cannot have a tty', { field: 'detach' });
    const size = options.ttySize ?? { cols: 80, rows: 24 };
    checkTerminalSize('ttySize', size.cols, size.rows);
    const processSpec = { ...ociExecProcess(req, options, boxCapabilities(meta)), terminal: true };
    const command = [
      runsc,
      ...runscArgs,
      'exec',
      '--internal-pid-file',
      pidFile,
      '--process',
      processFile,
      id,
    ];
    ({ file, argv } = scriptTerminal(command, size));
    writeFileSync(processFile, JSON.stringify(processSpec), { mode: 0o644 });
  } else {
    argv = [...runscArgs, 'exec', '--internal-pid-file', pidFile];
    if (req.user !== undefined) argv.push('--user', req.user);
    argv.push('--cwd', req.cwd);
    for (const e of req.env.values()) argv.push('--env', e);
    argv.push(id, options.cmd, ...options.args);
  }
  const child = spawn(file, argv, { stdio: ['pipe', 'pipe', 'pipe'] });
  return commandProcess(child, {
    id,
    pidFile,
    pidWaitMs: 2000,
    exitOf: (code, signal) => {
      // runsc writes the command's pid once the command runs: without it, it never started.
      const started = existsSync(pidFile);
      rm(pidFile, { force: true }).catch(() => {});
      if (options.tty) rm(processFile, { force: true }).catch(() => {});
      return !started && code === 128 ? EXEC_START_FAILED : exitCode(code, signal);
    },
    // The pid is the command's inside the sandbox.
    signal: async (pid, signal) => {
      await run(runsc, [...runscArgs, 'kill', '--pid', String(pid), id, signal.replace(/^SIG/, '')]);
    },
    // The terminal is the host pseudo-terminal script(1) gave runsc (its only child) as stdin.
    ...(options.tty
      ? {
          setSize: async (_pid: number, cols: number, rows: number, done: () => boolean) => {
            const holder = child.pid !== undefined ? onlyChild(child.pid) : undefined;
            if (holder !== undefined) await setTerminalSize(holder, cols, rows, done);
          },
        }
      : {}),
  });
}

/**
 * Removes the per-command files of Node processes that died mid-exec: pid files
 * (`<id>.<node pid>.<n>.ipid`) and terminal process specs (`<id>.<node pid>.<n>.process.json`).
 */
export function cleanStaleExecFiles(execDir: string): void {
  for (const name of readdirSync(execDir)) {
    const parts = name.split('.');
    const owner = name.endsWith('.ipid')
      ? Number(parts.at(-3))
      : name.endsWith('.process.json')
        ? Number(parts.at(-4))
        : 0;
    if (owner > 0 && owner !== process.pid && !alive(owner)) rmSync(join(execDir, name), { force: true });
  }
}
