import { NotFoundError } from '../errors.ts';
import { type FactorStore, SqlFactorStore } from './factors.ts';
import {
  authorizationCodeValues,
  deviceCodeValues,
  INSERT_AUTHORIZATION_CODE,
  INSERT_DEVICE_CODE,
  INSERT_LOGIN_SESSION,
  INSERT_PUSHED_REQUEST,
  loginSessionValues,
  pushedRequestValues,
  REFRESH_TOKEN_COLUMNS,
  refreshTokenValues,
  SQLITE_VALUES,
} from './inserts.ts';
import { type LinkStore, SqlLinkStore } from './links.ts';
import {
  toCode,
  toDeviceCode,
  toKey,
  toPushedRequest,
  toRefresh,
  toRefreshWithOwner,
  toSession,
} from './rows.ts';
import { SqliteClients } from './sqlite/clients.ts';
import type {
  AuthorizationCodeRecord,
  AuthStore,
  ClientRecord,
  DeviceCodeRecord,
  LoginSessionRecord,
  NewAuthorizationCode,
  NewLoginSession,
  NewRefreshToken,
  NewSigningKey,
  PushedRequestRecord,
  RefreshTokenRecord,
  RefreshTokenWithOwner,
  SigningKeyRecord,
} from './types.ts';
import { devicePoll, UPDATE_DEVICE_POLL } from './updates.ts';

export type { SqliteAuthStoreOptions } from './sqlite/core.ts';

const INSERT_REFRESH_TOKEN = `INSERT INTO refresh_tokens (${REFRESH_TOKEN_COLUMNS})
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** Marks an unused, unrevoked refresh token used; parameters: used_at, replaced_by, token_hash. */
const MARK_REFRESH_TOKEN_USED = `UPDATE refresh_tokens SET used_at = ?, replaced_by = ?
  WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL`;

/**
 * The default {@link AuthStore}: SQLite through `node:sqlite`. Synchronous inside, async at the interface.
 * This file holds the token lifecycle, login sessions and the OAuth extension state; the rest is in
 * `./sqlite/` (core, users, clients).
 */
export class SqliteAuthStore extends SqliteClients implements AuthStore {
  /** Links to upstream provider accounts (`./links.ts`) over this connection. */
  readonly links: LinkStore = new SqlLinkStore({
    get: async (sql, ...params) => this.sqlGet(sql, ...params),
    all: async (sql, ...params) => this.sqlAll(sql, ...params),
    run: async (sql, ...params) => this.sqlRun(sql, ...params),
  });
  /** Second factors (`./factors.ts`) over this connection. */
  readonly factors: FactorStore = new SqlFactorStore({
    get: async (sql, ...params) => this.sqlGet(sql, ...params),
    all: async (sql, ...params) => this.sqlAll(sql, ...params),
    run: async (sql, ...params) => this.sqlRun(sql, ...params),
  });

  // ── refresh tokens, authorization codes, signing keys, login sessions ──

  async insertRefreshToken(input: NewRefreshToken): Promise<RefreshTokenRecord> {
    return this.change('refresh token', { field: 'tokenHash', value: '…' }, undefined, () => {
      const row = this.sqlGet(`${INSERT_REFRESH_TOKEN} RETURNING *`, ...refreshTokenValues(input));
      return toRefresh(row!);
    });
  }

  async findRefreshToken(tokenHash: string): Promise<RefreshTokenRecord | undefined> {
    return this.sqlGetAs(toRefresh, 'SELECT * FROM refresh_tokens WHERE token_hash = ?', String(tokenHash));
  }

  async findRefreshTokenWithOwner(tokenHash: string): Promise<RefreshTokenWithOwner | undefined> {
    const row = this.sqlGet(
      `SELECT t.*, u.id AS owner_id, u.user_name AS owner_user_name, u.is_enabled AS owner_is_enabled,
        u.lockout_end AS owner_lockout_end, u.security_stamp AS owner_security_stamp
        FROM refresh_tokens t LEFT JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?`,
      String(tokenHash),
    );
    return row ? toRefreshWithOwner(row) : undefined;
  }

  async markRefreshTokenUsed(tokenHash: string, now: number, replacedBy: string | null): Promise<boolean> {
    return this.sqlRun(MARK_REFRESH_TOKEN_USED, now, replacedBy, tokenHash) > 0;
  }

  /**
   * Group commit: rotations requested during one turn of the event loop are written in one
   * `BEGIN IMMEDIATE` … `COMMIT` (each in its own savepoint, so one failure affects only its caller), and
   * every promise settles only after that commit. Under concurrent refresh traffic this shares one WAL
   * append (and its write syscalls) among the rotations of a turn; durability per answer is unchanged.
   */
  async rotateRefreshToken(tokenHash: string, next: NewRefreshToken, now: number): Promise<boolean> {
    const hash = String(tokenHash);
    return this.enqueue('refresh token', () => this.#rotate(hash, next, now));
  }

  /** One rotation inside the group commit's transaction: mark used (if unused and unrevoked), insert the successor. */
  #rotate(tokenHash: string, next: NewRefreshToken, now: number): boolean {
    if (this.sqlRun(MARK_REFRESH_TOKEN_USED, now, next.tokenHash, tokenHash) === 0) return false;
    this.sqlRun(INSERT_REFRESH_TOKEN, ...refreshTokenValues(next));
    return true;
  }

  async revokeRefreshToken(tokenHash: string, now: number): Promise<boolean> {
    return (
      this.sqlRun(
        'UPDATE refresh_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL',
        now,
        tokenHash,
      ) > 0
    );
  }

  async revokeRefreshTokenFamily(familyId: string, now: number): Promise<number> {
    return this.sqlRun(
      'UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND used_at IS NULL AND revoked_at IS NULL',
      now,
      familyId,
    );
  }

  async revokeUserRefreshTokens(userId: string, now: number): Promise<number> {
    return this.sqlRun(
      'UPDATE refresh_tokens SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL',
      now,
      userId,
    );
  }

  async insertAuthorizationCode(input: NewAuthorizationCode): Promise<AuthorizationCodeRecord> {
    return this.change('authorization code', { field: 'codeHash', value: '…' }, undefined, () => {
      const row = this.sqlGet(
        INSERT_AUTHORIZATION_CODE,
        ...authorizationCodeValues(input, (amr) => JSON.stringify(amr)),
      );
      return toCode(row!);
    });
  }

  async findAuthorizationCode(codeHash: string): Promise<AuthorizationCodeRecord | undefined> {
    return this.sqlGetAs(toCode, 'SELECT * FROM authorization_codes WHERE code_hash = ?', String(codeHash));
  }

  async consumeAuthorizationCode(
    codeHash: string,
    now: number,
  ): Promise<AuthorizationCodeRecord | undefined> {
    return this.sqlGetAs(
      toCode,
      'UPDATE authorization_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL RETURNING *',
      now,
      String(codeHash),
    );
  }

  async insertSigningKey(input: NewSigningKey): Promise<SigningKeyRecord> {
    return this.change('signing key', { field: 'kid', value: input.kid }, undefined, () => {
      const row = this.sqlGet(
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
    const now = options.now ?? this.clock();
    const sql = options.includeRetired
      ? 'SELECT * FROM signing_keys WHERE expires_at IS NULL OR expires_at > ? ORDER BY created_at DESC, kid'
      : 'SELECT * FROM signing_keys WHERE retired_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, kid';
    return this.sqlAll(sql, now).map(toKey);
  }

  async retireSigningKey(kid: string, at: number, expiresAt: number | null): Promise<void> {
    if (
      this.sqlRun(
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
    return this.change('login session', { field: 'sessionHash', value: '…' }, undefined, () => {
      const row = this.sqlGet(INSERT_LOGIN_SESSION, ...loginSessionValues(input, SQLITE_VALUES));
      return toSession(row!);
    });
  }

  async getLoginSession(sessionHash: string): Promise<LoginSessionRecord | undefined> {
    return this.sqlGetAs(
      toSession,
      'SELECT * FROM login_sessions WHERE session_hash = ?',
      String(sessionHash),
    );
  }

  async revokeLoginSession(sessionHash: string, now: number): Promise<boolean> {
    return (
      this.sqlRun(
        'UPDATE login_sessions SET revoked_at = ? WHERE session_hash = ? AND revoked_at IS NULL',
        now,
        sessionHash,
      ) > 0
    );
  }

  async findLoginSessionBySid(sid: string): Promise<LoginSessionRecord | undefined> {
    if (typeof sid !== 'string') return undefined;
    return this.sqlGetAs(toSession, 'SELECT * FROM login_sessions WHERE sid = ?', sid);
  }

  async endLoginSession(sessionHash: string, now: number): Promise<number> {
    return this.tx(() => {
      const session = this.sqlGet(
        'UPDATE login_sessions SET revoked_at = coalesce(revoked_at, ?) WHERE session_hash = ? RETURNING sid',
        now,
        String(sessionHash),
      );
      if (!session || session.sid === null || session.sid === undefined) return 0;
      return this.sqlRun(
        'UPDATE refresh_tokens SET revoked_at = ? WHERE session_id = ? AND revoked_at IS NULL',
        now,
        String(session.sid),
      );
    });
  }

  async addSessionClient(sid: string, clientId: string, now: number): Promise<void> {
    this.sqlRun(
      'INSERT INTO session_clients (session_id, client_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
      sid,
      clientId,
      now,
    );
  }

  async listSessionClients(sid: string): Promise<ClientRecord[]> {
    return this.sqlAll(
      'SELECT client_id FROM session_clients WHERE session_id = ? ORDER BY client_id',
      String(sid),
    ).flatMap((row) => this.clientRecord(String(row.client_id)) ?? []);
  }

  async purgeExpired(now: number): Promise<number> {
    return this.tx(
      () =>
        this.sqlRun('DELETE FROM refresh_tokens WHERE expires_at <= ?', now) +
        this.sqlRun('DELETE FROM authorization_codes WHERE expires_at <= ?', now) +
        this.sqlRun('DELETE FROM login_sessions WHERE expires_at <= ?', now) +
        this.sqlRun('DELETE FROM signing_keys WHERE expires_at IS NOT NULL AND expires_at <= ?', now) +
        this.sqlRun('DELETE FROM replay_cache WHERE expires_at <= ?', now) +
        this.sqlRun('DELETE FROM pushed_authorization_requests WHERE expires_at <= ?', now) +
        this.sqlRun('DELETE FROM device_codes WHERE expires_at <= ?', now),
    );
  }

  async insertDeviceCode(
    input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
  ): Promise<DeviceCodeRecord> {
    return this.change('device code', { field: 'userCode', value: input.userCode }, undefined, () => {
      const row = this.sqlGet(INSERT_DEVICE_CODE, ...deviceCodeValues(input));
      return toDeviceCode(row!);
    });
  }

  async findDeviceCodeByUserCode(userCode: string): Promise<DeviceCodeRecord | undefined> {
    return this.sqlGetAs(toDeviceCode, 'SELECT * FROM device_codes WHERE user_code = ?', String(userCode));
  }

  async pollDeviceCode(
    deviceCodeHash: string,
    now: number,
  ): Promise<{ record: DeviceCodeRecord; slowDown: boolean } | undefined> {
    return this.tx(() => {
      const record = this.sqlGetAs(
        toDeviceCode,
        'SELECT * FROM device_codes WHERE device_code_hash = ?',
        String(deviceCodeHash),
      );
      if (!record) return undefined;
      const { slowDown, params } = devicePoll(record, now);
      this.sqlRun(UPDATE_DEVICE_POLL, ...params);
      return { record, slowDown };
    });
  }

  async decideDeviceCode(userCode: string, approved: boolean, userId: string, now: number): Promise<boolean> {
    return (
      this.sqlRun(
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
      this.sqlRun(
        `UPDATE device_codes SET status = 'used' WHERE device_code_hash = ? AND status = 'approved'`,
        String(deviceCodeHash),
      ) === 1
    );
  }

  async insertPushedRequest(input: Omit<PushedRequestRecord, 'usedAt'>): Promise<PushedRequestRecord> {
    return this.change('pushed request', { field: 'requestHash', value: '…' }, undefined, () => {
      const row = this.sqlGet(INSERT_PUSHED_REQUEST, ...pushedRequestValues(input, SQLITE_VALUES));
      return toPushedRequest(row!);
    });
  }

  async findPushedRequest(requestHash: string): Promise<PushedRequestRecord | undefined> {
    return this.sqlGetAs(
      toPushedRequest,
      'SELECT * FROM pushed_authorization_requests WHERE request_hash = ?',
      String(requestHash),
    );
  }

  async consumePushedRequest(requestHash: string, now: number): Promise<boolean> {
    return (
      this.sqlRun(
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
    return this.enqueue(
      'replay key',
      () =>
        this.sqlRun(
          `INSERT INTO replay_cache (kind, key, expires_at) VALUES (?, ?, ?)
            ON CONFLICT (kind, key) DO UPDATE SET expires_at = excluded.expires_at WHERE replay_cache.expires_at <= ?`,
          kindText,
          keyText,
          expiresAt,
          now,
        ) === 1,
    );
  }
}
