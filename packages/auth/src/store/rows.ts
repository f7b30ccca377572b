/**
 * Row → record mapping shared by the SQLite and PostgreSQL stores. Both schemas use the same table and
 * column names; they differ in value types, which these mappers accept either way: flags are SQLite
 * integers `0`/`1` or PostgreSQL booleans, JSON columns are SQLite text or PostgreSQL `jsonb` (already
 * parsed by the driver), 64-bit integers are numbers or decimal strings (PostgreSQL `bigint`), name lists
 * are a JSON array text or an array.
 */
import type {
  AuditEvent,
  AuthorizationCodeRecord,
  ClientMetadata,
  ClientRecord,
  ConsentRecord,
  DeviceCodeRecord,
  DeviceCodeStatus,
  GrantType,
  LoginSessionRecord,
  PushedRequestRecord,
  RefreshTokenRecord,
  RefreshTokenWithOwner,
  RoleRecord,
  SigningKeyRecord,
  UserAddress,
  UserRecord,
} from './types.ts';

/** A database row: column name → value as the driver returns it. */
export type Row = Record<string, unknown>;

/** A JSON column: parses text (SQLite), passes parsed values (PostgreSQL `jsonb`) through. */
export function json<T>(value: unknown): T {
  return (typeof value === 'string' ? JSON.parse(value) : value) as T;
}

/** A flag column: SQLite `1` or PostgreSQL `true`. */
export const flag = (value: unknown): boolean => value === 1 || value === true;

/** A nullable number column (bigint strings included). */
export const num = (value: unknown): number | null =>
  value === null || value === undefined ? null : Number(value);

/** A nullable text column. */
export const strOrNull = (value: unknown): string | null =>
  value === null || value === undefined ? null : String(value);

/**
 * The scopes of a consent after a grant: those of the current `consents` row (`scopes` JSON column; no
 * row: none) united with `granted`, without repeats, sorted.
 */
export function grantedScopes(current: Row | undefined, granted: readonly string[]): string[] {
  return [...new Set([...(current ? json<string[]>(current.scopes) : []), ...granted])].sort();
}

/** A list of names (JSON array text or array; nulls from outer joins dropped), sorted. */
export function sortedNames(value: unknown): string[] {
  const names = value === null || value === undefined ? [] : json<(string | null)[]>(value);
  return names.filter((n): n is string => typeof n === 'string').sort();
}

/** `users` row (with `roles`: the names of the roles held). */
export function toUser(row: Row): UserRecord {
  return {
    id: String(row.id),
    userName: String(row.user_name),
    passwordHash: strOrNull(row.password_hash),
    isEnabled: flag(row.is_enabled),
    lockoutEnd: num(row.lockout_end),
    accessFailedCount: Number(row.access_failed_count),
    securityStamp: String(row.security_stamp),
    roles: sortedNames(row.roles),
    directPermissions: json(row.direct_permissions),
    deniedPermissions: json(row.denied_permissions),
    displayName: strOrNull(row.display_name),
    givenName: strOrNull(row.given_name),
    familyName: strOrNull(row.family_name),
    email: strOrNull(row.email),
    emailVerified: flag(row.email_verified),
    phoneNumber: strOrNull(row.phone_number),
    phoneNumberVerified: flag(row.phone_number_verified),
    address: row.address === null || row.address === undefined ? null : json<UserAddress>(row.address),
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** `roles` row (with `parent_roles`: the names of its parents). */
export function toRole(row: Row): RoleRecord {
  return {
    id: String(row.id),
    name: String(row.name),
    description: String(row.description),
    permissions: json(row.permissions),
    deniedPermissions: json(row.denied_permissions),
    parentRoles: sortedNames(row.parent_roles),
    isSystem: flag(row.is_system),
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** Clients with their OAuth extension metadata (`metadata`, or null), the row {@link toClient} reads; alias `c`. */
export const CLIENT_SELECT =
  'SELECT c.*, m.metadata FROM clients c LEFT JOIN client_metadata m ON m.client_id = c.client_id';

/**
 * Freezes a client record and its arrays in place, for the stores' client caches, which hand the same
 * object to every caller; returns it.
 */
export function freezeClient(record: ClientRecord): ClientRecord {
  for (const list of [
    record.redirectUris,
    record.allowedGrantTypes,
    record.allowedScopes,
    record.permissions,
  ])
    Object.freeze(list);
  return Object.freeze(record);
}

/** `clients` row (with `metadata` from `client_metadata`, or null). */
export function toClient(row: Row): ClientRecord {
  return {
    clientId: String(row.client_id),
    displayName: String(row.display_name),
    clientType: row.client_type === 'public' ? 'public' : 'confidential',
    secretHash: strOrNull(row.secret_hash),
    isEnabled: flag(row.is_enabled),
    redirectUris: json(row.redirect_uris),
    allowedGrantTypes: json<GrantType[]>(row.allowed_grant_types),
    allowedScopes: json(row.allowed_scopes),
    permissions: json(row.permissions),
    postLogoutRedirectUris: json(row.post_logout_redirect_uris ?? '[]'),
    backchannelLogoutUri: strOrNull(row.backchannel_logout_uri),
    requireConsent: flag(row.require_consent),
    metadata: row.metadata === null || row.metadata === undefined ? {} : json<ClientMetadata>(row.metadata),
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** `audit_events` row. */
export function toAudit(row: Row): AuditEvent {
  return {
    id: Number(row.id),
    time: Number(row.time),
    category: String(row.category),
    outcome: String(row.outcome),
    subjectId: strOrNull(row.subject_id),
    subjectName: strOrNull(row.subject_name),
    clientId: strOrNull(row.client_id),
    failureCode: strOrNull(row.failure_code),
    remoteAddress: strOrNull(row.remote_address),
    details: row.details === null || row.details === undefined ? null : json(row.details),
  };
}

/** `device_codes` row. */
export function toDeviceCode(row: Row): DeviceCodeRecord {
  return {
    deviceCodeHash: String(row.device_code_hash),
    userCode: String(row.user_code),
    clientId: String(row.client_id),
    scope: String(row.scope),
    status: String(row.status) as DeviceCodeStatus,
    userId: strOrNull(row.user_id),
    intervalSeconds: Number(row.interval_s),
    lastPolledAt: num(row.last_polled_at),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
  };
}

/** `pushed_authorization_requests` row. */
export function toPushedRequest(row: Row): PushedRequestRecord {
  return {
    requestHash: String(row.request_hash),
    clientId: String(row.client_id),
    params: json<Record<string, string>>(row.params),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    usedAt: num(row.used_at),
  };
}

/** `refresh_tokens` row. */
export function toRefresh(row: Row): RefreshTokenRecord {
  return {
    tokenHash: String(row.token_hash),
    familyId: String(row.family_id),
    clientId: String(row.client_id),
    userId: strOrNull(row.user_id),
    scope: String(row.scope),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    usedAt: num(row.used_at),
    revokedAt: num(row.revoked_at),
    replacedBy: strOrNull(row.replaced_by),
    dpopJkt: strOrNull(row.dpop_jkt),
    sessionId: strOrNull(row.session_id),
    authTime: num(row.auth_time),
    amr: row.amr === null || row.amr === undefined ? [] : json<string[]>(row.amr),
  };
}

/**
 * A `refresh_tokens` row joined with its user's `owner_id`, `owner_user_name`, `owner_is_enabled`,
 * `owner_lockout_end`, `owner_security_stamp` (null when there is no user).
 */
export function toRefreshWithOwner(row: Row): RefreshTokenWithOwner {
  return {
    token: toRefresh(row),
    owner:
      row.owner_id === null || row.owner_id === undefined
        ? undefined
        : {
            id: String(row.owner_id),
            userName: String(row.owner_user_name),
            isEnabled: flag(row.owner_is_enabled),
            lockoutEnd: num(row.owner_lockout_end),
            securityStamp: String(row.owner_security_stamp),
          },
  };
}

/** `authorization_codes` row. */
export function toCode(row: Row): AuthorizationCodeRecord {
  return {
    codeHash: String(row.code_hash),
    clientId: String(row.client_id),
    userId: String(row.user_id),
    redirectUri: String(row.redirect_uri),
    scope: String(row.scope),
    codeChallenge: strOrNull(row.code_challenge),
    codeChallengeMethod: strOrNull(row.code_challenge_method),
    nonce: strOrNull(row.nonce),
    authTime: num(row.auth_time),
    sessionId: strOrNull(row.session_id),
    amr: row.amr === null || row.amr === undefined ? [] : json<string[]>(row.amr),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    usedAt: num(row.used_at),
  };
}

/** `signing_keys` row. */
export function toKey(row: Row): SigningKeyRecord {
  return {
    kid: String(row.kid),
    alg: String(row.alg),
    privateJwk: json(row.private_jwk),
    publicJwk: json(row.public_jwk),
    createdAt: Number(row.created_at),
    retiredAt: num(row.retired_at),
    expiresAt: num(row.expires_at),
  };
}

/** `login_sessions` row. */
export function toSession(row: Row): LoginSessionRecord {
  return {
    sessionHash: String(row.session_hash),
    userId: String(row.user_id),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    revokedAt: num(row.revoked_at),
    sid: strOrNull(row.sid),
    amr: json<string[]>(row.amr ?? '["pwd"]'),
  };
}

/** `consents` row. */
export function toConsent(row: Row): ConsentRecord {
  return {
    userId: String(row.user_id),
    clientId: String(row.client_id),
    scopes: json<string[]>(row.scopes),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}
