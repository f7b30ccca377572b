/**
 * Token lifecycle for both databases: refresh tokens (rotation with reuse detection, RFC 9700 §4.14.2),
 * authorization codes (single use, RFC 6749 §4.1.2), signing keys and login sessions.
 *
 * Every one-time transition is one conditional `UPDATE` (`… WHERE used_at IS NULL …`): when two writers
 * race (two connections, or two instances on PostgreSQL), the database lets exactly one of them change the
 * row. Signing-key changes are announced through the dialect's `notify` statement (PostgreSQL
 * `pg_notify` on {@link SIGNING_KEYS_CHANNEL}, delivered at commit).
 */
import { NotFoundError } from '../../errors.ts';
import {
  authorizationCodeValues,
  INSERT_AUTHORIZATION_CODE,
  INSERT_LOGIN_SESSION,
  loginSessionValues,
  REFRESH_TOKEN_COLUMNS,
  refreshTokenValues,
} from '../inserts.ts';
import { toCode, toKey, toRefresh, toRefreshWithOwner, toSession } from '../rows.ts';
import type {
  AuthorizationCodeRecord,
  LoginSessionRecord,
  NewAuthorizationCode,
  NewLoginSession,
  NewRefreshToken,
  NewSigningKey,
  RefreshTokenRecord,
  RefreshTokenWithOwner,
  SigningKeyRecord,
} from '../types.ts';
import { getAs, type SqlDriver, type StoreContext, write } from './driver.ts';

/** `LISTEN`/`NOTIFY` channel announcing inserted or retired signing keys (payload: the kid). */
export const SIGNING_KEYS_CHANNEL = 'seed_auth_signing_keys';

/** Conflicts on token hashes name the field, never the value. */
export const HIDDEN_TOKEN = { field: 'tokenHash', value: '…' } as const;

/** Inserts a refresh token; parameters: {@link refreshTokenValues}. */
export const INSERT_REFRESH_TOKEN = `INSERT INTO refresh_tokens (${REFRESH_TOKEN_COLUMNS})
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** Marks an unused, unrevoked refresh token used; parameters: used_at, replaced_by, token_hash. */
export const MARK_REFRESH_TOKEN_USED = `UPDATE refresh_tokens SET used_at = ?, replaced_by = ?
  WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL`;

/** See `AuthStore.insertRefreshToken`. */
export function insertRefreshToken(db: SqlDriver, input: NewRefreshToken): Promise<RefreshTokenRecord> {
  return write(db, 'refresh token', HIDDEN_TOKEN, async () => {
    const row = await db.get(`${INSERT_REFRESH_TOKEN} RETURNING *`, ...refreshTokenValues(input));
    return toRefresh(row!);
  });
}

/** See `AuthStore.findRefreshToken`. */
export function findRefreshToken(db: SqlDriver, tokenHash: string): Promise<RefreshTokenRecord | undefined> {
  return getAs(toRefresh, db, 'SELECT * FROM refresh_tokens WHERE token_hash = ?', String(tokenHash));
}

/** See `AuthStore.findRefreshTokenWithOwner`: the token and its user's status in one `SELECT`. */
export function findRefreshTokenWithOwner(
  db: SqlDriver,
  tokenHash: string,
): Promise<RefreshTokenWithOwner | undefined> {
  return getAs(
    toRefreshWithOwner,
    db,
    `SELECT t.*, u.id AS owner_id, u.user_name AS owner_user_name, u.is_enabled AS owner_is_enabled,
      u.lockout_end AS owner_lockout_end, u.security_stamp AS owner_security_stamp
      FROM refresh_tokens t LEFT JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?`,
    String(tokenHash),
  );
}

/** See `AuthStore.markRefreshTokenUsed`. */
export async function markRefreshTokenUsed(
  db: SqlDriver,
  tokenHash: string,
  now: number,
  replacedBy: string | null,
): Promise<boolean> {
  return (await db.run(MARK_REFRESH_TOKEN_USED, now, replacedBy, String(tokenHash))) > 0;
}

/**
 * See `AuthStore.rotateRefreshToken`: marks the old token used — only when unused and unrevoked — and
 * inserts its successor only when that happened. Call it inside a transaction (both statements or none).
 */
export async function rotateRefreshToken(
  db: SqlDriver,
  tokenHash: string,
  next: NewRefreshToken,
  now: number,
): Promise<boolean> {
  if ((await db.run(MARK_REFRESH_TOKEN_USED, now, next.tokenHash, String(tokenHash))) === 0) return false;
  await db.run(INSERT_REFRESH_TOKEN, ...refreshTokenValues(next));
  return true;
}

/** The columns a revocation may select rows by, per table that has a `revoked_at` column. */
interface RevocableColumns {
  refresh_tokens: 'token_hash' | 'family_id' | 'user_id' | 'session_id';
  login_sessions: 'session_hash';
}

/**
 * Sets `revoked_at = now` (ms since the epoch) on the rows of `table` whose `column` is `value` and that
 * are not revoked yet, and with `unusedOnly` also not used yet (`used_at IS NULL`). One conditional
 * `UPDATE`, so a row is revoked once and keeps its first revocation time.
 * @returns how many rows it revoked.
 */
function revokeRows<T extends keyof RevocableColumns>(
  db: SqlDriver,
  table: T,
  column: RevocableColumns[T],
  value: string,
  now: number,
  unusedOnly = false,
): Promise<number> {
  const unused = unusedOnly ? ' AND used_at IS NULL' : '';
  return db.run(
    `UPDATE ${table} SET revoked_at = ? WHERE ${column} = ?${unused} AND revoked_at IS NULL`,
    now,
    String(value),
  );
}

/** See `AuthStore.revokeRefreshToken`. */
export async function revokeRefreshToken(db: SqlDriver, tokenHash: string, now: number): Promise<boolean> {
  return (await revokeRows(db, 'refresh_tokens', 'token_hash', tokenHash, now)) > 0;
}

/** See `AuthStore.revokeRefreshTokenFamily`: the family's usable tokens. @returns how many. */
export function revokeUsableFamilyTokens(db: SqlDriver, familyId: string, now: number): Promise<number> {
  return revokeRows(db, 'refresh_tokens', 'family_id', familyId, now, true);
}

/** Revokes the unrevoked refresh tokens whose `column` is `value`. @returns how many. */
export function revokeRefreshTokensBy(
  db: SqlDriver,
  column: 'user_id' | 'session_id',
  value: string,
  now: number,
): Promise<number> {
  return revokeRows(db, 'refresh_tokens', column, value, now);
}

/** See `AuthStore.insertAuthorizationCode`. */
export function insertAuthorizationCode(
  db: SqlDriver,
  input: NewAuthorizationCode,
): Promise<AuthorizationCodeRecord> {
  return write(db, 'authorization code', { field: 'codeHash', value: '…' }, async () => {
    const row = await db.get(
      INSERT_AUTHORIZATION_CODE,
      ...authorizationCodeValues(input, (amr) => db.dialect.values.list(amr)),
    );
    return toCode(row!);
  });
}

/** See `AuthStore.findAuthorizationCode`. */
export function findAuthorizationCode(
  db: SqlDriver,
  codeHash: string,
): Promise<AuthorizationCodeRecord | undefined> {
  return getAs(toCode, db, 'SELECT * FROM authorization_codes WHERE code_hash = ?', String(codeHash));
}

/** See `AuthStore.consumeAuthorizationCode`: one conditional `UPDATE … RETURNING`. */
export function consumeAuthorizationCode(
  db: SqlDriver,
  codeHash: string,
  now: number,
): Promise<AuthorizationCodeRecord | undefined> {
  return getAs(
    toCode,
    db,
    'UPDATE authorization_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL RETURNING *',
    now,
    String(codeHash),
  );
}

/** Announces a signing-key change to the other instances at commit (when the dialect can). */
async function announceSigningKey(db: SqlDriver, kid: string): Promise<void> {
  if (db.dialect.notify) await db.get(db.dialect.notify, SIGNING_KEYS_CHANNEL, kid);
}

/** See `AuthStore.insertSigningKey`; announced on {@link SIGNING_KEYS_CHANNEL} at commit. */
export function insertSigningKey(ctx: StoreContext, input: NewSigningKey): Promise<SigningKeyRecord> {
  return write(ctx.db, 'signing key', { field: 'kid', value: input.kid }, () =>
    ctx.db.transaction(async (db) => {
      const { json } = db.dialect.values;
      const row = await db.get(
        `INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, expires_at)
          VALUES (?, ?, ?, ?, ?, ?) RETURNING *`,
        input.kid,
        input.alg,
        json(input.privateJwk),
        json(input.publicJwk),
        input.createdAt,
        input.expiresAt ?? null,
      );
      await announceSigningKey(db, input.kid);
      return toKey(row!);
    }),
  );
}

/** See `AuthStore.listSigningKeys`. */
export async function listSigningKeys(
  db: SqlDriver,
  includeRetired: boolean,
  now: number,
): Promise<SigningKeyRecord[]> {
  const sql = includeRetired
    ? 'SELECT * FROM signing_keys WHERE expires_at IS NULL OR expires_at > ? ORDER BY created_at DESC, kid'
    : 'SELECT * FROM signing_keys WHERE retired_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, kid';
  return (await db.all(sql, now)).map(toKey);
}

/** See `AuthStore.retireSigningKey`; announced on {@link SIGNING_KEYS_CHANNEL} at commit. */
export async function retireSigningKey(
  ctx: StoreContext,
  kid: string,
  at: number,
  expiresAt: number | null,
): Promise<void> {
  await ctx.db.transaction(async (db) => {
    const changed = await db.run(
      'UPDATE signing_keys SET retired_at = ?, expires_at = ? WHERE kid = ?',
      at,
      expiresAt,
      kid,
    );
    if (changed === 0) throw new NotFoundError('signing key', kid);
    await announceSigningKey(db, kid);
  });
}

/** See `AuthStore.createLoginSession`. */
export function createLoginSession(db: SqlDriver, input: NewLoginSession): Promise<LoginSessionRecord> {
  return write(db, 'login session', { field: 'sessionHash', value: '…' }, async () => {
    const row = await db.get(INSERT_LOGIN_SESSION, ...loginSessionValues(input, db.dialect.values));
    return toSession(row!);
  });
}

/** See `AuthStore.getLoginSession`. */
export function getLoginSession(db: SqlDriver, sessionHash: string): Promise<LoginSessionRecord | undefined> {
  return getAs(toSession, db, 'SELECT * FROM login_sessions WHERE session_hash = ?', String(sessionHash));
}

/** See `AuthStore.revokeLoginSession`. */
export async function revokeLoginSession(db: SqlDriver, sessionHash: string, now: number): Promise<boolean> {
  return (await revokeRows(db, 'login_sessions', 'session_hash', sessionHash, now)) > 0;
}

/** See `AuthStore.findLoginSessionBySid`. */
export async function findLoginSessionBySid(
  db: SqlDriver,
  sid: string,
): Promise<LoginSessionRecord | undefined> {
  if (typeof sid !== 'string') return undefined;
  return getAs(toSession, db, 'SELECT * FROM login_sessions WHERE sid = ?', sid);
}

/** See `AuthStore.endLoginSession`: the session and its refresh tokens in one transaction. */
export function endLoginSession(ctx: StoreContext, sessionHash: string, now: number): Promise<number> {
  return ctx.db.transaction(async (db) => {
    const session = await db.get(
      'UPDATE login_sessions SET revoked_at = coalesce(revoked_at, ?) WHERE session_hash = ? RETURNING sid',
      now,
      String(sessionHash),
    );
    if (!session || session.sid === null || session.sid === undefined) return 0;
    return revokeRefreshTokensBy(db, 'session_id', String(session.sid), now);
  });
}

/** See `AuthStore.addSessionClient`. */
export async function addSessionClient(
  db: SqlDriver,
  sid: string,
  clientId: string,
  now: number,
): Promise<void> {
  await db.run(
    'INSERT INTO session_clients (session_id, client_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
    sid,
    clientId,
    now,
  );
}
