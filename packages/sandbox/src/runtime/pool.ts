/**
 * Warm pools: `runtime.pool({ image, size, options })` keeps `size` boxes of those options
 * created and running, so that `runtime.create()` with the same options hands one out at once instead of
 * starting a box (a box start is ~50 ms; a hand-out is a row update), and the pool refills in the
 * background once the handed-out box's first command has ended (`REFILL_DELAY_MS` at the latest), so the
 * refill does not compete with that command for the CPU.
 *
 * Pooled boxes are ordinary boxes of the `homeDir` listed in the `pooled_boxes` table: `listInfo()` leaves
 * them out until they are handed out, and a runtime removes the pooled boxes of a process that is gone.
 * Options match when their normalized forms (`validateBoxOptions`) are equal; lifetimes (`timeoutMs`,
 * `autoPause`, …) are not part of the match and start at hand-out. A handed-out box keeps the hostname it
 * was started with (its id), whatever name it is given.
 *
 * Which pools may hand out a box is decided per call: `create()` calls made inside
 * {@link withHandOutPools} take boxes only from the pools it names (the REST server: the calling
 * tenant's pools), so that a box kept ready for one tenant never goes to another.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { BoxError } from '../errors.ts';
import type { JsBoxOptions } from '../types.ts';
import { LIFETIME_FIELDS } from './lifetimes.ts';
import { validateBoxOptions } from './options.ts';
import { type StateDb, withBoxName } from './state.ts';

/** What `runtime.pool()` takes: the image, how many boxes to keep ready, and the other box options. */
export interface PoolSpec {
  /** Image of the pooled boxes. */
  image: string;
  /** Boxes kept ready (1..64). */
  size: number;
  /** The other box options (`JsBoxOptions` without `image`); `secrets` and `ports` are refused. */
  options?: Omit<JsBoxOptions, 'image'>;
}

/** A warm pool (the handle `runtime.pool()` returns). */
export interface JsBoxPool {
  /** Pool id (the key under which `shutdown` and `close` find it). */
  readonly id: string;
  /** Boxes the pool keeps ready. */
  readonly size: number;
  /** Boxes ready to be handed out now. */
  ready(): number;
  /** Resolves once the pool holds `size` ready boxes (or a refill failed: rejects with that error). */
  filled(): Promise<void>;
  /**
   * Stops refilling and removes the boxes not yet handed out; resolves once boxes that were still being
   * created are removed too (nothing of the pool is left running).
   */
  close(): Promise<void>;
}

/** Largest pool size. */
export const MAX_POOL_SIZE = 64;

/**
 * Longest wait before a pool refills after a hand-out, ms. The refill (a box start: tens of ms of CPU for
 * the supervisor, mounts and the OCI runtime) begins when the handed-out box's first command has ended
 * (`commandEnded`), or after this delay when it runs longer: on a 2-core host a refill started at once
 * tripled the create → first exec latency the pool is there to cut (bench/lifecycle.ts).
 */
export const REFILL_DELAY_MS = 250;

const SCHEMA = `CREATE TABLE IF NOT EXISTS pooled_boxes (
  box_id TEXT PRIMARY KEY REFERENCES boxes(id) ON DELETE CASCADE,
  pool TEXT NOT NULL
)`;

/** Ids of the pools allowed to hand out boxes in the current async context; absent: every pool. */
const handOutPools = new AsyncLocalStorage<ReadonlySet<string>>();

/**
 * Runs `fn` so that the `create()` calls it makes (in its async context) take ready boxes only from the
 * warm pools whose ids are in `pools` (`JsBoxPool.id`); the other pools are left untouched (no box taken,
 * no refill). Outside such a call every pool of the runtime hands out boxes.
 * @returns what `fn` returns.
 */
export function withHandOutPools<T>(pools: ReadonlySet<string>, fn: () => T): T {
  return handOutPools.run(pools, fn);
}

/**
 * The canonical form of box options for matching: normalized, without name, lifetimes and labels (a
 * handed-out box takes the create's, see `LocalCreation.create`).
 */
export function poolKey(options: unknown): string {
  if (typeof options !== 'object' || options === null) return '';
  const rest: Record<string, unknown> = { ...(options as Record<string, unknown>) };
  for (const field of LIFETIME_FIELDS) delete rest[field];
  delete rest.labels;
  return JSON.stringify(validateBoxOptions(rest));
}

/**
 * Validates a pool spec; returns the full box options of its boxes.
 * @throws BoxError `invalid_option` naming `image`, `size`, `options`, `options.secrets` or `options.ports`.
 */
export function poolBoxOptions(spec: unknown): { options: JsBoxOptions; size: number } {
  if (typeof spec !== 'object' || spec === null) {
    throw new BoxError('pool options must be an object { image, size, options? }', { field: 'pool' });
  }
  const s = spec as Partial<PoolSpec>;
  if (typeof s.image !== 'string' || s.image === '') {
    throw new BoxError('invalid pool option image: must be a non-empty string', { field: 'image' });
  }
  if (!Number.isInteger(s.size) || (s.size as number) < 1 || (s.size as number) > MAX_POOL_SIZE) {
    throw new BoxError(`invalid pool option size: must be an integer from 1 to ${MAX_POOL_SIZE}`, {
      field: 'size',
    });
  }
  const extra = s.options ?? {};
  if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) {
    throw new BoxError('invalid pool option options: must be an object of box options', { field: 'options' });
  }
  if (Array.isArray(extra.secrets) && extra.secrets.length > 0) {
    throw new BoxError('invalid pool option options.secrets: pooled boxes cannot hold secrets', {
      field: 'options.secrets',
    });
  }
  if (Array.isArray(extra.ports) && extra.ports.length > 0) {
    throw new BoxError('invalid pool option options.ports: pooled boxes cannot publish host ports', {
      field: 'options.ports',
    });
  }
  const options = { ...extra, image: s.image } as JsBoxOptions;
  for (const field of LIFETIME_FIELDS) delete (options as Record<string, unknown>)[field];
  validateBoxOptions(options);
  return { options, size: s.size as number };
}

/** The `pooled_boxes` table of one state database. */
export class PoolTable {
  readonly #db: StateDb;

  /** Creates the table when missing. */
  constructor(db: StateDb) {
    this.#db = db;
    db.run(SCHEMA);
  }

  /** Marks box `boxId` as a ready box of pool `pool`. */
  add(boxId: string, pool: string): void {
    this.#db.run('INSERT OR REPLACE INTO pooled_boxes (box_id, pool) VALUES (?, ?)', boxId, pool);
  }

  /** Ids of every pooled (not handed-out) box. */
  ids(): Set<string> {
    return new Set(this.#db.all('SELECT box_id FROM pooled_boxes').map((row) => row.box_id as string));
  }

  /**
   * Hands box `boxId` out under `name` (null: no name) in one transaction; false when it is no longer
   * pooled (another process took it).
   * @throws BoxError `conflict` (field `name`) when the name is taken.
   */
  claim(boxId: string, name: string | null): boolean {
    return this.#db.transaction(() => {
      if (this.#db.change('DELETE FROM pooled_boxes WHERE box_id = ?', boxId) === 0) return false;
      if (name !== null)
        withBoxName(name, () => this.#db.run('UPDATE boxes SET name = ? WHERE id = ?', name, boxId));
      return true;
    });
  }
}

/** What a pool needs from its runtime. */
export interface PoolHost {
  /** Creates and starts a box with these options, marked as a box of pool `poolId`; resolves with its id. */
  create(options: JsBoxOptions, poolId: string): Promise<string>;
  /** Removes a box (forced). */
  remove(id: string): Promise<void>;
}

/** One warm pool of a runtime instance. */
export class BoxPool implements JsBoxPool {
  readonly id: string;
  readonly size: number;
  /** Canonical options of the pool's boxes (`poolKey`). */
  readonly key: string;
  readonly #options: JsBoxOptions;
  readonly #host: PoolHost;
  readonly #table: PoolTable;
  readonly #ready: string[] = [];
  #creating = 0;
  /** Creations in flight, each settled once its box is in the pool or, after `close`, removed. */
  readonly #inFlight = new Set<Promise<void>>();
  #closed = false;
  #error: Error | null = null;
  #waiters: { resolve: () => void; reject: (e: Error) => void }[] = [];
  /** Handed-out boxes whose first command has not ended yet, with the timer of the deferred refill. */
  readonly #deferred = new Map<string, ReturnType<typeof setTimeout>>();

  /** @param spec already validated by {@link poolBoxOptions}. */
  constructor(id: string, spec: { options: JsBoxOptions; size: number }, host: PoolHost, table: PoolTable) {
    this.id = id;
    this.size = spec.size;
    this.#options = spec.options;
    this.key = poolKey(spec.options);
    this.#host = host;
    this.#table = table;
    this.#refill();
  }

  ready(): number {
    return this.#ready.length;
  }

  filled(): Promise<void> {
    if (this.#error) return Promise.reject(this.#error);
    if (this.#ready.length >= this.size) return Promise.resolve();
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /**
   * Takes a ready box for a caller, named `name`; null when none is ready (or another process claimed
   * them), or when the caller runs inside {@link withHandOutPools} without this pool's id. The refill
   * starts when that box's first command ends (`commandEnded`) or `REFILL_DELAY_MS` later, whichever
   * comes first; at once when no box was ready.
   * @throws BoxError `conflict` when `name` is taken (the box goes back to the pool).
   */
  take(name: string | null): string | null {
    const allowed = handOutPools.getStore();
    if (allowed !== undefined && !allowed.has(this.id)) return null;
    while (this.#ready.length > 0) {
      const id = this.#ready.shift()!;
      let claimed: boolean;
      try {
        claimed = this.#table.claim(id, name);
      } catch (error) {
        this.#ready.unshift(id);
        throw error;
      }
      if (claimed) {
        this.#deferred.set(
          id,
          setTimeout(() => this.commandEnded(id), REFILL_DELAY_MS),
        );
        return id;
      }
    }
    this.#refill();
    return null;
  }

  /**
   * Called when a command of box `id` has ended: the refill deferred by its hand-out starts now. No-op
   * for a box this pool has not just handed out.
   */
  commandEnded(id: string): void {
    const timer = this.#deferred.get(id);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.#deferred.delete(id);
    this.#refill();
  }

  #refill(): void {
    // A failing image or option stops the refill; the error is reported by `filled()`.
    while (!this.#closed && !this.#error && this.#ready.length + this.#creating < this.size) {
      this.#creating++;
      const creation = this.#host.create(this.#options, this.id).then(
        async (id) => {
          this.#creating--;
          if (this.#closed) {
            await this.#host.remove(id).catch(() => {});
            return;
          }
          this.#table.add(id, this.id);
          this.#ready.push(id);
          if (this.#ready.length >= this.size) {
            for (const w of this.#waiters.splice(0)) w.resolve();
          }
        },
        (error: Error) => {
          this.#creating--;
          this.#error = error;
          for (const w of this.#waiters.splice(0)) w.reject(error);
        },
      );
      this.#inFlight.add(creation);
      creation.finally(() => this.#inFlight.delete(creation));
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#deferred.values()) clearTimeout(timer);
    this.#deferred.clear();
    const ids = this.#ready.splice(0);
    await Promise.all([...ids.map((id) => this.#host.remove(id).catch(() => {})), ...this.#inFlight]);
    for (const w of this.#waiters.splice(0))
      w.reject(new BoxError('the pool was closed', { code: 'conflict' }));
  }
}
