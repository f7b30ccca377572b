/**
 * The default {@link AuthStore}: SQLite through `node:sqlite`, one connection per store. The repository
 * logic is the one both databases share (`./sql-store.ts`, `./sql/`); this file opens and migrates the
 * database, runs the optional background checkpointer, keeps the client cache coherent with other
 * connections, and group-commits the token endpoint's writes (`./sqlite/driver.ts`).
 */
import { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { MIGRATIONS } from './migrations.ts';
import { freezeClient } from './rows.ts';
import type { ChangeKey, SqlDriver } from './sql/driver.ts';
import { type ClientLookup, SqlAuthStore } from './sql-store.ts';
import { SqliteDriver } from './sqlite/driver.ts';
import type { AuthStore, ClientRecord } from './types.ts';

/** Options of {@link SqliteAuthStore}. */
export interface SqliteAuthStoreOptions {
  /** Database file path, or `':memory:'` (default) for an in-memory database. */
  path?: string;
  /** Clock for `createdAt` / `updatedAt` / audit times, ms epoch (default `Date.now`). */
  now?: () => number;
  /** How long to wait for a lock held by another connection, ms (default 5000). */
  busyTimeoutMs?: number;
  /**
   * WAL pages after which a commit checkpoints the WAL into the database file (`PRAGMA wal_autocheckpoint`;
   * files only). Default: SQLite's 1000. Larger values mean fewer checkpoints (each one fsyncs, blocking
   * the event loop) at the cost of a larger WAL file (4 KiB per page).
   */
  walAutocheckpointPages?: number;
  /**
   * When set (files only), a worker thread checkpoints the WAL every `backgroundCheckpointMs` ms on its own
   * connection (`PRAGMA wal_checkpoint(PASSIVE)`, see `checkpointer.ts`), so that the copy into the
   * database file and its fsync happen off Node's event loop. The automatic checkpoint of this connection
   * stays on as a backstop (at `walAutocheckpointPages`). Default: off.
   */
  backgroundCheckpointMs?: number;
}

/** The checkpoint worker's module: `.ts` when running from source, `.js` from the published build. */
const CHECKPOINTER_MODULE = import.meta.url.endsWith('.ts') ? './checkpointer.ts' : './checkpointer.js';

/** Entries of the client cache (clients and misses); it is emptied when full. */
const CLIENT_CACHE_LIMIT = 1024;

/**
 * Parsed client records (and misses) by id, valid while `PRAGMA data_version` is unchanged (it changes
 * when another connection commits) and dropped by this store's own client writes.
 */
class DataVersionClientCache implements ClientLookup {
  readonly #entries = new Map<string, ClientRecord | undefined>();
  readonly #db: SqlDriver;
  #version: number | undefined;
  /** Bumped by every invalidation: a read that overlapped one is not cached. */
  #generation = 0;

  constructor(db: SqlDriver) {
    this.#db = db;
  }

  async get(
    clientId: string,
    load: () => Promise<ClientRecord | undefined>,
  ): Promise<ClientRecord | undefined> {
    const version = Number((await this.#db.get('PRAGMA data_version'))?.data_version);
    if (version !== this.#version) {
      this.#entries.clear();
      this.#version = version;
    }
    if (this.#entries.has(clientId)) return this.#entries.get(clientId);
    const generation = this.#generation;
    const record = await load();
    if (record) freezeClient(record);
    if (generation === this.#generation) {
      if (this.#entries.size >= CLIENT_CACHE_LIMIT) this.#entries.clear();
      this.#entries.set(clientId, record);
    }
    return record;
  }

  invalidate(): void {
    this.#generation++;
    this.#entries.clear();
  }
}

/** See the module comment. */
export class SqliteAuthStore extends SqlAuthStore implements AuthStore {
  readonly #database: DatabaseSync;
  readonly #driver: SqliteDriver;
  readonly #now: () => number;
  #checkpointer: Worker | undefined;
  #checkpointerExited: Promise<void> = Promise.resolve();

  /**
   * Opens (creating if needed) the database and applies pending migrations.
   * @throws Error when the file cannot be opened or a migration fails (nothing of that migration is
   * applied); RangeError for a bad `walAutocheckpointPages` or `backgroundCheckpointMs`.
   */
  constructor(options: SqliteAuthStoreOptions = {}) {
    const path = options.path ?? ':memory:';
    const database = new DatabaseSync(path, {
      enableForeignKeyConstraints: true,
      timeout: options.busyTimeoutMs ?? 5000,
    });
    const driver = new SqliteDriver(database);
    const now = options.now ?? Date.now;
    super(driver, now, new DataVersionClientCache(driver));
    this.#database = database;
    this.#driver = driver;
    this.#now = now;
    if (path !== ':memory:') {
      database.exec('PRAGMA journal_mode = WAL');
      database.exec('PRAGMA synchronous = NORMAL');
      const pages = options.walAutocheckpointPages;
      if (pages !== undefined) {
        if (!Number.isSafeInteger(pages) || pages < 1)
          throw new RangeError('walAutocheckpointPages: positive integer');
        database.exec(`PRAGMA wal_autocheckpoint = ${pages}`);
      }
    }
    this.#migrate();
    const interval = options.backgroundCheckpointMs;
    if (interval !== undefined && path !== ':memory:') {
      if (!Number.isSafeInteger(interval) || interval < 1)
        throw new RangeError('backgroundCheckpointMs: positive integer (ms)');
      const checkpointer = new Worker(new URL(CHECKPOINTER_MODULE, import.meta.url), {
        workerData: { path, intervalMs: interval },
      });
      this.#checkpointer = checkpointer;
      this.#checkpointerExited = new Promise<void>((resolve) => checkpointer.once('exit', () => resolve()));
      checkpointer.unref();
      checkpointer.on('error', () => {
        // The automatic checkpoint of this connection remains; nothing to recover here.
      });
    }
  }

  /** Versions of the applied migrations, ascending. */
  appliedMigrations(): number[] {
    return this.#database
      .prepare('SELECT version FROM schema_migrations ORDER BY version')
      .all()
      .map((row) => Number(row.version));
  }

  /** The SQLite journal mode in effect (`wal` for files, `memory` for `:memory:`). */
  journalMode(): string {
    return String(this.#database.prepare('PRAGMA journal_mode').get()?.journal_mode);
  }

  /** Applies the pending migrations, each in its own transaction (synchronously, before any other use). */
  #migrate(): void {
    const database = this.#database;
    database.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`);
    const applied = new Set(this.appliedMigrations());
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      database.exec('BEGIN IMMEDIATE');
      try {
        database.exec(migration.sql);
        database
          .prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
          .run(migration.version, migration.name, this.#now());
        database.exec('COMMIT');
      } catch (error) {
        database.exec('ROLLBACK');
        throw error;
      }
    }
  }

  /** Group-committed with the other writes of this event-loop turn (see `SqliteDriver.batch`). */
  protected override batched(
    entity: string,
    key: ChangeKey,
    work: (db: SqlDriver) => Promise<boolean>,
  ): Promise<boolean> {
    return this.#driver.batch(entity, key, work);
  }

  /** Commits pending group writes, stops the checkpointer and closes the database. */
  async close(): Promise<void> {
    if (this.#database.isOpen) await this.#driver.flush();
    const checkpointer = this.#checkpointer;
    if (checkpointer) {
      this.#checkpointer = undefined;
      checkpointer.postMessage('stop');
      await this.#checkpointerExited;
    }
    if (this.#database.isOpen) this.#database.close();
  }
}
