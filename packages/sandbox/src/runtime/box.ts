/**
 * Box handle (spec 002 "Box handle (`JsBox`)"): metadata, commands, files, lifecycle, snapshots and
 * metrics of one box. `JsBox` is a facade over one `BoxBackend` (`box-backend.ts`): `LocalBox`
 * (`box-local.ts`, a box of this host) or the REST client's box (`rest/box-client.ts`). The facade checks
 * every argument once, for both, and forwards.
 */

import { BoxError } from '../errors.ts';
import { interpreterFor } from '../interpreter/index.ts';
import type { CodeInterpreter } from '../interpreter/types.ts';
import type { JsBoxInfo, JsBoxMetrics, JsNetworkHandle } from '../types.ts';
import type { BoxBackend, ExecEnv, ExecOptions } from './box-backend.ts';
import type { JsExecution } from './execution.ts';
import { copyIn, copyOut } from './files/copy.ts';
import { BoxFiles } from './files/files.ts';
import type { CopyOptions } from './files/types.ts';
import { checkTimeoutAction, checkTimeoutMs, type TimeoutAction } from './lifetimes.ts';
import { BoxSnapshots } from './snapshots.ts';

export type { BoxBackend, ExecEnv, ExecOptions } from './box-backend.ts';

/**
 * Checks the command, arguments and options of an exec before anything runs (local and REST boxes).
 * @throws BoxError naming `cmd` (non-empty string), `args` (array of strings) or `cwd` (absolute path).
 */
export function validateExecRequest(cmd: unknown, args: unknown, options: ExecOptions): void {
  if (typeof cmd !== 'string' || cmd === '') {
    throw new BoxError('invalid exec option cmd: must be a non-empty string', { field: 'cmd' });
  }
  if (!Array.isArray(args) || args.some((a) => typeof a !== 'string')) {
    throw new BoxError('invalid exec option args: must be an array of strings', { field: 'args' });
  }
  if (options.cwd !== undefined && (typeof options.cwd !== 'string' || !options.cwd.startsWith('/'))) {
    throw new BoxError('invalid exec option cwd: must be an absolute path', { field: 'cwd' });
  }
}

/** Turns any accepted env form into `KEY=value` entries. @throws BoxError naming `env` on bad input. */
export function envEntries(env: ExecEnv | undefined | null): string[] {
  if (env === undefined || env === null) return [];
  const pairs: [unknown, unknown][] = Array.isArray(env)
    ? env.map((item) => (Array.isArray(item) ? [item[0], item[1]] : [item?.key, item?.value]))
    : typeof env === 'object'
      ? Object.entries(env)
      : (() => {
          throw new BoxError('invalid exec option env: must be an object of strings or an array of pairs', {
            field: 'env',
          });
        })();
  return pairs.map(([key, value]) => {
    if (typeof key !== 'string' || key === '' || key.includes('=') || typeof value !== 'string') {
      throw new BoxError(
        `invalid exec option env: entry '${String(key)}' must be a name without "=" and a string value`,
        {
          field: 'env',
        },
      );
    }
    return `${key}=${value}`;
  });
}

/** A handle to one box (spec 002 `JsBox`). Obtained from `JsRuntime.create` or `JsRuntime.get`. */
export class JsBox {
  /** Box id (ULID). */
  readonly id: string;
  /** Box name, or null when the box has none. */
  readonly name: string | null;
  readonly #backend: BoxBackend;
  #network: JsNetworkHandle | null = null;
  #files: BoxFiles | null = null;
  #snapshot: BoxSnapshots | null = null;

  /** @internal Use `JsRuntime.create` or `JsRuntime.get`; `backend` is the box's flavour. */
  constructor(backend: BoxBackend) {
    this.#backend = backend;
    this.id = backend.id;
    this.name = backend.name;
  }

  /**
   * Tunnels to TCP ports of the box (spec 002 `JsNetworkHandle`): locally through the box's network
   * namespace (`src/network/tunnel.ts`), over REST prepared on the server and opened with HTTP `CONNECT`.
   */
  get network(): JsNetworkHandle {
    this.#network ??= this.#backend.network();
    return this.#network;
  }

  /**
   * Stateful code contexts of the box (Jupyter kernels, E2B-shaped executions; `src/interpreter/`): locally
   * the box's Jupyter Server is driven from this process, over REST the server's code routes do it. The
   * image needs Jupyter Server and ipykernel (`python:slim`, `code-interpreter-v1`).
   */
  get interpreter(): CodeInterpreter {
    return this.#backend.interpreter?.() ?? interpreterFor(this);
  }

  /**
   * The box's files (read, write, list, stat, exists, makeDir, remove, rename, watchDir; `files/files.ts`).
   * Locally every path is resolved inside the box root by this process without following box-controlled
   * symlinks out of it; new files belong to the box's user. Over REST the server does the same, and file
   * contents are streamed both ways.
   */
  get files(): BoxFiles {
    this.#files ??= new BoxFiles(this.#backend.files());
    return this.#files;
  }

  /**
   * Copies a host file or directory into the box (BoxLite `copyIn`; options `recursive`, `overwrite`,
   * `includeParent` default true, `followSymlinks` false; `docker cp` placement). Streamed file by file.
   * @throws BoxError `not_found`, `conflict`, `invalid_option` naming the argument.
   */
  copyIn(hostPath: string, guestPath: string, options?: CopyOptions): Promise<void> {
    return copyIn(this.files, hostPath, guestPath, options);
  }

  /** Copies a file or directory of the box to the host (BoxLite `copyOut`; same options as `copyIn`). */
  copyOut(guestPath: string, hostPath: string, options?: CopyOptions): Promise<void> {
    return copyOut(this.files, guestPath, hostPath, options);
  }

  /**
   * Metadata of the box (spec 002 `JsBoxInfo`), read fresh: locally from the state database, over REST the
   * server's current record. @throws BoxError `not_found` when the box was removed.
   */
  info(): Promise<JsBoxInfo> {
    return this.#backend.info();
  }

  /**
   * Starts `cmd` with `args` in the box (spec 002 `JsBox.exec`). `env` adds variables on top of the box's;
   * `tty` allocates a pseudo-terminal (stderr is then merged into stdout). BoxLite's positional extras:
   * `user` (`uid[:gid]` or a name of the image), `timeoutSecs` (the command is killed when it passes:
   * `wait()` then gives exit code 137 and `errorMessage`), `workingDir` (absolute).
   * @throws BoxError `invalid_option` naming the argument.
   *   `conflict` when the box is not running, `exec` when the command cannot be started.
   */
  async exec(
    cmd: string,
    args?: string[],
    env?: ExecEnv,
    tty?: boolean,
    user?: string,
    timeoutSecs?: number,
    workingDir?: string,
  ): Promise<JsExecution> {
    if (tty !== undefined && tty !== null && typeof tty !== 'boolean') {
      throw new BoxError('invalid exec option tty: must be a boolean', { field: 'tty' });
    }
    if (user !== undefined && user !== null && (typeof user !== 'string' || user === '')) {
      throw new BoxError('invalid exec option user: must be a non-empty string', { field: 'user' });
    }
    if (
      timeoutSecs !== undefined &&
      timeoutSecs !== null &&
      (typeof timeoutSecs !== 'number' || !Number.isFinite(timeoutSecs) || timeoutSecs <= 0)
    ) {
      throw new BoxError('invalid exec option timeoutSecs: must be a positive number of seconds', {
        field: 'timeoutSecs',
      });
    }
    const options: ExecOptions = { tty: tty ?? false };
    if (user !== undefined && user !== null) options.user = user;
    if (workingDir !== undefined && workingDir !== null) options.cwd = workingDir;
    const execution = await this.execWith(cmd, args ?? [], env, options);
    if (timeoutSecs !== undefined && timeoutSecs !== null) {
      const timer = setTimeout(() => {
        execution.abort(`command timed out after ${timeoutSecs} s`).catch(() => {});
      }, timeoutSecs * 1000);
      timer.unref();
      execution.wait().then(
        () => clearTimeout(timer),
        () => clearTimeout(timer),
      );
    }
    return execution;
  }

  /** @internal `exec` with per-command `cwd` and `user` (used by the wrapper boxes and the CLI). */
  async execWith(
    cmd: string,
    args: string[] = [],
    env: ExecEnv | undefined,
    options: ExecOptions,
  ): Promise<JsExecution> {
    validateExecRequest(cmd, args, options);
    return this.#backend.exec(cmd, [...args], envEntries(env), options);
  }

  /**
   * Starts a stopped box again (BoxLite `box.start()`): its writable layer, volumes and options are kept;
   * `startedAt` is the new start. A running box is left as it is.
   * @throws BoxError `not_found` (removed, e.g. `autoRemove` on stop), `conflict` (failed, or secrets
   *   whose values only the creating runtime held).
   */
  async start(): Promise<void> {
    await this.#backend.start();
  }

  /**
   * Pauses the box: every process of it is frozen with the cgroup freezer and uses no CPU;
   * memory stays resident (no checkpoint: see ENGINE.md "Pause and resume"). `info()` then reports status
   * `paused` in every process; `exec` is refused with `conflict` unless the box has `autoResume`; files stay
   * readable and writable. Pausing a paused box is a no-op.
   * @throws BoxError `conflict` when the box is not running, `not_found` when it was removed,
   *   `unsupported` when its processes are not in a freezable cgroup of their own.
   */
  async pause(): Promise<void> {
    await this.#backend.pause();
  }

  /**
   * Resumes a paused box: its processes continue where they were frozen; the `autoPause` idle clock
   * restarts. Resuming a running box is a no-op.
   * @throws BoxError `conflict` when the box is stopped, `not_found` when it was removed.
   */
  async resume(): Promise<void> {
    await this.#backend.resume();
  }

  /**
   * Sets the box's timeout (E2B `setTimeout`): `onTimeout` happens `timeoutMs` from now, replacing any
   * earlier timeout (longer or shorter). `onTimeout` (`stop`, `pause`, `remove`) defaults to the box's
   * own (`JsBoxOptions.onTimeout`, else `stop`). Enforced by the reaper process of the `homeDir`, with no
   * SDK process needed.
   * @throws BoxError `invalid_option` naming `timeoutMs` or `onTimeout`, `not_found` when removed.
   */
  async setTimeout(timeoutMs: number, onTimeout?: TimeoutAction): Promise<void> {
    const ms = checkTimeoutMs(timeoutMs, 'timeoutMs');
    const action = onTimeout === undefined ? undefined : checkTimeoutAction(onTimeout, 'onTimeout');
    await this.#backend.setTimeout(ms, action);
  }

  /**
   * Snapshots of the box's filesystem (BoxLite #205 / E2B naming): `create(name?)`, `list()`,
   * `get(name)`, `restore(name)`, `remove(name)`; see `BoxSnapshots` (`snapshots.ts`).
   */
  get snapshot(): BoxSnapshots {
    this.#snapshot ??= new BoxSnapshots(this.#backend.snapshots());
    return this.#snapshot;
  }

  /**
   * Writes the box to `path` as a portable archive: an OCI image layout in one tar holding the
   * image's layers, one more layer with the box's writable layer (taken consistently while the box keeps
   * running) and its options in the config labels; `runtime.importBox(path)` brings it back, and it also
   * opens as an image (`skopeo inspect oci-archive:<path>`). See `archive.ts`.
   * @throws BoxError `invalid_option` (field `path`), `unsupported` (see `BoxSnapshots`), `not_found`.
   */
  async export(path: string): Promise<void> {
    await this.#backend.export(path);
  }

  /** Stops the box; with `autoRemove` the box is then removed. Stopping a stopped box is a no-op. */
  async stop(): Promise<void> {
    await this.#backend.stop();
  }

  /**
   * @internal `stop()` giving the box's commands `graceMs` after SIGTERM before SIGKILL (used by
   * `shutdown(timeout)` and the REST stop route's `timeout`).
   */
  async stopWithin(graceMs: number): Promise<void> {
    await this.#backend.stop(graceMs);
  }

  /**
   * Counters, resource usage and creation stage timings of the box (spec 002 `JsBoxMetrics`).
   * `cpuPercent` is the usage since the previous sample (first sample: since the box started).
   */
  metrics(): Promise<JsBoxMetrics> {
    return this.#backend.metrics();
  }
}
