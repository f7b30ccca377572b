/**
 * The image store's disk budget (`ImageLimits.maxStoreBytes`), held across every process that shares one
 * store directory. A ledger, `<homeDir>/images/budget.db` (`node:sqlite`, WAL), keeps
 * - `layers`: the unpacked bytes of each stored layer, and
 * - `reservations`: what each live `StoreBudget` has reserved for work in flight (blobs being downloaded,
 *   layers being unpacked), with the pid and start time of its process.
 *
 * A budget takes from its own reservation without touching the ledger; a take its reservation cannot
 * cover asks for more (what it needs, rounded up to {@link GRANT_BYTES} or an eighth of what is free,
 * whichever is less) in one write transaction that
 * counts the stored layers plus every reservation, so two processes can never both be granted the last
 * free bytes. Reservations of processes that are gone (no process with that pid and start time) are
 * dropped then. Publishing a layer (the rename of its directory) and removing one happen inside the
 * transaction that records them, so the ledger and the `layers/` directory agree for every process.
 * SQLite's write lock is the store's lock; each transaction holds it for one rename and a few statements
 * (a waiting process blocks for at most `BUSY_TIMEOUT_MS`).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { readProcStat } from '../engine/proc-stat.ts';
import { BoxError } from '../errors.ts';
import { immediateTransaction, useWalJournal } from '../sqlite-transaction.ts';
import type { Bound, Budget } from './limits.ts';

/** Bytes reserved from the ledger at a time (a take of more reserves what it needs). */
export const GRANT_BYTES = 64 * 1024 * 1024;
/** How long a transaction waits for another process's write lock, ms. */
const BUSY_TIMEOUT_MS = 10_000;

/** The store-wide budget of one `StoreFiles` (see the module comment). */
export class StoreBudget implements Budget {
  /** The bound (`maxStoreBytes`), used in errors. */
  readonly bytes: Bound;
  readonly #db: DatabaseSync;
  /** This budget's row in `reservations`. */
  readonly #owner = randomBytes(8).toString('hex');
  readonly #pid = process.pid;
  readonly #start = readProcStat(process.pid)?.starttime ?? 0;
  /** Bytes reserved in the ledger by this budget. */
  #reserved = 0;
  /** Bytes of the reservation taken by work in flight. */
  #taken = 0;

  /**
   * Opens (creating) the ledger in `root` (`<homeDir>/images`, which must exist).
   * @param bound the store's byte bound (`{ name: 'maxStoreBytes', max }`).
   */
  constructor(root: string, bound: Bound) {
    this.bytes = bound;
    this.#db = new DatabaseSync(join(root, 'budget.db'), { timeout: BUSY_TIMEOUT_MS });
    useWalJournal(this.#db, BUSY_TIMEOUT_MS);
    this.#db.exec(`PRAGMA synchronous = NORMAL;
      CREATE TABLE IF NOT EXISTS layers (digest TEXT PRIMARY KEY, bytes INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS reservations (owner TEXT PRIMARY KEY, pid INTEGER NOT NULL,
        start INTEGER NOT NULL, bytes INTEGER NOT NULL);`);
  }

  /** Bytes in use store-wide: stored layers plus every process's reservations (read from the ledger). */
  get usedBytes(): number {
    return this.#total();
  }

  /**
   * Makes the ledger's `layers` agree with the directory: each stored layer (`stored`, digest → unpacked
   * bytes, read from `layer.json`) is recorded, and rows of layers no longer on disk (`layerDir(digest)`)
   * are dropped. Run at store start, under the write lock.
   */
  reconcile(stored: ReadonlyMap<string, number>, layerDir: (digest: string) => string): void {
    this.#transaction(() => {
      const insert = this.#db.prepare('INSERT OR IGNORE INTO layers (digest, bytes) VALUES (?, ?)');
      for (const [digest, bytes] of stored) insert.run(digest, bytes);
      const rows = this.#db.prepare('SELECT digest FROM layers').all() as { digest: string }[];
      const drop = this.#db.prepare('DELETE FROM layers WHERE digest = ?');
      for (const { digest } of rows) if (!existsSync(layerDir(digest))) drop.run(digest);
      this.#dropDead();
    });
  }

  /**
   * Takes `bytes` before they are written (entries are not bounded store-wide).
   * @throws BoxError `image` naming `maxStoreBytes` when the store has not that much free (nothing taken).
   */
  take(bytes: number, _entries = 0): void {
    if (bytes <= 0) return;
    const need = this.#taken + bytes - this.#reserved;
    if (need > 0) {
      this.#transaction(() => {
        this.#dropDead();
        const free = this.bytes.max - this.#total();
        if (need > free) {
          throw new BoxError(`unpacked size exceeds ${this.bytes.name} (${this.bytes.max} bytes)`, {
            code: 'image',
          });
        }
        // Near the bound grants shrink (an eighth of what is free), so that reservations other work
        // holds but has not used yet refuse little that would have fitted.
        const grant = Math.max(need, Math.min(GRANT_BYTES, Math.floor(free / 8)));
        this.#setReserved(this.#reserved + Math.min(free, grant));
      });
    }
    this.#taken += bytes;
  }

  /** Gives back what `take` took (work that failed or finished); an idle budget returns its reservation. */
  give(bytes: number, _entries = 0): void {
    this.#taken = Math.max(0, this.#taken - bytes);
    if (this.#taken === 0 && this.#reserved > 0) this.#transaction(() => this.#setReserved(0));
  }

  /**
   * Publishes a layer: in one write transaction, `publish()` renames its directory into place and, when it
   * did (false: another process published it first), the layer's `storedBytes` are recorded and the
   * `takenBytes` its unpack took leave this budget's work in flight (stored bytes are counted by the
   * ledger from then on).
   * @returns what `publish` returned.
   */
  publish(digest: string, storedBytes: number, takenBytes: number, publish: () => boolean): boolean {
    return this.#transaction(() => {
      if (!publish()) return false;
      this.#db
        .prepare('INSERT OR REPLACE INTO layers (digest, bytes) VALUES (?, ?)')
        .run(digest, storedBytes);
      const moved = Math.min(takenBytes, this.#taken);
      this.#taken -= moved;
      this.#setReserved(this.#taken === 0 ? 0 : Math.max(this.#taken, this.#reserved - moved));
      return true;
    });
  }

  /**
   * Removes a stored layer: in one write transaction, `remove()` moves its directory away and, when it did,
   * its row is dropped (its bytes are free for every process).
   * @returns what `remove` returned.
   */
  remove(digest: string, remove: () => boolean): boolean {
    return this.#transaction(() => {
      if (!remove()) return false;
      this.#db.prepare('DELETE FROM layers WHERE digest = ?').run(digest);
      return true;
    });
  }

  /** Returns this budget's reservation and closes the ledger. */
  close(): void {
    if (!this.#db.isOpen) return;
    try {
      this.#transaction(() => this.#setReserved(0));
    } finally {
      this.#db.close();
    }
  }

  #total(): number {
    const row = this.#db
      .prepare(
        'SELECT (SELECT COALESCE(SUM(bytes), 0) FROM layers) + (SELECT COALESCE(SUM(bytes), 0) FROM reservations) AS used',
      )
      .get() as { used: number };
    return Number(row.used);
  }

  #setReserved(bytes: number): void {
    this.#reserved = bytes;
    if (bytes === 0) this.#db.prepare('DELETE FROM reservations WHERE owner = ?').run(this.#owner);
    else
      this.#db
        .prepare('INSERT OR REPLACE INTO reservations (owner, pid, start, bytes) VALUES (?, ?, ?, ?)')
        .run(this.#owner, this.#pid, this.#start, bytes);
  }

  /** Drops the reservations of processes that are gone (pid free, or reused by a later process). */
  #dropDead(): void {
    const rows = this.#db.prepare('SELECT owner, pid, start FROM reservations').all() as {
      owner: string;
      pid: number;
      start: number;
    }[];
    const drop = this.#db.prepare('DELETE FROM reservations WHERE owner = ?');
    for (const { owner, pid, start } of rows) {
      if (Number(pid) === this.#pid && Number(start) === this.#start) continue;
      const stat = readProcStat(Number(pid));
      if (!stat || stat.starttime !== Number(start) || stat.state === 'Z') drop.run(owner);
    }
  }

  #transaction<T>(fn: () => T): T {
    return immediateTransaction(this.#db, fn);
  }
}

/** `rename(from, to)` as `publish`/`remove` callbacks want it: false when `to` exists and is not empty. */
export function renameUnlessTaken(from: string, to: string): boolean {
  try {
    renameSync(from, to);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTEMPTY' || code === 'EEXIST') return false;
    throw error;
  }
}
