/**
 * Token lifecycle of the PostgreSQL store: refresh tokens (rotation with reuse detection, RFC 9700
 * §4.14.2), authorization codes (single use, RFC 6749 §4.1.2), signing keys and login sessions.
 *
 * Every one-time transition is one conditional `UPDATE` (`… WHERE used_at IS NULL …`): when two instances
 * race, PostgreSQL lets exactly one of them change the row. A rotation is one statement too (the `UPDATE`
 * of the old token and the `INSERT` of its successor in one CTE), so it takes one round trip. Signing-key
 * changes are announced on the {@link SIGNING_KEYS_CHANNEL} notification channel, delivered at commit.
 */
import { NotFoundError } from '../../errors.ts';
import {
  authorizationCodeValues,
  INSERT_AUTHORIZATION_CODE,
  INSERT_LOGIN_SESSION,
  loginSessionValues,
  POSTGRES_VALUES,
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
import { all, get, getAs, type PgContext, type Q, run, tx, write } from './db.ts';

/** `LISTEN`/`NOTIFY` channel announcing inserted or retired signing keys (payload: the kid). */
export const SIGNING_KEYS_CHANNEL = 'seed_auth_signing_keys';

const hidden = { field: 'tokenHash', value: '…' };

/** See `AuthStore.insertRefreshToken`. */
export function insertRefreshToken(q: Q, input: NewRefreshToken): Promise<RefreshTokenRecord> {
  return write('refresh token', hidden, async () => {
    const row = await get(
      q,
      `INSERT INTO refresh_tokens (${REFRESH_TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
      ...refreshTokenValues(input),
    );
    return toRefresh(row!);
  });
}

/** See `AuthStore.findRefreshToken`. */
export function findRefreshToken(q: Q, tokenHash: string): Promise<RefreshTokenRecord | undefined> {
  return getAs(toRefresh, q, 'SELECT * FROM refresh_tokens WHERE token_hash = ?', String(tokenHash));
}

/** See `AuthStore.findRefreshTokenWithOwner`. */
export function findRefreshTokenWithOwner(
  q: Q,
  tokenHash: string,
): Promise<RefreshTokenWithOwner | undefined> {
  return getAs(
    toRefreshWithOwner,
    q,
    `SELECT t.*, u.id AS owner_id, u.user_name AS owner_user_name, u.is_enabled AS owner_is_enabled,
      u.lockout_end AS owner_lockout_end, u.security_stamp AS owner_security_stamp
      FROM refresh_tokens t LEFT JOIN users u ON u.id = t.user_id WHERE t.token_hash = ?`,
    String(tokenHash),
  );
}

/** See `AuthStore.markRefreshTokenUsed`. */
export async function markRefreshTokenUsed(
  q: Q,
  tokenHash: string,
  now: number,
  replacedBy: string | null,
): Promise<boolean> {
  const changed = await run(
    q,
    `UPDATE refresh_tokens SET used_at = ?, replaced_by = ?
      WHERE token_hash = ? AND used_at IS NULL AND revoked_at IS NULL`,
    now,
    replacedBy,
    String(tokenHash),
  );
  return changed > 0;
}

/**
 * See `AuthStore.rotateRefreshToken`: one statement marks the old token used — only when unused and
 * unrevoked — and inserts its successor only when that happened.
 */
export function rotateRefreshToken(
  q: Q,
  tokenHash: string,
  next: NewRefreshToken,
  now: number,
): Promise<boolean> {
  return write('refresh token', hidden, async () => {
    const row = await get(
      q,
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

/** See `AuthStore.revokeRefreshToken`. */
export async function revokeRefreshToken(q: Q, tokenHash: string, now: number): Promise<boolean> {
  const changed = await run(
    q,
    'UPDATE refresh_tokens SET revoked_at = ? WHERE token_hash = ? AND revoked_at IS NULL',
    now,
    String(tokenHash),
  );
  return changed > 0;
}

/** See `AuthStore.revokeRefreshTokenFamily`: the family's usable tokens. @returns how many. */
export function revokeUsableFamilyTokens(q: Q, familyId: string, now: number): Promise<number> {
  return run(
    q,
    'UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND used_at IS NULL AND revoked_at IS NULL',
    now,
    String(familyId),
  );
}

/** Revokes the unrevoked refresh tokens whose `column` is `value`. @returns how many. */
export function revokeRefreshTokensBy(
  q: Q,
  column: 'user_id' | 'session_id',
  value: string,
  now: number,
): Promise<number> {
  return run(
    q,
    `UPDATE refresh_tokens SET revoked_at = ? WHERE ${column} = ? AND revoked_at IS NULL`,
    now,
    String(value),
  );
}

/** See `AuthStore.insertAuthorizationCode`. */
export function insertAuthorizationCode(q: Q, input: NewAuthorizationCode): Promise<AuthorizationCodeRecord> {
  return write('authorization code', { field: 'codeHash', value: '…' }, async () => {
    const row = await get(q, INSERT_AUTHORIZATION_CODE, ...authorizationCodeValues(input, (amr) => [...amr]));
    return toCode(row!);
  });
}

/** See `AuthStore.findAuthorizationCode`. */
export function findAuthorizationCode(q: Q, codeHash: string): Promise<AuthorizationCodeRecord | undefined> {
  return getAs(toCode, q, 'SELECT * FROM authorization_codes WHERE code_hash = ?', String(codeHash));
}

/** See `AuthStore.consumeAuthorizationCode`: one conditional `UPDATE … RETURNING`. */
export function consumeAuthorizationCode(
  q: Q,
  codeHash: string,
  now: number,
): Promise<AuthorizationCodeRecord | undefined> {
  return getAs(
    toCode,
    q,
    'UPDATE authorization_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL RETURNING *',
    now,
    String(codeHash),
  );
}

/** See `AuthStore.insertSigningKey`; announced on {@link SIGNING_KEYS_CHANNEL} at commit. */
export function insertSigningKey(ctx: PgContext, input: NewSigningKey): Promise<SigningKeyRecord> {
  return write('signing key', { field: 'kid', value: input.kid }, () =>
    tx(ctx, async (q) => {
      const row = await get(
        q,
        `INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at, expires_at)
          VALUES (?, ?, ?, ?, ?, ?) RETURNING *`,
        input.kid,
        input.alg,
        input.privateJwk,
        input.publicJwk,
        input.createdAt,
        input.expiresAt ?? null,
      );
      await get(q, 'SELECT pg_notify(?, ?)', SIGNING_KEYS_CHANNEL, input.kid);
      return toKey(row!);
    }),
  );
}

/** See `AuthStore.listSigningKeys`. */
export async function listSigningKeys(
  q: Q,
  includeRetired: boolean,
  now: number,
): Promise<SigningKeyRecord[]> {
  const sql = includeRetired
    ? 'SELECT * FROM signing_keys WHERE expires_at IS NULL OR expires_at > ? ORDER BY created_at DESC, kid'
    : 'SELECT * FROM signing_keys WHERE retired_at IS NULL AND (expires_at IS NULL OR expires_at > ?) ORDER BY created_at DESC, kid';
  return (await all(q, sql, now)).map(toKey);
}

/** See `AuthStore.retireSigningKey`; announced on {@link SIGNING_KEYS_CHANNEL} at commit. */
export async function retireSigningKey(
  ctx: PgContext,
  kid: string,
  at: number,
  expiresAt: number | null,
): Promise<void> {
  await tx(ctx, async (q) => {
    const changed = await run(
      q,
      'UPDATE signing_keys SET retired_at = ?, expires_at = ? WHERE kid = ?',
      at,
      expiresAt,
      kid,
    );
    if (changed === 0) throw new NotFoundError('signing key', kid);
    await get(q, 'SELECT pg_notify(?, ?)', SIGNING_KEYS_CHANNEL, kid);
  });
}

/** See `AuthStore.createLoginSession`. */
export function createLoginSession(q: Q, input: NewLoginSession): Promise<LoginSessionRecord> {
  return write('login session', { field: 'sessionHash', value: '…' }, async () => {
    const row = await get(q, INSERT_LOGIN_SESSION, ...loginSessionValues(input, POSTGRES_VALUES));
    return toSession(row!);
  });
}

/** See `AuthStore.getLoginSession`. */
export function getLoginSession(q: Q, sessionHash: string): Promise<LoginSessionRecord | undefined> {
  return getAs(toSession, q, 'SELECT * FROM login_sessions WHERE session_hash = ?', String(sessionHash));
}

/** See `AuthStore.revokeLoginSession`. */
export async function revokeLoginSession(q: Q, sessionHash: string, now: number): Promise<boolean> {
  const changed = await run(
    q,
    'UPDATE login_sessions SET revoked_at = ? WHERE session_hash = ? AND revoked_at IS NULL',
    now,
    String(sessionHash),
  );
  return changed > 0;
}

/** See `AuthStore.findLoginSessionBySid`. */
export async function findLoginSessionBySid(q: Q, sid: string): Promise<LoginSessionRecord | undefined> {
  if (typeof sid !== 'string') return undefined;
  return getAs(toSession, q, 'SELECT * FROM login_sessions WHERE sid = ?', sid);
}

/** See `AuthStore.endLoginSession`: the session and its refresh tokens in one transaction. */
export function endLoginSession(ctx: PgContext, sessionHash: string, now: number): Promise<number> {
  return tx(ctx, async (q) => {
    const session = await get(
      q,
      'UPDATE login_sessions SET revoked_at = coalesce(revoked_at, ?) WHERE session_hash = ? RETURNING sid',
      now,
      String(sessionHash),
    );
    if (!session || session.sid === null || session.sid === undefined) return 0;
    return revokeRefreshTokensBy(q, 'session_id', String(session.sid), now);
  });
}

/** See `AuthStore.addSessionClient`. */
export async function addSessionClient(q: Q, sid: string, clientId: string, now: number): Promise<void> {
  await run(
    q,
    'INSERT INTO session_clients (session_id, client_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING',
    sid,
    clientId,
    now,
  );
}
