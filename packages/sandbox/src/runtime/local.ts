/**
 * The local runtime backend of `JsRuntime` (spec 002 "Runtime (`JsRuntime`)"): creates, lists, looks up and removes boxes,
 * keeps their records in `<homeDir>/state.db` (SQLite, WAL) and reports metrics.
 *
 * Layout of `homeDir` (default `~/.sandbox`): `state.db` (boxes, volumes), `boxes/<id>/` (one directory
 * per box, owned by the engine), `volumes/<id>/data` (managed volumes), `engine/` (OCI runtime state),
 * and the image store's directories.
 *
 * `LocalRuntime` wires the parts (`local-parts.ts`: state database, image store, engine and networking)
 * to the modules that do the work: `local-create.ts` (create, warm pools), `local-launch.ts` (preparing
 * and starting a box), `local-lifecycle.ts` (readiness, crash recovery, stop/start/pause/resume/teardown),
 * `local-images.ts` and `local-volumes.ts` (the `images` and `volumes` sub-APIs), `snapshot-local.ts`
 * (snapshots, clones, imports). It answers the queries (listInfo, getInfo, get, metrics) and removal.
 */
import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { BoxError, conflict, notFound } from '../errors.ts';
import { ImageStore } from '../images/index.ts';
import type { ImageLimits } from '../images/limits.ts';
import { BoxNetworking, parseAllowNet } from '../network/index.ts';
import type { JsBoxInfo, JsBoxOptions, JsOptions, JsRuntimeMetrics } from '../types.ts';
import type { ImportedBox, ImportOptions } from './archive-options.ts';
import type { RuntimeBackend, RuntimeImages, RuntimeVolumes } from './backend.ts';
import { JsBox } from './box.ts';
import { boxInfo, LocalBox } from './box-local.ts';
import type { RuntimeContext } from './context.ts';
import { PendingCounters } from './counters.ts';
import { checkArgv, HealthMonitor, initialHealth, publicHealth, runCheck } from './health.ts';
import { LifetimeStore } from './lifetimes.ts';
import { LocalCreation } from './local-create.ts';
import { localImages, prepareImage } from './local-images.ts';
import { LocalLifecycle } from './local-lifecycle.ts';
import { LocalEngines, type LocalParts } from './local-parts.ts';
import { localVolumes } from './local-volumes.ts';
import type { NormalizedBoxOptions } from './options.ts';
import { type JsBoxPool, type PoolSpec, PoolTable } from './pool.ts';
import type { ReaperHost } from './reaper.ts';
import { LocalSnapshots } from './snapshot-local.ts';
import type { CloneOptions } from './snapshots.ts';
import { type BoxRecord, ownerAlive, processIdentity, StateDb } from './state.ts';

/** Default `homeDir`: the hidden directory `.sandbox` in the user's home (spec 002 `JsOptions.homeDir`). */
export function defaultHomeDir(): string {
  return process.env.SANDBOX_HOME || join(homedir(), '.sandbox');
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

  /** The image and import bounds in force (`JsOptions.imageLimits` over `DEFAULT_IMAGE_LIMITS`). */
  get imageLimits(): ImageLimits {
    return this.#parts.store.limits;
  }
  /** State database, image store, engine, lifetimes, health checks and counters of this instance. */
  readonly #parts: LocalParts;
  /** Per-box exec counters not yet written to the state database (see `PendingCounters`). */
  readonly #pending: PendingCounters;
  /** Readiness, recovery and the stop/start/pause/resume/teardown of boxes. */
  readonly #lifecycle: LocalLifecycle;
  /** Box creation and the warm pools of this instance. */
  readonly #creation: LocalCreation;
  /** What the box handles of this instance use (`LocalBox`). */
  readonly #ctx: RuntimeContext;
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
    const db = new StateDb(this.homeDir);
    mkdirSync(join(this.homeDir, 'boxes'), { recursive: true, mode: 0o700 });
    const engines = new LocalEngines(this.homeDir);
    this.#parts = {
      homeDir: this.homeDir,
      db,
      store: new ImageStore({
        homeDir: this.homeDir,
        registries: options.imageRegistries ?? [],
        ...(options.imageLimits !== undefined ? { limits: options.imageLimits } : {}),
      }),
      engines,
      lifetimes: new LifetimeStore(db),
      poolTable: new PoolTable(db),
      health: new HealthMonitor({
        check: async (id, argv, timeoutMs) => runCheck(await engines.engine(), id, argv, timeoutMs),
        save: (id, status) => db.setHealth(id, { ...status, monitor: this.#me }),
        state: async (id) => {
          // Reconciled: a box whose init died is stopped, a frozen one paused.
          const status = (await this.#lifecycle.refresh(id))?.status;
          return status === 'running' ? 'running' : status === 'paused' ? 'paused' : 'gone';
        },
      }),
      secretValues: new Map(),
      counters: { created: 0, failed: 0, commands: 0, execErrors: 0 },
    };
    this.#pending = new PendingCounters(db);
    this.#lifecycle = new LocalLifecycle(this.#parts);
    this.#creation = new LocalCreation(
      this.#parts,
      this.#lifecycle,
      (record, ports) => new JsBox(new LocalBox(this.#ctx, record, ports)),
    );
    this.#snapshots = new LocalSnapshots({
      homeDir: this.homeDir,
      imageLimits: this.#parts.store.limits,
      record: async (idOrName) => {
        const record = await this.#find(idOrName);
        if (!record) throw notFound(`no box '${idOrName}'`);
        return record;
      },
      boxDir: (id) => engines.boxDir(id),
      restart: (id, between) => this.#lifecycle.restart(id, between),
      createSeeded: (options, name, seed) => this.#creation.createSeeded(options, name, seed),
      prepareImage: (record) => prepareImage(this.#parts.store, record.options as NormalizedBoxOptions),
    });
    this.#ctx = this.#boxContext();
  }

  /** The services of this runtime that its box handles (`LocalBox`) use. */
  #boxContext(): RuntimeContext {
    const { counters, lifetimes } = this.#parts;
    return {
      snapshots: this.#snapshots,
      engine: () => this.#parts.engines.engine(),
      refresh: (id) => this.#lifecycle.refresh(id),
      countCommand: (id) => {
        counters.commands++;
        this.#pending.add(id, { commands: 1 });
      },
      countExecEnd: (id, report) => {
        lifetimes.touch(id);
        // A warm pool refills once the box it handed out has run its first command (pool.ts).
        for (const pool of this.#creation.pools.values()) pool.commandEnded(id);
        const failed = report.exitCode !== 0;
        if (failed) counters.execErrors++;
        this.#pending.add(id, {
          errors: failed ? 1 : 0,
          sent: report.bytesSent,
          received: report.bytesReceived,
        });
      },
      flushCounters: () => this.#pending.flush(),
      stopBox: (id, graceMs) => this.#lifecycle.stopBox(id, graceMs),
      startBox: (id) => this.#lifecycle.startBox(id),
      lifecycle: this.#lifecycle.boxLifecycle(),
      updateNetwork: (id, allowNet) => this.#updateNetwork(id, allowNet),
    };
  }

  /**
   * `box.network.update`: a running (or paused) box gets the new `allowNet` from the network helper
   * (`network/manager.ts` `update`), then the record keeps it for later starts; a stopped box's record
   * only. @throws BoxError `not_found`, `conflict` (network `disabled`), `unsupported` (rootless),
   * `invalid_option` naming `network.allowNet[i]`, `unavailable` (no network helper answers).
   */
  async #updateNetwork(id: string, allowNet: string[]): Promise<string[]> {
    const record = await this.#lifecycle.refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.options.network.mode === 'disabled') {
      throw conflict(`box ${id} has no network (mode disabled); its allowNet cannot be changed`);
    }
    const networking = this.#parts.engines.networking();
    if (!(networking instanceof BoxNetworking)) {
      throw new BoxError('changing a running box network policy needs a root runtime', {
        code: 'unsupported',
      });
    }
    parseAllowNet(allowNet);
    const live = record.status === 'running' || record.status === 'paused';
    const inForce = live ? await networking.update(record.id, allowNet) : [...allowNet];
    const options = { ...record.options, network: { ...record.options.network, allowNet: inForce } };
    this.#parts.db.run('UPDATE boxes SET options = ? WHERE id = ?', JSON.stringify(options), record.id);
    return inForce;
  }

  /**
   * The services the lifetime reaper (`reaper-main.ts`) needs from this runtime: the lifetimes table, each
   * box's reconciled status, whether commands run in it, and pause/stop/remove by id.
   */
  reaperHost(): ReaperHost {
    return this.#lifecycle.reaperHost();
  }

  /**
   * Stops every running, non-detached box this process created (BoxLite `runtime.shutdown(timeout)`):
   * SIGTERM to their commands, SIGKILL after `timeoutSecs` (default 10). Detached boxes and boxes of
   * other processes are left running. Boxes with `autoRemove` are removed; warm pools are closed.
   * @throws BoxError `invalid_option` (field `timeout`) for a negative or non-finite timeout.
   */
  async shutdown(timeoutSecs = 10): Promise<void> {
    if (typeof timeoutSecs !== 'number' || !Number.isFinite(timeoutSecs) || timeoutSecs < 0) {
      throw new BoxError('invalid shutdown option timeout: must be a number of seconds ≥ 0', {
        field: 'timeout',
      });
    }
    await this.#lifecycle.whenReady();
    const me = processIdentity(process.pid);
    const mine = this.#parts.db
      .listBoxes()
      .filter(
        (r) => r.owner === me && !r.options.detach && (r.status === 'running' || r.status === 'creating'),
      );
    await this.#creation.closePools();
    const graceMs = Math.round(timeoutSecs * 1000);
    await Promise.all(mine.map((r) => this.#lifecycle.stopBox(r.id, graceMs).catch(() => {})));
    this.#pending.flush();
  }

  /**
   * Creates and starts a box (spec 002 `create`). Defaults per `JsBoxOptions`; `name` must be unique.
   * Stage timings are recorded in the box's metrics.
   * @throws BoxError naming the field for invalid options (the four rejections of spec 002 included), a
   *   taken name, a missing host path or image, or an engine failure. Nothing of a failed box remains.
   * A warm pool of this runtime with the same options (`pool.ts`) hands out a ready box instead.
   */
  create(options: JsBoxOptions, name?: string): Promise<JsBox> {
    return this.#creation.create(options, name);
  }

  /**
   * Keeps `size` boxes of `image` and `options` ready (warm pools, `pool.ts`): `create()` with
   * the same options hands one out and the pool refills in the background. `shutdown()` drains it.
   * @throws BoxError `invalid_option` naming `image`, `size`, `options` or the box option at fault.
   */
  pool(spec: PoolSpec): JsBoxPool {
    return this.#creation.pool(spec);
  }

  /**
   * A new box started from box `idOrName`'s current state or its snapshot `options.snapshot`
   * (`cloneBox`); see `LocalSnapshots.clone`.
   */
  cloneBox(idOrName: string, options?: CloneOptions, name?: string): Promise<JsBox> {
    return this.#snapshots.clone(idOrName, options, name);
  }

  /** A new box from an archive written by `box.export` (`importBox`); see `LocalSnapshots.importBox`. */
  importBox(path: string, nameOrOptions?: string | ImportOptions): Promise<ImportedBox> {
    return this.#snapshots.importBox(path, nameOrOptions);
  }

  /** Metadata of every box in `homeDir`, oldest first (spec 002 `listInfo`). */
  async listInfo(): Promise<JsBoxInfo[]> {
    await this.#lifecycle.whenReady();
    // Pooled boxes are not listed until they are handed out.
    const pooled = this.#parts.poolTable.ids();
    const records = await Promise.all(
      this.#parts.db
        .listBoxes()
        .filter((r) => !pooled.has(r.id))
        .map((r) => this.#lifecycle.reconcile(r)),
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

  /**
   * The reconciled record of the box with this id or name, or null; takes over its health checks when
   * their monitor is gone.
   * @throws BoxError `invalid_option` (field `idOrName`) unless it is a non-empty string.
   */
  async #find(idOrName: string): Promise<BoxRecord | null> {
    if (typeof idOrName !== 'string' || idOrName === '') {
      throw new BoxError('idOrName must be a non-empty string', { field: 'idOrName' });
    }
    await this.#lifecycle.whenReady();
    const found = this.#parts.db.getBox(idOrName);
    const record = found ? await this.#lifecycle.reconcile(found) : null;
    if (record) await this.#adoptHealth(record);
    return record;
  }

  /**
   * Takes over the health checks of a running box whose monitoring process is gone (a detached box that
   * outlived the process that created or started it); see `health.ts`. One process wins the claim.
   */
  async #adoptHealth(record: BoxRecord): Promise<void> {
    const { db, health, store } = this.#parts;
    const check = record.options.healthCheck;
    if (!check || record.status !== 'running' || health.watching(record.id)) return;
    const monitor = record.health?.monitor ?? (record.health ? undefined : record.owner);
    if (monitor && ownerAlive(monitor)) return;
    const resume = record.health ? publicHealth(record.health) : initialHealth(true);
    const expected = record.health ? JSON.stringify(record.health) : null;
    if (!db.claimHealth(record.id, expected, { ...resume, monitor: this.#me })) return;
    const image =
      record.options.image !== undefined ? await store.get(record.options.image).catch(() => null) : null;
    const startedAt = Date.parse(record.startedAt ?? record.createdAt);
    health.watch(record.id, check, checkArgv(check.command, image?.config.healthcheck), startedAt, resume);
  }

  /**
   * Runtime metrics (spec 002 `JsRuntimeMetrics`): the totals count what this runtime instance did since
   * it was constructed; `numRunningBoxes` counts every running box of `homeDir`.
   */
  async metrics(): Promise<JsRuntimeMetrics> {
    await this.#lifecycle.whenReady();
    const { counters, db } = this.#parts;
    // Boxes whose init died (e.g. the parent of a non-detached box exited) no longer count as running.
    await Promise.all(
      db
        .listBoxes()
        .filter((r) => r.status === 'running')
        .map((r) => this.#lifecycle.reconcile(r)),
    );
    return {
      boxesCreatedTotal: counters.created,
      boxesFailedTotal: counters.failed,
      numRunningBoxes: db.countRunning(),
      totalCommandsExecuted: counters.commands,
      totalExecErrors: counters.execErrors,
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
    await this.#lifecycle.teardown(record.id);
  }

  /**
   * Spec 002 `close`: writes pending exec counters to the state database and ends this instance's health
   * checks; boxes keep running per their `detach` option and their state is on disk.
   */
  close(): void {
    this.#parts.health.close();
    this.#pending.flush();
  }

  /** Image operations on this runtime's store. */
  get images(): RuntimeImages {
    return localImages(this.#parts.store, this.#parts.db);
  }

  /** Managed volumes of this runtime's `homeDir`. */
  get volumes(): RuntimeVolumes {
    return localVolumes(this.homeDir, this.#parts.db);
  }
}
