/**
 * Box creation of a local runtime (spec 002 `create`): options are checked, the box is recorded (status
 * `creating`) before anything is set up, then launched (`local-launch.ts`); a failure tears down whatever
 * was made. Warm pools of this runtime (`pool.ts`) hand out ready boxes of the same options instead, and
 * clones and imports get a box whose disk is filled before its first start (`createSeeded`).
 */
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { finished } from 'node:stream/promises';
import { ulid } from 'ulid';
import { DEFAULT_DISK_SIZE_GB, ensureDiskImage } from '../engine/disk.ts';
import { RootlessEngine } from '../engine/rootless.ts';
import { BoxError } from '../errors.ts';
import type { JsBoxOptions, JsPublishedPort } from '../types.ts';
import type { JsBox } from './box.ts';
import { validateLifetimes } from './lifetimes.ts';
import { launchBox } from './local-launch.ts';
import type { LocalLifecycle } from './local-lifecycle.ts';
import type { LocalParts } from './local-parts.ts';
import { type NormalizedBoxOptions, validateBoxName, validateBoxOptions, validateLabels } from './options.ts';
import { BoxPool, type JsBoxPool, type PoolSpec, poolBoxOptions, poolKey } from './pool.ts';
import { ensureReaper } from './reaper.ts';
import type { BoxRecord } from './state.ts';

/** A box handle over a record, with the port publications this instance made (null when unknown). */
export type BoxHandleFactory = (record: BoxRecord, publishedPorts: JsPublishedPort[] | null) => JsBox;

/**
 * Checks that every host path among a box's volumes is an existing file or directory.
 * @throws BoxError naming `volumes[i].hostPath` for the first one that is not.
 */
function checkHostPaths(volumes: NormalizedBoxOptions['volumes']): void {
  volumes.forEach((volume, i) => {
    if (volume.hostPath === undefined) return;
    let exists = false;
    try {
      const stat = statSync(volume.hostPath);
      exists = stat.isDirectory() || stat.isFile();
    } catch {}
    if (!exists) {
      throw new BoxError(
        `invalid box option volumes[${i}].hostPath: '${volume.hostPath}' is not an existing file or directory`,
        { field: `volumes[${i}].hostPath` },
      );
    }
  });
}

/** Creates the boxes of one local runtime and keeps its warm pools. */
export class LocalCreation {
  /** Warm pools of this instance (`pool.ts`), by id. */
  readonly pools = new Map<string, BoxPool>();
  readonly #parts: LocalParts;
  readonly #lifecycle: LocalLifecycle;
  readonly #handle: BoxHandleFactory;

  /**
   * @param parts the runtime's shared parts.
   * @param lifecycle readiness, refresh and teardown of its boxes.
   * @param handle makes the `JsBox` handed to the caller.
   */
  constructor(parts: LocalParts, lifecycle: LocalLifecycle, handle: BoxHandleFactory) {
    this.#parts = parts;
    this.#lifecycle = lifecycle;
    this.#handle = handle;
  }

  /**
   * Creates and starts a box (spec 002 `create`); a warm pool with the same options hands out a ready box
   * instead (given `name` and the lifetimes of `options`), unless its boxes died while pooled.
   * @throws BoxError as `createNew`.
   */
  async create(options: JsBoxOptions, name?: string): Promise<JsBox> {
    if (this.pools.size > 0) {
      const boxName = validateBoxName(name) ?? null;
      const lifetimes = validateLifetimes(options);
      const labels = validateLabels((options as { labels?: unknown } | null)?.labels);
      const key = poolKey(options);
      for (const pool of this.pools.values()) {
        if (pool.key !== key) continue;
        const id = pool.take(boxName);
        if (!id) continue;
        const record = await this.#lifecycle.refresh(id);
        if (record?.status !== 'running') {
          // It died while pooled (its box was killed): it goes, and the caller gets a new box.
          if (record) await this.#lifecycle.teardown(id).catch(() => {});
          continue;
        }
        if (lifetimes) {
          this.#parts.lifetimes.create(record.id, lifetimes);
          ensureReaper(this.#parts.homeDir);
        }
        this.#relabel(record, labels);
        return this.#handle(record, []);
      }
    }
    return this.createNew(options, name);
  }

  /** Gives a box handed out by a pool the labels of the create (none: no labels; the pool key ignores them). */
  #relabel(record: BoxRecord, labels: Record<string, string> | undefined): void {
    if (labels === undefined && record.options.labels === undefined) return;
    if (labels !== undefined) {
      this.#parts.db.run(
        "UPDATE boxes SET options = json_set(options, '$.labels', json(?)) WHERE id = ?",
        JSON.stringify(labels),
        record.id,
      );
      record.options.labels = labels;
    } else {
      this.#parts.db.run(
        "UPDATE boxes SET options = json_remove(options, '$.labels') WHERE id = ?",
        record.id,
      );
      delete record.options.labels;
    }
  }

  /**
   * `create` without the warm pools: always starts a new box (a box of pool `poolId` when given); `seed`
   * runs on the recorded box before its first start (clones and imports fill its writable layer).
   * @throws BoxError naming the field for invalid options (the four rejections of spec 002 included), a
   *   taken name, a missing host path or image, or an engine failure. Nothing of a failed box remains.
   */
  async createNew(
    options: JsBoxOptions,
    name?: string,
    poolId?: string,
    seed?: (id: string) => Promise<void>,
  ): Promise<JsBox> {
    const t0 = performance.now();
    const { db, engines, lifetimes: lifetimeStore, counters } = this.#parts;
    const normalized = validateBoxOptions(options);
    const lifetimes = validateLifetimes(options);
    const boxName = validateBoxName(name) ?? null;
    checkHostPaths(normalized.volumes);
    await this.#lifecycle.whenReady();
    if (normalized.isolation === 'gvisor') {
      // The platform is chosen once per boot (a KVM probe of at most 3 s the first time); runsc missing
      // fails here, before anything is created.
      const engine = await engines.engine();
      normalized.gvisorPlatform = (await engine.gvisorPlatform()).platform;
    }
    if (normalized.allowUnlimited) {
      // Rootless without a delegated cgroup subtree: the caller accepted a box without limits.
      const engine = await engines.engine();
      if (engine instanceof RootlessEngine && engine.delegation().missing.length > 0) {
        normalized.limitsEnforced = false;
      }
    }
    const id = ulid();
    const { secrets, ...rest } = normalized;
    db.insertBox({
      id,
      name: boxName,
      image: normalized.image ?? normalized.rootfsPath!,
      options: { ...rest, secrets: secrets.map(({ value: _value, ...s }) => s) },
      createdAt: new Date().toISOString(),
    });
    try {
      // Marked pooled before it starts: never listed while the pool fills.
      if (poolId !== undefined) this.#parts.poolTable.add(id, poolId);
      if (lifetimes) lifetimeStore.create(id, lifetimes);
      if (seed) await seed(id);
      await launchBox(this.#parts, id, boxName, normalized, t0);
      if (lifetimes) {
        lifetimeStore.markStarted(id);
        ensureReaper(this.#parts.homeDir);
      }
      if (normalized.secrets.length > 0) this.#parts.secretValues.set(id, normalized.secrets);
      counters.created++;
      return this.#handle(db.getBox(id)!, engines.networking().publishedPorts(id) ?? []);
    } catch (error) {
      counters.failed++;
      await this.#lifecycle.teardown(id).catch(() => {});
      if (error instanceof BoxError) throw error;
      throw new BoxError(`cannot create box ${boxName ?? id}: ${(error as Error).message}`, {
        cause: error,
        code: 'internal',
      });
    }
  }

  /**
   * A new box whose disk (btrfs, `options.diskSizeGb` or the default size) is made and handed to `seed`
   * (as the box directory) before its first start: clones and imports (`snapshot-local.ts`).
   * @throws BoxError as `createNew`.
   */
  createSeeded(
    options: JsBoxOptions,
    name: string | undefined,
    seed: (boxDir: string) => Promise<void>,
  ): Promise<JsBox> {
    const { engines } = this.#parts;
    return this.createNew(options, name, undefined, async (id) => {
      const boxDir = engines.boxDir(id);
      mkdirSync(join(boxDir, 'disk'), { recursive: true, mode: 0o700 });
      const sizeGb = options.diskSizeGb ?? DEFAULT_DISK_SIZE_GB;
      await ensureDiskImage(engines.stateRoot(), id, join(boxDir, 'disk.img'), sizeGb, { snapshots: true });
      await seed(boxDir);
    });
  }

  /**
   * Keeps `spec.size` boxes of `spec.image` and `spec.options` ready (`pool.ts`): `create()` with the same
   * options hands one out and the pool refills in the background; `close()` (or `closePools`) drains it.
   * @throws BoxError `invalid_option` naming `image`, `size`, `options` or the box option at fault.
   */
  pool(spec: PoolSpec): JsBoxPool {
    const checked = poolBoxOptions(spec);
    const host = {
      create: async (options: JsBoxOptions, poolId: string) => {
        const box = await this.createNew(options, undefined, poolId);
        // One command run ahead, outside the box's counters: a box's first exec costs about twice the
        // next ones (bench/lifecycle.ts). Its outcome does not matter (an image may lack `true`).
        const engine = await this.#parts.engines.engine();
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
        await this.#lifecycle.whenReady();
        await this.#lifecycle.teardown(id);
      },
    };
    const pool = new BoxPool(ulid(), checked, host, this.#parts.poolTable);
    this.pools.set(pool.id, pool);
    const close = pool.close.bind(pool);
    pool.close = async () => {
      this.pools.delete(pool.id);
      await close();
    };
    return pool;
  }

  /** Closes every warm pool of this instance (their ready boxes are removed). */
  async closePools(): Promise<void> {
    await Promise.all([...this.pools.values()].map((pool) => pool.close()));
  }
}
