/**
 * The {@link AuthStore} both databases share: every method runs the repository logic of `./sql/` (written
 * once over {@link SqlDriver}) on the driver its subclass opens — {@link SqliteAuthStore} (`./sqlite.ts`)
 * or {@link PostgresAuthStore} (`./postgres.ts`). A subclass adds what belongs to its database alone:
 * opening and migrating, the client cache's coherence (SQLite `PRAGMA data_version`, PostgreSQL change
 * notifications) and how writes of the hot path are committed ({@link SqlAuthStore.batched}).
 */
import { type FactorStore, SqlFactorStore } from './factors.ts';
import { type LinkStore, SqlLinkStore } from './links.ts';
import * as clients from './sql/clients.ts';
import { type ChangeKey, insertAudit, type SqlDriver, type StoreContext, write } from './sql/driver.ts';
import * as oauth from './sql/oauth.ts';
import * as roles from './sql/roles.ts';
import * as tokens from './sql/tokens.ts';
import * as users from './sql/users.ts';
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

/** A cache of client records in front of `getClient`; the store reports every client change to it. */
export interface ClientLookup {
  /**
   * The cached record of `clientId`, or `load()`'s answer (then cached). Returned records and their
   * arrays are frozen.
   */
  get(clientId: string, load: () => Promise<ClientRecord | undefined>): Promise<ClientRecord | undefined>;
  /** Drops one client's entry after a change of it made here, or every entry. */
  invalidate(clientId?: string): void;
}

/** See the module comment. */
export abstract class SqlAuthStore implements AuthStore {
  /** The database and the clock the repositories run on. */
  protected readonly ctx: StoreContext;
  readonly #clients: ClientLookup;
  /** Links to upstream provider accounts (`./links.ts`) over this database. */
  readonly links: LinkStore;
  /** Second factors (`./factors.ts`) over this database. */
  readonly factors: FactorStore;

  /** @param now clock for `createdAt` / `updatedAt` / audit times, ms epoch. */
  protected constructor(db: SqlDriver, now: () => number, clientCache: ClientLookup) {
    this.ctx = { db, now };
    this.#clients = clientCache;
    this.links = new SqlLinkStore(db);
    this.factors = new SqlFactorStore(db);
  }

  /** The database driver. */
  protected get db(): SqlDriver {
    return this.ctx.db;
  }

  /**
   * Runs a write of the token endpoint's hot path (`work` is atomic on the driver it gets): here at once,
   * mapping constraint errors naming `key.field`. The SQLite store commits the writes of one event-loop
   * turn together instead (group commit).
   */
  protected batched(
    entity: string,
    key: ChangeKey,
    work: (db: SqlDriver) => Promise<boolean>,
  ): Promise<boolean> {
    return write(this.db, entity, key, () => work(this.db));
  }

  // ── users and lockout ──
  createUser(input: NewUser, options?: ChangeOptions): Promise<UserRecord> {
    return users.createUser(this.ctx, input, options);
  }
  getUser(id: string): Promise<UserRecord | undefined> {
    return users.user(this.db, id);
  }
  findUserByName(userName: string): Promise<UserRecord | undefined> {
    return users.findUserByName(this.db, userName);
  }
  listUsers(query?: ListQuery): Promise<Page<UserRecord>> {
    return users.listUsers(this.db, query);
  }
  updateUser(id: string, patch: UserPatch, options?: ChangeOptions): Promise<UserRecord> {
    return users.updateUser(this.ctx, id, patch, options);
  }
  setPasswordHash(
    id: string,
    passwordHash: string,
    options?: ChangeOptions & { rotateStamp?: boolean },
  ): Promise<UserRecord> {
    return users.setPasswordHash(this.ctx, id, passwordHash, options);
  }
  lockUser(id: string, until: number, options?: ChangeOptions): Promise<UserRecord> {
    return users.lockUser(this.ctx, id, until, options);
  }
  unlockUser(id: string, options?: ChangeOptions): Promise<UserRecord> {
    return users.unlockUser(this.ctx, id, options);
  }
  deleteUser(id: string, options?: ChangeOptions): Promise<void> {
    return users.deleteUser(this.ctx, id, options);
  }
  getUserSubject(id: string): Promise<UserSubject | undefined> {
    return users.getUserSubject(this.db, id);
  }
  beginAccessAttempt(userId: string, now: number, maxFailures: number): Promise<AccessAttempt> {
    return users.beginAccessAttempt(this.db, userId, now, maxFailures);
  }
  failAccessAttempt(
    userId: string,
    attempt: number,
    now: number,
    maxFailures: number,
    lockoutMs: number,
  ): Promise<boolean> {
    return users.failAccessAttempt(this.db, userId, attempt, now, maxFailures, lockoutMs);
  }
  succeedAccessAttempt(userId: string): Promise<void> {
    return users.succeedAccessAttempt(this.db, userId);
  }

  // ── roles and permissions ──
  createRole(input: NewRole, options?: ChangeOptions): Promise<RoleRecord> {
    return roles.createRole(this.ctx, input, options);
  }
  getRole(id: string): Promise<RoleRecord | undefined> {
    return roles.role(this.db, id);
  }
  findRoleByName(name: string): Promise<RoleRecord | undefined> {
    return roles.findRoleByName(this.db, name);
  }
  listRoles(query?: ListQuery): Promise<Page<RoleRecord>> {
    return roles.listRoles(this.db, query);
  }
  updateRole(id: string, patch: RolePatch, options?: ChangeOptions): Promise<RoleRecord> {
    return roles.updateRole(this.ctx, id, patch, options);
  }
  deleteRole(id: string, options?: ChangeOptions): Promise<void> {
    return roles.deleteRole(this.ctx, id, options);
  }
  createPermission(input: NewPermission, options?: ChangeOptions): Promise<PermissionRecord> {
    return roles.createPermission(this.ctx, input, options);
  }
  getPermission(code: string): Promise<PermissionRecord | undefined> {
    return roles.getPermission(this.db, code);
  }
  listPermissions(query?: ListQuery): Promise<Page<PermissionRecord>> {
    return roles.listPermissions(this.db, query);
  }
  updatePermission(
    code: string,
    patch: { description?: string },
    options?: ChangeOptions,
  ): Promise<PermissionRecord> {
    return roles.updatePermission(this.ctx, code, patch, options);
  }
  deletePermission(code: string, options?: ChangeOptions): Promise<void> {
    return roles.deletePermission(this.ctx, code, options);
  }

  // ── clients and consent ──
  /** Runs a client change, then drops the client's cache entry. */
  #clientChange<T>(clientId: unknown, change: () => Promise<T>): Promise<T> {
    return change().finally(() =>
      this.#clients.invalidate(typeof clientId === 'string' ? clientId : undefined),
    );
  }
  createClient(input: NewClient, options?: ChangeOptions): Promise<ClientRecord> {
    return this.#clientChange(input?.clientId, () => clients.createClient(this.ctx, input, options));
  }
  /** Cached (see {@link ClientLookup}): the returned record and its arrays are frozen. */
  async getClient(clientId: string): Promise<ClientRecord | undefined> {
    if (typeof clientId !== 'string') return undefined;
    return this.#clients.get(clientId, () => clients.client(this.db, clientId));
  }
  listClients(query?: ListQuery): Promise<Page<ClientRecord>> {
    return clients.listClients(this.db, query);
  }
  updateClient(clientId: string, patch: ClientPatch, options?: ChangeOptions): Promise<ClientRecord> {
    return this.#clientChange(clientId, () => clients.updateClient(this.ctx, clientId, patch, options));
  }
  deleteClient(clientId: string, options?: ChangeOptions): Promise<void> {
    return this.#clientChange(clientId, () => clients.deleteClient(this.ctx, clientId, options));
  }
  setClientMetadata(
    clientId: string,
    metadata: ClientMetadata,
    options?: ChangeOptions,
  ): Promise<ClientRecord> {
    return this.#clientChange(clientId, () =>
      clients.setClientMetadata(this.ctx, clientId, metadata, options),
    );
  }
  setRegistrationAccessToken(clientId: string, tokenHash: string, now: number): Promise<void> {
    return clients.setRegistrationAccessToken(this.ctx, clientId, tokenHash, now);
  }
  findRegistrationAccessToken(clientId: string): Promise<string | undefined> {
    return clients.findRegistrationAccessToken(this.db, clientId);
  }
  getConsent(userId: string, clientId: string): Promise<ConsentRecord | undefined> {
    return clients.getConsent(this.db, userId, clientId);
  }
  grantConsent(
    userId: string,
    clientId: string,
    scopes: readonly string[],
    options?: ChangeOptions,
  ): Promise<ConsentRecord> {
    return clients.grantConsent(this.ctx, userId, clientId, scopes, options);
  }
  listConsents(query?: {
    userId?: string;
    clientId?: string;
    offset?: number;
    limit?: number;
  }): Promise<Page<ConsentRecord>> {
    return clients.listConsents(this.db, query);
  }
  revokeConsent(userId: string, clientId: string, options?: ChangeOptions): Promise<void> {
    return clients.revokeConsent(this.ctx, userId, clientId, options);
  }

  // ── audit ──
  appendAudit(event: NewAuditEvent): Promise<AuditEvent> {
    return insertAudit(this.db, event, this.ctx.now());
  }
  listAudit(query?: AuditQuery): Promise<Page<AuditEvent>> {
    return oauth.listAudit(this.db, query);
  }

  // ── token lifecycle ──
  insertRefreshToken(input: NewRefreshToken): Promise<RefreshTokenRecord> {
    return tokens.insertRefreshToken(this.db, input);
  }
  findRefreshToken(tokenHash: string): Promise<RefreshTokenRecord | undefined> {
    return tokens.findRefreshToken(this.db, tokenHash);
  }
  findRefreshTokenWithOwner(tokenHash: string): Promise<RefreshTokenWithOwner | undefined> {
    return tokens.findRefreshTokenWithOwner(this.db, tokenHash);
  }
  markRefreshTokenUsed(tokenHash: string, now: number, replacedBy: string | null): Promise<boolean> {
    return tokens.markRefreshTokenUsed(this.db, tokenHash, now, replacedBy);
  }
  /** Both statements of the rotation in one transaction, committed as {@link SqlAuthStore.batched} does. */
  rotateRefreshToken(tokenHash: string, next: NewRefreshToken, now: number): Promise<boolean> {
    const hash = String(tokenHash);
    return this.batched('refresh token', tokens.HIDDEN_TOKEN, (db) =>
      db.transaction((t) => tokens.rotateRefreshToken(t, hash, next, now)),
    );
  }
  revokeRefreshToken(tokenHash: string, now: number): Promise<boolean> {
    return tokens.revokeRefreshToken(this.db, tokenHash, now);
  }
  revokeRefreshTokenFamily(familyId: string, now: number): Promise<number> {
    return tokens.revokeUsableFamilyTokens(this.db, familyId, now);
  }
  revokeUserRefreshTokens(userId: string, now: number): Promise<number> {
    return tokens.revokeRefreshTokensBy(this.db, 'user_id', userId, now);
  }
  insertAuthorizationCode(input: NewAuthorizationCode): Promise<AuthorizationCodeRecord> {
    return tokens.insertAuthorizationCode(this.db, input);
  }
  findAuthorizationCode(codeHash: string): Promise<AuthorizationCodeRecord | undefined> {
    return tokens.findAuthorizationCode(this.db, codeHash);
  }
  consumeAuthorizationCode(codeHash: string, now: number): Promise<AuthorizationCodeRecord | undefined> {
    return tokens.consumeAuthorizationCode(this.db, codeHash, now);
  }
  insertSigningKey(input: NewSigningKey): Promise<SigningKeyRecord> {
    return tokens.insertSigningKey(this.ctx, input);
  }
  listSigningKeys(options: { includeRetired?: boolean; now?: number } = {}): Promise<SigningKeyRecord[]> {
    return tokens.listSigningKeys(this.db, options.includeRetired === true, options.now ?? this.ctx.now());
  }
  retireSigningKey(kid: string, at: number, expiresAt: number | null): Promise<void> {
    return tokens.retireSigningKey(this.ctx, kid, at, expiresAt);
  }
  createLoginSession(input: NewLoginSession): Promise<LoginSessionRecord> {
    return tokens.createLoginSession(this.db, input);
  }
  getLoginSession(sessionHash: string): Promise<LoginSessionRecord | undefined> {
    return tokens.getLoginSession(this.db, sessionHash);
  }
  revokeLoginSession(sessionHash: string, now: number): Promise<boolean> {
    return tokens.revokeLoginSession(this.db, sessionHash, now);
  }
  findLoginSessionBySid(sid: string): Promise<LoginSessionRecord | undefined> {
    return tokens.findLoginSessionBySid(this.db, sid);
  }
  endLoginSession(sessionHash: string, now: number): Promise<number> {
    return tokens.endLoginSession(this.ctx, sessionHash, now);
  }
  addSessionClient(sid: string, clientId: string, now: number): Promise<void> {
    return tokens.addSessionClient(this.db, sid, clientId, now);
  }
  listSessionClients(sid: string): Promise<ClientRecord[]> {
    return clients.listSessionClients(this.db, sid);
  }
  purgeExpired(now: number): Promise<number> {
    return oauth.purgeExpired(this.ctx, now);
  }

  // ── OAuth extensions ──
  insertDeviceCode(
    input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
  ): Promise<DeviceCodeRecord> {
    return oauth.insertDeviceCode(this.db, input);
  }
  findDeviceCodeByUserCode(userCode: string): Promise<DeviceCodeRecord | undefined> {
    return oauth.findDeviceCodeByUserCode(this.db, userCode);
  }
  pollDeviceCode(
    deviceCodeHash: string,
    now: number,
  ): Promise<{ record: DeviceCodeRecord; slowDown: boolean } | undefined> {
    return oauth.pollDeviceCode(this.ctx, deviceCodeHash, now);
  }
  decideDeviceCode(userCode: string, approved: boolean, userId: string, now: number): Promise<boolean> {
    return oauth.decideDeviceCode(this.db, userCode, approved, userId, now);
  }
  consumeDeviceCode(deviceCodeHash: string): Promise<boolean> {
    return oauth.consumeDeviceCode(this.db, deviceCodeHash);
  }
  insertPushedRequest(input: Omit<PushedRequestRecord, 'usedAt'>): Promise<PushedRequestRecord> {
    return oauth.insertPushedRequest(this.db, input);
  }
  findPushedRequest(requestHash: string): Promise<PushedRequestRecord | undefined> {
    return oauth.findPushedRequest(this.db, requestHash);
  }
  consumePushedRequest(requestHash: string, now: number): Promise<boolean> {
    return oauth.consumePushedRequest(this.db, requestHash, now);
  }
  /** One statement, committed as {@link SqlAuthStore.batched} does. */
  claimReplayKey(kind: string, key: string, expiresAt: number, now: number): Promise<boolean> {
    const kindText = String(kind);
    const keyText = String(key);
    return this.batched('replay key', { field: 'key', value: '…' }, (db) =>
      oauth.claimReplayKey(db, kindText, keyText, expiresAt, now),
    );
  }

  /** Closes the database. */
  abstract close(): Promise<void>;
}
