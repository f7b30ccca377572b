/**
 * Box handle (spec 002 "Box handle (`JsBox`)"): metadata, commands, stop and metrics of one box.
 * A handle reads its record from the state database on every call, so handles in several processes
 * agree on a box's state.
 */

import type { EngineExecOptions } from '../engine/types.ts';
import { BoxError, conflict, notFound } from '../errors.ts';
import { LocalNetworkHandle } from '../network/tunnel.ts';
import type { JsBoxInfo, JsBoxMetrics, JsNetworkHandle, JsNetworkInfo, JsPublishedPort } from '../types.ts';
import type { BoxLifecycle, RuntimeContext } from './context.ts';
import { JsExecution } from './execution.ts';
import { copyIn, copyOut } from './files/copy.ts';
import { BoxFiles } from './files/files.ts';
import { LocalFiles } from './files/local.ts';
import type { CopyOptions } from './files/types.ts';
import { initialHealth, publicHealth } from './health.ts';
import { checkTimeoutAction, checkTimeoutMs, type TimeoutAction } from './lifetimes.ts';
import { BoxSnapshots, type SnapshotService } from './snapshots.ts';
import type { BoxRecord } from './state.ts';

/** Environment of one command: `{ KEY: value }`, `[key, value]` pairs or `{ key, value }` entries. */
export type ExecEnv = Record<string, string> | [string, string][] | { key: string; value: string }[];

/** Per-command options beyond the spec's `exec(cmd, args?, env?, tty?)`, used by the wrapper boxes. */
export interface ExecOptions {
  /** Working directory of the command (absolute); default the box's `workingDir`. */
  cwd?: string;
  /** User of the command: `uid[:gid]` or a name known in the image; default the image's user, else root. */
  user?: string;
  /** Allocate a pseudo-terminal. */
  tty?: boolean;
  /** Initial size of that terminal, in character cells (with `tty`); default 80×24. */
  ttySize?: { cols: number; rows: number };
}

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

/**
 * Maps a record's status to spec 002 `JsBoxStateInfo.status`: `configured`, `running`, `stopped`, `failed`,
 * and `paused` (a frozen box, issue 18).
 */
function publicStatus(status: BoxRecord['status']): string {
  return status === 'creating' ? 'configured' : status;
}

/** Builds `JsBoxInfo` from a record; `publishedPorts` as known to the handle (null when unknown). */
export function boxInfo(record: BoxRecord, publishedPorts: JsPublishedPort[] | null): JsBoxInfo {
  const { mode, allowNet } = record.options.network;
  const network: JsNetworkInfo = {
    outbound: { mode, allowNet: [...allowNet] },
    inbound: { mode, allowNet: [] },
    publishedPorts,
    mode,
    allowNet: [...allowNet],
  };
  const running = record.status === 'running';
  return {
    id: record.id,
    ...(record.name !== null ? { name: record.name } : {}),
    state: {
      status: publicStatus(record.status),
      running,
      ...((running || record.status === 'paused') && record.pid ? { pid: record.pid } : {}),
    },
    createdAt: record.createdAt,
    ...(record.startedAt ? { startedAt: record.startedAt } : {}),
    image: record.image,
    cpus: record.options.cpus,
    memoryMib: record.options.memoryMib,
    network,
    // Records written before the isolation option existed are container boxes.
    isolation: {
      tier: record.options.isolation ?? 'container',
      ...(record.options.gvisorPlatform ? { platform: record.options.gvisorPlatform } : {}),
    },
    // The latest recorded check since the box's last start (`starting` before the first one).
    healthStatus: record.options.healthCheck
      ? record.health
        ? publicHealth(record.health)
        : initialHealth(running)
      : initialHealth(false),
    ...(record.options.limitsEnforced === false ? { limitsEnforced: false as const } : {}),
  };
}

/** A handle to one box (spec 002 `JsBox`). Obtained from `JsRuntime.create` or `JsRuntime.get`. */
export class JsBox {
  /** Box id (ULID). */
  readonly id: string;
  /** Box name, or null when the box has none. */
  readonly name: string | null;
  readonly #ctx: RuntimeContext;
  #network: JsNetworkHandle | null = null;
  #files: BoxFiles | null = null;
  #snapshot: BoxSnapshots | null = null;
  /** Port publications this handle made; null when it only loaded the box from the state database. */
  readonly #publishedPorts: JsPublishedPort[] | null;

  /** @internal Use `JsRuntime.create` or `JsRuntime.get`. */
  constructor(ctx: RuntimeContext, record: BoxRecord, publishedPorts: JsPublishedPort[] | null) {
    this.#ctx = ctx;
    this.id = record.id;
    this.name = record.name;
    this.#publishedPorts = publishedPorts;
  }

  /** Tunnels to TCP ports of the box (spec 002 `JsNetworkHandle`; `src/network/tunnel.ts`). */
  get network(): JsNetworkHandle {
    this.#network ??= new LocalNetworkHandle(async () => {
      const current = await this.#record();
      if (current.status !== 'running' || !current.pid) {
        throw conflict(
          `box ${this.id} is ${publicStatus(current.status)}, not running; cannot open a tunnel`,
        );
      }
      return current.pid;
    });
    return this.#network;
  }

  async #record(): Promise<BoxRecord> {
    const record = await this.#ctx.refresh(this.id);
    if (!record) throw notFound(`box ${this.id} no longer exists`);
    return record;
  }

  /**
   * The box's files (read, write, list, stat, exists, makeDir, remove, rename, watchDir; `files/files.ts`).
   * Locally every path is resolved inside the box root by this process without following box-controlled
   * symlinks out of it; new files belong to the box's user.
   */
  get files(): BoxFiles {
    this.#files ??= new BoxFiles(
      new LocalFiles({
        initPid: async () => {
          const record = await this.#record();
          // A paused box's files are reachable: the host reads them, no box process runs for it.
          if ((record.status !== 'running' && record.status !== 'paused') || !record.pid) {
            throw conflict(
              `box ${this.id} is ${publicStatus(record.status)}, not running; its files are not reachable`,
            );
          }
          // The host pid of a gVisor box is its Sentry, whose /proc/<pid>/root is not the box root.
          if (record.options.isolation === 'gvisor') {
            throw new BoxError(
              `files: not supported by the gvisor isolation tier (box ${this.id}); read and write files with exec`,
              { code: 'unsupported' },
            );
          }
          return { pid: record.pid, identity: record.init };
        },
      }),
    );
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

  /** Metadata of the box (spec 002 `JsBoxInfo`), read fresh. @throws BoxError when the box was removed. */
  async info(): Promise<JsBoxInfo> {
    const record = await this.#record();
    // Publications end with the box: a stopped box has none active ([]), unknown stays null.
    const up = record.status === 'running' || record.status === 'paused';
    return boxInfo(record, up ? this.#publishedPorts : this.#publishedPorts && []);
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
    const entries = envEntries(env);
    let record = await this.#record();
    if (record.status === 'paused') {
      if (!(await this.#ctx.lifecycle?.autoResume(this.id))) {
        throw conflict(
          `box ${this.id} is paused; resume() it first (or create it with autoResume) to exec '${cmd}'`,
        );
      }
      record = await this.#record();
    }
    if (record.status !== 'running') {
      throw conflict(`box ${this.id} is ${publicStatus(record.status)}, not running; cannot exec '${cmd}'`);
    }
    const engineOptions: EngineExecOptions = {
      cmd,
      args: [...args],
      env: entries,
      tty: options.tty === true,
    };
    if (options.cwd !== undefined) engineOptions.cwd = options.cwd;
    if (options.user !== undefined) engineOptions.user = options.user;
    if (options.tty && options.ttySize) engineOptions.ttySize = options.ttySize;
    const engine = await this.#ctx.engine();
    this.#ctx.countCommand(this.id);
    this.#ctx.lifecycle?.touch(this.id);
    let process: Awaited<ReturnType<typeof engine.exec>>;
    try {
      process = await engine.exec(this.id, engineOptions);
    } catch (error) {
      this.#ctx.countExecEnd(this.id, { bytesSent: 0, bytesReceived: 0, exitCode: -1 });
      if (error instanceof BoxError) throw error;
      throw new BoxError(`cannot exec '${cmd}' in box ${this.id}: ${(error as Error).message}`, {
        cause: error,
        code: 'exec',
      });
    }
    return new JsExecution(process, (report) => this.#ctx.countExecEnd(this.id, report));
  }

  /**
   * Starts a stopped box again (BoxLite `box.start()`): its writable layer, volumes and options are kept;
   * `startedAt` is the new start. A running box is left as it is.
   * @throws BoxError `not_found` (removed, e.g. `autoRemove` on stop), `conflict` (failed, or secrets
   *   whose values only the creating runtime held).
   */
  async start(): Promise<void> {
    await this.#ctx.startBox(this.id);
  }

  /**
   * Pauses the box (issue 18): every process of it is frozen with the cgroup freezer and uses no CPU;
   * memory stays resident (no checkpoint: see ENGINE.md "Pause and resume"). `info()` then reports status
   * `paused` in every process; `exec` is refused with `conflict` unless the box has `autoResume`; files stay
   * readable and writable. Pausing a paused box is a no-op.
   * @throws BoxError `conflict` when the box is not running, `not_found` when it was removed,
   *   `unsupported` when its processes are not in a freezable cgroup of their own.
   */
  async pause(): Promise<void> {
    await this.#lifecycle().pause(this.id);
  }

  /**
   * Resumes a paused box: its processes continue where they were frozen; the `autoPause` idle clock
   * restarts. Resuming a running box is a no-op.
   * @throws BoxError `conflict` when the box is stopped, `not_found` when it was removed.
   */
  async resume(): Promise<void> {
    await this.#lifecycle().resume(this.id);
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
    await this.#lifecycle().setTimeout(this.id, ms, action);
  }

  /**
   * Snapshots of the box's filesystem (BoxLite #205 / E2B naming): `create(name?)`, `list()`,
   * `get(name)`, `restore(name)`, `remove(name)`; see `BoxSnapshots` (`snapshots.ts`).
   */
  get snapshot(): BoxSnapshots {
    this.#snapshot ??= new BoxSnapshots({
      create: (name) => this.#snapshotService().create(this.id, name),
      list: () => this.#snapshotService().list(this.id),
      get: (name) => this.#snapshotService().get(this.id, name),
      restore: (name) => this.#snapshotService().restore(this.id, name),
      remove: (name) => this.#snapshotService().remove(this.id, name),
    });
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
    await this.#snapshotService().export(this.id, path);
  }

  #snapshotService(): SnapshotService {
    const service = this.#ctx.snapshots;
    if (!service) throw new BoxError('this runtime cannot snapshot boxes', { code: 'unsupported' });
    return service;
  }

  #lifecycle(): BoxLifecycle {
    const lifecycle = this.#ctx.lifecycle;
    if (!lifecycle) throw new BoxError('this runtime cannot pause boxes', { code: 'unsupported' });
    return lifecycle;
  }

  /** Stops the box; with `autoRemove` the box is then removed. Stopping a stopped box is a no-op. */
  async stop(): Promise<void> {
    await this.#ctx.stopBox(this.id);
  }

  /**
   * @internal `stop()` giving the box's commands `graceMs` after SIGTERM before SIGKILL (used by
   * `shutdown(timeout)` and the REST stop route's `timeout`).
   */
  async stopWithin(graceMs: number): Promise<void> {
    await this.#ctx.stopBox(this.id, graceMs);
  }

  /**
   * Counters, resource usage and creation stage timings of the box (spec 002 `JsBoxMetrics`).
   * `cpuPercent` is the usage since the previous sample (first sample: since the box started).
   */
  async metrics(): Promise<JsBoxMetrics> {
    this.#ctx.flushCounters?.();
    const record = await this.#record();
    const metrics: JsBoxMetrics = {
      commandsExecutedTotal: record.commandsExecuted,
      execErrorsTotal: record.execErrors,
      bytesSentTotal: record.bytesSent,
      bytesReceivedTotal: record.bytesReceived,
      ...record.timings,
    };
    if (record.status === 'running' || record.status === 'paused') {
      const engine = await this.#ctx.engine();
      const stats = await engine.stats(this.id).catch(() => null);
      if (stats) {
        if (stats.cpuPercent !== undefined) metrics.cpuPercent = stats.cpuPercent;
        if (stats.memoryBytes !== undefined) metrics.memoryBytes = stats.memoryBytes;
        if (stats.networkBytesSent !== undefined) metrics.networkBytesSent = stats.networkBytesSent;
        if (stats.networkBytesReceived !== undefined)
          metrics.networkBytesReceived = stats.networkBytesReceived;
        if (stats.networkTcpConnections !== undefined)
          metrics.networkTcpConnections = stats.networkTcpConnections;
        if (stats.networkTcpErrors !== undefined) metrics.networkTcpErrors = stats.networkTcpErrors;
      }
    }
    return metrics;
  }
}
