/**
 * Commands in a running gVisor box: `runsc exec --internal-pid-file` with three pipes, the exit code
 * the command's own; `kill` signals the command's pid in the sandbox with `runsc kill --pid`. No
 * terminal (`tty`): runsc 20221219 has no `exec --tty`.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { commandProcess, execRequest, exitCode } from './exec-process.ts';
import type { GVisorBoxMeta } from './gvisor-bundle.ts';
import { alive, run } from './host-process.ts';
import type { EngineExecOptions, EngineProcess } from './types.ts';

/** Exit code of a command that could not be started (as in the container tier). */
export const EXEC_START_FAILED = 255;

/**
 * Refuses a terminal: runsc 20221219 has no `exec --tty`.
 * @throws BoxError (code `unsupported`) when `options.tty` is set.
 */
export function refuseTty(options: Pick<EngineExecOptions, 'tty'>): void {
  if (options.tty) {
    throw new BoxError(
      "tty: not supported by the gvisor isolation tier (runsc 20221219 has no exec --tty); use isolation 'container'",
      { code: 'unsupported' },
    );
  }
}

/** What `gvisorExec` needs of its engine. */
export interface GVisorExecContext {
  /** The runsc command line before the subcommand: `[runsc, --root, …]`. */
  runtime: string[];
  /** Directory of the commands' pid files (`<id>.<node pid>.<n>.ipid`). */
  execDir: string;
  /** A number unique among this process's commands, for the pid file's name. */
  seq: number;
}

/**
 * Runs a command in the running gVisor box `meta.id`; see `Engine.exec`. The command starts from the
 * box's environment, user and working directory, each overridden by `options`. The exit code is the
 * command's, 128 + signal when a signal ended it, or `EXEC_START_FAILED` (255) when it could not be
 * started (runsc's message on stderr).
 * @throws BoxError when `tty` is requested (code `unsupported`), `cmd` is empty, `user` is unknown, or
 *   `cwd` or `env` is malformed; `exited` rejects with a BoxError when runsc cannot be spawned.
 */
export function gvisorExec(
  ctx: GVisorExecContext,
  meta: GVisorBoxMeta,
  options: EngineExecOptions,
): EngineProcess {
  const id = meta.id;
  refuseTty(options);
  const req = execRequest(meta.rootfs, meta, options);
  const pidFile = join(ctx.execDir, `${id}.${process.pid}.${ctx.seq}.ipid`);
  const args = ['exec', '--internal-pid-file', pidFile];
  if (req.user !== undefined) args.push('--user', req.user);
  args.push('--cwd', req.cwd);
  for (const e of req.env.values()) args.push('--env', e);
  args.push(id, options.cmd, ...options.args);
  const [runsc, ...runscArgs] = ctx.runtime as [string, ...string[]];
  const child = spawn(runsc, [...runscArgs, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  return commandProcess(child, {
    id,
    pidFile,
    pidWaitMs: 2000,
    exitOf: (code, signal) => {
      // runsc writes the command's pid once the command runs: without it, it never started.
      const started = existsSync(pidFile);
      rm(pidFile, { force: true }).catch(() => {});
      return !started && code === 128 ? EXEC_START_FAILED : exitCode(code, signal);
    },
    // The pid is the command's inside the sandbox.
    signal: async (pid, signal) => {
      await run(runsc, [...runscArgs, 'kill', '--pid', String(pid), id, signal.replace(/^SIG/, '')]);
    },
  });
}

/** Removes exec pid files of Node processes that died mid-exec (`<id>.<node pid>.<n>.ipid`). */
export function cleanStaleExecFiles(execDir: string): void {
  for (const name of readdirSync(execDir)) {
    if (!name.endsWith('.ipid')) continue;
    const owner = Number(name.split('.').at(-3));
    if (owner > 0 && owner !== process.pid && !alive(owner)) rmSync(join(execDir, name), { force: true });
  }
}
