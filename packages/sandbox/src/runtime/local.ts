/**
 * The local runtime backend of `JsRuntime` (spec 002 "Runtime (`JsRuntime`)"): creates, lists, looks up and removes boxes,
 * keeps their records in `<homeDir>/state.db` (SQLite, WAL) and reports metrics.
 *
 * Layout of `homeDir` (default `~/.sandbox`): `state.db` (boxes, volumes), `boxes/<id>/` (one directory
 * per box, owned by the engine), `volumes/<id>/data` (managed volumes), `engine/` (OCI runtime state),
 * and the image store's directories.
 *
 * Crash safety: a box record is written (status `creating`, owned by this process) before anything is
 * set up and removed only after everything is torn down. When a runtime starts it removes every box whose
 * creating process is gone, every box directory without a record, and marks boxes whose init process died
 * as stopped (removing them when created with `autoRemove`).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { finished } from 'node:stream/promises';
import { ulid } from 'ulid';
import { DEFAULT_DISK_SIZE_GB, ensureDiskImage } from '../engine/disk.ts';
import { freezeBox, freezerState, thawBox } from '../engine/freezer.ts';
import { createTieredEngine, type TieredEngine } from '../engine/gvisor-tiers.ts';
import { RootlessEngine } from '../engine/rootless.ts';
import type { Engine, EngineBoxSpec, EngineMount } from '../engine/types.ts';
import { BoxError, conflict, notFound, withCode } from '../errors.ts';
import { ImageStore, type PreparedImage } from '../images/index.ts';
import { BoxNetworking, secretsEnv } from '../network/index.ts';
import { RootlessNetworking } from '../network/rootless.ts';
import type { JsBoxInfo, JsBoxOptions, JsOptions, JsRuntimeMetrics } from '../types.ts';
import { type RuntimeBackend, type RuntimeImages, type RuntimeVolumes, splitReference } from './backend.ts';
import { JsBox } from './box.ts';
import { boxInfo, LocalBox } from './box-local.ts';
import type { RuntimeContext } from './context.ts';
import { PendingCounters } from './counters.ts';
import type { ExecutionReport } from './execution.ts';
import { checkArgv, HealthMonitor, initialHealth, publicHealth, runCheck } from './health.ts';
import { LifetimeStore, validateLifetimes } from './lifetimes.ts';
import {
  DEFAULT_PIDS_LIMIT,
  mainProcessArgv,
  type NormalizedBoxOptions,
  validateBoxName,
  validateBoxOptions,
} from './options.ts';
import { BoxPool, type JsBoxPool, type PoolSpec, PoolTable, poolBoxOptions, poolKey } from './pool.ts';
import { ensureReaper, execsRunningIn, type ReaperHost } from './reaper.ts';
import { LocalSnapshots } from './snapshot-local.ts';
import type { CloneOptions } from './snapshots.ts';
import {
  type BoxRecord,
  type BoxTimings,
  ownerAlive,
  processIdentity,
  StateDb,
  type VolumeRecord,
} from './state.ts';

/** Default `homeDir`: the hidden directory `.sandbox` in the user's home (spec 002 `JsOptions.homeDir`). */
export function defaultHomeDir(): string {
  return process.env.SANDBOX_HOME || join(homedir(), '.sandbox');
}

/** True when this process is not root: boxes then run on the rootless engine (engine/rootless.ts). */
function rootless(): boolean {
  return process.getuid?.() !== 0;
}

function nowIso(): string {
  return new Date().toISOString();
}

function ms(start: number): number {
  return Math.round((performance.now() - start) * 1000) / 1000;
}

/** Runtime counters of one `JsRuntime` instance since it was constructed. */
interface Counters {
  created: number;
  failed: number;
  commands: number;
  execErrors: number;
}

/**
 * A local runtime over one `homeDir` (spec 002 `JsRuntime`, local flavour; reached through `JsRuntime`).
 * Several runtimes, in one process or in several, may share a `homeDir`: they see the same boxes.
 */
export class LocalRuntime implements RuntimeBackend {
  /** Absolute base directory of this runtime's data. */
  readonly homeDir: string;
  /** Always null: a local runtime has no server. */
  readonly url: null = null;
  readonly #db: StateDb;
  readonly #store: ImageStore;
  readonly #counters: Counters = { created: 0, failed: 0, commands: 0, execErrors: 0 };
  /** Per-box exec counters not yet written to the state database (see `PendingCounters`). */
  readonly #pending: PendingCounters;
  #engine: Promise<TieredEngine | RootlessEngine> | null = null;
  #ready: Promise<void> | null = null;
  #net: BoxNetworking | RootlessNetworking | null = null;
  readonly #ctx: RuntimeContext;
  /** Secret values of boxes this instance created (never stored), for `start` after `stop`. */
  readonly #secretValues = new Map<string, NormalizedBoxOptions['secrets']>();
  /** Stored box lifetimes (`lifetimes.ts`), enforced by the reaper process (`reaper.ts`). */
  readonly #lifetimes: LifetimeStore;
  /** Warm pools of this instance (`pool.ts`), by id. */
  readonly #pools = new Map<string, BoxPool>();
  readonly #poolTable: PoolTable;
  /** Health checks of the boxes this instance created, started or took over (`health.ts`). */
  readonly #health: HealthMonitor;
  /** `pid:starttime` of this process, recorded with the health of the boxes it checks. */
  readonly #me = processIdentity(process.pid) ?? `${process.pid}:0`;
  /** Snapshots, clones, exports and imports (`snapshot-local.ts`). */
  readonly #snapshots: LocalSnapshots;

  /**
   * @param options `homeDir` (default {@link defaultHomeDir}) and `imageRegistries`, already checked by
   *   `JsRuntime`.
   */
  constructor(options: JsOptions) {
    this.homeDir = resolve(options.homeDir ?? defaultHomeDir());
    this.#db = new StateDb(this.homeDir);
    this.#pending = new PendingCounters(this.#db);
    this.#lifetimes = new LifetimeStore(this.#db);
    this.#poolTable = new PoolTable(this.#db);
    mkdirSync(join(this.homeDir, 'boxes'), { recursive: true, mode: 0o700 });
    this.#store = new ImageStore({ homeDir: this.homeDir, registries: options.imageRegistries ?? [] });
    this.#snapshots = new LocalSnapshots({
      homeDir: this.homeDir,
      record: async (idOrName) => {
        const record = await this.#find(idOrName);
        if (!record) throw notFound(`no box '${idOrName}'`);
        return record;
      },
      boxDir: (id) => this.#boxDir(id),
      restart: (id, between) => this.#restart(id, between),
      createSeeded: (options, name, seed) =>
        this.#createNew(options, name, undefined, async (id) => {
          // The new box's disk is made (btrfs) and filled before its first start.
          const boxDir = this.#boxDir(id);
          mkdirSync(join(boxDir, 'disk'), { recursive: true, mode: 0o700 });
          const sizeGb = options.diskSizeGb ?? DEFAULT_DISK_SIZE_GB;
          await ensureDiskImage(this.#engineStateRoot(), id, join(boxDir, 'disk.img'), sizeGb, {
            snapshots: true,
          });
          await seed(boxDir);
        }),
      prepareImage: (record) => this.#prepareImage(record.options as NormalizedBoxOptions),
    });
    this.#ctx = {
      snapshots: this.#snapshots,
      engine: () => this.#getEngine(),
      refresh: (id) => this.#refresh(id),
      countCommand: (id) => {
        this.#counters.commands++;
        this.#pending.add(id, { commands: 1 });
      },
      countExecEnd: (id, report: ExecutionReport) => {
        this.#lifetimes.touch(id);
        // A warm pool refills once the box it handed out has run its first command (pool.ts).
        for (const pool of this.#pools.values()) pool.commandEnded(id);
        const failed = report.exitCode !== 0;
        if (failed) this.#counters.execErrors++;
        this.#pending.add(id, {
          errors: failed ? 1 : 0,
          sent: report.bytesSent,
          received: report.bytesReceived,
        });
      },
      flushCounters: () => this.#pending.flush(),
      stopBox: (id, graceMs) => this.#stopBox(id, graceMs),
      startBox: (id) => this.#startBox(id),
      lifecycle: {
        pause: (id) => this.#pause(id),
        resume: (id) => this.#resume(id),
        autoResume: async (id) => {
          if (!this.#lifetimes.get(id)?.autoResume) return false;
          await this.#resume(id);
          return true;
        },
        setTimeout: async (id, ms, action) => {
          if (!(await this.#refresh(id))) throw notFound(`box ${id} no longer exists`);
          this.#lifetimes.setTimeout(id, ms, action);
          ensureReaper(this.homeDir);
        },
        touch: (id) => this.#lifetimes.touch(id),
      },
    };
    this.#health = new HealthMonitor({
      check: async (id, argv, timeoutMs) => runCheck(await this.#getEngine(), id, argv, timeoutMs),
      save: (id, status) => this.#db.setHealth(id, { ...status, monitor: this.#me }),
      state: async (id) => {
        // Reconciled: a box whose init died is stopped, a frozen one paused.
        const status = (await this.#refresh(id))?.status;
        return status === 'running' ? 'running' : status === 'paused' ? 'paused' : 'gone';
      },
    });
  }

  /**
   * The engine's state directory: `<homeDir>/engine`, shared by every process on this homeDir. The OCI
   * runtimes refuse paths with whitespace; such a homeDir gets a directory under /run keyed by its hash.
   */
  #engineStateRoot(): string {
    if (!/\s/.test(this.homeDir)) return join(this.homeDir, 'engine');
    return join('/run/seed-sandbox', createHash('sha256').update(this.homeDir).digest('hex').slice(0, 16));
  }

  /** Networking of this runtime's boxes (issue 9); per-box network state in `<engine state root>/net`. */
  #networking(): BoxNetworking | RootlessNetworking {
    const stateDir = join(this.#engineStateRoot(), 'net');
    this.#net ??= rootless() ? new RootlessNetworking({ stateDir }) : new BoxNetworking({ stateDir });
    return this.#net;
  }

  /** The engine of both isolation tiers (the gVisor one is created on the first gVisor box). */
  #getEngine(): Promise<TieredEngine | RootlessEngine> {
    // An ordinary account gets the rootless engine (user namespace from its subordinate ids, issue 16).
    this.#engine ??= rootless()
      ? (async () =>
          new RootlessEngine({ stateRoot: this.#engineStateRoot(), ...this.#networking().hooks() }))()
      : createTieredEngine({
          stateRoot: this.#engineStateRoot(),
          ...this.#networking().hooks(),
        });
    this.#engine.catch(() => {
      this.#engine = null;
    });
    return this.#engine;
  }

  /** Engine ready and crash leftovers cleaned (once per runtime instance). */
  #whenReady(): Promise<void> {
    this.#ready ??= (async () => {
      await this.#getEngine();
      await this.#recover();
      // Lifetimes stored by earlier runs (a reboot of the runtime state) are enforced again.
      if (this.#lifetimes.needsReaper()) ensureReaper(this.homeDir);
    })();
    this.#ready.catch(() => {
      this.#ready = null;
    });
    return this.#ready;
  }

  #boxDir(id: string): string {
    return join(this.homeDir, 'boxes', id);
  }

  /** Removes what crashed processes left behind (see the module comment). */
  async #recover(): Promise<void> {
    const records = this.#db.listBoxes();
    const known = new Set(records.map((r) => r.id));
    await Promise.all(records.map((record) => this.#reconcile(record)));
    let dirs: string[] = [];
    try {
      dirs = readdirSync(join(this.homeDir, 'boxes'));
    } catch {}
    const engine = await this.#getEngine();
    for (const dir of dirs) {
      // A record is inserted before its directory is made and deleted after it is removed, so a directory
      // without a record is always a leftover.
      if (known.has(dir) || this.#db.getBox(dir)) continue;
      await engine.remove(dir, this.#boxDir(dir)).catch(() => {});
      rmSync(this.#boxDir(dir), { recursive: true, force: true });
    }
    // Pooled boxes of a process that is gone: nobody can hand them out any more.
    const pooled = this.#poolTable.ids();
    for (const record of records) {
      if (pooled.has(record.id) && !ownerAlive(record.owner)) await this.#teardown(record.id).catch(() => {});
    }
    // Containers the engine knows (its state lives in this homeDir) but no record names.
    const lister = engine as Engine & { list?: () => Promise<{ id: string; boxDir?: string }[]> };
    for (const box of (await lister.list?.().catch(() => [])) ?? []) {
      if (this.#db.getBox(box.id)) continue;
      await engine.remove(box.id, box.boxDir ?? this.#boxDir(box.id)).catch(() => {});
    }
  }

  /**
   * Brings a record in line with reality: a `creating` box of a dead process is torn down; a `running` box
   * whose init process is gone is marked stopped (and removed when `autoRemove`). Returns the current
   * record, or null when the box is gone.
   */
  async #reconcile(record: BoxRecord): Promise<BoxRecord | null> {
    if (record.status === 'creating') {
      if (ownerAlive(record.owner)) return record;
      await this.#teardown(record.id);
      return null;
    }
    if (record.status === 'running' && !(record.init && ownerAlive(record.init))) {
      const engine = await this.#getEngine();
      const state = await engine.state(record.id).catch(() => ({ status: 'unknown' as const }));
      if (state.status === 'running') return record;
      await engine.stop(record.id, 0).catch(() => {});
      // The engine skips the network hook when the container is already gone (parent-death stop).
      await this.#networking().teardown(record.id);
      this.#db.setStatus(record.id, 'stopped');
      this.#lifetimes.markStopped(record.id);
      if (record.options.autoRemove) {
        await this.#teardown(record.id);
        return null;
      }
      return { ...record, status: 'stopped', pid: null };
    }
    if (record.status === 'stopped' && record.options.autoRemove) {
      // Stopped but not yet removed (the stopping process died in between).
      await this.#teardown(record.id);
      return null;
    }
    if (record.status === 'running' && record.pid) {
      // Paused is the cgroup's state (engine/freezer.ts), read back on every look, never stored.
      let frozen = false;
      try {
        frozen = freezerState(record.id, record.pid) === 'frozen';
      } catch {}
      if (frozen) return { ...record, status: 'paused' };
    }
    return record;
  }

  /**
   * Pauses a running box (`JsBox.pause`): freezes its cgroup. No-op when paused.
   * @throws BoxError `not_found`, `conflict` (not running), `unsupported` (no freezable cgroup).
   */
  async #pause(id: string): Promise<void> {
    const record = await this.#refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === 'paused') return;
    if (record.status !== 'running' || !record.pid) {
      throw conflict(`box ${record.name ?? id} is ${record.status}; only a running box can be paused`);
    }
    await freezeBox(id, record.pid);
  }

  /**
   * Resumes a paused box (`JsBox.resume`): thaws its cgroup and restarts its idle clock. No-op when running.
   * @throws BoxError `not_found`, `conflict` (stopped or failed).
   */
  async #resume(id: string): Promise<void> {
    const record = await this.#refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === 'running') return;
    if (record.status !== 'paused' || !record.pid) {
      throw conflict(`box ${record.name ?? id} is ${record.status}; only a paused box can be resumed`);
    }
    thawBox(id, record.pid);
    this.#lifetimes.touch(id);
  }

  /**
   * Runs `prepare` on the running or paused box `id` (its disk mounted), then stops it at once and starts
   * it again with its options (snapshot restore); a stopped box only gets `prepare`.
   * @throws BoxError `not_found`, `conflict` (secrets whose values this runtime does not hold), before
   *   `prepare` runs.
   */
  async #restart(id: string, prepare: () => Promise<void>): Promise<void> {
    const record = await this.#refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status !== 'running' && record.status !== 'paused') return prepare();
    if (record.options.secrets.length > 0 && !this.#secretValues.has(id)) {
      throw conflict(
        `box ${record.name ?? id} has secrets whose values are only held by the runtime that created it; it cannot be restarted here`,
      );
    }
    await prepare();
    this.#health.unwatch(id);
    const engine = await this.#getEngine();
    this.#thawForStop(id);
    await engine.stop(id, 0);
    this.#db.setStatus(id, 'stopped');
    await this.#startBox(id);
  }

  /** Thaws a box that may be paused before it is stopped (a frozen process does not die of SIGKILL). */
  #thawForStop(id: string): void {
    const pid = this.#db.getBox(id)?.pid;
    if (!pid) return;
    try {
      thawBox(id, pid);
    } catch {}
  }

  /**
   * The services the lifetime reaper (`reaper-main.ts`) needs from this runtime: the lifetimes table, each
   * box's reconciled status, whether commands run in it, and pause/stop/remove by id.
   */
  reaperHost(): ReaperHost {
    return {
      lifetimes: this.#lifetimes,
      status: async (id) => (await this.#refresh(id))?.status ?? null,
      execsRunning: (id) => execsRunningIn(join(this.#engineStateRoot(), 'exec'), id),
      pause: (id) => this.#pause(id),
      stop: (id) => this.#stopBox(id),
      remove: async (id) => {
        await this.#whenReady();
        await this.#teardown(id);
      },
    };
  }

  async #refresh(id: string): Promise<BoxRecord | null> {
    await this.#whenReady();
    const record = this.#db.getBox(id);
    return record ? this.#reconcile(record) : null;
  }

  /** Deletes everything of a box: engine state, box directory, then (last) its record. */
  async #teardown(id: string): Promise<void> {
    this.#health.unwatch(id);
    const engine = await this.#getEngine();
    this.#thawForStop(id);
    await engine.remove(id, this.#boxDir(id)); // kills the box first when it still runs
    await this.#networking().teardown(id);
    rmSync(this.#boxDir(id), { recursive: true, force: true });
    this.#db.deleteBox(id);
  }

  /** Stops a box (`graceMs` for its commands to exit after SIGTERM), then removes it when `autoRemove`. */
  async #stopBox(id: string, graceMs?: number): Promise<void> {
    await this.#whenReady();
    const record = this.#db.getBox(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === 'running' || record.status === 'creating') {
      this.#health.unwatch(id);
      const engine = await this.#getEngine();
      this.#thawForStop(id);
      await engine.stop(id, graceMs);
      this.#db.setStatus(id, 'stopped');
      this.#lifetimes.markStopped(id);
      if (this.#lifetimes.get(id)?.autoDelete != null) ensureReaper(this.homeDir);
    }
    if (record.options.autoRemove) {
      await this.#teardown(id);
      this.#secretValues.delete(id);
    }
  }

  /**
   * Starts a stopped box again (BoxLite `box.start()`): same writable layer, volumes and options; a
   * running box is left as it is.
   * @throws BoxError `not_found` when it was removed, `conflict` when it is being created or failed, or
   *   when it has secrets whose values this runtime instance does not hold (they are never stored).
   */
  async #startBox(id: string): Promise<void> {
    await this.#whenReady();
    const record = await this.#refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === 'running') return;
    if (record.status !== 'stopped') {
      throw conflict(`box ${record.name ?? id} is ${record.status}; only a stopped box can be started`);
    }
    const secrets = record.options.secrets.length > 0 ? this.#secretValues.get(id) : [];
    if (!secrets) {
      throw conflict(
        `box ${record.name ?? id} has secrets whose values are only held by the runtime that created it; create a new box`,
      );
    }
    const options = { ...record.options, secrets } as NormalizedBoxOptions;
    try {
      await this.#launch(id, record.name, options, performance.now());
      this.#lifetimes.markStarted(id);
    } catch (error) {
      await (await this.#getEngine()).stop(id, 0).catch(() => {});
      await this.#networking().teardown(id);
      this.#db.setStatus(id, 'stopped');
      if (error instanceof BoxError) throw error;
      throw new BoxError(`cannot start box ${record.name ?? id}: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /**
   * Stops every running, non-detached box this process created (BoxLite `runtime.shutdown(timeout)`):
   * SIGTERM to their commands, SIGKILL after `timeoutSecs` (default 10). Detached boxes and boxes of
   * other processes are left running. Boxes with `autoRemove` are removed.
   * @throws BoxError `invalid_option` (field `timeout`) for a negative or non-finite timeout.
   */
  async shutdown(timeoutSecs = 10): Promise<void> {
    if (typeof timeoutSecs !== 'number' || !Number.isFinite(timeoutSecs) || timeoutSecs < 0) {
      throw new BoxError('invalid shutdown option timeout: must be a number of seconds ≥ 0', {
        field: 'timeout',
      });
    }
    await this.#whenReady();
    const me = processIdentity(process.pid);
    const mine = this.#db
      .listBoxes()
      .filter(
        (r) => r.owner === me && !r.options.detach && (r.status === 'running' || r.status === 'creating'),
      );
    await Promise.all([...this.#pools.values()].map((pool) => pool.close()));
    await Promise.all(mine.map((r) => this.#stopBox(r.id, Math.round(timeoutSecs * 1000)).catch(() => {})));
    this.#pending.flush();
  }

  /** Finds or creates the managed volume `idOrName`; returns its record and data directory. */
  #resolveVolume(idOrName: string, field: string): { volume: VolumeRecord; dataDir: string } {
    let volume = this.#db.getVolume(idOrName);
    if (!volume) {
      try {
        validateBoxName(idOrName);
      } catch {
        throw new BoxError(
          `invalid box option ${field}: no volume '${idOrName}', and it is not a valid name for a new volume`,
          { field },
        );
      }
      volume = this.#db.insertVolume({ id: ulid(), name: idOrName, createdAt: nowIso() });
    }
    const dataDir = join(this.homeDir, 'volumes', volume.id, 'data');
    mkdirSync(dataDir, { recursive: true, mode: 0o755 });
    return { volume, dataDir };
  }

  async #prepareImage(options: NormalizedBoxOptions): Promise<PreparedImage> {
    if (options.rootfsPath !== undefined) return this.#store.fromRootfsPath(options.rootfsPath);
    const image = options.image!;
    try {
      return (await this.#store.get(image)) ?? (await this.#store.pull(image));
    } catch (error) {
      throw withCode(error, 'image', `cannot pull image '${image}'`);
    }
  }

  /**
   * Prepares the image, volumes, environment and network of a box and starts it in the engine, then
   * records it as running with its stage timings. Used by `create` and by `start` (a stopped box resumes
   * its writable layer: same box directory, same spec).
   */
  async #launch(
    id: string,
    boxName: string | null,
    normalized: NormalizedBoxOptions,
    t0: number,
  ): Promise<void> {
    const tImage = performance.now();
    const image = await this.#prepareImage(normalized);
    const stageImagePrepareMs = ms(tImage);
    const mounts: EngineMount[] = [];
    const volumeIds: string[] = [];
    normalized.volumes.forEach((volume, i) => {
      if (volume.managedVolume !== undefined) {
        const { volume: record, dataDir } = this.#resolveVolume(
          volume.managedVolume,
          `volumes[${i}].managedVolume`,
        );
        volumeIds.push(record.id);
        mounts.push({ hostPath: dataDir, guestPath: volume.guestPath, readOnly: false, ownedByBox: true });
      } else {
        mounts.push({
          hostPath: volume.hostPath!,
          guestPath: volume.guestPath,
          readOnly: volume.readOnly === true,
        });
      }
    });
    this.#db.linkVolumes(id, volumeIds);
    const env = new Map<string, string>();
    for (const entry of image.config.env) {
      const eq = entry.indexOf('=');
      if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
    }
    for (const { key, value } of normalized.env) env.set(key, value);
    // Secrets (issue 9): the box sees placeholders and the proxy/CA settings, never the values.
    for (const [key, value] of Object.entries(secretsEnv(normalized.secrets))) {
      if (!normalized.env.some((e) => e.key === key)) env.set(key, value);
    }
    const boxDir = this.#boxDir(id);
    mkdirSync(boxDir, { recursive: true, mode: 0o700 });
    const spec: EngineBoxSpec = {
      id,
      hostname: boxName ?? id.toLowerCase(),
      layerDirs: image.layerDirs,
      boxDir,
      env: [...env].map(([k, v]) => `${k}=${v}`),
      workingDir: normalized.workingDir,
      cpus: normalized.cpus,
      memoryMib: normalized.memoryMib,
      pidsLimit: DEFAULT_PIDS_LIMIT,
      mounts,
      capabilities: normalized.capabilities,
      network: normalized.network,
      detach: normalized.detach,
      isolation: normalized.isolation,
    };
    const user = normalized.user ?? image.config.user;
    if (user) spec.user = user;
    const main = mainProcessArgv(normalized, image.config);
    if (main && normalized.isolation === 'gvisor') {
      throw new BoxError('entrypoint/cmd: a main process is not supported by the gvisor isolation tier', {
        code: 'unsupported',
        field: normalized.entrypoint !== undefined ? 'entrypoint' : 'cmd',
      });
    }
    if (normalized.diskSizeGb !== undefined) spec.diskSizeGb = normalized.diskSizeGb;
    if (normalized.limitsEnforced === false) spec.allowUnlimited = true;
    const engine = await this.#getEngine();
    this.#networking().prepare(id, {
      ports: normalized.ports,
      secrets: normalized.secrets,
      detach: normalized.detach,
      // The container tier's network host side starts beside the box's mounts (manager.ts `prepare`).
      ...(normalized.isolation === 'gvisor' ? {} : { network: normalized.network }),
    });
    const started = await engine.start(spec);
    const timings: BoxTimings = {
      stageImagePrepareMs,
      ...started.timings,
      totalCreateDurationMs: ms(t0),
    };
    this.#db.markRunning(id, started.pid, processIdentity(started.pid), nowIso(), timings);
    if (main) {
      // The main process: in the background, as the box's user, in its working directory.
      await engine
        .exec(id, { cmd: main[0]!, args: main.slice(1), env: [], tty: false, detach: true })
        .catch((error: Error) => {
          throw new BoxError(
            `cannot start the main process ${JSON.stringify(main)} of box ${boxName ?? id} (is ${main[0]} an executable of the image, runnable by its user?): ${error.message}`,
            { cause: error, code: 'exec', field: normalized.entrypoint !== undefined ? 'entrypoint' : 'cmd' },
          );
        });
    }
    if (normalized.healthCheck) {
      const argv = checkArgv(normalized.healthCheck.command, image.config.healthcheck);
      this.#health.watch(id, normalized.healthCheck, argv, Date.now());
    }
  }

  /**
   * Creates and starts a box (spec 002 `create`). Defaults per `JsBoxOptions`; `name` must be unique.
   * Stage timings are recorded in the box's metrics.
   * @throws BoxError naming the field for invalid options (the four rejections of spec 002 included), a
   *   taken name, a missing host path or image, or an engine failure. Nothing of a failed box remains.
   * A warm pool of this runtime with the same options (`pool.ts`) hands out a ready box instead.
   */
  async create(options: JsBoxOptions, name?: string): Promise<JsBox> {
    if (this.#pools.size > 0) {
      const boxName = validateBoxName(name) ?? null;
      const lifetimes = validateLifetimes(options);
      const key = poolKey(options);
      for (const pool of this.#pools.values()) {
        if (pool.key !== key) continue;
        const id = pool.take(boxName);
        if (!id) continue;
        const record = await this.#refresh(id);
        if (record?.status !== 'running') {
          // It died while pooled (its box was killed): it goes, and the caller gets a new box.
          if (record) await this.#teardown(id).catch(() => {});
          continue;
        }
        if (lifetimes) {
          this.#lifetimes.create(record.id, lifetimes);
          ensureReaper(this.homeDir);
        }
        return new JsBox(new LocalBox(this.#ctx, record, []));
      }
    }
    return this.#createNew(options, name);
  }

  /**
   * Keeps `size` boxes of `image` and `options` ready (issue 18 warm pools; `pool.ts`): `create()` with
   * the same options hands one out and the pool refills in the background. `shutdown()` drains it.
   * @throws BoxError `invalid_option` naming `image`, `size`, `options` or the box option at fault.
   */
  pool(spec: PoolSpec): JsBoxPool {
    const checked = poolBoxOptions(spec);
    const host = {
      create: async (options: JsBoxOptions, poolId: string) => {
        const box = await this.#createNew(options, undefined, poolId);
        // One command run ahead, outside the box's counters: a box's first exec costs about twice the
        // next ones (bench/lifecycle.ts). Its outcome does not matter (an image may lack `true`).
        const engine = await this.#getEngine();
        const warmUp = await engine
          .exec(box.id, { cmd: 'true', args: [], env: [], tty: false })
          .catch(() => null);
        if (warmUp) {
          warmUp.stdin.end();
          await Promise.all([
            warmUp.exited,
            finished(warmUp.stdout.resume()),
            finished(warmUp.stderr.resume()),
          ]).catch(() => {});
        }
        return box.id;
      },
      remove: async (id: string) => {
        await this.#whenReady();
        await this.#teardown(id);
      },
    };
    const pool = new BoxPool(ulid(), checked, host, this.#poolTable);
    this.#pools.set(pool.id, pool);
    const close = pool.close.bind(pool);
    pool.close = async () => {
      this.#pools.delete(pool.id);
      await close();
    };
    return pool;
  }

  /**
   * `create` without the warm pools: always starts a new box (a box of pool `poolId` when given); `seed`
   * runs on the recorded box before its first start (clones and imports fill its writable layer).
   */
  async #createNew(
    options: JsBoxOptions,
    name?: string,
    poolId?: string,
    seed?: (id: string) => Promise<void>,
  ): Promise<JsBox> {
    const t0 = performance.now();
    const normalized = validateBoxOptions(options);
    const lifetimes = validateLifetimes(options);
    const boxName = validateBoxName(name) ?? null;
    normalized.volumes.forEach((volume, i) => {
      if (volume.hostPath === undefined) return;
      let exists = false;
      try {
        const stat = statSync(volume.hostPath);
        exists = stat.isDirectory() || stat.isFile();
      } catch {}
      if (!exists) {
        throw new BoxError(
          `invalid box option volumes[${i}].hostPath: '${volume.hostPath}' is not an existing file or directory`,
          {
            field: `volumes[${i}].hostPath`,
          },
        );
      }
    });
    await this.#whenReady();
    if (normalized.isolation === 'gvisor') {
      // The platform is chosen once per boot (a KVM probe of at most 3 s the first time); runsc missing
      // fails here, before anything is created.
      const engine = await this.#getEngine();
      normalized.gvisorPlatform = (await engine.gvisorPlatform()).platform;
    }
    if (normalized.allowUnlimited) {
      // Rootless without a delegated cgroup subtree: the caller accepted a box without limits.
      const engine = await this.#getEngine();
      if (engine instanceof RootlessEngine && engine.delegation().missing.length > 0) {
        normalized.limitsEnforced = false;
      }
    }
    const id = ulid();
    const { secrets, ...rest } = normalized;
    this.#db.insertBox({
      id,
      name: boxName,
      image: normalized.image ?? normalized.rootfsPath!,
      options: { ...rest, secrets: secrets.map(({ value: _value, ...s }) => s) },
      createdAt: nowIso(),
    });
    try {
      // Marked pooled before it starts: never listed while the pool fills.
      if (poolId !== undefined) this.#poolTable.add(id, poolId);
      if (lifetimes) this.#lifetimes.create(id, lifetimes);
      if (seed) await seed(id);
      await this.#launch(id, boxName, normalized, t0);
      if (lifetimes) {
        this.#lifetimes.markStarted(id);
        ensureReaper(this.homeDir);
      }
      if (normalized.secrets.length > 0) this.#secretValues.set(id, normalized.secrets);
      this.#counters.created++;
      const record = this.#db.getBox(id)!;
      return new JsBox(new LocalBox(this.#ctx, record, this.#networking().publishedPorts(id) ?? []));
    } catch (error) {
      this.#counters.failed++;
      await this.#teardown(id).catch(() => {});
      if (error instanceof BoxError) throw error;
      throw new BoxError(`cannot create box ${boxName ?? id}: ${(error as Error).message}`, { cause: error });
    }
  }

  /**
   * A new box started from box `idOrName`'s current state or its snapshot `options.snapshot`
   * (`cloneBox`); see `LocalSnapshots.clone`.
   */
  cloneBox(idOrName: string, options?: CloneOptions, name?: string): Promise<JsBox> {
    return this.#snapshots.clone(idOrName, options, name);
  }

  /** A new box from an archive written by `box.export` (`importBox`); see `LocalSnapshots.importBox`. */
  importBox(path: string, name?: string): Promise<JsBox> {
    return this.#snapshots.importBox(path, name);
  }

  /** Metadata of every box in `homeDir`, oldest first (spec 002 `listInfo`). */
  async listInfo(): Promise<JsBoxInfo[]> {
    await this.#whenReady();
    // Pooled boxes are not listed until they are handed out.
    const pooled = this.#poolTable.ids();
    const records = await Promise.all(
      this.#db
        .listBoxes()
        .filter((r) => !pooled.has(r.id))
        .map((r) => this.#reconcile(r)),
    );
    return records.filter((r): r is BoxRecord => r !== null).map((r) => boxInfo(r, null));
  }

  /** Metadata of the box with this id or name, or null (spec 002 `getInfo`). */
  async getInfo(idOrName: string): Promise<JsBoxInfo | null> {
    const record = await this.#find(idOrName);
    return record ? boxInfo(record, null) : null;
  }

  /** A handle to the box with this id or name, or null (spec 002 `get`). Works across processes. */
  async get(idOrName: string): Promise<JsBox | null> {
    const record = await this.#find(idOrName);
    return record ? new JsBox(new LocalBox(this.#ctx, record, null)) : null;
  }

  async #find(idOrName: string): Promise<BoxRecord | null> {
    if (typeof idOrName !== 'string' || idOrName === '') {
      throw new BoxError('idOrName must be a non-empty string', { field: 'idOrName' });
    }
    await this.#whenReady();
    const found = this.#db.getBox(idOrName);
    const record = found ? await this.#reconcile(found) : null;
    if (record) await this.#adoptHealth(record);
    return record;
  }

  /**
   * Takes over the health checks of a running box whose monitoring process is gone (a detached box that
   * outlived the process that created or started it); see `health.ts`. One process wins the claim.
   */
  async #adoptHealth(record: BoxRecord): Promise<void> {
    const check = record.options.healthCheck;
    if (!check || record.status !== 'running' || this.#health.watching(record.id)) return;
    const monitor = record.health?.monitor ?? (record.health ? undefined : record.owner);
    if (monitor && ownerAlive(monitor)) return;
    const resume = record.health ? publicHealth(record.health) : initialHealth(true);
    const expected = record.health ? JSON.stringify(record.health) : null;
    if (!this.#db.claimHealth(record.id, expected, { ...resume, monitor: this.#me })) return;
    const image =
      record.options.image !== undefined
        ? await this.#store.get(record.options.image).catch(() => null)
        : null;
    const startedAt = Date.parse(record.startedAt ?? record.createdAt);
    this.#health.watch(
      record.id,
      check,
      checkArgv(check.command, image?.config.healthcheck),
      startedAt,
      resume,
    );
  }

  /**
   * Runtime metrics (spec 002 `JsRuntimeMetrics`): the totals count what this runtime instance did since
   * it was constructed; `numRunningBoxes` counts every running box of `homeDir`.
   */
  async metrics(): Promise<JsRuntimeMetrics> {
    await this.#whenReady();
    // Boxes whose init died (e.g. the parent of a non-detached box exited) no longer count as running.
    await Promise.all(
      this.#db
        .listBoxes()
        .filter((r) => r.status === 'running')
        .map((r) => this.#reconcile(r)),
    );
    return {
      boxesCreatedTotal: this.#counters.created,
      boxesFailedTotal: this.#counters.failed,
      numRunningBoxes: this.#db.countRunning(),
      totalCommandsExecuted: this.#counters.commands,
      totalExecErrors: this.#counters.execErrors,
    };
  }

  /**
   * Removes a box and everything it owns (spec 002 `remove`). A running box needs `force` (it is killed).
   * @throws BoxError `not_found` when no box has this id or name, `conflict` when it runs without `force`.
   */
  async remove(idOrName: string, force = false): Promise<void> {
    const record = await this.#find(idOrName);
    if (!record) throw notFound(`no box with id or name '${idOrName}'`);
    if (
      (record.status === 'running' || record.status === 'paused' || record.status === 'creating') &&
      !force
    ) {
      throw conflict(
        `box ${record.name ?? record.id} is ${record.status}; stop it first or remove with force`,
      );
    }
    await this.#teardown(record.id);
  }

  /**
   * Spec 002 `close`: writes pending exec counters to the state database and ends this instance's health
   * checks; boxes keep running per their `detach` option and their state is on disk.
   */
  close(): void {
    this.#health.close();
    this.#pending.flush();
  }

  /** Image operations on this runtime's store (issue 7). */
  get images(): RuntimeImages {
    const store = this.#store;
    return {
      pull: async (reference, options) => {
        const image = await store.pull(reference, options).catch((error) => {
          throw withCode(error, 'image', `cannot pull image '${reference}'`);
        });
        return {
          reference,
          configDigest: image.configDigest,
          layerCount: image.layerDirs.length,
          digest: image.digest,
          resolvedReference: image.reference,
        };
      },
      get: (reference) => store.get(reference),
      list: async () =>
        (await store.list()).map((image) => ({
          ...image,
          ...splitReference(image.reference),
          id: image.digest,
          cachedAt: image.pulledAt,
        })),
      remove: async (reference) => {
        const target = await store.get(reference);
        if (!target) throw notFound(`image '${reference}' is not stored`);
        for (const record of this.#db.listBoxes()) {
          if (record.options.image === undefined) continue;
          const used = await store.get(record.options.image).catch(() => null);
          if (used?.digest === target.digest) {
            throw conflict(
              `image '${reference}' is used by box ${record.name ?? record.id}; remove the box first`,
            );
          }
        }
        await store.remove(reference);
      },
    };
  }

  /** Managed volumes of this runtime's `homeDir`. */
  get volumes(): RuntimeVolumes {
    return {
      create: async (name) => {
        const volumeName = validateBoxName(name) ?? null;
        const volume = this.#db.insertVolume({ id: ulid(), name: volumeName, createdAt: nowIso() });
        mkdirSync(join(this.homeDir, 'volumes', volume.id, 'data'), { recursive: true, mode: 0o755 });
        return volume;
      },
      get: async (idOrName) => this.#db.getVolume(idOrName),
      list: async () => this.#db.listVolumes(),
      remove: async (idOrName) => {
        const volume = this.#db.getVolume(idOrName);
        if (!volume) throw notFound(`no volume with id or name '${idOrName}'`);
        const users = this.#db.volumeUsers(volume.id);
        if (users.length > 0) throw conflict(`volume '${idOrName}' is mounted by box ${users.join(', ')}`);
        this.#db.deleteVolume(volume.id);
        rmSync(join(this.homeDir, 'volumes', volume.id), { recursive: true, force: true });
      },
    };
  }
}
