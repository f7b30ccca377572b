/**
 * Small host-side helpers every engine (crun, gVisor, rootless) uses around the processes it starts:
 * waiting, telling a live process from a zombie, writing its generated scripts, reading a command's
 * pipes without deadlock, running a host command to completion, a process's age, starting a box
 * supervisor and reading how its start went, and ending another process's supervisor of a box.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { PassThrough, type Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import { CLK_TCK, processRuns, readProcStat } from './proc-stat.ts';

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** True when `pid` exists and is not a zombie (state `Z` or `X` in `/proc/<pid>/stat`). */
export function alive(pid: number): boolean {
  return processRuns(pid);
}

/**
 * Writes an executable script (mode 0755) unless `path` already holds exactly `content`. The file is
 * written beside it and renamed into place, so concurrent engines never run a half-written script.
 * @throws the file system error.
 */
export function writeIfChanged(path: string, content: string): void {
  let current: string | undefined;
  try {
    current = readFileSync(path, 'utf8');
  } catch {}
  if (current === content) return;
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, content, { mode: 0o755 });
  chmodSync(tmp, 0o755);
  renameSync(tmp, path);
}

/** Device and inode of a file, as `stat(2)` gives them (`st_dev`, `st_ino`). */
export interface FileIdentity {
  dev: number;
  ino: number;
}

/**
 * Waits until process `pid` runs the program `program` (its `/proc/<pid>/exe` is that file: same device
 * and inode), polling every millisecond. An OCI runtime's `run --detach` returns once the box init is
 * set up but possibly before that process has called execve(2): until then it is still the runtime's
 * own, non-dumpable copy (crun sets `PR_SET_DUMPABLE` 0), whose namespaces a later `crun exec` cannot
 * join after entering the box's user namespace (crun 1.8.1 `try_setns_with_pidfd`: EPERM, "fail
 * startup"; fixed upstream in crun 1.8.7, containers/crun#1264). ENGINE.md "Start path".
 * @returns true once it runs `program`; false when the process is gone (or a zombie) or `timeoutMs`
 *   passed first.
 */
export async function waitForExec(pid: number, program: FileIdentity, timeoutMs = 10_000): Promise<boolean> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      const st = statSync(`/proc/${pid}/exe`);
      if (st.dev === program.dev && st.ino === program.ino) return true;
    } catch {}
    if (!alive(pid) || performance.now() > deadline) return false;
    await sleep(1);
  }
}

/**
 * Waits for the outcome of a background helper that reports through files (scripts.ts `NET_LINK_SH`):
 * an empty `<base>.ok` or `<base>.failed` created once it has ended, its error output in `<base>.out`
 * (closed before either exists). Polled every millisecond, as `waitForExec`.
 * @returns once `<base>.ok` exists.
 * @throws Error `<what> failed: <the last 800 characters of <base>.out>`, or `<what> did not finish in
 *   <timeoutMs> ms`.
 */
export async function waitForOutcomeFiles(base: string, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (existsSync(`${base}.ok`)) return;
    if (existsSync(`${base}.failed`)) {
      let text = '';
      try {
        text = readFileSync(`${base}.out`, 'utf8').trim();
      } catch {}
      throw new Error(`${what} failed: ${text.slice(-800) || 'no output'}`);
    }
    if (performance.now() > deadline) throw new Error(`${what} did not finish in ${timeoutMs} ms`);
    await sleep(1);
  }
}

/** The files `waitForOutcomeFiles` reads for `base` (removed before a helper runs again). */
export function outcomeFiles(base: string): string[] {
  return ['ok', 'failed', 'out'].map((s) => `${base}.${s}`);
}

/** Bytes an unread output stream may buffer before the command is throttled by back-pressure. */
export const EXEC_OUTPUT_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * Reads a command's pipe eagerly into a PassThrough, so a caller reading only stdout never deadlocks a
 * command that floods stderr (and vice versa); back-pressure applies only past
 * `EXEC_OUTPUT_BUFFER_BYTES` unread bytes.
 */
export function drain(source: Readable): Readable {
  const out = new PassThrough({ highWaterMark: 64 * 1024 });
  source.on('data', (chunk: Buffer) => {
    out.write(chunk);
    if (out.writableLength + out.readableLength > EXEC_OUTPUT_BUFFER_BYTES) {
      source.pause();
      out.once('drain', () => source.resume());
    }
  });
  source.on('end', () => out.end());
  source.on('error', (err) => out.destroy(err));
  return out;
}

/** A box supervisor that has reported how its start went (see `startSupervisor`). */
export interface SupervisorStart {
  /** The supervisor; its stdin is the parent-death pipe of a non-detached box. */
  child: ChildProcess;
  /** Its last status line: `started`, or `error <stage>` (`error exited` when it exited silently). */
  outcome: string;
  /** When it reported `mounted` (the box root is ready), `performance.now()` ms. */
  tMounted: number;
  /** When it reported its outcome, `performance.now()` ms. */
  tStarted: number;
}

/**
 * The environment `env` as a file `/bin/sh` loads under `set -a` (every assignment exported): one
 * `NAME='value'` line each, the value single-quoted (a `'` inside written `'\''`), so no value is
 * ever expanded or run, whatever it holds (hostnames and paths come from the caller).
 * @throws BoxError `internal` for a name that is not a shell variable name.
 */
export function shellEnvFile(env: Record<string, string>): string {
  return Object.entries(env)
    .map(([name, value]) => {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
        throw new BoxError(`supervisor environment: '${name}' is not a variable name`, { code: 'internal' });
      return `${name}='${value.replaceAll("'", `'\\''`)}'\n`;
    })
    .join('');
}

/** A supervisor started ahead of need (spare-supervisor.ts) that `startSupervisor` gives its box. */
export interface SpareStart {
  /** The idle spare (`SpareSupervisor.take`), running `supervisor-spare.sh`. */
  child: ChildProcess;
  /** Where the box's environment is written (`shellEnvFile`, mode 0600) for the spare to load. */
  envFile: string;
}

/**
 * Spawns a box supervisor script (detached, stdin and stdout piped, `fds` passed as descriptors 3…) and
 * waits for its status lines on stdout: `mounted`, then `started` or `error <stage>`. Never throws for a
 * failed start: the caller checks `outcome` (and builds its error with `supervisorFailure`). With
 * `gate` (the script then runs with `SB_GO=1`), the script mounts the box root while `gate` settles and
 * runs the box only once it resolved (`go` on its stdin); when `gate` rejects it gets `stop` and
 * reports `error network`. With `spare` (only without `fds`: a spare inherits none) no process is
 * spawned: the environment goes to `spare.envFile` and its path to the spare's stdin, and the spare
 * execs `command args` with it (scripts.ts `SUPERVISOR_SPARE_SH`); the file is removed once the
 * supervisor has reported.
 * @throws the file system error when `spare.envFile` cannot be written.
 */
export async function startSupervisor(
  command: string,
  args: string[],
  env: Record<string, string>,
  fds: number[],
  gate?: Promise<unknown>,
  spare?: SpareStart,
): Promise<SupervisorStart> {
  const fullEnv = gate ? { ...env, SB_GO: '1' } : env;
  let child: ChildProcess;
  if (spare && fds.length === 0) {
    writeFileSync(spare.envFile, shellEnvFile(fullEnv), { mode: 0o600 });
    child = spare.child;
    child.stdin?.write(`${spare.envFile}\n`);
  } else {
    child = spawn(command, args, { env: fullEnv, detached: true, stdio: ['pipe', 'pipe', 'ignore', ...fds] });
    child.on('error', () => {});
    child.stdin?.on('error', () => {});
  }
  gate?.then(
    () => child.stdin?.write('go\n'),
    () => child.stdin?.write('stop\n'),
  );
  let tMounted = performance.now();
  const outcome = await new Promise<string>((resolve) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      if (line === 'mounted') tMounted = performance.now();
      else {
        resolve(line);
        lines.close();
      }
    });
    // The end of its stdout, not its exit: a detached box's supervisor exits right after printing
    // `started`, and the exit event may come before that line has been read.
    lines.on('close', () => resolve('error exited'));
  });
  child.stdout?.destroy();
  // Read by now: the spare loaded it before it ran the supervisor, which reported.
  if (spare && fds.length === 0) rmSync(spare.envFile, { force: true });
  return { child, outcome, tMounted, tStarted: performance.now() };
}

/**
 * The error of a failed supervisor start: `box <id>: start failed at <stage><detail>: <last 800 characters
 * of the box log>` (the log part only when the log has text).
 */
export async function supervisorFailure(
  id: string,
  outcome: string,
  log: string,
  detail = '',
): Promise<BoxError> {
  const text = (await readFile(log, 'utf8').catch(() => '')).trim();
  return new BoxError(
    `box ${id}: start failed at ${outcome.replace(/^error /, '')}${detail}${text ? `: ${text.slice(-800)}` : ''}`,
    { code: 'internal' },
  );
}

/**
 * The box supervisors this process started and still keeps, by box id: the stdin of each is the
 * parent-death pipe of a non-detached box (the supervisor tears the box down when it closes without
 * a `release` line).
 */
export class Supervisors {
  readonly #children = new Map<string, ChildProcess>();

  /**
   * Takes the supervisor of a box that has started: kept (its stdin unreferenced, so it does not hold
   * this process open) unless the box is `detach`ed, whose supervisor's stdin is closed at once.
   */
  keep(id: string, child: ChildProcess, detach: boolean): void {
    if (!detach) {
      this.#children.set(id, child);
      (child.stdin as unknown as { unref?: () => void }).unref?.();
    } else {
      child.stdin?.destroy();
    }
    child.unref();
  }

  /**
   * Tells the supervisor of box `id` to let go (`release` on its stdin: it exits without touching the
   * box) and forgets it.
   * @returns false when this process keeps no supervisor of that box.
   */
  release(id: string): boolean {
    const child = this.#children.get(id);
    if (!child) return false;
    this.#children.delete(id);
    try {
      child.stdin?.end('release\n');
    } catch {}
    return true;
  }
}

/**
 * Ends the parent-death watch of box `id` that another process's engine started (its supervisor
 * script, pid in `<boxDir>/bundle/supervisor.pid`, which is removed), with SIGTERM: the box was
 * stopped or removed by this process, so the watch has nothing left to guard. The pid is only
 * signalled when it still runs a supervisor of this box: its environment names the box (`SB_ID`) and
 * its bundle (`SB_BUNDLE`), and, when `script` is given, its command line runs that script.
 */
export function endForeignSupervisor(id: string, boxDir: string, script?: string): void {
  const bundle = join(boxDir, 'bundle');
  const file = join(bundle, 'supervisor.pid');
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
  } catch {
    return;
  }
  rmSync(file, { force: true });
  if (!(pid > 0) || pid === process.pid) return;
  try {
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    if (!environ.includes(`SB_ID=${id}`) || !environ.includes(`SB_BUNDLE=${bundle}`)) return;
    if (script !== undefined && readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[1] !== script)
      return;
    process.kill(pid, 'SIGTERM');
  } catch {}
}

/** What `run` gives back: the exit code (1 when killed or not started) and the decoded output. */
export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs a host command to completion (no shell), killed after `timeoutMs` ms, output capped at 16 MiB.
 * Never throws: a failure to start or a timeout gives code 1 (the error's message as stderr when the
 * command wrote none).
 */
export function run(file: string, args: string[], timeoutMs = 30_000): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({
        code,
        stdout: String(stdout),
        stderr: String(stderr || (err && !stderr ? err.message : '')),
      });
    });
  });
}

/** How long `pid` has been running, ms (from its start time in `/proc/<pid>/stat`); 1000 when unreadable. */
export function processAgeMs(pid: number): number {
  const stat = readProcStat(pid);
  if (!stat) return 1000;
  try {
    const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    return Math.max(1, (uptime - stat.starttime / CLK_TCK) * 1000);
  } catch {
    return 1000;
  }
}

/**
 * The pid a runtime wrote to `pidFile` (`crun exec --pid-file`, `runsc exec --internal-pid-file`),
 * polled every 5 ms for up to `timeoutMs` ms or until `stop()` is true; undefined when none appeared.
 */
export async function waitForPidFile(
  pidFile: string,
  timeoutMs: number,
  stop: () => boolean,
): Promise<number | undefined> {
  for (let i = 0; i < Math.ceil(timeoutMs / 5) && !stop(); i++) {
    try {
      const pid = Number.parseInt(await readFile(pidFile, 'utf8'), 10);
      if (pid > 0) return pid;
    } catch {}
    await sleep(5);
  }
  return undefined;
}
