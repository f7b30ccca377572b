/**
 * The local box backend (`BoxBackend`, `box-backend.ts`): a box of this host. It reads the box's record
 * from the state database on every call (through `RuntimeContext.refresh`), so handles in several
 * processes agree on a box's state, and drives the box through the runtime's engine.
 */

import type { EngineExecOptions, EngineStats } from '../engine/types.ts';
import { BoxError, conflict, notFound } from '../errors.ts';
import { LocalNetworkHandle } from '../network/tunnel.ts';
import type {
  JsBoxInfo,
  JsBoxMetrics,
  JsNetworkHandle,
  JsNetworkInfo,
  JsPublishedPort,
  TimeoutAction,
} from '../types.ts';
import type { BoxBackend, ExecOptions } from './box-backend.ts';
import type { BoxLifecycle, RuntimeContext } from './context.ts';
import { JsExecution } from './execution.ts';
import { ForwardedFiles } from './files/forward.ts';
import { GVisorFiles } from './files/gvisor.ts';
import { LocalFiles } from './files/local.ts';
import type { FilesBackend } from './files/types.ts';
import { initialHealth, publicHealth } from './health.ts';
import type { SnapshotOps, SnapshotService } from './snapshots.ts';
import type { BoxRecord } from './state.ts';

/**
 * Maps a record's status to spec 002 `JsBoxStateInfo.status`: `configured`, `running`, `stopped`, `failed`,
 * and `paused` (a frozen box).
 */
function publicStatus(status: BoxRecord['status']): string {
  return status === 'creating' ? 'configured' : status;
}

/**
 * The `EngineStats` fields a box's metrics report, each once: a `Record` over `keyof EngineStats`, so a
 * field added to `EngineStats` and missing here fails the type check.
 */
const ENGINE_STATS_FIELDS = Object.keys({
  cpuPercent: true,
  memoryBytes: true,
  networkBytesSent: true,
  networkBytesReceived: true,
  networkTcpConnections: true,
  networkTcpErrors: true,
} satisfies Record<keyof EngineStats, true>) as (keyof EngineStats)[];

/** Copies the `EngineStats` fields the engine measured (defined ones only, no other keys) onto `metrics`. */
function copyEngineStats(stats: EngineStats, metrics: JsBoxMetrics): void {
  for (const field of ENGINE_STATS_FIELDS) {
    const value = stats[field];
    if (value !== undefined) metrics[field] = value;
  }
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
    ...(record.options.labels ? { labels: { ...record.options.labels } } : {}),
  };
}

/** A box of a local runtime (`BoxBackend`); created by `LocalRuntime` and wrapped in a `JsBox`. */
export class LocalBox implements BoxBackend {
  readonly id: string;
  readonly name: string | null;
  readonly #ctx: RuntimeContext;
  /** Port publications this handle made; null when it only loaded the box from the state database. */
  readonly #publishedPorts: JsPublishedPort[] | null;

  /**
   * @param ctx the runtime's services; `record` the box as the runtime last read it; `publishedPorts` the
   *   publications the runtime made for it (null when unknown to this process).
   */
  constructor(ctx: RuntimeContext, record: BoxRecord, publishedPorts: JsPublishedPort[] | null) {
    this.#ctx = ctx;
    this.id = record.id;
    this.name = record.name;
    this.#publishedPorts = publishedPorts;
  }

  async #record(): Promise<BoxRecord> {
    const record = await this.#ctx.refresh(this.id);
    if (!record) throw notFound(`box ${this.id} no longer exists`);
    return record;
  }

  /** Tunnels through the box's network namespace, entered via its init process (`network/tunnel.ts`). */
  network(): JsNetworkHandle {
    return new LocalNetworkHandle(
      async () => {
        const current = await this.#record();
        if (current.status !== 'running' || !current.pid) {
          throw conflict(
            `box ${this.id} is ${publicStatus(current.status)}, not running; cannot open a tunnel`,
          );
        }
        return current.pid;
      },
      this.#ctx.updateNetwork ? (allowNet) => this.#ctx.updateNetwork!(this.id, allowNet) : undefined,
    );
  }

  /**
   * Files of the box: resolved inside the box root by this process (`files/local.ts`) for a container
   * box, reachable while it runs or is paused; moved by a helper inside a gVisor box (`files/gvisor.ts`),
   * while it runs. @throws BoxError `conflict` (stopped box, or a paused gVisor box) on first use.
   */
  files(): FilesBackend {
    const local = new LocalFiles({
      initPid: async () => {
        const record = await this.#record();
        // A paused box's files are reachable: the host reads them, no box process runs for it.
        if ((record.status !== 'running' && record.status !== 'paused') || !record.pid) {
          throw conflict(
            `box ${this.id} is ${publicStatus(record.status)}, not running; its files are not reachable`,
          );
        }
        return { pid: record.pid, identity: record.init };
      },
    });
    const gvisor = new GVisorFiles({
      exec: async (args, env) => {
        const record = await this.#record();
        if (record.status !== 'running') {
          throw conflict(
            `box ${this.id} is ${publicStatus(record.status)}, not running; the files of a gvisor box are reached from inside it`,
          );
        }
        const engine = await this.#ctx.engine();
        return engine.exec(this.id, { cmd: '/.sandbox/busybox', args, env, tty: false });
      },
    });
    return new ForwardedFiles(
      async () => ((await this.#record()).options.isolation === 'gvisor' ? gvisor : local),
      async () =>
        (await this.#record()).options.volumes.flatMap((v) =>
          v.hostPath !== undefined && v.readOnly !== true ? [v.hostPath] : [],
        ),
    );
  }

  /** Metadata from the record; publications end with the box (a stopped box has none active). */
  async info(): Promise<JsBoxInfo> {
    const record = await this.#record();
    const up = record.status === 'running' || record.status === 'paused';
    return boxInfo(record, up ? this.#publishedPorts : this.#publishedPorts && []);
  }

  /** Starts a command through the engine; counts it in the box and runtime counters. */
  async exec(cmd: string, args: string[], env: string[], options: ExecOptions): Promise<JsExecution> {
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
    const engineOptions: EngineExecOptions = { cmd, args, env, tty: options.tty === true };
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

  /** Starts the box again through the runtime (`RuntimeContext.startBox`). */
  async start(): Promise<void> {
    await this.#ctx.startBox(this.id);
  }

  /** Stops the box through the runtime (`RuntimeContext.stopBox`). */
  async stop(graceMs?: number): Promise<void> {
    await this.#ctx.stopBox(this.id, graceMs);
  }

  /** Freezes the box (`BoxLifecycle.pause`). @throws BoxError `unsupported` without lifecycle services. */
  async pause(): Promise<void> {
    await this.#lifecycle().pause(this.id);
  }

  /** Thaws the box (`BoxLifecycle.resume`). */
  async resume(): Promise<void> {
    await this.#lifecycle().resume(this.id);
  }

  /** Stores the timeout; the reaper process of the `homeDir` enforces it (`lifetimes.ts`). */
  async setTimeout(ms: number, action?: TimeoutAction): Promise<void> {
    await this.#lifecycle().setTimeout(this.id, ms, action);
  }

  /** Counters from the state database (pending ones written first) and live usage from the engine. */
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
      if (stats) copyEngineStats(stats, metrics);
    }
    return metrics;
  }

  /** The runtime's snapshot service bound to this box (`snapshot-local.ts`). */
  snapshots(): SnapshotOps {
    return {
      create: (name) => this.#snapshotService().create(this.id, name),
      list: () => this.#snapshotService().list(this.id),
      get: (name) => this.#snapshotService().get(this.id, name),
      restore: (name) => this.#snapshotService().restore(this.id, name),
      remove: (name) => this.#snapshotService().remove(this.id, name),
    };
  }

  /** Writes the box's archive with the runtime's snapshot service (`archive.ts`). */
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
}
