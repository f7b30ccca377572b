/**
 * The {@link SqlDriver} of the SQLite store over one `node:sqlite` connection. Statements run
 * synchronously (prepared once per connection) and their promises are already settled when returned.
 * A transaction (`BEGIN IMMEDIATE` … `COMMIT`) owns the connection until it ends: statements and
 * transactions asked for meanwhile wait for it, so nothing else ever runs inside it. Writes of the token
 * endpoint's hot path can be group-committed ({@link SqliteDriver.batch}).
 */
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { SQLITE_VALUES } from '../inserts.ts';
import type { Row } from '../rows.ts';
import {
  type ChangeKey,
  constraintErrorOf,
  type Dialect,
  dialectSelects,
  type SqlDriver,
  type SqlParam,
} from '../sql/driver.ts';

const SQLITE_CONSTRAINT_UNIQUE = 2067;
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
const SQLITE_CONSTRAINT_FOREIGNKEY = 787;

/** Maps SQLite constraint errors to `ConflictError` / `ConstraintError`; returns other errors unchanged. */
export function constraintError(entity: string, field: string, value: string, error: unknown): unknown {
  const code = (error as { errcode?: number }).errcode;
  const violated =
    code === SQLITE_CONSTRAINT_UNIQUE || code === SQLITE_CONSTRAINT_PRIMARYKEY
      ? 'unique'
      : code === SQLITE_CONSTRAINT_FOREIGNKEY
        ? 'foreign_key'
        : undefined;
  return constraintErrorOf(violated, entity, field, value, error);
}

/** The SQLite {@link Dialect}. */
export const SQLITE_DIALECT: Dialect = {
  name: 'sqlite',
  values: SQLITE_VALUES,
  typed: () => '?',
  forUpdate: '',
  ...dialectSelects((column, from) => `(SELECT json_group_array(${column}) ${from})`),
  consentScopesOnConflict: 'excluded.scopes',
  roleGraphLock: undefined,
  notify: undefined,
  constraintError,
};

/**
 * A write waiting for its group commit. `work` runs inside the batch's transaction (in its own
 * savepoint) and answers the caller's boolean; `entity` and `key` name what a constraint failure concerns.
 */
interface PendingWrite {
  readonly work: (db: SqlDriver) => Promise<boolean>;
  readonly entity: string;
  readonly key: ChangeKey;
  resolve(value: boolean): void;
  reject(error: unknown): void;
}

/** See the module comment. */
export class SqliteDriver implements SqlDriver {
  readonly dialect = SQLITE_DIALECT;
  readonly #database: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();
  /** Settles when the open transaction ends; undefined while none is open. */
  #open: Promise<void> | undefined;
  /** The driver a transaction's work runs on: the connection, without waiting for the transaction. */
  readonly #inside: SqlDriver;
  /** Writes waiting for the next group commit. */
  #pending: PendingWrite[] = [];

  constructor(database: DatabaseSync) {
    this.#database = database;
    this.#inside = {
      dialect: SQLITE_DIALECT,
      get: async (sql, ...params) => this.#stmt(sql).get(...(params as SQLInputValue[])) as Row | undefined,
      all: async (sql, ...params) => this.#stmt(sql).all(...(params as SQLInputValue[])) as Row[],
      run: async (sql, ...params) => this.#run(sql, params),
      transaction: (fn) => fn(this.#inside),
    };
  }

  /** The prepared statement of `sql` (prepared once per connection). */
  #stmt(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#database.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  #run(sql: string, params: SqlParam[]): number {
    return Number(this.#stmt(sql).run(...(params as SQLInputValue[])).changes);
  }

  async get(sql: string, ...params: SqlParam[]): Promise<Row | undefined> {
    while (this.#open) await this.#open;
    return this.#stmt(sql).get(...(params as SQLInputValue[])) as Row | undefined;
  }

  async all(sql: string, ...params: SqlParam[]): Promise<Row[]> {
    while (this.#open) await this.#open;
    return this.#stmt(sql).all(...(params as SQLInputValue[])) as Row[];
  }

  async run(sql: string, ...params: SqlParam[]): Promise<number> {
    while (this.#open) await this.#open;
    return this.#run(sql, params);
  }

  async transaction<T>(fn: (db: SqlDriver) => Promise<T>): Promise<T> {
    // As in get/all/run: the check is repeated after every wait, and what follows it runs in the same
    // continuation, so two waiters woken by one commit never both go ahead.
    while (this.#open) await this.#open;
    let end!: () => void;
    this.#open = new Promise<void>((resolve) => {
      end = resolve;
    });
    try {
      this.#stmt('BEGIN IMMEDIATE').run();
      try {
        const result = await fn(this.#inside);
        this.#stmt('COMMIT').run();
        return result;
      } catch (error) {
        this.#stmt('ROLLBACK').run();
        throw error;
      }
    } finally {
      this.#open = undefined;
      end();
    }
  }

  /**
   * Group commit: writes asked for during one turn of the event loop are committed in one
   * `BEGIN IMMEDIATE` … `COMMIT`, each in its own savepoint (so one failure concerns only its caller), and
   * every promise settles only after that commit. Under concurrent refresh traffic this shares one WAL
   * append (and its write syscalls) among the rotations of a turn; durability per answer is unchanged.
   * A constraint violation rejects with the typed error naming `key.field`.
   */
  batch(entity: string, key: ChangeKey, work: (db: SqlDriver) => Promise<boolean>): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#pending.push({ work, entity, key, resolve, reject });
      if (this.#pending.length === 1) setImmediate(() => void this.flush());
    });
  }

  /** Commits the writes queued by {@link SqliteDriver.batch} in one transaction and settles their promises. */
  async flush(): Promise<void> {
    const batch = this.#pending;
    this.#pending = [];
    if (batch.length === 0) return;
    const outcomes: ({ ok: true; value: boolean } | { ok: false; error: unknown })[] = [];
    try {
      await this.transaction(async (db) => {
        for (const item of batch) {
          this.#stmt('SAVEPOINT batched').run();
          try {
            outcomes.push({ ok: true, value: await item.work(db) });
            this.#stmt('RELEASE batched').run();
          } catch (error) {
            this.#stmt('ROLLBACK TO batched').run();
            this.#stmt('RELEASE batched').run();
            outcomes.push({
              ok: false,
              error: constraintError(item.entity, item.key.field, item.key.value, error),
            });
          }
        }
      });
    } catch (error) {
      // Nothing of the batch was committed (the transaction rolled back).
      for (const item of batch) item.reject(error);
      return;
    }
    batch.forEach((item, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) item.resolve(outcome.value);
      else item.reject(outcome.error);
    });
  }
}
