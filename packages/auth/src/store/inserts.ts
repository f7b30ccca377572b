/**
 * The INSERT statements the SQLite and the PostgreSQL store share, with their parameter lists in column
 * order (spec 001's records: users, roles, clients, refresh tokens, authorization codes, device codes,
 * login sessions, pushed authorization requests).
 * Both drivers take `?` placeholders; the values the two databases represent differently (lists of
 * strings, booleans) go through the store's {@link ValueEncoding}. Inputs are validated before (`inputs.ts`).
 */
import type { newClientValues, newRoleValues, newUserValues } from './inputs.ts';
import type {
  DeviceCodeRecord,
  NewAuthorizationCode,
  NewLoginSession,
  NewRefreshToken,
  PushedRequestRecord,
} from './types.ts';
import * as v from './validation.ts';

/** How a store binds the values SQLite and PostgreSQL represent differently. */
export interface ValueEncoding<L, B, J = unknown> {
  /** A list of strings: JSON text in SQLite, the array itself for PostgreSQL's `jsonb` columns. */
  list(values: readonly string[]): L;
  /** A boolean: 1 or 0 in SQLite, the boolean in PostgreSQL. */
  bool(value: boolean): B;
  /** A JSON object: JSON text in SQLite, the object itself for a `jsonb` column. */
  json(value: object): J;
}

/** {@link ValueEncoding} of the SQLite store. */
export const SQLITE_VALUES: ValueEncoding<string, number, string> = {
  list: (values) => JSON.stringify(values),
  bool: (value) => (value ? 1 : 0),
  json: (value) => JSON.stringify(value),
};

/** {@link ValueEncoding} of the PostgreSQL store. */
export const POSTGRES_VALUES: ValueEncoding<readonly string[], boolean, { readonly [key: string]: unknown }> =
  {
    list: (values) => values,
    bool: (value) => value,
    json: (value) => value as { readonly [key: string]: unknown },
  };

/** Inserts a user; parameters: {@link userValues}. */
export const INSERT_USER = `INSERT INTO users (id, user_name, user_name_key, password_hash, is_enabled,
  security_stamp, direct_permissions, denied_permissions, created_at, updated_at, display_name, given_name,
  family_name, email, email_verified, phone_number, phone_number_verified, address)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** The parameters of {@link INSERT_USER} for a new user `id` with security stamp `stamp`, at `now` (ms). */
export function userValues<L, B, J>(
  id: string,
  values: ReturnType<typeof newUserValues>,
  stamp: string,
  now: number,
  encode: ValueEncoding<L, B, J>,
): (SqlValue | L | B | J)[] {
  const { profile } = values;
  return [
    id,
    values.userName,
    v.nameKey(values.userName),
    values.passwordHash,
    encode.bool(values.isEnabled),
    stamp,
    encode.list(values.direct),
    encode.list(values.denied),
    now,
    now,
    profile.displayName ?? null,
    profile.givenName ?? null,
    profile.familyName ?? null,
    profile.email ?? null,
    encode.bool(profile.emailVerified ?? false),
    profile.phoneNumber ?? null,
    encode.bool(profile.phoneNumberVerified ?? false),
    profile.address ? encode.json(profile.address as Readonly<Record<string, string>>) : null,
  ];
}

/** Inserts a role; parameters: {@link roleValues}. */
export const INSERT_ROLE = `INSERT INTO roles (id, name, name_key, description, permissions, denied_permissions,
  created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`;

/** The parameters of {@link INSERT_ROLE} for a new role `id` at `now` (ms). */
export function roleValues<L>(
  id: string,
  values: ReturnType<typeof newRoleValues>,
  now: number,
  encode: ValueEncoding<L, unknown>,
): (SqlValue | L)[] {
  return [
    id,
    values.name,
    v.nameKey(values.name),
    values.description,
    encode.list(values.permissions),
    encode.list(values.denied),
    now,
    now,
  ];
}

/** Inserts a client (its OpenID Connect settings and metadata live in other tables); parameters: {@link clientValues}. */
export const INSERT_CLIENT = `INSERT INTO clients (client_id, display_name, client_type, secret_hash, is_enabled,
  redirect_uris, allowed_grant_types, allowed_scopes, permissions, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** The parameters of {@link INSERT_CLIENT} at `now` (ms). */
export function clientValues<L, B>(
  values: ReturnType<typeof newClientValues>,
  now: number,
  encode: ValueEncoding<L, B>,
): (SqlValue | L | B)[] {
  return [
    values.clientId,
    values.displayName,
    values.clientType,
    values.secretHash,
    encode.bool(values.isEnabled),
    encode.list(values.redirectUris),
    encode.list(values.grantTypes),
    encode.list(values.scopes),
    encode.list(values.permissions),
    now,
    now,
  ];
}

/** A SQL parameter both stores bind as is (`node:sqlite` and `postgres`). */
type SqlValue = string | number | null;

/** Columns of a refresh-token insert, in the order of {@link refreshTokenValues} (both stores). */
export const REFRESH_TOKEN_COLUMNS = `token_hash, family_id, client_id, user_id, scope, created_at, expires_at,
  dpop_jkt, session_id, auth_time, amr`;

/** The values of a refresh-token insert, in the order of {@link REFRESH_TOKEN_COLUMNS}. */
export function refreshTokenValues(input: NewRefreshToken): SqlValue[] {
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
    input.amr && input.amr.length > 0 ? JSON.stringify(input.amr) : null,
  ];
}

/** Inserts an authorization code and returns its row; parameters: {@link authorizationCodeValues}. */
export const INSERT_AUTHORIZATION_CODE = `INSERT INTO authorization_codes (code_hash, client_id, user_id,
  redirect_uri, scope, code_challenge, code_challenge_method, nonce, created_at, expires_at, auth_time,
  session_id, amr) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`;

/**
 * The parameters of {@link INSERT_AUTHORIZATION_CODE}; `encodeAmr` turns the authentication methods into
 * the store's column value (JSON text in SQLite, a JSON value in PostgreSQL).
 */
export function authorizationCodeValues<A>(
  input: NewAuthorizationCode,
  encodeAmr: (amr: readonly string[]) => A,
): (SqlValue | A)[] {
  return [
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
    input.amr ? encodeAmr(input.amr) : null,
  ];
}

/** Inserts a device authorization (RFC 8628 §3.2) and returns its row; parameters: {@link deviceCodeValues}. */
export const INSERT_DEVICE_CODE = `INSERT INTO device_codes (device_code_hash, user_code, client_id, scope,
  interval_s, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`;

/** The parameters of {@link INSERT_DEVICE_CODE}. */
export function deviceCodeValues(
  input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
): SqlValue[] {
  return [
    input.deviceCodeHash,
    input.userCode,
    input.clientId,
    input.scope,
    input.intervalSeconds,
    input.createdAt,
    input.expiresAt,
  ];
}

/** Inserts a login session and returns its row; parameters: {@link loginSessionValues}. */
export const INSERT_LOGIN_SESSION = `INSERT INTO login_sessions (session_hash, user_id, created_at, expires_at, sid,
  amr) VALUES (?, ?, ?, ?, ?, ?) RETURNING *`;

/** The parameters of {@link INSERT_LOGIN_SESSION}; `amr` defaults to `['pwd']`. */
export function loginSessionValues<L>(
  input: NewLoginSession,
  encode: ValueEncoding<L, unknown>,
): (SqlValue | L)[] {
  return [
    input.sessionHash,
    input.userId,
    input.createdAt,
    input.expiresAt,
    input.sid ?? null,
    encode.list(input.amr ?? ['pwd']),
  ];
}

/** Inserts a pushed authorization request (RFC 9126 §2.2) and returns its row; parameters: {@link pushedRequestValues}. */
export const INSERT_PUSHED_REQUEST = `INSERT INTO pushed_authorization_requests (request_hash, client_id, params,
  created_at, expires_at) VALUES (?, ?, ?, ?, ?) RETURNING *`;

/** The parameters of {@link INSERT_PUSHED_REQUEST}. */
export function pushedRequestValues<J>(
  input: Omit<PushedRequestRecord, 'usedAt'>,
  encode: ValueEncoding<unknown, unknown, J>,
): (SqlValue | J)[] {
  return [input.requestHash, input.clientId, encode.json(input.params), input.createdAt, input.expiresAt];
}
