/**
 * Query helpers of the PostgreSQL store over the `postgres` driver: statements are written with `?`
 * placeholders (as the SQLite store's are) and run as prepared statements with `$n` parameters; writes run
 * in transactions ({@link change}) that also append the optional audit event; PostgreSQL constraint errors
 * become the typed errors of `../../errors.ts`.
 */
import type postgres from 'postgres';
import { ConflictError, ConstraintError } from '../../errors.ts';
import { auditValues, likePattern, paging } from '../inputs.ts';
import { type Row, toAudit } from '../rows.ts';
import type { AuditEvent, ChangeOptions, ListQuery, NewAuditEvent, Page } from '../types.ts';

/** A connection pool or a transaction: anything that runs queries. */
export type Q = postgres.ISql;

/**
 * A statement parameter. Arrays and objects are for `jsonb` columns (the driver serializes them as JSON
 * once the server has described the parameter's type).
 */
export type Param =
  | string
  | number
  | boolean
  | null
  | readonly unknown[]
  | { readonly [key: string]: unknown };

/** What the store's area modules share: the pool and the clock. */
export interface PgContext {
  readonly sql: postgres.Sql;
  /** ms epoch. */
  readonly now: () => number;
}

const texts = new Map<string, string>();

/** `?` placeholders → `$1`, `$2`, … (the statements of this store have no `?` in literals). */
function pgText(text: string): string {
  let converted = texts.get(text);
  if (converted === undefined) {
    let n = 0;
    converted = text.replace(/\?/g, () => `$${++n}`);
    texts.set(text, converted);
  }
  return converted;
}

function exec(q: Q, text: string, params: Param[]) {
  return q.unsafe(pgText(text), params as postgres.ParameterOrJSON<never>[], { prepare: true });
}

/** Every row of a statement. */
export async function all(q: Q, text: string, ...params: Param[]): Promise<Row[]> {
  return [...(await exec(q, text, params))] as Row[];
}

/** The first row of a statement, or undefined. */
export async function get(q: Q, text: string, ...params: Param[]): Promise<Row | undefined> {
  return (await exec(q, text, params))[0] as Row | undefined;
}

/** The first row mapped by `map`, or undefined. */
export async function getAs<T>(
  map: (row: Row) => T,
  q: Q,
  text: string,
  ...params: Param[]
): Promise<T | undefined> {
  const row = await get(q, text, ...params);
  return row ? map(row) : undefined;
}

/** Runs a statement. @returns the number of rows it changed. */
export async function run(q: Q, text: string, ...params: Param[]): Promise<number> {
  return (await exec(q, text, params)).count;
}

/** PostgreSQL error codes (Appendix A): unique violation, foreign key violation. */
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

/** Maps constraint errors to `ConflictError` / `ConstraintError`; returns other errors unchanged. */
export function constraintError(entity: string, field: string, value: string, error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  if (code === UNIQUE_VIOLATION) return new ConflictError(entity, field, value, { cause: error });
  if (code === FOREIGN_KEY_VIOLATION) {
    return new ConstraintError('foreign_key', `${entity}: a referenced record does not exist`, {
      cause: error,
    });
  }
  return error;
}

/** Runs `fn` in one transaction. */
export async function tx<T>(ctx: PgContext, fn: (q: Q) => Promise<T>): Promise<T> {
  return (await ctx.sql.begin((t) => fn(t))) as T;
}

/** Appends an audit event (in the caller's transaction when `q` is one). @throws ValidationError. */
export async function insertAudit(q: Q, event: NewAuditEvent, now: number): Promise<AuditEvent> {
  const row = await get(
    q,
    `INSERT INTO audit_events (time, category, outcome, subject_id, subject_name, client_id, failure_code,
      remote_address, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
    ...auditValues(event, now).slice(0, 8),
    event.details ?? null,
  );
  return toAudit(row!);
}

/**
 * Runs a change in one transaction, appends the optional audit event in it, and maps constraint errors
 * (naming `key.field`).
 */
export async function change<T>(
  ctx: PgContext,
  entity: string,
  key: { field: string; value: string },
  options: ChangeOptions | undefined,
  fn: (q: Q) => Promise<T>,
): Promise<T> {
  try {
    return await tx(ctx, async (q) => {
      const result = await fn(q);
      if (options?.audit) await insertAudit(q, options.audit, ctx.now());
      return result;
    });
  } catch (error) {
    throw constraintError(entity, key.field, key.value, error);
  }
}

/** Runs one statement and maps its constraint errors (no transaction needed for a single statement). */
export async function write<T>(
  entity: string,
  key: { field: string; value: string },
  fn: () => Promise<T>,
): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw constraintError(entity, key.field, key.value, error);
  }
}

/**
 * One page of a searchable list and the total count: `search` is the column matched case-insensitively
 * against `query.search`; `select` reads the rows of `table`; `order` sorts them.
 * @throws ValidationError (bad offset, limit or search).
 */
export async function page<T>(
  q: Q,
  query: ListQuery | undefined,
  sql: { table: string; select: string; search: string; order: string },
  map: (row: Row) => T,
): Promise<Page<T>> {
  const { offset, limit } = paging(query);
  const like = likePattern(query?.search);
  const where = `WHERE ${sql.search} LIKE ? ESCAPE '\\'`;
  const [count, rows] = await Promise.all([
    get(q, `SELECT count(*) AS n FROM ${sql.table} ${where}`, like),
    all(q, `${sql.select} ${where} ORDER BY ${sql.order} LIMIT ? OFFSET ?`, like, limit, offset),
  ]);
  return { items: rows.map(map), total: Number(count?.n) };
}
