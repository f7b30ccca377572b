import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { ConflictError, ConstraintError } from '../../errors.ts';
import { auditValues, auditWhere, likePattern, paging } from '../inputs.ts';
import { MIGRATIONS } from '../migrations.ts';
import { toAudit } from '../rows.ts';
import type { AuditEvent, AuditQuery, ChangeOptions, ListQuery, NewAuditEvent, Page } from '../types.ts';

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

/** A result row. */
export type Row = Record<string, SQLInputValue>;

const SQLITE_CONSTRAINT_UNIQUE = 2067;
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
/** The checkpoint worker's module: `.ts` when running from source, `.js` from the published build. */
const CHECKPOINTER_MODULE = import.meta.url.endsWith('.ts') ? '../checkpointer.ts' : '../checkpointer.js';
const SQLITE_CONSTRAINT_FOREIGNKEY = 787;

interface SqliteError {
  errcode?: number;
  message: string;
}

/** Maps SQLite constraint errors to `ConflictError` / `ConstraintError`; returns other errors unchanged. */
export function constraintError(entity: string, field: string, value: string, error: unknown): unknown {
  const code = (error as SqliteError).errcode;
  if (code === SQLITE_CONSTRAINT_UNIQUE || code === SQLITE_CONSTRAINT_PRIMARYKEY) {
    return new ConflictError(entity, field, value, { cause: error });
  }
  if (code === SQLITE_CONSTRAINT_FOREIGNKEY) {
    return new ConstraintError('foreign_key', `${entity}: a referenced record does not exist`, {
      cause: error,
    });
  }
  return error;
}

/**
 * A write waiting for its group commit: a refresh-token rotation or a replay-cache claim. `apply` runs
 * inside the batch's transaction (in its own savepoint) and answers the method's boolean result; `entity`
 * names what a constraint failure concerns.
 */
interface PendingWrite {
  readonly apply: () => boolean;
  readonly entity: string;
  resolve(value: boolean): void;
  reject(error: unknown): void;
}

/** Connection, transactions and shared machinery of the SQLite store (see the module comment). */
export abstract class SqliteCore {
  protected readonly database: DatabaseSync;
  protected readonly clock: () => number;
  readonly #statements = new Map<string, StatementSync>();
  #checkpointer: Worker | undefined;
  /**
   * Writes waiting for the next group commit ({@link SqliteAuthStore.rotateRefreshToken},
   * {@link SqliteAuthStore.claimReplayKey}).
   */
  #pendingRotations: PendingWrite[] = [];
  #checkpointerExited: Promise<void> = Promise.resolve();

  /**
   * Opens (creating if needed) the database and applies pending migrations.
   * @throws Error when the file cannot be opened or a migration fails (nothing of that migration is applied).
   */
  constructor(options: SqliteAuthStoreOptions = {}) {
    const path = options.path ?? ':memory:';
    this.database = new DatabaseSync(path, {
      enableForeignKeyConstraints: true,
      timeout: options.busyTimeoutMs ?? 5000,
    });
    this.clock = options.now ?? Date.now;
    if (path !== ':memory:') {
      this.database.exec('PRAGMA journal_mode = WAL');
      this.database.exec('PRAGMA synchronous = NORMAL');
      const pages = options.walAutocheckpointPages;
      if (pages !== undefined) {
        if (!Number.isSafeInteger(pages) || pages < 1)
          throw new RangeError('walAutocheckpointPages: positive integer');
        this.database.exec(`PRAGMA wal_autocheckpoint = ${pages}`);
      }
    }
    this.#migrate();
    const interval = options.backgroundCheckpointMs;
    if (interval !== undefined && path !== ':memory:') {
      if (!Number.isSafeInteger(interval) || interval < 1)
        throw new RangeError('backgroundCheckpointMs: positive integer (ms)');
      this.#checkpointer = new Worker(new URL(CHECKPOINTER_MODULE, import.meta.url), {
        workerData: { path, intervalMs: interval },
      });
      const exited = new Promise<void>((resolve) => this.#checkpointer?.once('exit', () => resolve()));
      this.#checkpointerExited = exited;
      this.#checkpointer.unref();
      this.#checkpointer.on('error', () => {
        // The automatic checkpoint of this connection remains; nothing to recover here.
      });
    }
  }

  /** Versions of the applied migrations, ascending. */
  appliedMigrations(): number[] {
    return this.database
      .prepare('SELECT version FROM schema_migrations ORDER BY version')
      .all()
      .map((row) => Number(row.version));
  }

  /** The SQLite journal mode in effect (`wal` for files, `memory` for `:memory:`). */
  journalMode(): string {
    return String(this.database.prepare('PRAGMA journal_mode').get()?.journal_mode);
  }

  #migrate(): void {
    this.database.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`);
    const applied = new Set(this.appliedMigrations());
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      this.tx(() => {
        this.database.exec(migration.sql);
        this.database
          .prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
          .run(migration.version, migration.name, this.clock());
      });
    }
  }

  /** The prepared statement of `sql` (prepared once per connection). */
  protected stmt(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.database.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  /** The first row of `sql`, or undefined. */
  protected sqlGet(sql: string, ...params: SQLInputValue[]): Row | undefined {
    return this.stmt(sql).get(...params) as Row | undefined;
  }

  /** The first row of `sql` as a record (`map`), or `undefined` when there is none. */
  protected sqlGetAs<T>(map: (row: Row) => T, sql: string, ...params: SQLInputValue[]): T | undefined {
    const row = this.sqlGet(sql, ...params);
    return row ? map(row) : undefined;
  }

  /** Every row of `sql`. */
  protected sqlAll(sql: string, ...params: SQLInputValue[]): Row[] {
    return this.stmt(sql).all(...params) as Row[];
  }

  /** Runs `sql`. @returns the number of rows changed. */
  protected sqlRun(sql: string, ...params: SQLInputValue[]): number {
    return Number(this.stmt(sql).run(...params).changes);
  }

  /** Runs `fn` in one `BEGIN IMMEDIATE` transaction (rolled back when it throws). */
  protected tx<T>(fn: () => T): T {
    // Prepared once (not re-parsed by exec() on every transaction).
    this.stmt('BEGIN IMMEDIATE').run();
    try {
      const result = fn();
      this.stmt('COMMIT').run();
      return result;
    } catch (error) {
      this.stmt('ROLLBACK').run();
      throw error;
    }
  }

  /** Runs a change in one transaction, writes the optional audit event in it, and maps constraint errors. */
  protected change<T>(
    entity: string,
    key: { field: string; value: string },
    options: ChangeOptions | undefined,
    fn: () => T,
  ): T {
    try {
      return this.tx(() => {
        const result = fn();
        if (options?.audit) this.insertAudit(options.audit);
        return result;
      });
    } catch (error) {
      throw constraintError(entity, key.field, key.value, error);
    }
  }

  /**
   * One page of a searchable list (`query.offset` / `query.limit`, see {@link paging}) and the total count.
   * `search` is the column matched against `query.search` (a case-insensitive substring, see
   * {@link likePattern}); `select` reads the rows of `table` (aliases included), `order` sorts them.
   */
  protected page<T>(
    query: ListQuery | undefined,
    sql: { table: string; select: string; search: string; order: string },
    map: (row: Row) => T,
  ): Page<T> {
    const { offset, limit } = paging(query);
    const like = likePattern(query?.search);
    const where = `WHERE ${sql.search} LIKE ? ESCAPE '\\'`;
    const total = Number(this.sqlGet(`SELECT count(*) AS n FROM ${sql.table} ${where}`, like)?.n);
    const items = this.sqlAll(
      `${sql.select} ${where} ORDER BY ${sql.order} LIMIT ? OFFSET ?`,
      like,
      limit,
      offset,
    );
    return { items: items.map(map), total };
  }

  // ── audit ──

  /** Appends an audit event (inside the caller's transaction, if any). @throws ValidationError. */
  protected insertAudit(event: NewAuditEvent): AuditEvent {
    const row = this.sqlGet(
      `INSERT INTO audit_events (time, category, outcome, subject_id, subject_name, client_id, failure_code,
        remote_address, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
      ...auditValues(event, this.clock()),
    );
    return toAudit(row!);
  }

  async appendAudit(event: NewAuditEvent): Promise<AuditEvent> {
    return this.insertAudit(event);
  }

  async listAudit(query?: AuditQuery): Promise<Page<AuditEvent>> {
    const { offset, limit } = paging(query);
    const { clause, params } = auditWhere(query ?? {});
    const total = Number(
      this.database.prepare(`SELECT count(*) AS n FROM audit_events ${clause}`).get(...params)?.n,
    );
    const items = (
      this.database
        .prepare(`SELECT * FROM audit_events ${clause} ORDER BY time DESC, id DESC LIMIT ? OFFSET ?`)
        .all(...params, limit, offset) as Row[]
    ).map(toAudit);
    return { items, total };
  }

  /** Queues a write for the group commit of this event-loop turn; resolves once it is committed. */
  protected enqueue(entity: string, apply: () => boolean): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#pendingRotations.push({ apply, entity, resolve, reject });
      if (this.#pendingRotations.length === 1) setImmediate(() => this.flushWrites());
    });
  }

  /** Commits the writes queued by {@link SqliteCore.enqueue} in one transaction and settles their promises. */
  protected flushWrites(): void {
    const batch = this.#pendingRotations;
    this.#pendingRotations = [];
    if (batch.length === 0) return;
    const outcomes: ({ ok: true; value: boolean } | { ok: false; error: unknown })[] = [];
    try {
      this.tx(() => {
        for (const item of batch) {
          this.stmt('SAVEPOINT rotation').run();
          try {
            outcomes.push({ ok: true, value: item.apply() });
            this.stmt('RELEASE rotation').run();
          } catch (error) {
            this.stmt('ROLLBACK TO rotation').run();
            this.stmt('RELEASE rotation').run();
            const field = item.entity === 'refresh token' ? 'tokenHash' : 'key';
            outcomes.push({ ok: false, error: constraintError(item.entity, field, '…', error) });
          }
        }
      });
    } catch (error) {
      // Nothing of the batch was committed (#tx rolled back).
      for (const item of batch) item.reject(error);
      return;
    }
    batch.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    });
  }

  /** Commits pending group writes, stops the checkpointer and closes the database. */
  async close(): Promise<void> {
    if (this.database.isOpen) this.flushWrites();
    const checkpointer = this.#checkpointer;
    if (checkpointer) {
      this.#checkpointer = undefined;
      checkpointer.postMessage('stop');
      await this.#checkpointerExited;
    }
    if (this.database.isOpen) this.database.close();
  }
}
