/**
 * What every engine's `exec` (crun/runc in oci-exec.ts, gVisor in gvisor-exec.ts, rootless in
 * rootless-exec.ts) does alike before it starts a command: checking `cmd`, `cwd`, `env` and the
 * terminal size, resolving the user against the box image, the command's full environment, the OCI
 * process it is given as (the box's rlimits, capabilities and `noNewPrivileges`), finding a command on
 * the box's `PATH` through the box root without following its links from the host, the exit code
 * of a finished runtime process, the host terminal of a command run with `tty` (script(1) and stty(1)),
 * and the `EngineProcess` made of a running one.
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { resolveUser } from './box-user.ts';
import { lstatInRoot } from './confined.ts';
import { drain, run, waitForPidFile } from './host-process.ts';
import { DEFAULT_PATH, findExecutable } from './host-system.ts';
import { BOX_RLIMITS } from './oci.ts';
import type { EngineExecOptions, EngineProcess } from './types.ts';

/** A box's defaults for its commands (from its spec, kept in its `engine.json`). */
export interface ExecDefaults {
  /** The box's `KEY=value` environment. */
  env: string[];
  /** Default user (`name`, `uid` or `uid:gid`, as in the box spec). */
  user?: string;
  /** Default working directory, absolute. */
  workingDir: string;
}

/** A checked command request (see `execRequest`). */
export interface ExecRequest {
  /** `uid:gid` of the command's user; undefined when neither the box nor the call names one (root). */
  user: string | undefined;
  /** Working directory, absolute. */
  cwd: string;
  /** Full environment by key: the box's overlaid with the call's, one `KEY=value` entry per key. */
  env: Map<string, string>;
}

/**
 * Checks the options of `Engine.exec` against the box's defaults and resolves the user against the
 * image's `/etc/passwd` and `/etc/group` under `rootfs` (read confined to it, box-user.ts).
 * @throws BoxError naming `cmd` (empty), `user` (unknown), `cwd` (relative) or `env` (not `KEY=value`).
 */
export function execRequest(rootfs: string, box: ExecDefaults, options: EngineExecOptions): ExecRequest {
  if (typeof options.cmd !== 'string' || options.cmd.length === 0)
    throw new BoxError('cmd: must be a non-empty string', { field: 'cmd', code: 'invalid_option' });
  const name = options.user ?? box.user;
  const user = name !== undefined && name !== '' ? resolveUser(rootfs, name, 'user') : undefined;
  const cwd = options.cwd ?? box.workingDir;
  if (!cwd.startsWith('/'))
    throw new BoxError(`cwd: '${cwd}' must be an absolute path`, { field: 'cwd', code: 'invalid_option' });
  const env = new Map<string, string>();
  for (const e of box.env) env.set(e.slice(0, e.indexOf('=')), e);
  for (const e of options.env) {
    if (!e.includes('=') || e.startsWith('='))
      throw new BoxError(`env: '${e}' must be KEY=value`, { field: 'env', code: 'invalid_option' });
    env.set(e.slice(0, e.indexOf('=')), e);
  }
  return { user, cwd, env };
}

/** The OCI `process` of a command (runtime spec "process"), as given to `<runtime> exec --process`. */
export interface OciExecProcess {
  terminal: boolean;
  user: { uid: number; gid: number };
  args: string[];
  env: string[];
  cwd: string;
  noNewPrivileges: true;
  rlimits: typeof BOX_RLIMITS;
  capabilities?: { bounding: string[]; effective: string[]; permitted: string[] };
}

/**
 * The OCI process of a checked request running `options.cmd` with `options.args`: the box's rlimits
 * and `noNewPrivileges`; with `capabilities` (the box's bounding set), as Docker does, a command of
 * uid 0 gets them effective and permitted, any other user the bounding set only.
 */
export function ociExecProcess(
  req: ExecRequest,
  options: Pick<EngineExecOptions, 'cmd' | 'args'>,
  capabilities: string[] | undefined,
): OciExecProcess {
  const [uid = 0, gid = 0] = (req.user ?? '0:0').split(':').map(Number);
  return {
    terminal: false,
    user: { uid, gid },
    args: [options.cmd, ...options.args],
    env: [...req.env.values()],
    cwd: req.cwd,
    noNewPrivileges: true,
    rlimits: BOX_RLIMITS,
    ...(capabilities
      ? {
          capabilities: {
            bounding: capabilities,
            effective: uid === 0 ? capabilities : [],
            permitted: uid === 0 ? capabilities : [],
          },
        }
      : {}),
  };
}

/**
 * Checks a terminal size in character cells: `cols` and `rows` must be positive integers.
 * @throws BoxError naming `field` (`ttySize` or `resize`) otherwise.
 */
export function checkTerminalSize(field: string, cols: number, rows: number): void {
  if (!(Number.isInteger(cols) && cols > 0 && Number.isInteger(rows) && rows > 0)) {
    throw new BoxError(`${field}: cols ${cols} and rows ${rows} must be positive integers`, {
      field,
      code: 'invalid_option',
    });
  }
}

/** Shell-quotes one word for `script -c`. */
function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * How to run `command` (a runtime's `exec` with a terminal) under script(1): script opens a new host
 * pseudo-terminal, sets it to `size` (character cells, checked by the caller) and runs the command with
 * that terminal as its stdin, stdout and stderr; script's own stdio stays pipes.
 * @returns the file (the host's script) and its arguments, to spawn.
 * @throws BoxError code `unsupported` (field `tty`) when the host has no script(1) (util-linux).
 */
export function scriptTerminal(
  command: readonly string[],
  size: { cols: number; rows: number },
): { file: string; argv: string[] } {
  const script = findExecutable('script');
  if (!script) {
    throw new BoxError('tty: needs script(1) from util-linux on the host', {
      field: 'tty',
      code: 'unsupported',
    });
  }
  const line = command.map(shellQuote).join(' ');
  const sized = `stty cols ${size.cols} rows ${size.rows} && exec ${line}`;
  return { file: script, argv: ['-q', '-e', '-f', '-c', sized, '/dev/null'] };
}

/**
 * Sets the size of the terminal that is process `pid`'s stdin (opened as `/proc/<pid>/fd/0`) to `cols`
 * × `rows` character cells with stty(1); the kernel then sends SIGWINCH to the terminal's foreground
 * process group. `prefix` runs stty through another program (e.g. into the box's user namespace, when
 * only a box user can open the terminal); default: the host's stty directly.
 * @throws BoxError code `internal` when stty fails while the command still runs (`done()` false); a
 *   failure after the command ended is ignored.
 */
export async function setTerminalSize(
  pid: number,
  cols: number,
  rows: number,
  done: () => boolean,
  prefix: readonly string[] = [],
): Promise<void> {
  const [file, ...args] = [
    ...prefix,
    'stty',
    '-F',
    `/proc/${pid}/fd/0`,
    'cols',
    String(cols),
    'rows',
    String(rows),
  ];
  const r = await run(file!, args);
  if (r.code !== 0 && !done()) throw new BoxError(`resize: ${r.stderr.trim()}`, { code: 'internal' });
}

/** The command's search path: `PATH` of its environment, else `DEFAULT_PATH`. */
export function searchPath(env: Map<string, string>): string {
  return env.get('PATH')?.slice('PATH='.length) ?? DEFAULT_PATH;
}

/**
 * Resolves `cmd` the way execvp(3) would inside a box, through the box root `root` (a
 * `/proc/<pid>/root` path): a name with a slash is kept; otherwise the first `path` directory with an
 * entry of that name (a file, or a symlink, which is not followed from the host) wins.
 * @returns the path inside the box, or undefined when nothing matches.
 */
export function resolveInBox(root: string, cmd: string, path: string): string | undefined {
  if (cmd.includes('/')) return cmd;
  for (const dir of path.split(':')) {
    if (!dir.startsWith('/')) continue;
    const inBox = join(dir, cmd);
    try {
      const st = lstatInRoot(root, inBox);
      if (st && (st.isSymbolicLink() || (st.isFile() && (st.mode & 0o111) !== 0))) return inBox;
    } catch {}
  }
  return undefined;
}

/** Exit code of a finished process as a shell reports it: its code, or 128 + the signal's number. */
export function exitCode(code: number | null, signal: NodeJS.Signals | null): number {
  return code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
}

/** How `commandProcess` treats one spawned runtime `exec` (see there). */
export interface CommandHandling {
  /** Box id, for error messages. */
  id: string;
  /** The runtime's pid file of the command. */
  pidFile: string;
  /** How long `kill` and `resize` wait for the pid file to appear, ms. */
  pidWaitMs: number;
  /** The exit code from the runtime process's own code and signal (and where per-exec files go away). */
  exitOf: (code: number | null, signal: NodeJS.Signals | null) => number;
  /** Sends `signal` to the command, `pid` as read from the pid file. */
  signal: (pid: number, signal: NodeJS.Signals) => Promise<void>;
  /**
   * Sets the size of the command's terminal (`pid` as above; `done()` tells whether the command has
   * exited meanwhile); absent for a command without one: the process then has no `resize`.
   */
  setSize?: (pid: number, cols: number, rows: number, done: () => boolean) => Promise<void>;
}

/**
 * The `EngineProcess` of the runtime process `child` running a command (`<runtime> exec`): its pipes
 * (stdout and stderr drained so a caller reading one never blocks the other), `exited` resolving to
 * `h.exitOf` of its exit (rejecting with a BoxError when it cannot be spawned), `kill` through
 * `h.signal` and, with `h.setSize`, `resize`, run one after the other so the last request wins;
 * both are no-ops once the command has exited or when its pid file never appears.
 * @throws (from `resize`) BoxError naming `resize` for a size that is not positive integers.
 */
export function commandProcess(child: ChildProcessWithoutNullStreams, h: CommandHandling): EngineProcess {
  let done = false;
  const exited = new Promise<number>((resolve, reject) => {
    child.on('error', (err) => {
      done = true;
      reject(new BoxError(`box ${h.id}: exec failed: ${err.message}`, { cause: err, code: 'exec' }));
    });
    child.on('exit', (code, signal) => {
      done = true;
      resolve(h.exitOf(code, signal));
    });
  });
  exited.catch(() => {});
  const commandPid = () => waitForPidFile(h.pidFile, h.pidWaitMs, () => done);
  child.stdin.on('error', () => {});
  const proc: EngineProcess = {
    stdin: child.stdin,
    stdout: drain(child.stdout),
    stderr: drain(child.stderr),
    exited,
    kill: async (signal: NodeJS.Signals = 'SIGKILL') => {
      const pid = await commandPid();
      if (pid !== undefined && !done) await h.signal(pid, signal);
    },
  };
  const setSize = h.setSize;
  if (setSize) {
    let queue: Promise<void> = Promise.resolve();
    proc.resize = (cols: number, rows: number): Promise<void> => {
      const next = queue.then(async () => {
        checkTerminalSize('resize', cols, rows);
        const pid = await commandPid();
        if (pid !== undefined && !done) await setSize(pid, cols, rows, () => done);
      });
      queue = next.catch(() => {});
      return next;
    };
  }
  return proc;
}
