/**
 * PostgreSQL implementation of {@link AuthStore} on the `postgres` driver: several auth server
 * instances share one database, and every guarantee of the store holds across them because it is enforced
 * by the database, not by process memory — lockout counting, refresh-token rotation and reuse detection,
 * single-use codes and pushed requests, the replay cache, login sessions, signing keys.
 *
 * Open it with {@link PostgresAuthStore.open}: it connects (a pool of `maxConnections`) and applies the
 * pending migrations under an advisory lock (`./postgres/schema.ts`), so instances may start together.
 * The work is split by area: `./postgres/users.ts`, `roles.ts`, `clients.ts`, `tokens.ts`, `oauth.ts`;
 * rows and input validation are shared with the SQLite store (`./rows.ts`, `./inputs.ts`).
 */
import postgres from 'postgres';
import type { PgQueryClient } from '../ratelimit.ts';
import { type FactorStore, SqlFactorStore, type SqlRunner } from './factors.ts';
import { type LinkStore, SqlLinkStore } from './links.ts';
import { ClientCache } from './postgres/client-cache.ts';
import * as clients from './postgres/clients.ts';
import { all, get, insertAudit, type PgContext, run } from './postgres/db.ts';
import * as oauth from './postgres/oauth.ts';
import * as roles from './postgres/roles.ts';
import { CLIENTS_CHANNEL, migrate, PG_MIGRATIONS } from './postgres/schema.ts';
import * as tokens from './postgres/tokens.ts';
import * as users from './postgres/users.ts';
import type {
  AccessAttempt,
  AuditEvent,
  AuditQuery,
  AuthorizationCodeRecord,
  AuthStore,
  ChangeOptions,
  ClientMetadata,
  ClientPatch,
  ClientRecord,
  ConsentRecord,
  DeviceCodeRecord,
  ListQuery,
  LoginSessionRecord,
  NewAuditEvent,
  NewAuthorizationCode,
  NewClient,
  NewLoginSession,
  NewPermission,
  NewRefreshToken,
  NewRole,
  NewSigningKey,
  NewUser,
  Page,
  PermissionRecord,
  PushedRequestRecord,
  RefreshTokenRecord,
  RefreshTokenWithOwner,
  RolePatch,
  RoleRecord,
  SigningKeyRecord,
  UserPatch,
  UserRecord,
  UserSubject,
} from './types.ts';

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
export class PostgresAuthStore implements AuthStore {
  readonly #sql: postgres.Sql;
  readonly #ctx: PgContext;
  readonly #clients: ClientCache;
  /** Second factors (`./factors.ts`) over this pool. */
  readonly factors: FactorStore;
  #closed = false;
  /** Links to upstream provider accounts (`./links.ts`) over this pool. */
  readonly links: LinkStore;

  private constructor(sql: postgres.Sql, now: () => number, clientCacheTtlMs: number) {
    this.#sql = sql;
    this.#ctx = { sql, now };
    this.#clients = new ClientCache(clientCacheTtlMs);
    const db: SqlRunner = {
      get: (text, ...params) => get(sql, text, ...params),
      all: (text, ...params) => all(sql, text, ...params),
      run: (text, ...params) => run(sql, text, ...params),
    };
    this.links = new SqlLinkStore(db);
    this.factors = new SqlFactorStore(db);
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
    const sql = postgres(url, { max, onnotice: () => {}, connection: { application_name: 'seed-auth' } });
    const ttl = options.clientCacheTtlMs ?? 5000;
    if (!Number.isSafeInteger(ttl) || ttl < 0)
      throw new RangeError('clientCacheTtlMs: non-negative integer (ms)');
    const store = new PostgresAuthStore(sql, options.now ?? Date.now, ttl);
    try {
      await migrate(sql, store.#ctx.now);
      if (ttl > 0) {
        await sql.listen(
          CLIENTS_CHANNEL,
          (clientId) => store.#clients.invalidate(clientId),
          () => store.#clients.listening(),
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
    const handle = await this.#sql.listen(tokens.SIGNING_KEYS_CHANNEL, () => listener());
    return () => handle.unlisten();
  }

  // ── users and lockout ──
  createUser(input: NewUser, options?: ChangeOptions): Promise<UserRecord> {
    return users.createUser(this.#ctx, input, options);
  }
  getUser(id: string): Promise<UserRecord | undefined> {
    return users.user(this.#sql, String(id));
  }
  findUserByName(userName: string): Promise<UserRecord | undefined> {
    return users.findUserByName(this.#sql, userName);
  }
  listUsers(query?: ListQuery): Promise<Page<UserRecord>> {
    return users.listUsers(this.#sql, query);
  }
  updateUser(id: string, patch: UserPatch, options?: ChangeOptions): Promise<UserRecord> {
    return users.updateUser(this.#ctx, id, patch, options);
  }
  setPasswordHash(
    id: string,
    passwordHash: string,
    options?: ChangeOptions & { rotateStamp?: boolean },
  ): Promise<UserRecord> {
    return users.setPasswordHash(this.#ctx, id, passwordHash, options);
  }
  lockUser(id: string, until: number, options?: ChangeOptions): Promise<UserRecord> {
    return users.lockUser(this.#ctx, id, until, options);
  }
  unlockUser(id: string, options?: ChangeOptions): Promise<UserRecord> {
    return users.unlockUser(this.#ctx, id, options);
  }
  deleteUser(id: string, options?: ChangeOptions): Promise<void> {
    return users.deleteUser(this.#ctx, id, options);
  }
  getUserSubject(id: string): Promise<UserSubject | undefined> {
    return users.getUserSubject(this.#ctx, id);
  }
  beginAccessAttempt(userId: string, now: number, maxFailures: number): Promise<AccessAttempt> {
    return users.beginAccessAttempt(this.#sql, userId, now, maxFailures);
  }
  failAccessAttempt(
    userId: string,
    attempt: number,
    now: number,
    maxFailures: number,
    lockoutMs: number,
  ): Promise<boolean> {
    return users.failAccessAttempt(this.#sql, userId, attempt, now, maxFailures, lockoutMs);
  }
  succeedAccessAttempt(userId: string): Promise<void> {
    return users.succeedAccessAttempt(this.#sql, userId);
  }

  // ── roles and permissions ──
  createRole(input: NewRole, options?: ChangeOptions): Promise<RoleRecord> {
    return roles.createRole(this.#ctx, input, options);
  }
  getRole(id: string): Promise<RoleRecord | undefined> {
    return roles.role(this.#sql, String(id));
  }
  findRoleByName(name: string): Promise<RoleRecord | undefined> {
    return roles.findRoleByName(this.#sql, name);
  }
  listRoles(query?: ListQuery): Promise<Page<RoleRecord>> {
    return roles.listRoles(this.#sql, query);
  }
  updateRole(id: string, patch: RolePatch, options?: ChangeOptions): Promise<RoleRecord> {
    return roles.updateRole(this.#ctx, id, patch, options);
  }
  deleteRole(id: string, options?: ChangeOptions): Promise<void> {
    return roles.deleteRole(this.#ctx, id, options);
  }
  createPermission(input: NewPermission, options?: ChangeOptions): Promise<PermissionRecord> {
    return roles.createPermission(this.#ctx, input, options);
  }
  getPermission(code: string): Promise<PermissionRecord | undefined> {
    return roles.getPermission(this.#sql, code);
  }
  listPermissions(query?: ListQuery): Promise<Page<PermissionRecord>> {
    return roles.listPermissions(this.#sql, query);
  }
  updatePermission(
    code: string,
    patch: { description?: string },
    options?: ChangeOptions,
  ): Promise<PermissionRecord> {
    return roles.updatePermission(this.#ctx, code, patch, options);
  }
  deletePermission(code: string, options?: ChangeOptions): Promise<void> {
    return roles.deletePermission(this.#ctx, code, options);
  }

  // ── clients and consent ──
  /** Runs a client change, then drops the client's cache entry (other instances hear the trigger). */
  #clientChange<T>(clientId: unknown, change: Promise<T>): Promise<T> {
    return change.finally(() =>
      this.#clients.invalidate(typeof clientId === 'string' ? clientId : undefined),
    );
  }
  createClient(input: NewClient, options?: ChangeOptions): Promise<ClientRecord> {
    return this.#clientChange(input?.clientId, clients.createClient(this.#ctx, input, options));
  }
  /** Cached (see `./postgres/client-cache.ts`): the returned record and its arrays are frozen. */
  getClient(clientId: string): Promise<ClientRecord | undefined> {
    if (typeof clientId !== 'string') return Promise.resolve(undefined);
    return this.#clients.get(clientId, () => clients.client(this.#sql, clientId));
  }
  listClients(query?: ListQuery): Promise<Page<ClientRecord>> {
    return clients.listClients(this.#sql, query);
  }
  updateClient(clientId: string, patch: ClientPatch, options?: ChangeOptions): Promise<ClientRecord> {
    return this.#clientChange(clientId, clients.updateClient(this.#ctx, clientId, patch, options));
  }
  deleteClient(clientId: string, options?: ChangeOptions): Promise<void> {
    return this.#clientChange(clientId, clients.deleteClient(this.#ctx, clientId, options));
  }
  setClientMetadata(
    clientId: string,
    metadata: ClientMetadata,
    options?: ChangeOptions,
  ): Promise<ClientRecord> {
    return this.#clientChange(clientId, clients.setClientMetadata(this.#ctx, clientId, metadata, options));
  }
  setRegistrationAccessToken(clientId: string, tokenHash: string, now: number): Promise<void> {
    return clients.setRegistrationAccessToken(this.#ctx, clientId, tokenHash, now);
  }
  findRegistrationAccessToken(clientId: string): Promise<string | undefined> {
    return clients.findRegistrationAccessToken(this.#sql, clientId);
  }
  getConsent(userId: string, clientId: string): Promise<ConsentRecord | undefined> {
    return clients.getConsent(this.#sql, userId, clientId);
  }
  grantConsent(
    userId: string,
    clientId: string,
    scopes: readonly string[],
    options?: ChangeOptions,
  ): Promise<ConsentRecord> {
    return clients.grantConsent(this.#ctx, userId, clientId, scopes, options);
  }
  listConsents(query?: {
    userId?: string;
    clientId?: string;
    offset?: number;
    limit?: number;
  }): Promise<Page<ConsentRecord>> {
    return clients.listConsents(this.#sql, query);
  }
  revokeConsent(userId: string, clientId: string, options?: ChangeOptions): Promise<void> {
    return clients.revokeConsent(this.#ctx, userId, clientId, options);
  }

  // ── audit ──
  appendAudit(event: NewAuditEvent): Promise<AuditEvent> {
    return insertAudit(this.#sql, event, this.#ctx.now());
  }
  listAudit(query?: AuditQuery): Promise<Page<AuditEvent>> {
    return oauth.listAudit(this.#sql, query);
  }

  // ── token lifecycle ──
  insertRefreshToken(input: NewRefreshToken): Promise<RefreshTokenRecord> {
    return tokens.insertRefreshToken(this.#sql, input);
  }
  findRefreshToken(tokenHash: string): Promise<RefreshTokenRecord | undefined> {
    return tokens.findRefreshToken(this.#sql, tokenHash);
  }
  findRefreshTokenWithOwner(tokenHash: string): Promise<RefreshTokenWithOwner | undefined> {
    return tokens.findRefreshTokenWithOwner(this.#sql, tokenHash);
  }
  markRefreshTokenUsed(tokenHash: string, now: number, replacedBy: string | null): Promise<boolean> {
    return tokens.markRefreshTokenUsed(this.#sql, tokenHash, now, replacedBy);
  }
  rotateRefreshToken(tokenHash: string, next: NewRefreshToken, now: number): Promise<boolean> {
    return tokens.rotateRefreshToken(this.#sql, tokenHash, next, now);
  }
  revokeRefreshToken(tokenHash: string, now: number): Promise<boolean> {
    return tokens.revokeRefreshToken(this.#sql, tokenHash, now);
  }
  revokeRefreshTokenFamily(familyId: string, now: number): Promise<number> {
    return tokens.revokeUsableFamilyTokens(this.#sql, familyId, now);
  }
  revokeUserRefreshTokens(userId: string, now: number): Promise<number> {
    return tokens.revokeRefreshTokensBy(this.#sql, 'user_id', userId, now);
  }
  insertAuthorizationCode(input: NewAuthorizationCode): Promise<AuthorizationCodeRecord> {
    return tokens.insertAuthorizationCode(this.#sql, input);
  }
  findAuthorizationCode(codeHash: string): Promise<AuthorizationCodeRecord | undefined> {
    return tokens.findAuthorizationCode(this.#sql, codeHash);
  }
  consumeAuthorizationCode(codeHash: string, now: number): Promise<AuthorizationCodeRecord | undefined> {
    return tokens.consumeAuthorizationCode(this.#sql, codeHash, now);
  }
  insertSigningKey(input: NewSigningKey): Promise<SigningKeyRecord> {
    return tokens.insertSigningKey(this.#ctx, input);
  }
  listSigningKeys(options: { includeRetired?: boolean; now?: number } = {}): Promise<SigningKeyRecord[]> {
    return tokens.listSigningKeys(this.#sql, options.includeRetired === true, options.now ?? this.#ctx.now());
  }
  retireSigningKey(kid: string, at: number, expiresAt: number | null): Promise<void> {
    return tokens.retireSigningKey(this.#ctx, kid, at, expiresAt);
  }
  createLoginSession(input: NewLoginSession): Promise<LoginSessionRecord> {
    return tokens.createLoginSession(this.#sql, input);
  }
  getLoginSession(sessionHash: string): Promise<LoginSessionRecord | undefined> {
    return tokens.getLoginSession(this.#sql, sessionHash);
  }
  revokeLoginSession(sessionHash: string, now: number): Promise<boolean> {
    return tokens.revokeLoginSession(this.#sql, sessionHash, now);
  }
  findLoginSessionBySid(sid: string): Promise<LoginSessionRecord | undefined> {
    return tokens.findLoginSessionBySid(this.#sql, sid);
  }
  endLoginSession(sessionHash: string, now: number): Promise<number> {
    return tokens.endLoginSession(this.#ctx, sessionHash, now);
  }
  addSessionClient(sid: string, clientId: string, now: number): Promise<void> {
    return tokens.addSessionClient(this.#sql, sid, clientId, now);
  }
  listSessionClients(sid: string): Promise<ClientRecord[]> {
    return clients.listSessionClients(this.#sql, sid);
  }
  purgeExpired(now: number): Promise<number> {
    return oauth.purgeExpired(this.#ctx, now);
  }

  // ── OAuth extensions ──
  insertDeviceCode(
    input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
  ): Promise<DeviceCodeRecord> {
    return oauth.insertDeviceCode(this.#sql, input);
  }
  findDeviceCodeByUserCode(userCode: string): Promise<DeviceCodeRecord | undefined> {
    return oauth.findDeviceCodeByUserCode(this.#sql, userCode);
  }
  pollDeviceCode(
    deviceCodeHash: string,
    now: number,
  ): Promise<{ record: DeviceCodeRecord; slowDown: boolean } | undefined> {
    return oauth.pollDeviceCode(this.#ctx, deviceCodeHash, now);
  }
  decideDeviceCode(userCode: string, approved: boolean, userId: string, now: number): Promise<boolean> {
    return oauth.decideDeviceCode(this.#sql, userCode, approved, userId, now);
  }
  consumeDeviceCode(deviceCodeHash: string): Promise<boolean> {
    return oauth.consumeDeviceCode(this.#sql, deviceCodeHash);
  }
  insertPushedRequest(input: Omit<PushedRequestRecord, 'usedAt'>): Promise<PushedRequestRecord> {
    return oauth.insertPushedRequest(this.#sql, input);
  }
  findPushedRequest(requestHash: string): Promise<PushedRequestRecord | undefined> {
    return oauth.findPushedRequest(this.#sql, requestHash);
  }
  consumePushedRequest(requestHash: string, now: number): Promise<boolean> {
    return oauth.consumePushedRequest(this.#sql, requestHash, now);
  }
  claimReplayKey(kind: string, key: string, expiresAt: number, now: number): Promise<boolean> {
    return oauth.claimReplayKey(this.#sql, kind, key, expiresAt, now);
  }

  /** Closes the pool (waits up to 5 s for running queries). Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#clients.stop();
    await this.#sql.end({ timeout: 5 });
  }
}
