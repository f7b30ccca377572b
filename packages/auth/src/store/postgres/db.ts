/**
 * The {@link SqlDriver} of the PostgreSQL store over the `postgres` driver: statements are written with
 * `?` placeholders (as the SQLite store's are) and run as prepared statements with `$n` parameters; a
 * transaction reserves one connection of the pool (`sql.begin`). PostgreSQL constraint errors become the
 * typed errors of `../../errors.ts`.
 */
import type postgres from 'postgres';
import { POSTGRES_VALUES } from '../inserts.ts';
import type { Row } from '../rows.ts';
import {
  constraintErrorOf,
  type Dialect,
  dialectSelects,
  type SqlDriver,
  type SqlParam,
} from '../sql/driver.ts';

/** Advisory lock key serializing changes of the role inheritance graph (see `../sql/roles.ts`). */
const ROLE_GRAPH_LOCK_KEY = 4_100_022;

/** PostgreSQL error codes (Appendix A): unique violation, foreign key violation. */
const UNIQUE_VIOLATION = '23505';
const FOREIGN_KEY_VIOLATION = '23503';

/** Maps constraint errors to `ConflictError` / `ConstraintError`; returns other errors unchanged. */
export function constraintError(entity: string, field: string, value: string, error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  const violated =
    code === UNIQUE_VIOLATION ? 'unique' : code === FOREIGN_KEY_VIOLATION ? 'foreign_key' : undefined;
  return constraintErrorOf(violated, entity, field, value, error);
}

/** The PostgreSQL {@link Dialect}. */
export const POSTGRES_DIALECT: Dialect = {
  name: 'postgres',
  values: POSTGRES_VALUES,
  typed: (type) => `?::${type}`,
  forUpdate: ' FOR UPDATE',
  ...dialectSelects((column, from) => `ARRAY(SELECT ${column} ${from})`),
  consentScopesOnConflict: `(SELECT coalesce(jsonb_agg(DISTINCT s ORDER BY s), '[]'::jsonb)
    FROM jsonb_array_elements_text(consents.scopes || excluded.scopes) AS s)`,
  roleGraphLock: `SELECT pg_advisory_xact_lock(${ROLE_GRAPH_LOCK_KEY})`,
  notify: 'SELECT pg_notify(?, ?)',
  constraintError,
};

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

/** See the module comment. `q` is the pool, or the connection of an open transaction. */
export class PgDriver implements SqlDriver {
  readonly dialect = POSTGRES_DIALECT;
  readonly #q: postgres.ISql;
  /** The pool, or undefined inside a transaction (whose nested transactions run inline). */
  readonly #pool: postgres.Sql | undefined;

  constructor(q: postgres.Sql | postgres.TransactionSql, pool?: postgres.Sql) {
    this.#q = q;
    this.#pool = pool;
  }

  #exec(text: string, params: SqlParam[]) {
    return this.#q.unsafe(pgText(text), params as postgres.ParameterOrJSON<never>[], { prepare: true });
  }

  async get(sql: string, ...params: SqlParam[]): Promise<Row | undefined> {
    return (await this.#exec(sql, params))[0] as Row | undefined;
  }

  async all(sql: string, ...params: SqlParam[]): Promise<Row[]> {
    return [...(await this.#exec(sql, params))] as Row[];
  }

  async run(sql: string, ...params: SqlParam[]): Promise<number> {
    return (await this.#exec(sql, params)).count;
  }

  async transaction<T>(fn: (db: SqlDriver) => Promise<T>): Promise<T> {
    if (!this.#pool) return fn(this);
    return (await this.#pool.begin((t) => fn(new PgDriver(t)))) as T;
  }
}
