/**
 * The database interface the store's repository logic (`./users.ts`, `./roles.ts`, `./clients.ts`,
 * `./tokens.ts`, `./oauth.ts`) is written against once, for both databases: {@link SqlDriver} runs
 * statements with `?` placeholders (asynchronous at the interface; the SQLite driver answers at once,
 * the PostgreSQL driver after its round trip) and {@link Dialect} holds the few places where the two SQL
 * dialects differ. Also the helpers every repository uses: one-transaction changes with their audit event
 * ({@link change}), single-statement writes ({@link write}), pages of a searchable list ({@link page}).
 */
import { ConflictError, ConstraintError } from '../../errors.ts';
import type { SqlRunner } from '../factors.ts';
import { auditValues, likePattern, paging } from '../inputs.ts';
import type { ValueEncoding } from '../inserts.ts';
import { type Row, toAudit } from '../rows.ts';
import type { AuditEvent, ChangeOptions, ListQuery, NewAuditEvent, Page } from '../types.ts';

/**
 * A statement parameter. Booleans, arrays and objects come only from the dialect's {@link ValueEncoding}
 * (PostgreSQL binds them to `boolean` / `jsonb` columns; SQLite's encoding turns them into integers and
 * JSON text before they reach the driver).
 */
export type SqlParam =
  | string
  | number
  | boolean
  | null
  | readonly unknown[]
  | { readonly [key: string]: unknown };

/** A placeholder type PostgreSQL cannot always infer from the statement (SQLite needs none). */
export type ParamType = 'text' | 'jsonb' | 'boolean' | 'bigint';

/** What differs between the SQL of SQLite and of PostgreSQL, for the statements the repositories share. */
export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** How lists, booleans and JSON values are bound. */
  readonly values: ValueEncoding<SqlParam, SqlParam, SqlParam>;
  /** `?` typed as `type`: `?::text` in PostgreSQL, `?` in SQLite. */
  typed(type: ParamType): string;
  /** Row-lock suffix of a `SELECT` inside a change: `' FOR UPDATE'` (PostgreSQL) or `''` (SQLite, whose `BEGIN IMMEDIATE` already serializes writers). */
  readonly forUpdate: string;
  /** Users with the names of the roles they hold (`roles`, a list column); alias `u`. */
  readonly userSelect: string;
  /** Roles with the names of their parents (`parent_roles`, a list column); alias `r`. */
  readonly roleSelect: string;
  /**
   * The `scopes` value of a consent upsert's `DO UPDATE`: the union of the stored and the inserted scopes
   * (PostgreSQL, where a concurrent first grant may insert the row between the read and the write), or the
   * inserted union itself (SQLite, where the transaction holds the write lock from its start).
   */
  readonly consentScopesOnConflict: string;
  /** A statement taking the role-graph lock for the rest of the transaction (PostgreSQL), or undefined. */
  readonly roleGraphLock: string | undefined;
  /** A statement `(channel, payload)` that notifies other instances at commit (PostgreSQL), or undefined. */
  readonly notify: string | undefined;
  /**
   * Maps a constraint violation to `ConflictError` (unique key; naming `field` and `value`) or
   * `ConstraintError` (`foreign_key`); returns any other error unchanged.
   */
  constraintError(entity: string, field: string, value: string, error: unknown): unknown;
}

/**
 * The dialect's `userSelect` and `roleSelect`; `nameList(column, from)` aggregates `column` of the rows
 * `from` yields into one list column (a JSON array text in SQLite, an array in PostgreSQL).
 */
export function dialectSelects(nameList: (column: string, from: string) => string): {
  userSelect: string;
  roleSelect: string;
} {
  const roles = nameList(
    'r.name',
    'FROM user_roles ur JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = u.id',
  );
  const parents = nameList(
    'p.name',
    'FROM role_parents rp JOIN roles p ON p.id = rp.parent_id WHERE rp.role_id = r.id',
  );
  return {
    userSelect: `SELECT u.*, ${roles} AS roles FROM users u`,
    roleSelect: `SELECT r.*, ${parents} AS parent_roles FROM roles r`,
  };
}

/** A connection (pool) or an open transaction of one of the two databases. */
export interface SqlDriver extends SqlRunner {
  readonly dialect: Dialect;
  /** The first row of a statement, or undefined. */
  get(sql: string, ...params: SqlParam[]): Promise<Row | undefined>;
  /** Every row of a statement. */
  all(sql: string, ...params: SqlParam[]): Promise<Row[]>;
  /** Runs a statement. @returns the number of rows it changed. */
  run(sql: string, ...params: SqlParam[]): Promise<number>;
  /**
   * Runs `fn` in one transaction over the driver it is given (committed when `fn` resolves, rolled back
   * when it rejects). Called on a transaction's driver, `fn` runs inside that same transaction.
   */
  transaction<T>(fn: (db: SqlDriver) => Promise<T>): Promise<T>;
}

/** The constraint a database error reports as violated: a unique key, a foreign key, or neither. */
export type ViolatedConstraint = 'unique' | 'foreign_key' | undefined;

/**
 * The typed error of a constraint violation: `ConflictError` naming `field` and `value` for a unique key,
 * `ConstraintError` (`foreign_key`) for a foreign key; any other `error` is returned unchanged.
 */
export function constraintErrorOf(
  violated: ViolatedConstraint,
  entity: string,
  field: string,
  value: string,
  error: unknown,
): unknown {
  if (violated === 'unique') return new ConflictError(entity, field, value, { cause: error });
  if (violated === 'foreign_key') {
    return new ConstraintError('foreign_key', `${entity}: a referenced record does not exist`, {
      cause: error,
    });
  }
  return error;
}

/** What every repository function gets: the database and the store's clock (ms epoch). */
export interface StoreContext {
  readonly db: SqlDriver;
  readonly now: () => number;
}

/** Which field a conflict names, and the value it reports (`'…'` for secrets and hashes). */
export interface ChangeKey {
  readonly field: string;
  readonly value: string;
}

/** The first row of a statement mapped by `map`, or undefined. */
export async function getAs<T>(
  map: (row: Row) => T,
  db: SqlDriver,
  sql: string,
  ...params: SqlParam[]
): Promise<T | undefined> {
  const row = await db.get(sql, ...params);
  return row ? map(row) : undefined;
}

/** Appends an audit event (in the caller's transaction when `db` is one). @throws ValidationError. */
export async function insertAudit(db: SqlDriver, event: NewAuditEvent, now: number): Promise<AuditEvent> {
  const values = auditValues(event, now);
  const row = await db.get(
    `INSERT INTO audit_events (time, category, outcome, subject_id, subject_name, client_id, failure_code,
      remote_address, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
    ...values.slice(0, 8),
    event.details ? db.dialect.values.json(event.details) : null,
  );
  return toAudit(row!);
}

/**
 * Runs a change in one transaction, appends the optional audit event in it, and maps constraint errors
 * (naming `key.field`). @throws whatever `fn` throws, constraint violations as typed errors.
 */
export async function change<T>(
  ctx: StoreContext,
  entity: string,
  key: ChangeKey,
  options: ChangeOptions | undefined,
  fn: (db: SqlDriver) => Promise<T>,
): Promise<T> {
  try {
    return await ctx.db.transaction(async (db) => {
      const result = await fn(db);
      if (options?.audit) await insertAudit(db, options.audit, ctx.now());
      return result;
    });
  } catch (error) {
    throw ctx.db.dialect.constraintError(entity, key.field, key.value, error);
  }
}

/** Runs a single-statement write (atomic without a transaction) and maps its constraint errors. */
export async function write<T>(
  db: SqlDriver,
  entity: string,
  key: ChangeKey,
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw db.dialect.constraintError(entity, key.field, key.value, error);
  }
}

/** How a searchable list is read: `select` reads the rows of `table`, `search` is matched, `order` sorts. */
export interface ListSql {
  readonly table: string;
  readonly select: string;
  readonly search: string;
  readonly order: string;
}

/**
 * One page of a searchable list (`query.offset` / `query.limit`, see {@link paging}) and the total count;
 * `sql.search` is matched case-insensitively against `query.search` (see {@link likePattern}).
 * @throws ValidationError (bad offset, limit or search).
 */
export async function page<T>(
  db: SqlDriver,
  query: ListQuery | undefined,
  sql: ListSql,
  map: (row: Row) => T,
): Promise<Page<T>> {
  const { offset, limit } = paging(query);
  const like = likePattern(query?.search);
  const where = `WHERE ${sql.search} LIKE ? ESCAPE '\\'`;
  const [count, rows] = await Promise.all([
    db.get(`SELECT count(*) AS n FROM ${sql.table} ${where}`, like),
    db.all(`${sql.select} ${where} ORDER BY ${sql.order} LIMIT ? OFFSET ?`, like, limit, offset),
  ]);
  return { items: rows.map(map), total: Number(count?.n) };
}
