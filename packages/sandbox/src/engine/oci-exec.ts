/**
 * Commands in a running box of the container tier (engine.ts): `<runtime> exec --process` with plain
 * pipes, the command given as an OCI process file (the box's rlimits, capabilities and
 * `noNewPrivileges`; exec-process.ts). A terminal (`tty`) is made by `tty-relay.pl` (scripts.ts) in
 * the box's own devpts with crun, or by the runtime's `exec --tty` under script(1) otherwise. A
 * background command (`detach`) is started by `exec --detach` and outlives this process. The steps the
 * rootless engine (rootless-exec.ts) takes alike live here too: the checked request, OCI process and
 * per-command files (`prepareOciExec`), the terminal relay's arguments (`ttyRelayArgs`) and the files'
 * removal at exit (`execFilesHandling`).
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import {
  type CommandHandling,
  checkTerminalSize,
  commandProcess,
  type ExecDefaults,
  type ExecRequest,
  execRequest,
  exitCode,
  type OciExecProcess,
  ociExecProcess,
  resolveInBox,
  scriptTerminal,
  searchPath,
  setTerminalSize,
} from './exec-process.ts';
import { alive, sleep } from './host-process.ts';
import type { IdMapping } from './idmap.ts';
import { TTY_HELPER_PATH } from './oci.ts';
import type { EngineExecOptions, EngineProcess } from './types.ts';

/** What `ociExec` needs of its engine. */
export interface OciExecContext {
  /** The runtime command line before the subcommand: `[crun, --root, …]`. */
  runtime: string[];
  /** Directory of the commands' pid and process files (`<id>.<node pid>.<n>.pid` / `.json`). */
  execDir: string;
  /** A number unique among this process's commands, for the files' names. */
  seq: number;
  /** Host `perl` running the terminal relay; undefined when the relay cannot serve (runc, no busybox). */
  ttyPerl: string | undefined;
  /** Host path of `tty-relay.pl`. */
  ttyRelayPath: string;
}

/** The running box a command goes into. */
export interface OciExecBox extends ExecDefaults {
  id: string;
  /** Host path of the box's root mount point (its image files, read confined for `user`). */
  rootfs: string;
  /** Host pid of the box init. */
  initPid: number;
  /** The box's capability names (bounding set); undefined: the runtime's defaults. */
  capabilities?: string[];
  /** The box's user namespace mapping; null or undefined: none. */
  idMap?: IdMapping | null;
}

/** A command checked and described for `<runtime> exec --process` (see `prepareOciExec`). */
export interface PreparedOciExec {
  /** The checked request. */
  req: ExecRequest;
  /** The command's OCI process, to be written to `processFile`. */
  ociProcess: OciExecProcess;
  /** The runtime's pid file of the command: `<execDir>/<box id>.<node pid>.<seq>.pid`. */
  pidFile: string;
  /** The command's OCI process file: the same name ending in `.json`. */
  processFile: string;
  /** The terminal size in character cells (default 80×24), checked; undefined without `tty`. */
  ttySize: { cols: number; rows: number } | undefined;
}

/**
 * The first steps of a command of the root (`ociExec`) and rootless (rootless-exec.ts) engines: checks
 * `options` against the box's defaults (its user resolved under `rootfs`), builds its OCI process with the
 * box's `capabilities`, names its per-command files under `files.execDir` and checks its terminal size.
 * @throws BoxError naming `cmd`, `user`, `cwd`, `env` (`execRequest`), `ttySize`, or `detach` (with a tty).
 */
export function prepareOciExec(
  rootfs: string,
  box: ExecDefaults & { id: string; capabilities?: string[] | undefined },
  options: EngineExecOptions,
  files: { execDir: string; seq: number },
): PreparedOciExec {
  const req = execRequest(rootfs, box, options);
  const base = join(files.execDir, `${box.id}.${process.pid}.${files.seq}`);
  // The command is given as an OCI process (`exec --process`): the runtime's command-line form
  // would leave out the box's rlimits and `noNewPrivileges`, and give the command the caller's limits.
  const ociProcess = ociExecProcess(req, options, box.capabilities);
  let ttySize: { cols: number; rows: number } | undefined;
  if (options.tty) {
    ttySize = options.ttySize ?? { cols: 80, rows: 24 };
    checkTerminalSize('ttySize', ttySize.cols, ttySize.rows);
    if (options.detach)
      throw new BoxError('detach: a background command cannot have a tty', { field: 'detach' });
  }
  return { req, ociProcess, pidFile: `${base}.pid`, processFile: `${base}.json`, ttySize };
}

/**
 * Lets `tty-relay.pl` make the command's terminal in the box's own devpts (`<boxRoot>/dev/pts`, sized
 * before anything runs): the command is resolved on the box's PATH here (busybox would run its own
 * applet of that name instead; one not found is left to the runtime, which reports it) and started by
 * busybox `setsid -c`, so it leads a session owning the terminal (Ctrl-C, job control).
 * @param boxRoot the box root as the host reaches it, `/proc/<init pid>/root`.
 * @returns the relay's arguments before the runtime's command line: the devpts directory, cols, rows.
 */
export function ttyRelayArgs(
  boxRoot: string,
  prepared: PreparedOciExec,
  options: EngineExecOptions,
  size: { cols: number; rows: number },
): string[] {
  const inBox = resolveInBox(boxRoot, options.cmd, searchPath(prepared.req.env));
  if (inBox) prepared.ociProcess.args = [TTY_HELPER_PATH, 'setsid', '-c', inBox, ...options.args];
  return [join(boxRoot, 'dev/pts'), String(size.cols), String(size.rows)];
}

/**
 * What `commandProcess` is told about a foreground command's files: `kill` and `resize` wait up to 1 s
 * for its pid file, and both files are removed when the runtime process exits.
 */
export function execFilesHandling(
  id: string,
  prepared: PreparedOciExec,
): Pick<CommandHandling, 'id' | 'pidFile' | 'pidWaitMs' | 'exitOf'> {
  const { pidFile, processFile } = prepared;
  return {
    id,
    pidFile,
    pidWaitMs: 1000,
    exitOf: (code, signal) => {
      rm(pidFile, { force: true }).catch(() => {});
      rm(processFile, { force: true }).catch(() => {});
      return exitCode(code, signal);
    },
  };
}

/**
 * Runs a command in the running box `box`; see `Engine.exec`. The exit code is the command's, or
 * 128 + signal when a signal ended it.
 * @throws BoxError naming `cmd`, `user`, `cwd`, `env`, `ttySize` or `detach` (with a tty); code
 *   `unsupported` for a tty without script(1) on the host where the terminal relay cannot serve; code
 *   `exec` when a background command could not be started. `exited` rejects with a BoxError when the
 *   runtime cannot be spawned.
 */
export async function ociExec(
  ctx: OciExecContext,
  box: OciExecBox,
  options: EngineExecOptions,
): Promise<EngineProcess> {
  const { id } = box;
  const prepared = prepareOciExec(box.rootfs, box, options, ctx);
  const { ociProcess, pidFile, processFile, ttySize: size } = prepared;
  const uid = ociProcess.user.uid;
  let file = ctx.runtime[0] as string;
  let argv = [...ctx.runtime.slice(1), 'exec', '--pid-file', pidFile, '--process', processFile, id];
  let resizeAfterStart: { cols: number; rows: number } | undefined;
  let ttyEnv: NodeJS.ProcessEnv | undefined;
  if (size) {
    const boxRoot = `/proc/${box.initPid}/root`;
    const perl = ctx.ttyPerl;
    if (perl && existsSync(join(boxRoot, TTY_HELPER_PATH))) {
      // The terminal is made by tty-relay.pl in the box's own devpts (so the command sees
      // /dev/pts/<n> of its box); the runtime passes it on as plain stdio. The runtime's own
      // `exec --tty` is not used: it sizes its terminal only after the command has started, and
      // crun 1.8.1 prints output still unread when the command exits as its own red error line.
      const relay = ttyRelayArgs(boxRoot, prepared, options, size);
      if (box.idMap) ttyEnv = { ...process.env, SB_TTY_UID: String(box.idMap.hostUid + uid) };
      argv = [ctx.ttyRelayPath, ...relay, file, ...argv];
      file = perl;
    } else {
      // runc (which copies a foreground command's plain stdio through pipes) or boxes started
      // without the helper: the runtime's `exec --tty` under script(1), whose terminal it needs on
      // its stdin. The box terminal gets its size from script's only after the command started.
      ociProcess.terminal = true;
      ({ file, argv } = scriptTerminal([file, ...argv], size));
      resizeAfterStart = size;
    }
  }
  writeFileSync(processFile, JSON.stringify(ociProcess));
  if (options.detach) {
    argv.splice(argv.indexOf('exec') + 1, 0, '--detach');
    return execDetached(id, file, argv, pidFile, processFile);
  }
  const child = spawn(file, argv, { stdio: ['pipe', 'pipe', 'pipe'], ...(ttyEnv ? { env: ttyEnv } : {}) });
  const proc = commandProcess(child, {
    ...execFilesHandling(id, prepared),
    signal: async (pid, signal) => {
      try {
        process.kill(pid, signal);
      } catch {}
    },
    // The command's own terminal, opened through /proc/<pid>/fd/0 from the host.
    ...(options.tty ? { setSize: setTerminalSize } : {}),
  });
  if (resizeAfterStart) proc.resize?.(resizeAfterStart.cols, resizeAfterStart.rows).catch(() => {});
  return proc;
}

/**
 * `exec` with `detach`: the runtime starts the command in the background, with /dev/null as its stdio,
 * and returns; the command is then a child of the box init and outlives this process.
 * @throws BoxError code `exec` when the runtime could not start it (e.g. no such program).
 */
async function execDetached(
  id: string,
  file: string,
  argv: string[],
  pidFile: string,
  processFile: string,
): Promise<EngineProcess> {
  // The runtime's own error goes to a log file: its stderr becomes the command's.
  const logFile = `${pidFile.slice(0, -'.pid'.length)}.log`;
  argv.splice(argv.indexOf('exec'), 0, `--log=${logFile}`);
  let pid: number | undefined;
  // A failed start whose command is not running is tried once more (a transient runtime failure); a
  // command that cannot start fails both times.
  for (let attempt = 1; ; attempt++) {
    const code = await new Promise<number>((resolve) => {
      const child = spawn(file, argv, { stdio: 'ignore' });
      child.on('error', () => resolve(-1));
      child.on('exit', (c, signal) => resolve(exitCode(c, signal)));
    });
    try {
      pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10) || undefined;
    } catch {}
    const log = await readFile(logFile, 'utf8').catch(() => '');
    await Promise.all([pidFile, logFile].map((f) => rm(f, { force: true }).catch(() => {})));
    if (code === 0 || (pid !== undefined && alive(pid))) break;
    if (attempt < 2) {
      await sleep(100);
      continue;
    }
    await rm(processFile, { force: true }).catch(() => {});
    const why = log.trim().split('\n').slice(-3).join('; ').slice(-600);
    throw new BoxError(
      `box ${id}: the background command could not be started (runtime exit ${code}${why ? `: ${why}` : ''})`,
      { code: 'exec' },
    );
  }
  await rm(processFile, { force: true }).catch(() => {});
  const stdin = new PassThrough();
  stdin.resume();
  return {
    stdin,
    stdout: PassThrough.from([]) as Readable,
    stderr: PassThrough.from([]) as Readable,
    exited: Promise.resolve(0),
    kill: async (signal: NodeJS.Signals = 'SIGKILL') => {
      if (pid !== undefined && alive(pid)) process.kill(pid, signal);
    },
  };
}
