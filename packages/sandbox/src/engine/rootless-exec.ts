/**
 * Commands in a rootless box (rootless.ts): `crun exec` run inside the box's user namespace
 * (`nsenter --user=/proc/<init>/ns/user`, where the caller is root over the box's ids), with the command
 * given as an OCI process file (the box's rlimits, capabilities and `noNewPrivileges`, as the root
 * engine does). A tty is made by the same `tty-relay.pl` in the box's own devpts instance
 * (`/proc/<init>/root/dev/pts`), and signals reach commands of any box user through `kill` run in the
 * namespace (a command running as box uid 1000 is host subordinate uid, which the caller cannot
 * signal from outside).
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { BoxError } from '../errors.ts';
import { lstatInRoot } from './confined.ts';
import { commandProcess, setTerminalSize } from './exec-process.ts';
import { TTY_HELPER_PATH } from './oci.ts';
import { execFilesHandling, prepareOciExec, ttyRelayArgs } from './oci-exec.ts';
import type { EngineExecOptions, EngineProcess } from './types.ts';

/** What an exec needs to know about the box. */
export interface RootlessExecContext {
  id: string;
  /** Host pid of the box init. */
  initPid: number;
  /** `KEY=value` environment of the box. */
  env: string[];
  user?: string;
  workingDir: string;
  /** Capability names of the box (bounding set). */
  capabilities: string[];
  /** crun's state directory (`--root`). */
  crun: { root: string };
  /** Directory for the per-exec pid and process files. */
  execDir: string;
  /** Path of `tty-relay.pl` and the perl interpreter, when tty is possible. */
  ttyRelay?: { perl: string; script: string };
  /** Sequence number making the per-exec files unique. */
  seq: number;
}

/** `nsenter` argv prefix entering the user namespace of the box (as its root). */
export function inBoxUserns(initPid: number): string[] {
  return ['nsenter', `--user=/proc/${initPid}/ns/user`, '--'];
}

/** Sends `signal` to host pids of a box from inside its user namespace. */
export function signalInBox(initPid: number, pids: number[], signal: NodeJS.Signals): Promise<void> {
  if (pids.length === 0) return Promise.resolve();
  const [file, ...args] = inBoxUserns(initPid);
  return new Promise((resolve) => {
    const child = spawn(file!, [...args, 'kill', `-${signal.replace(/^SIG/, '')}`, ...pids.map(String)], {
      stdio: 'ignore',
    });
    child.on('error', () => resolve());
    child.on('exit', () => resolve());
  });
}

/**
 * Starts a command in a running rootless box (see the module comment and `Engine.exec`).
 * @throws BoxError naming `cmd`, `cwd`, `env`, `user` or `ttySize` for bad options.
 */
export async function rootlessExec(
  ctx: RootlessExecContext,
  options: EngineExecOptions,
): Promise<EngineProcess> {
  const boxRoot = `/proc/${ctx.initPid}/root`;
  const prepared = prepareOciExec(boxRoot, ctx, options, ctx);
  const { ociProcess, pidFile, processFile, ttySize: size } = prepared;
  // crun joins the box's cgroups through the delegated subtree (freezer included, which it reads on
  // every exec); the hybrid layout it refuses for `run` does not stop `exec`.
  const crunArgv = [
    ...inBoxUserns(ctx.initPid),
    'crun',
    '--root',
    ctx.crun.root,
    'exec',
    '--pid-file',
    pidFile,
    '--process',
    processFile,
    ctx.id,
  ];
  let argv = crunArgv;
  if (size) {
    if (!ctx.ttyRelay || !lstatInRoot(boxRoot, TTY_HELPER_PATH)) {
      throw new BoxError('tty: needs perl and a static busybox (busybox-static) on the host', {
        code: 'unsupported',
      });
    }
    const relay = ttyRelayArgs(boxRoot, prepared, options, size);
    argv = [ctx.ttyRelay.perl, ctx.ttyRelay.script, ...relay, ...crunArgv];
  }
  writeFileSync(processFile, JSON.stringify(ociProcess));
  const childEnv = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };
  if (options.detach) {
    // A background command (a box's main process): crun starts it with /dev/null as stdio and returns.
    argv.splice(argv.indexOf('exec') + 1, 0, '--detach');
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      const c = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'], env: childEnv });
      let stderr = '';
      c.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      c.on('error', (e) => resolve({ code: -1, stderr: e.message }));
      c.on('exit', (code) => resolve({ code: code ?? -1, stderr }));
    });
    await Promise.all([rm(pidFile, { force: true }), rm(processFile, { force: true })]).catch(() => {});
    if (result.code !== 0) {
      throw new BoxError(
        `box ${ctx.id}: the background command could not be started (runtime exit ${result.code}: ${result.stderr.trim().slice(-600)})`,
        { code: 'exec' },
      );
    }
    const empty = () => new PassThrough().end() as PassThrough;
    return {
      stdin: new PassThrough(),
      stdout: empty(),
      stderr: empty(),
      exited: Promise.resolve(0),
      kill: async () => {},
    };
  }
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: childEnv,
  });
  return commandProcess(child, {
    ...execFilesHandling(ctx.id, prepared),
    signal: (pid, signal) => signalInBox(ctx.initPid, [pid], signal),
    // The terminal is the command's stdin; stty runs in the box's user namespace (the command may
    // run as a box user the caller cannot reach from outside).
    ...(options.tty
      ? {
          setSize: (pid: number, cols: number, rows: number, done: () => boolean) =>
            setTerminalSize(pid, cols, rows, done, inBoxUserns(ctx.initPid)),
        }
      : {}),
  });
}
