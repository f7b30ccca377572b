/**
 * PostgreSQL implementation of {@link AuthStore} on the `postgres` driver: several auth server
 * instances share one database, and every guarantee of the store holds across them because it is enforced
 * by the database, not by process memory — lockout counting, refresh-token rotation and reuse detection,
 * single-use codes and pushed requests, the replay cache, login sessions, signing keys.
 *
 * Open it with {@link PostgresAuthStore.open}: it connects (a pool of `maxConnections`) and applies the
 * pending migrations under an advisory lock (`./postgres/schema.ts`), so instances may start together.
 * The repository logic is the one both databases share (`./sql-store.ts`, `./sql/`) over
 * `./postgres/db.ts`; this file adds opening, the notification-driven client cache, the rate limiter's
 * query client, signing-key notifications, and refresh-token rotation in one statement.
 */
import postgres from 'postgres';
import type { PgQueryClient } from '../ratelimit.ts';
import { REFRESH_TOKEN_COLUMNS, refreshTokenValues } from './inserts.ts';
import { ClientCache } from './postgres/client-cache.ts';
import { PgDriver } from './postgres/db.ts';
import { CLIENTS_CHANNEL, migrate, PG_MIGRATIONS } from './postgres/schema.ts';
import { write } from './sql/driver.ts';
import { HIDDEN_TOKEN, SIGNING_KEYS_CHANNEL } from './sql/tokens.ts';
import { SqlAuthStore } from './sql-store.ts';
import type { AuthStore, NewRefreshToken } from './types.ts';

/** Options of {@link PostgresAuthStore.open}. */
export interface PostgresAuthStoreOptions {
  /** Connection URL, `postgres://user:password@host:port/database` (libpq URI syntax). */
  url: string;
  /** Clock for `createdAt` / `updatedAt` / audit times, ms epoch (default `Date.now`). */
  now?: () => number;
  /** Size of the connection pool (default 10). */
  maxConnections?: number;
  /**
   * Longest life of a cached client record, ms (default 5000; `0` turns the client cache off). Entries are
   * dropped by change notifications within milliseconds; this bounds staleness if a notification is lost.
   */
  clientCacheTtlMs?: number;
}

/** Checks a `postgres://` / `postgresql://` URL. @throws RangeError naming the problem (never the password). */
export function checkPostgresUrl(url: unknown, name = 'AUTH_DATABASE_URL'): string {
  if (typeof url !== 'string') throw new RangeError(`${name}: must be a postgres:// URL`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RangeError(`${name}: not a URL (expected postgres://user:password@host:port/database)`);
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') {
    throw new RangeError(`${name}: scheme must be postgres:// or postgresql://`);
  }
  return url;
}

/** The PostgreSQL {@link AuthStore}. */
export class PostgresAuthStore extends SqlAuthStore implements AuthStore {
  readonly #sql: postgres.Sql;
  readonly #clients: ClientCache;
  #closed = false;

  private constructor(sql: postgres.Sql, now: () => number, clients: ClientCache) {
    super(new PgDriver(sql, sql), now, clients);
    this.#sql = sql;
    this.#clients = clients;
  }

  /**
   * Connects and applies pending migrations (safe when several instances start at once).
   * @throws RangeError (bad URL), or the driver's error when the database cannot be reached or a
   * migration fails (the pool is closed then).
   */
  static async open(options: PostgresAuthStoreOptions): Promise<PostgresAuthStore> {
    const url = checkPostgresUrl(options.url);
    const max = options.maxConnections ?? 10;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError('maxConnections: positive integer');
    const ttl = options.clientCacheTtlMs ?? 5000;
    if (!Number.isSafeInteger(ttl) || ttl < 0)
      throw new RangeError('clientCacheTtlMs: non-negative integer (ms)');
    const sql = postgres(url, { max, onnotice: () => {}, connection: { application_name: 'seed-auth' } });
    const now = options.now ?? Date.now;
    const clients = new ClientCache(ttl);
    const store = new PostgresAuthStore(sql, now, clients);
    try {
      await migrate(sql, now);
      if (ttl > 0) {
        await sql.listen(
          CLIENTS_CHANNEL,
          (clientId) => clients.invalidate(clientId),
          () => clients.listening(),
        );
      }
    } catch (error) {
      await sql.end({ timeout: 5 });
      throw error;
    }
    return store;
  }

  /** Versions of the applied migrations, ascending. */
  async appliedMigrations(): Promise<number[]> {
    const rows = await this.#sql`SELECT version FROM schema_migrations ORDER BY version`;
    return rows.map((row) => Number(row.version));
  }

  /** Versions this build knows, ascending. */
  static get migrations(): number[] {
    return PG_MIGRATIONS.map((m) => m.version);
  }

  /**
   * The brute-force counters' query client (`RateLimits.postgres`): runs rate-limiter-flexible's
   * statements on this pool as prepared statements and answers in `pg`'s `{ rows, rowCount }` shape.
   */
  rateLimitClient(): PgQueryClient {
    const sql = this.#sql;
    return {
      async query({ text, values }) {
        const rows = await sql.unsafe(text, (values ?? []) as postgres.ParameterOrJSON<never>[], {
          prepare: true,
        });
        return { rows: [...rows], rowCount: rows.count };
      },
    };
  }

  /**
   * Calls `listener` whenever any instance using this database inserts or retires a signing key
   * (`LISTEN` on a dedicated connection, re-established by the driver after a reconnect).
   * @returns a function that stops listening.
   */
  async watchSigningKeys(listener: () => void): Promise<() => Promise<void>> {
    const handle = await this.#sql.listen(SIGNING_KEYS_CHANNEL, () => listener());
    return () => handle.unlisten();
  }

  /**
   * See `AuthStore.rotateRefreshToken`: one statement (one round trip) marks the old token used — only
   * when unused and unrevoked — and inserts its successor only when that happened.
   */
  override rotateRefreshToken(tokenHash: string, next: NewRefreshToken, now: number): Promise<boolean> {
    return write(this.db, 'refresh token', HIDDEN_TOKEN, async () => {
      const row = await this.db.get(
        `WITH used AS (
          UPDATE refresh_tokens SET used_at = ?, replaced_by = ?
            WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL RETURNING 1),
        inserted AS (
          INSERT INTO refresh_tokens (${REFRESH_TOKEN_COLUMNS})
            SELECT ?, ?, ?, ?, ?, ?::bigint, ?::bigint, ?, ?, ?::bigint, ? WHERE EXISTS (SELECT 1 FROM used)
            RETURNING 1)
        SELECT (SELECT count(*) FROM inserted) AS n`,
        now,
        next.tokenHash,
        String(tokenHash),
        ...refreshTokenValues(next),
      );
      return Number(row?.n) === 1;
    });
  }

  /** Closes the pool (waits up to 5 s for running queries). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#clients.stop();
    await this.#sql.end({ timeout: 5 });
  }
}
