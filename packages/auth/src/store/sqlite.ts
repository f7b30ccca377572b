/**
 * Embedded SQLite implementation of {@link AuthStore} on `node:sqlite` (issue 4 "Storage").
 *
 * One database file (WAL journal, foreign keys on, busy timeout) or `':memory:'` for tests. Schema changes
 * are the versioned {@link MIGRATIONS}. Uniqueness is enforced by UNIQUE / PRIMARY KEY constraints and the
 * constraint error is translated to `ConflictError` — never read-then-write. Each mutating method runs in
 * one `BEGIN IMMEDIATE` transaction.
 */
import { randomUUID } from 'node:crypto';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import { ConflictError, ConstraintError, NotFoundError, ValidationError } from '../errors.ts';
import { normalizePermissionCode } from '../permissions.ts';
import { clientMetadata } from './client-metadata.ts';
import {
  auditFilter,
  auditValues,
  type ClientOidcValues,
  checkRoleUpdate,
  clientPatchValues,
  clientSecret,
  likePattern,
  newClientValues,
  newRoleValues,
  newStamp,
  newUserValues,
  paging,
  rolePatchValues,
  userPatchValues,
} from './inputs.ts';
import { MIGRATIONS } from './migrations.ts';
import {
  json,
  num,
  toAudit,
  toClient,
  toCode,
  toConsent,
  toDeviceCode,
  toKey,
  toPushedRequest,
  toRefresh,
  toRefreshWithOwner,
  toRole,
  toSession,
  toUser,
} from './rows.ts';
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
import * as v from './validation.ts';

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

type Row = Record<string, SQLInputValue>;

/** Entries of the client cache (clients and misses); it is emptied when full. */
const CLIENT_CACHE_LIMIT = 1024;

const SQLITE_CONSTRAINT_UNIQUE = 2067;
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
/** The checkpoint worker's module: `.ts` when running from source, `.js` from the published build. */
const CHECKPOINTER_MODULE = import.meta.url.endsWith('.ts') ? './checkpointer.ts' : './checkpointer.js';
const SQLITE_CONSTRAINT_FOREIGNKEY = 787;

const INSERT_REFRESH_TOKEN = `INSERT INTO refresh_tokens (token_hash, family_id, client_id, user_id, scope,
  created_at, expires_at, dpop_jkt, session_id, auth_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** The values of {@link INSERT_REFRESH_TOKEN}, in its column order. */
function refreshTokenValues(input: NewRefreshToken): SQLInputValue[] {
  return [
    input.tokenHash,
    input.familyId,
    input.clientId,
    input.userId ?? null,
    input.scope ?? '',
    input.createdAt,
    input.expiresAt,
    input.dpopJkt ?? null,
    input.sessionId ?? null,
    input.authTime ?? null,
  ];
}

/** Clients with their OAuth extension metadata (`metadata`, JSON or null); alias `c`. */
const CLIENT_SELECT =
  'SELECT c.*, m.metadata FROM clients c LEFT JOIN client_metadata m ON m.client_id = c.client_id';

/** Marks an unused, unrevoked refresh token used; parameters: used_at, replaced_by, token_hash. */
const MARK_REFRESH_TOKEN_USED = `UPDATE refresh_tokens SET used_at = ?, replaced_by = ?
  WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL`;

/** Roles with their parent role names (`parent_roles`, a JSON array); alias `r`. */
const ROLE_SELECT = `SELECT r.*, (SELECT json_group_array(p.name) FROM role_parents rp JOIN roles p ON p.id = rp.parent_id
  WHERE rp.role_id = r.id) AS parent_roles FROM roles r`;

/**
 * Ids of the roles a user holds and, transitively, their parents (`UNION` stops at roles already seen, so
 * the query ends even on a cyclic graph). One parameter: the user id.
 */
const USER_ROLE_CLOSURE = `WITH RECURSIVE held(id) AS (
  SELECT role_id FROM user_roles WHERE user_id = ?
  UNION SELECT rp.parent_id FROM role_parents rp JOIN held ON rp.role_id = held.id)`;

const USER_SELECT = `SELECT u.*, (SELECT json_group_array(r.name) FROM user_roles ur JOIN roles r ON r.id = ur.role_id
  WHERE ur.user_id = u.id) AS roles FROM users u`;

interface SqliteError {
  errcode?: number;
  message: string;
}

/** Maps SQLite constraint errors to `ConflictError` / `ConstraintError`; returns other errors unchanged. */
function constraintError(entity: string, field: string, value: string, error: unknown): unknown {
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

/** The default {@link AuthStore}: SQLite through `node:sqlite`. Synchronous inside, async at the interface. */
export class SqliteAuthStore implements AuthStore {
  readonly #db: DatabaseSync;
  readonly #now: () => number;
  readonly #statements = new Map<string, StatementSync>();
  /**
   * Parsed client records (and misses) by id for {@link SqliteAuthStore.getClient}, the token endpoint's
   * per-request lookup. Valid while `PRAGMA data_version` is unchanged (it changes when another connection
   * commits) and cleared by this store's own client writes.
   */
  readonly #clientCache = new Map<string, ClientRecord | undefined>();
  #clientCacheVersion: number | undefined;
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
    this.#db = new DatabaseSync(path, {
      enableForeignKeyConstraints: true,
      timeout: options.busyTimeoutMs ?? 5000,
    });
    this.#now = options.now ?? Date.now;
    if (path !== ':memory:') {
      this.#db.exec('PRAGMA journal_mode = WAL');
      this.#db.exec('PRAGMA synchronous = NORMAL');
      const pages = options.walAutocheckpointPages;
      if (pages !== undefined) {
        if (!Number.isSafeInteger(pages) || pages < 1)
          throw new RangeError('walAutocheckpointPages: positive integer');
        this.#db.exec(`PRAGMA wal_autocheckpoint = ${pages}`);
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
    return this.#db
      .prepare('SELECT version FROM schema_migrations ORDER BY version')
      .all()
      .map((row) => Number(row.version));
  }

  /** The SQLite journal mode in effect (`wal` for files, `memory` for `:memory:`). */
  journalMode(): string {
    return String(this.#db.prepare('PRAGMA journal_mode').get()?.journal_mode);
  }

  #migrate(): void {
    this.#db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`);
    const applied = new Set(this.appliedMigrations());
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      this.#tx(() => {
        this.#db.exec(migration.sql);
        this.#db
          .prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
          .run(migration.version, migration.name, this.#now());
      });
    }
  }

  #stmt(sql: string): StatementSync {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  #get(sql: string, ...params: SQLInputValue[]): Row | undefined {
    return this.#stmt(sql).get(...params) as Row | undefined;
  }

  /** The first row of `sql` as a record (`map`), or `undefined` when there is none. */
  #getAs<T>(map: (row: Row) => T, sql: string, ...params: SQLInputValue[]): T | undefined {
    const row = this.#get(sql, ...params);
    return row ? map(row) : undefined;
  }

  #all(sql: string, ...params: SQLInputValue[]): Row[] {
    return this.#stmt(sql).all(...params) as Row[];
  }

  #run(sql: string, ...params: SQLInputValue[]): number {
    return Number(this.#stmt(sql).run(...params).changes);
  }

  #tx<T>(fn: () => T): T {
    // Prepared once (not re-parsed by exec() on every transaction).
    this.#stmt('BEGIN IMMEDIATE').run();
    try {
      const result = fn();
      this.#stmt('COMMIT').run();
      return result;
    } catch (error) {
      this.#stmt('ROLLBACK').run();
      throw error;
    }
  }

  /** Runs a change in one transaction, writes the optional audit event in it, and maps constraint errors. */
  #change<T>(
    entity: string,
    key: { field: string; value: string },
    options: ChangeOptions | undefined,
    fn: () => T,
  ): T {
    try {
      return this.#tx(() => {
        const result = fn();
        if (options?.audit) this.#insertAudit(options.audit);
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
  #page<T>(
    query: ListQuery | undefined,
    sql: { table: string; select: string; search: string; order: string },
    map: (row: Row) => T,
  ): Page<T> {
    const { offset, limit } = paging(query);
    const like = likePattern(query?.search);
    const where = `WHERE ${sql.search} LIKE ? ESCAPE '\\'`;
    const total = Number(this.#get(`SELECT count(*) AS n FROM ${sql.table} ${where}`, like)?.n);
    const items = this.#all(
      `${sql.select} ${where} ORDER BY ${sql.order} LIMIT ? OFFSET ?`,
      like,
      limit,
      offset,
    );
    return { items: items.map(map), total };
  }

  // ── users ──

  #roleIds(names: readonly string[], field: string): string[] {
    return names.map((name, i) => {
      const row = this.#get('SELECT id FROM roles WHERE name_key = ?', v.nameKey(name));
      if (!row)
        throw new ValidationError(
          `${field}[${i}]`,
          'unknown_role',
          `${field}[${i}]: role '${name}' does not exist`,
        );
      return String(row.id);
    });
  }

  #setUserRoles(userId: string, roleIds: readonly string[]): void {
    this.#run('DELETE FROM user_roles WHERE user_id = ?', userId);
    for (const roleId of roleIds)
      this.#run('INSERT INTO user_roles (user_id, role_id) VALUES (?, ?)', userId, roleId);
  }

  #user(id: string): UserRecord | undefined {
    return this.#getAs(toUser, `${USER_SELECT} WHERE u.id = ?`, id);
  }

  #requireUser(id: string): UserRecord {
    const user = this.#user(id);
    if (!user) throw new NotFoundError('user', id);
    return user;
  }

  async createUser(input: NewUser, options?: ChangeOptions): Promise<UserRecord> {
    const { userName, isEnabled, roles, direct, denied, passwordHash, profile } = newUserValues(input);
    const id = randomUUID();
    const now = this.#now();
    return this.#change('user', { field: 'userName', value: userName }, options, () => {
      const roleIds = this.#roleIds(roles, 'roles');
      this.#run(
        `INSERT INTO users (id, user_name, user_name_key, password_hash, is_enabled, security_stamp,
          direct_permissions, denied_permissions, created_at, updated_at, display_name, given_name, family_name,
          email, email_verified) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        id,
        userName,
        v.nameKey(userName),
        passwordHash,
        isEnabled ? 1 : 0,
        newStamp(),
        JSON.stringify(direct),
        JSON.stringify(denied),
        now,
        now,
        profile.displayName ?? null,
        profile.givenName ?? null,
        profile.familyName ?? null,
        profile.email ?? null,
        profile.emailVerified ? 1 : 0,
      );
      this.#setUserRoles(id, roleIds);
      return this.#requireUser(id);
    });
  }

  async getUser(id: string): Promise<UserRecord | undefined> {
    return this.#user(String(id));
  }

  async findUserByName(userName: string): Promise<UserRecord | undefined> {
    if (typeof userName !== 'string') return undefined;
    return this.#getAs(toUser, `${USER_SELECT} WHERE u.user_name_key = ?`, v.nameKey(userName.trim()));
  }

  async listUsers(query?: ListQuery): Promise<Page<UserRecord>> {
    const key = 'u.user_name_key';
    return this.#page(query, { table: 'users u', select: USER_SELECT, search: key, order: key }, toUser);
  }

  async updateUser(id: string, patch: UserPatch, options?: ChangeOptions): Promise<UserRecord> {
    const { userName, isEnabled, roles, direct, denied, profile } = userPatchValues(patch);
    return this.#change('user', { field: 'userName', value: userName ?? '' }, options, () => {
      const current = this.#requireUser(id);
      const roleIds = roles === undefined ? undefined : this.#roleIds(roles, 'roles');
      const disabling = isEnabled === false && current.isEnabled;
      const name = userName ?? current.userName;
      const keep = <T>(value: T | undefined, old: T) => (value === undefined ? old : value);
      this.#run(
        `UPDATE users SET display_name = ?, given_name = ?, family_name = ?, email = ?, email_verified = ?
          WHERE id = ?`,
        keep(profile.displayName, current.displayName),
        keep(profile.givenName, current.givenName),
        keep(profile.familyName, current.familyName),
        keep(profile.email, current.email),
        keep(profile.emailVerified, current.emailVerified) ? 1 : 0,
        id,
      );
      this.#run(
        `UPDATE users SET user_name = ?, user_name_key = ?, is_enabled = ?, direct_permissions = ?,
          denied_permissions = ?, security_stamp = ?, version = version + 1, updated_at = ? WHERE id = ?`,
        name,
        v.nameKey(name),
        (isEnabled ?? current.isEnabled) ? 1 : 0,
        JSON.stringify(direct ?? current.directPermissions),
        JSON.stringify(denied ?? current.deniedPermissions),
        disabling ? newStamp() : current.securityStamp,
        this.#now(),
        id,
      );
      if (roleIds) this.#setUserRoles(id, roleIds);
      return this.#requireUser(id);
    });
  }

  async setPasswordHash(
    id: string,
    passwordHash: string,
    options?: ChangeOptions & { rotateStamp?: boolean },
  ): Promise<UserRecord> {
    if (typeof passwordHash !== 'string' || passwordHash.length === 0) {
      throw new ValidationError('passwordHash', 'required');
    }
    const rotate = options?.rotateStamp ?? true;
    return this.#change('user', { field: 'id', value: id }, options, () => {
      const current = this.#requireUser(id);
      this.#run(
        'UPDATE users SET password_hash = ?, security_stamp = ?, version = version + 1, updated_at = ? WHERE id = ?',
        passwordHash,
        rotate ? newStamp() : current.securityStamp,
        this.#now(),
        id,
      );
      return this.#requireUser(id);
    });
  }

  async lockUser(id: string, until: number, options?: ChangeOptions): Promise<UserRecord> {
    if (!Number.isFinite(until))
      throw new ValidationError('lockoutEnd', 'timestamp', 'lockoutEnd: ms epoch number');
    return this.#change('user', { field: 'id', value: id }, options, () => {
      this.#requireUser(id);
      this.#run(
        `UPDATE users SET lockout_end = ?, access_failed_count = 0, security_stamp = ?, version = version + 1,
          updated_at = ? WHERE id = ?`,
        Math.trunc(until),
        newStamp(),
        this.#now(),
        id,
      );
      return this.#requireUser(id);
    });
  }

  async unlockUser(id: string, options?: ChangeOptions): Promise<UserRecord> {
    return this.#change('user', { field: 'id', value: id }, options, () => {
      this.#requireUser(id);
      this.#run(
        'UPDATE users SET lockout_end = NULL, access_failed_count = 0, version = version + 1, updated_at = ? WHERE id = ?',
        this.#now(),
        id,
      );
      return this.#requireUser(id);
    });
  }

  async deleteUser(id: string, options?: ChangeOptions): Promise<void> {
    this.#change('user', { field: 'id', value: id }, options, () => {
      if (this.#run('DELETE FROM users WHERE id = ?', id) === 0) throw new NotFoundError('user', id);
    });
  }

  async getUserSubject(id: string): Promise<UserSubject | undefined> {
    const user = this.#user(String(id));
    if (!user) return undefined;
    const roles = this.#all(
      `${USER_ROLE_CLOSURE} ${ROLE_SELECT} WHERE r.id IN (SELECT id FROM held) ORDER BY r.name_key`,
      user.id,
    ).map(toRole);
    return { user, roles };
  }

  // ── lockout ──

  async beginAccessAttempt(userId: string, now: number, maxFailures: number): Promise<AccessAttempt> {
    const row = this.#get(
      `UPDATE users SET access_failed_count = access_failed_count + 1, lockout_end = NULL
        WHERE id = ? AND (lockout_end IS NULL OR lockout_end <= ?) AND access_failed_count < ?
        RETURNING access_failed_count`,
      userId,
      now,
      maxFailures,
    );
    if (row) return { allowed: true, attempt: Number(row.access_failed_count), lockoutEnd: null };
    const current = this.#get('SELECT lockout_end FROM users WHERE id = ?', userId);
    return { allowed: false, attempt: 0, lockoutEnd: current ? num(current.lockout_end) : null };
  }

  async failAccessAttempt(
    userId: string,
    attempt: number,
    now: number,
    maxFailures: number,
    lockoutMs: number,
  ): Promise<boolean> {
    if (attempt < maxFailures) return false;
    return (
      this.#run(
        `UPDATE users SET lockout_end = ?, access_failed_count = 0, security_stamp = ?, version = version + 1,
          updated_at = ? WHERE id = ?`,
        now + lockoutMs,
        newStamp(),
        now,
        userId,
      ) > 0
    );
  }

  async succeedAccessAttempt(userId: string): Promise<void> {
    this.#run(
      `UPDATE users SET access_failed_count = 0, lockout_end = NULL
        WHERE id = ? AND (access_failed_count <> 0 OR lockout_end IS NOT NULL)`,
      userId,
    );
  }

  // ── roles ──

  #role(id: string): RoleRecord | undefined {
    return this.#getAs(toRole, `${ROLE_SELECT} WHERE r.id = ?`, id);
  }

  /**
   * Replaces the parents of `roleId` with the roles named `names`.
   * @throws ValidationError `parentRoles[i]`: `unknown_role`, or `cycle` when the parent is the role itself
   * or already inherits from it (directly or through other roles).
   */
  #setRoleParents(roleId: string, names: readonly string[]): void {
    const parentIds = this.#roleIds(names, 'parentRoles');
    parentIds.forEach((parentId, i) => {
      const inherits = this.#get(
        `WITH RECURSIVE up(id) AS (SELECT ? UNION SELECT rp.parent_id FROM role_parents rp JOIN up ON rp.role_id = up.id)
          SELECT 1 AS hit FROM up WHERE id = ?`,
        parentId,
        roleId,
      );
      if (inherits) {
        throw new ValidationError(
          `parentRoles[${i}]`,
          'cycle',
          `parentRoles[${i}]: role '${names[i]}' is this role or inherits from it (cycles are not allowed)`,
        );
      }
    });
    this.#run('DELETE FROM role_parents WHERE role_id = ?', roleId);
    for (const parentId of parentIds)
      this.#run('INSERT INTO role_parents (role_id, parent_id) VALUES (?, ?)', roleId, parentId);
  }

  async createRole(input: NewRole, options?: ChangeOptions): Promise<RoleRecord> {
    const { name, description, permissions, denied, parents } = newRoleValues(input);
    const id = randomUUID();
    const now = this.#now();
    return this.#change('role', { field: 'name', value: name }, options, () => {
      this.#run(
        `INSERT INTO roles (id, name, name_key, description, permissions, denied_permissions, created_at, updated_at)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        id,
        name,
        v.nameKey(name),
        description,
        JSON.stringify(permissions),
        JSON.stringify(denied),
        now,
        now,
      );
      if (parents.length > 0) this.#setRoleParents(id, parents);
      return this.#role(id)!;
    });
  }

  async getRole(id: string): Promise<RoleRecord | undefined> {
    return this.#role(String(id));
  }

  async findRoleByName(name: string): Promise<RoleRecord | undefined> {
    if (typeof name !== 'string') return undefined;
    return this.#getAs(toRole, `${ROLE_SELECT} WHERE r.name_key = ?`, v.nameKey(name.trim()));
  }

  async listRoles(query?: ListQuery): Promise<Page<RoleRecord>> {
    const sql = { table: 'roles r', select: ROLE_SELECT, search: 'r.name_key', order: 'r.name_key' };
    return this.#page(query, sql, toRole);
  }

  async updateRole(id: string, patch: RolePatch, options?: ChangeOptions): Promise<RoleRecord> {
    const values = rolePatchValues(patch);
    const { name, description, permissions, denied, parents } = values;
    return this.#change('role', { field: 'name', value: name ?? '' }, options, () => {
      const current = this.#role(id);
      if (!current) throw new NotFoundError('role', id);
      const sameParents = checkRoleUpdate(current, values);
      const newName = name ?? current.name;
      this.#run(
        `UPDATE roles SET name = ?, name_key = ?, description = ?, permissions = ?, denied_permissions = ?,
          version = version + 1, updated_at = ? WHERE id = ?`,
        newName,
        v.nameKey(newName),
        description ?? current.description,
        JSON.stringify(permissions ?? current.permissions),
        JSON.stringify(denied ?? current.deniedPermissions),
        this.#now(),
        id,
      );
      if (!sameParents && parents !== undefined) this.#setRoleParents(id, parents);
      return this.#role(id)!;
    });
  }

  async deleteRole(id: string, options?: ChangeOptions): Promise<void> {
    this.#change('role', { field: 'id', value: id }, options, () => {
      const current = this.#role(id);
      if (!current) throw new NotFoundError('role', id);
      if (current.isSystem) {
        throw new ConstraintError(
          'system_role',
          `role '${current.name}' is a built-in system role and cannot be deleted`,
        );
      }
      // Holders lose the role: bump their version so cached matchers are rebuilt.
      this.#run(
        'UPDATE users SET version = version + 1 WHERE id IN (SELECT user_id FROM user_roles WHERE role_id = ?)',
        id,
      );
      this.#run('DELETE FROM roles WHERE id = ? AND is_system = 0', id);
    });
  }

  // ── permission catalog ──

  async createPermission(input: NewPermission, options?: ChangeOptions): Promise<PermissionRecord> {
    const code = normalizePermissionCode(input?.code, 'code', { allowWildcards: false });
    const description = v.optionalText(input.description, 'description');
    return this.#change('permission', { field: 'code', value: code }, options, () => {
      this.#run(
        'INSERT INTO permissions (code, description, created_at) VALUES (?, ?, ?)',
        code,
        description,
        this.#now(),
      );
      return this.#permission(code)!;
    });
  }

  #permission(code: string): PermissionRecord | undefined {
    const row = this.#get('SELECT * FROM permissions WHERE code = ?', code);
    return row
      ? { code: String(row.code), description: String(row.description), createdAt: Number(row.created_at) }
      : undefined;
  }

  async getPermission(code: string): Promise<PermissionRecord | undefined> {
    return typeof code === 'string' ? this.#permission(code.trim().toLowerCase()) : undefined;
  }

  async listPermissions(query?: ListQuery): Promise<Page<PermissionRecord>> {
    const sql = {
      table: 'permissions',
      select: 'SELECT code FROM permissions',
      search: 'code',
      order: 'code',
    };
    return this.#page(query, sql, (row) => this.#permission(String(row.code))!);
  }

  async updatePermission(
    code: string,
    patch: { description?: string },
    options?: ChangeOptions,
  ): Promise<PermissionRecord> {
    const key = String(code).trim().toLowerCase();
    const description = v.optionalText(patch.description, 'description');
    return this.#change('permission', { field: 'code', value: key }, options, () => {
      if (this.#run('UPDATE permissions SET description = ? WHERE code = ?', description, key) === 0) {
        throw new NotFoundError('permission', key);
      }
      return this.#permission(key)!;
    });
  }

  async deletePermission(code: string, options?: ChangeOptions): Promise<void> {
    const key = String(code).trim().toLowerCase();
    this.#change('permission', { field: 'code', value: key }, options, () => {
      if (this.#run('DELETE FROM permissions WHERE code = ?', key) === 0)
        throw new NotFoundError('permission', key);
    });
  }

  // ── clients ──

  #client(clientId: string): ClientRecord | undefined {
    return this.#getAs(toClient, `${CLIENT_SELECT} WHERE c.client_id = ?`, clientId);
  }

  async createClient(input: NewClient, options?: ChangeOptions): Promise<ClientRecord> {
    const values = newClientValues(input);
    const { clientId, secretHash, oidc } = values;
    const now = this.#now();
    this.#clientCache.clear();
    return this.#change('client', { field: 'clientId', value: clientId }, options, () => {
      this.#run(
        `INSERT INTO clients (client_id, display_name, client_type, secret_hash, is_enabled, redirect_uris,
          allowed_grant_types, allowed_scopes, permissions, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        clientId,
        values.displayName,
        values.clientType,
        secretHash,
        values.isEnabled ? 1 : 0,
        JSON.stringify(values.redirectUris),
        JSON.stringify(values.grantTypes),
        JSON.stringify(values.scopes),
        JSON.stringify(values.permissions),
        now,
        now,
      );
      this.#setClientOidc(clientId, oidc);
      return this.#client(clientId)!;
    });
  }

  /** Cached (see `#clientCache`): the returned record and its arrays are frozen. */
  async getClient(clientId: string): Promise<ClientRecord | undefined> {
    if (typeof clientId !== 'string') return undefined;
    const dataVersion = Number(this.#get('PRAGMA data_version')?.data_version);
    if (dataVersion !== this.#clientCacheVersion) {
      this.#clientCache.clear();
      this.#clientCacheVersion = dataVersion;
    }
    if (this.#clientCache.has(clientId)) return this.#clientCache.get(clientId);
    const client = this.#client(clientId);
    if (client) {
      for (const list of [
        client.redirectUris,
        client.allowedGrantTypes,
        client.allowedScopes,
        client.permissions,
      ])
        Object.freeze(list);
      Object.freeze(client);
    }
    if (this.#clientCache.size >= CLIENT_CACHE_LIMIT) this.#clientCache.clear();
    this.#clientCache.set(clientId, client);
    return client;
  }

  async listClients(query?: ListQuery): Promise<Page<ClientRecord>> {
    const sql = {
      table: 'clients c',
      select: CLIENT_SELECT,
      search: 'lower(c.client_id)',
      order: 'c.client_id',
    };
    return this.#page(query, sql, toClient);
  }

  async updateClient(clientId: string, patch: ClientPatch, options?: ChangeOptions): Promise<ClientRecord> {
    const values = clientPatchValues(patch);
    const oidc = values.oidc;
    this.#clientCache.clear();
    return this.#change('client', { field: 'clientId', value: clientId }, options, () => {
      const current = this.#client(clientId);
      if (!current) throw new NotFoundError('client', clientId);
      const secretHash =
        patch.secretHash === undefined
          ? current.secretHash
          : clientSecret(current.clientType, patch.secretHash);
      this.#run(
        `UPDATE clients SET display_name = ?, secret_hash = ?, is_enabled = ?, redirect_uris = ?, allowed_grant_types = ?,
          allowed_scopes = ?, permissions = ?, version = version + 1, updated_at = ? WHERE client_id = ?`,
        values.displayName ?? current.displayName,
        secretHash,
        (values.isEnabled ?? current.isEnabled) ? 1 : 0,
        JSON.stringify(values.redirectUris ?? current.redirectUris),
        JSON.stringify(values.grantTypes ?? current.allowedGrantTypes),
        JSON.stringify(values.scopes ?? current.allowedScopes),
        JSON.stringify(values.permissions ?? current.permissions),
        this.#now(),
        clientId,
      );
      this.#setClientOidc(clientId, oidc);
      return this.#client(clientId)!;
    });
  }

  async deleteClient(clientId: string, options?: ChangeOptions): Promise<void> {
    this.#clientCache.clear();
    this.#change('client', { field: 'clientId', value: clientId }, options, () => {
      if (this.#run('DELETE FROM clients WHERE client_id = ?', clientId) === 0)
        throw new NotFoundError('client', clientId);
    });
  }

  // ── audit ──

  #insertAudit(event: NewAuditEvent): AuditEvent {
    const row = this.#get(
      `INSERT INTO audit_events (time, category, outcome, subject_id, subject_name, client_id, failure_code,
        remote_address, details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
      ...auditValues(event, this.#now()),
    );
    return toAudit(row!);
  }

  async appendAudit(event: NewAuditEvent): Promise<AuditEvent> {
    return this.#insertAudit(event);
  }

  async listAudit(query?: AuditQuery): Promise<Page<AuditEvent>> {
    const { offset, limit } = paging(query);
    const where: string[] = [];
    const params: SQLInputValue[] = [];
    const filter = auditFilter(query ?? {});
    for (const [column, value] of filter.equal) {
      where.push(`${column} = ?`);
      params.push(value);
    }
    if (filter.from !== undefined) {
      where.push('time >= ?');
      params.push(filter.from);
    }
    if (filter.to !== undefined) {
      where.push('time < ?');
      params.push(filter.to);
    }
    const clause = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = Number(
      this.#db.prepare(`SELECT count(*) AS n FROM audit_events ${clause}`).get(...params)?.n,
    );
    const items = (
      this.#db
        .prepare(`SELECT * FROM audit_events ${clause} ORDER BY time DESC, id DESC LIMIT ? OFFSET ?`)
        .all(...params, limit, offset) as Row[]
    ).map(toAudit);
    return { items, total };
  }

  // ── refresh tokens, authorization codes, signing keys, login sessions ──

  async insertRefreshToken(input: NewRefreshToken): Promise<RefreshTokenRecord> {
    return this.#change('refresh token', { field: 'tokenHash', value: '…' }, undefined, () => {
      const row = this.#get(`${INSERT_REFRESH_TOKEN} RETURNING *`, ...refreshTokenValues(input));
      return toRefresh(row!);
    });
  }

  async findRefreshToken(tokenHash: string): Promise<RefreshTokenRecord | undefined> {
    return this.#getAs(toRefresh, 'SELECT * FROM refresh_tokens WHERE token_hash = ?', String(tokenHash));
  }

  async findRefreshTokenWithOwner(tokenHash: string): Promise<RefreshTokenWithOwner | undefined> {
    const row = this.#get(
      `SELECT t.*, u.id AS owner_id, u.user_name AS owner_user_name, u.is_enabled AS owner_is_enabled,
        u.lockout_end AS owner_lockout_end, u.security_stamp AS owner_security_stamp
        FROM refresh_tokens t LEFT JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?`,
      String(tokenHash),
    );
    return row ? toRefreshWithOwner(row) : undefined;
  }

  async markRefreshTokenUsed(tokenHash: string, now: number, replacedBy: string | null): Promise<boolean> {
    return this.#run(MARK_REFRESH_TOKEN_USED, now, replacedBy, tokenHash) > 0;
  }

  /**
   * Group commit: rotations requested during one turn of the event loop are written in one
   * `BEGIN IMMEDIATE` … `COMMIT` (each in its own savepoint, so one failure affects only its caller), and
   * every promise settles only after that commit. Under concurrent refresh traffic this shares one WAL
   * append (and its write syscalls) among the rotations of a turn; durability per answer is unchanged.
   */
  async rotateRefreshToken(tokenHash: string, next: NewRefreshToken, now: number): Promise<boolean> {
    const hash = String(tokenHash);
    return this.#enqueue('refresh token', () => this.#rotate(hash, next, now));
  }

  /** Queues a write for the group commit of this event-loop turn; resolves once it is committed. */
  #enqueue(entity: string, apply: () => boolean): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.#pendingRotations.push({ apply, entity, resolve, reject });
      if (this.#pendingRotations.length === 1) setImmediate(() => this.#commitRotations());
    });
  }

  #commitRotations(): void {
    const batch = this.#pendingRotations;
    this.#pendingRotations = [];
    if (batch.length === 0) return;
    const outcomes: ({ ok: true; value: boolean } | { ok: false; error: unknown })[] = [];
    try {
      this.#tx(() => {
        for (const item of batch) {
          this.#stmt('SAVEPOINT rotation').run();
          try {
            outcomes.push({ ok: true, value: item.apply() });
            this.#stmt('RELEASE rotation').run();
          } catch (error) {
            this.#stmt('ROLLBACK TO rotation').run();
            this.#stmt('RELEASE rotation').run();
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

  #rotate(tokenHash: string, next: NewRefreshToken, now: number): boolean {
    if (this.#run(MARK_REFRESH_TOKEN_USED, now, next.tokenHash, tokenHash) === 0) return false;
    this.#run(INSERT_REFRESH_TOKEN, ...refreshTokenValues(next));
    return true;
  }

  async revokeRefreshToken(tokenHash: string, now: number): Promise<boolean> {
    return (
      this.#run(
        'UPDATE refresh_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL',
        now,
        tokenHash,
      ) > 0
    );
  }

  async revokeRefreshTokenFamily(familyId: string, now: number): Promise<number> {
    return this.#run(
      'UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL',
      now,
      familyId,
    );
  }

  async revokeUserRefreshTokens(userId: string, now: number): Promise<number> {
    return this.#run(
      'UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL',
      now,
      userId,
    );
  }

  async insertAuthorizationCode(input: NewAuthorizationCode): Promise<AuthorizationCodeRecord> {
    return this.#change('authorization code', { field: 'codeHash', value: '…' }, undefined, () => {
      const row = this.#get(
        `INSERT INTO authorization_codes (code_hash, client_id, user_id, redirect_uri, scope, code_challenge,
          code_challenge_method, nonce, created_at, expires_at, auth_time, session_id, amr)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
        input.codeHash,
        input.clientId,
        input.userId,
        input.redirectUri,
        input.scope ?? '',
        input.codeChallenge ?? null,
        input.codeChallengeMethod ?? null,
        input.nonce ?? null,
        input.createdAt,
        input.expiresAt,
        input.authTime ?? null,
        input.sessionId ?? null,
        input.amr ? JSON.stringify(input.amr) : null,
      );
      return toCode(row!);
    });
  }

  async findAuthorizationCode(codeHash: string): Promise<AuthorizationCodeRecord | undefined> {
    return this.#getAs(toCode, 'SELECT * FROM authorization_codes WHERE code_hash = ?', String(codeHash));
  }

  async consumeAuthorizationCode(
    codeHash: string,
    now: number,
  ): Promise<AuthorizationCodeRecord | undefined> {
    return this.#getAs(
      toCode,
      'UPDATE authorization_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL RETURNING *',
      now,
      String(codeHash),
    );
  }

  async insertSigningKey(input: NewSigningKey): Promise<SigningKeyRecord> {
    return this.#change('signing key', { field: 'kid', value: input.kid }, undefined, () => {
      const row = this.#get(
        `INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, expires_at)
          VALUES (?, ?, ?, ?, ?, ?) RETURNING *`,
        input.kid,
        input.alg,
        JSON.stringify(input.privateJwk),
        JSON.stringify(input.publicJwk),
        input.createdAt,
        input.expiresAt ?? null,
      );
      return toKey(row!);
    });
  }

  async listSigningKeys(
    options: { includeRetired?: boolean; now?: number } = {},
  ): Promise<SigningKeyRecord[]> {
    const now = options.now ?? this.#now();
    const sql = options.includeRetired
      ? 'SELECT * FROM signing_keys WHERE expires_at IS NULL OR expires_at > ? ORDER BY created_at DESC, kid'
      : 'SELECT * FROM signing_keys WHERE retired_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, kid';
    return this.#all(sql, now).map(toKey);
  }

  async retireSigningKey(kid: string, at: number, expiresAt: number | null): Promise<void> {
    if (
      this.#run(
        'UPDATE signing_keys SET retired_at = ?, expires_at = ? WHERE kid = ?',
        at,
        expiresAt,
        kid,
      ) === 0
    ) {
      throw new NotFoundError('signing key', kid);
    }
  }

  async createLoginSession(input: NewLoginSession): Promise<LoginSessionRecord> {
    return this.#change('login session', { field: 'sessionHash', value: '…' }, undefined, () => {
      const row = this.#get(
        `INSERT INTO login_sessions (session_hash, user_id, created_at, expires_at, sid, amr)
          VALUES (?, ?, ?, ?, ?, ?) RETURNING *`,
        input.sessionHash,
        input.userId,
        input.createdAt,
        input.expiresAt,
        input.sid ?? null,
        JSON.stringify(input.amr ?? ['pwd']),
      );
      return toSession(row!);
    });
  }

  async getLoginSession(sessionHash: string): Promise<LoginSessionRecord | undefined> {
    return this.#getAs(toSession, 'SELECT * FROM login_sessions WHERE session_hash = ?', String(sessionHash));
  }

  async revokeLoginSession(sessionHash: string, now: number): Promise<boolean> {
    return (
      this.#run(
        'UPDATE login_sessions SET revoked_at = ? WHERE session_hash = ? AND revoked_at IS NULL',
        now,
        sessionHash,
      ) > 0
    );
  }

  async findLoginSessionBySid(sid: string): Promise<LoginSessionRecord | undefined> {
    if (typeof sid !== 'string') return undefined;
    return this.#getAs(toSession, 'SELECT * FROM login_sessions WHERE sid = ?', sid);
  }

  async endLoginSession(sessionHash: string, now: number): Promise<number> {
    return this.#tx(() => {
      const session = this.#get(
        'UPDATE login_sessions SET revoked_at = coalesce(revoked_at, ?) WHERE session_hash = ? RETURNING sid',
        now,
        String(sessionHash),
      );
      if (!session || session.sid === null || session.sid === undefined) return 0;
      return this.#run(
        'UPDATE refresh_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL',
        now,
        String(session.sid),
      );
    });
  }

  async addSessionClient(sid: string, clientId: string, now: number): Promise<void> {
    this.#run(
      'INSERT INTO session_clients (session_id, client_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
      sid,
      clientId,
      now,
    );
  }

  async listSessionClients(sid: string): Promise<ClientRecord[]> {
    return this.#all(
      'SELECT client_id FROM session_clients WHERE session_id = ? ORDER BY client_id',
      String(sid),
    ).flatMap((row) => this.#client(String(row.client_id)) ?? []);
  }

  // ── consent ──

  async getConsent(userId: string, clientId: string): Promise<ConsentRecord | undefined> {
    return this.#getAs(
      toConsent,
      'SELECT * FROM consents WHERE user_id = ? AND client_id = ?',
      String(userId),
      String(clientId),
    );
  }

  async grantConsent(
    userId: string,
    clientId: string,
    scopes: readonly string[],
    options?: ChangeOptions,
  ): Promise<ConsentRecord> {
    const granted = v.scopes(scopes, 'scopes');
    const now = this.#now();
    return this.#change('consent', { field: 'clientId', value: clientId }, options, () => {
      const current = this.#get(
        'SELECT scopes FROM consents WHERE user_id = ? AND client_id = ?',
        userId,
        clientId,
      );
      const union = [...new Set([...(current ? json<string[]>(current.scopes) : []), ...granted])].sort();
      const row = this.#get(
        `INSERT INTO consents (user_id, client_id, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
          ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = excluded.scopes, updated_at = excluded.updated_at
          RETURNING *`,
        userId,
        clientId,
        JSON.stringify(union),
        now,
        now,
      );
      return toConsent(row!);
    });
  }

  async listConsents(
    query: { userId?: string; clientId?: string; offset?: number; limit?: number } = {},
  ): Promise<Page<ConsentRecord>> {
    const { offset, limit } = paging(query);
    const where = 'WHERE (? IS NULL OR user_id = ?) AND (? IS NULL OR client_id = ?)';
    const user = query.userId ?? null;
    const client = query.clientId ?? null;
    const total = Number(
      this.#get(`SELECT count(*) AS n FROM consents ${where}`, user, user, client, client)?.n,
    );
    const items = this.#all(
      `SELECT * FROM consents ${where} ORDER BY updated_at DESC, client_id LIMIT ? OFFSET ?`,
      user,
      user,
      client,
      client,
      limit,
      offset,
    ).map(toConsent);
    return { items, total };
  }

  async revokeConsent(userId: string, clientId: string, options?: ChangeOptions): Promise<void> {
    this.#change('consent', { field: 'clientId', value: clientId }, options, () => {
      if (this.#run('DELETE FROM consents WHERE user_id = ? AND client_id = ?', userId, clientId) === 0)
        throw new NotFoundError('consent', `${userId}/${clientId}`);
    });
  }

  /** Writes the OpenID Connect settings of a client (inside the caller's transaction). */
  #setClientOidc(clientId: string, values: ClientOidcValues): void {
    const current = this.#get(
      'SELECT post_logout_redirect_uris, backchannel_logout_uri, require_consent FROM clients WHERE client_id = ?',
      clientId,
    );
    if (!current) return;
    this.#run(
      `UPDATE clients SET post_logout_redirect_uris = ?, backchannel_logout_uri = ?, require_consent = ?
        WHERE client_id = ?`,
      values.postLogoutRedirectUris === undefined
        ? current.post_logout_redirect_uris!
        : JSON.stringify(values.postLogoutRedirectUris),
      values.backchannelLogoutUri === undefined
        ? current.backchannel_logout_uri!
        : values.backchannelLogoutUri,
      values.requireConsent === undefined ? current.require_consent! : values.requireConsent ? 1 : 0,
      clientId,
    );
  }

  async purgeExpired(now: number): Promise<number> {
    return this.#tx(
      () =>
        this.#run('DELETE FROM refresh_tokens WHERE expires_at <= ?', now) +
        this.#run('DELETE FROM authorization_codes WHERE expires_at <= ?', now) +
        this.#run('DELETE FROM login_sessions WHERE expires_at <= ?', now) +
        this.#run('DELETE FROM signing_keys WHERE expires_at IS NOT NULL AND expires_at <= ?', now) +
        this.#run('DELETE FROM replay_cache WHERE expires_at <= ?', now) +
        this.#run('DELETE FROM pushed_authorization_requests WHERE expires_at <= ?', now) +
        this.#run('DELETE FROM device_codes WHERE expires_at <= ?', now),
    );
  }

  // ── OAuth extensions ──

  async setRegistrationAccessToken(clientId: string, tokenHash: string, now: number): Promise<void> {
    this.#change('client', { field: 'clientId', value: clientId }, undefined, () => {
      if (!this.#client(clientId)) throw new NotFoundError('client', clientId);
      this.#run(
        `INSERT INTO client_registrations (client_id, access_token_hash, created_at) VALUES (?, ?, ?)
          ON CONFLICT (client_id) DO UPDATE SET access_token_hash = excluded.access_token_hash`,
        clientId,
        tokenHash,
        now,
      );
    });
  }

  async findRegistrationAccessToken(clientId: string): Promise<string | undefined> {
    const row = this.#get(
      'SELECT access_token_hash FROM client_registrations WHERE client_id = ?',
      String(clientId),
    );
    return row ? String(row.access_token_hash) : undefined;
  }

  async insertDeviceCode(
    input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
  ): Promise<DeviceCodeRecord> {
    return this.#change('device code', { field: 'userCode', value: input.userCode }, undefined, () => {
      const row = this.#get(
        `INSERT INTO device_codes (device_code_hash, user_code, client_id, scope, interval_s, created_at, expires_at)
          VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`,
        input.deviceCodeHash,
        input.userCode,
        input.clientId,
        input.scope,
        input.intervalSeconds,
        input.createdAt,
        input.expiresAt,
      );
      return toDeviceCode(row!);
    });
  }

  async findDeviceCodeByUserCode(userCode: string): Promise<DeviceCodeRecord | undefined> {
    return this.#getAs(toDeviceCode, 'SELECT * FROM device_codes WHERE user_code = ?', String(userCode));
  }

  async pollDeviceCode(
    deviceCodeHash: string,
    now: number,
  ): Promise<{ record: DeviceCodeRecord; slowDown: boolean } | undefined> {
    return this.#tx(() => {
      const record = this.#getAs(
        toDeviceCode,
        'SELECT * FROM device_codes WHERE device_code_hash = ?',
        String(deviceCodeHash),
      );
      if (!record) return undefined;
      const slowDown =
        record.status === 'pending' &&
        record.lastPolledAt !== null &&
        now - record.lastPolledAt < record.intervalSeconds * 1000;
      this.#run(
        'UPDATE device_codes SET last_polled_at = ?, interval_s = interval_s + ? WHERE device_code_hash = ?',
        now,
        slowDown ? 5 : 0,
        record.deviceCodeHash,
      );
      return { record, slowDown };
    });
  }

  async decideDeviceCode(userCode: string, approved: boolean, userId: string, now: number): Promise<boolean> {
    return (
      this.#run(
        `UPDATE device_codes SET status = ?, user_id = ?
          WHERE user_code = ? AND status = 'pending' AND expires_at > ?`,
        approved ? 'approved' : 'denied',
        userId,
        String(userCode),
        now,
      ) === 1
    );
  }

  async consumeDeviceCode(deviceCodeHash: string): Promise<boolean> {
    return (
      this.#run(
        `UPDATE device_codes SET status = 'used' WHERE device_code_hash = ? AND status = 'approved'`,
        String(deviceCodeHash),
      ) === 1
    );
  }

  async insertPushedRequest(input: Omit<PushedRequestRecord, 'usedAt'>): Promise<PushedRequestRecord> {
    return this.#change('pushed request', { field: 'requestHash', value: '…' }, undefined, () => {
      const row = this.#get(
        `INSERT INTO pushed_authorization_requests (request_hash, client_id, params, created_at, expires_at)
          VALUES (?, ?, ?, ?, ?) RETURNING *`,
        input.requestHash,
        input.clientId,
        JSON.stringify(input.params),
        input.createdAt,
        input.expiresAt,
      );
      return toPushedRequest(row!);
    });
  }

  async findPushedRequest(requestHash: string): Promise<PushedRequestRecord | undefined> {
    return this.#getAs(
      toPushedRequest,
      'SELECT * FROM pushed_authorization_requests WHERE request_hash = ?',
      String(requestHash),
    );
  }

  async consumePushedRequest(requestHash: string, now: number): Promise<boolean> {
    return (
      this.#run(
        `UPDATE pushed_authorization_requests SET used_at = ?
          WHERE request_hash = ? AND used_at IS NULL AND expires_at > ?`,
        now,
        String(requestHash),
        now,
      ) === 1
    );
  }

  async claimReplayKey(kind: string, key: string, expiresAt: number, now: number): Promise<boolean> {
    // Committed with the rotations of the same event-loop turn (one commit for many DPoP refreshes). One
    // statement: inserts the key, or takes over an expired row of the same key; `BEGIN IMMEDIATE` makes
    // the check and the write atomic against every other connection.
    const kindText = String(kind);
    const keyText = String(key);
    return this.#enqueue(
      'replay key',
      () =>
        this.#run(
          `INSERT INTO replay_cache (kind, key, expires_at) VALUES (?, ?, ?)
            ON CONFLICT (kind, key) DO UPDATE SET expires_at = excluded.expires_at WHERE replay_cache.expires_at <= ?`,
          kindText,
          keyText,
          expiresAt,
          now,
        ) === 1,
    );
  }

  async setClientMetadata(
    clientId: string,
    metadata: ClientMetadata,
    options?: ChangeOptions,
  ): Promise<ClientRecord> {
    const value = clientMetadata(metadata);
    this.#clientCache.clear();
    return this.#change('client', { field: 'clientId', value: clientId }, options, () => {
      if (!this.#client(clientId)) throw new NotFoundError('client', clientId);
      this.#run(
        `INSERT INTO client_metadata (client_id, metadata) VALUES (?, ?)
          ON CONFLICT (client_id) DO UPDATE SET metadata = excluded.metadata`,
        clientId,
        JSON.stringify(value),
      );
      this.#run(
        'UPDATE clients SET version = version + 1, updated_at = ? WHERE client_id = ?',
        this.#now(),
        clientId,
      );
      return this.#client(clientId)!;
    });
  }

  async close(): Promise<void> {
    if (this.#db.isOpen) this.#commitRotations();
    const checkpointer = this.#checkpointer;
    if (checkpointer) {
      this.#checkpointer = undefined;
      checkpointer.postMessage('stop');
      await this.#checkpointerExited;
    }
    if (this.#db.isOpen) this.#db.close();
  }
}
