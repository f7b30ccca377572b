/**
 * Update statements and decisions shared by the SQLite and PostgreSQL stores, the way `./inserts.ts`
 * shares the inserts: both stores bind `?` placeholders (the PostgreSQL store numbers them), so each
 * keeps only its locking, transactions and value binding.
 */
import { ValidationError } from '../errors.ts';
import {
  type clientPatchValues,
  clientSecret,
  newStamp,
  type rolePatchValues,
  type userPatchValues,
} from './inputs.ts';
import type { ValueEncoding } from './inserts.ts';
import { CLIENT_SELECT } from './rows.ts';
import type { ClientRecord, DeviceCodeRecord, RoleRecord, UserRecord } from './types.ts';
import * as v from './validation.ts';

/** Seconds a `slow_down` answer adds to a device code's polling interval (RFC 8628 §3.5). */
export const DEVICE_SLOW_DOWN_SECONDS = 5;

/** Records a device-code poll: parameters `[lastPolledAt ms, added interval seconds, device code hash]`. */
export const UPDATE_DEVICE_POLL =
  'UPDATE device_codes SET last_polled_at = ?, interval_s = interval_s + ? WHERE device_code_hash = ?';

/**
 * The decision for one poll of a device code at `now` (ms since the epoch; RFC 8628 §3.4-3.5): a
 * pending code polled again sooner than its interval answers `slow_down` and its interval grows by
 * {@link DEVICE_SLOW_DOWN_SECONDS}. Pure; `params` are those of {@link UPDATE_DEVICE_POLL}.
 */
export function devicePoll(
  record: DeviceCodeRecord,
  now: number,
): { slowDown: boolean; params: [number, number, string] } {
  const slowDown =
    record.status === 'pending' &&
    record.lastPolledAt !== null &&
    now - record.lastPolledAt < record.intervalSeconds * 1000;
  return { slowDown, params: [now, slowDown ? DEVICE_SLOW_DOWN_SECONDS : 0, record.deviceCodeHash] };
}

/**
 * Finds whether role `$2` is role `$1` or one of its ancestors (parameters `[parent id, role id]`);
 * one row `{ hit: 1 }` if so. `seed` is the first placeholder as the dialect needs it typed
 * (`'?'` for SQLite, `'?::text'` for PostgreSQL).
 */
export function roleInheritsSql(seed: string): string {
  return `WITH RECURSIVE up(id) AS (SELECT ${seed} UNION SELECT rp.parent_id FROM role_parents rp JOIN up ON rp.role_id = up.id)
    SELECT 1 AS hit FROM up WHERE id = ?`;
}

/** Removes every parent of a role: parameter `[role id]`. */
export const DELETE_ROLE_PARENTS = 'DELETE FROM role_parents WHERE role_id = ?';

/** Adds one parent to a role: parameters `[role id, parent id]`. */
export const INSERT_ROLE_PARENT = 'INSERT INTO role_parents (role_id, parent_id) VALUES (?, ?)';

/**
 * The error for `parentRoles[i]` naming a role that is the role being changed or inherits from it
 * (spec 001 "Roles": the role graph is acyclic). Code `cycle`, field `parentRoles[i]`.
 */
export function roleCycleError(names: readonly string[], i: number): ValidationError {
  return new ValidationError(
    `parentRoles[${i}]`,
    'cycle',
    `parentRoles[${i}]: role '${names[i]}' is this role or inherits from it (cycles are not allowed)`,
  );
}

/** Updates a user's profile, name, flags, permissions and stamp; parameters: {@link userUpdateValues}. */
export const UPDATE_USER = `UPDATE users SET display_name = ?, given_name = ?, family_name = ?, email = ?,
  email_verified = ?, phone_number = ?, phone_number_verified = ?, address = ?, user_name = ?, user_name_key = ?, is_enabled = ?, direct_permissions = ?,
  denied_permissions = ?, security_stamp = ?, version = version + 1, updated_at = ? WHERE id = ?`;

/**
 * The parameters of {@link UPDATE_USER} applying a validated patch to `current` at `now` (ms): what the
 * patch leaves out keeps its value, and disabling an enabled user rotates its security stamp (spec 001
 * "User": sessions and tokens of a disabled user stop working).
 */
export function userUpdateValues<L, B, J>(
  current: UserRecord,
  patch: ReturnType<typeof userPatchValues>,
  now: number,
  encode: ValueEncoding<L, B, J>,
): (string | number | null | L | B | J)[] {
  const { userName, isEnabled, direct, denied, profile } = patch;
  const keep = <T>(value: T | undefined, old: T) => (value === undefined ? old : value);
  const name = userName ?? current.userName;
  const address = keep(profile.address, current.address) as Readonly<Record<string, string>> | null;
  return [
    keep(profile.displayName, current.displayName),
    keep(profile.givenName, current.givenName),
    keep(profile.familyName, current.familyName),
    keep(profile.email, current.email),
    encode.bool(keep(profile.emailVerified, current.emailVerified)),
    keep(profile.phoneNumber, current.phoneNumber),
    encode.bool(keep(profile.phoneNumberVerified, current.phoneNumberVerified)),
    address === null ? null : encode.json(address),
    name,
    v.nameKey(name),
    encode.bool(isEnabled ?? current.isEnabled),
    encode.list(direct ?? current.directPermissions),
    encode.list(denied ?? current.deniedPermissions),
    isEnabled === false && current.isEnabled ? newStamp() : current.securityStamp,
    now,
    current.id,
  ];
}

/**
 * Sets a user's password hash: parameters `[hash, rotate (encoded boolean), new stamp, now ms, id]`;
 * the security stamp changes only when `rotate` is true.
 */
export const UPDATE_PASSWORD = `UPDATE users SET password_hash = ?, security_stamp = CASE WHEN ? THEN ? ELSE security_stamp END,
  version = version + 1, updated_at = ? WHERE id = ?`;

/** Locks a user out and rotates its stamp: parameters `[lockout end ms, new stamp, now ms, id]`. */
export const LOCK_USER = `UPDATE users SET lockout_end = ?, access_failed_count = 0, security_stamp = ?,
  version = version + 1, updated_at = ? WHERE id = ?`;

/** Lifts a user's lockout: parameters `[now ms, id]`. */
export const UNLOCK_USER = `UPDATE users SET lockout_end = NULL, access_failed_count = 0, version = version + 1,
  updated_at = ? WHERE id = ?`;

/**
 * Counts a sign-in attempt when the user is not locked out and under the failure limit: parameters
 * `[user id, now ms, max failures]`; returns `access_failed_count`, or no row when the attempt is refused.
 */
export const BEGIN_ACCESS_ATTEMPT = `UPDATE users SET access_failed_count = access_failed_count + 1, lockout_end = NULL
  WHERE id = ? AND (lockout_end IS NULL OR lockout_end <= ?) AND access_failed_count < ?
  RETURNING access_failed_count`;

/** Clears a user's failure count and lockout after a good sign-in: parameters `[user id]`. */
export const SUCCEED_ACCESS_ATTEMPT = `UPDATE users SET access_failed_count = 0, lockout_end = NULL
  WHERE id = ? AND (access_failed_count <> 0 OR lockout_end IS NOT NULL)`;

/** Updates a role's name, description and permissions; parameters: {@link roleUpdateValues}. */
export const UPDATE_ROLE = `UPDATE roles SET name = ?, name_key = ?, description = ?, permissions = ?,
  denied_permissions = ?, version = version + 1, updated_at = ? WHERE id = ?`;

/** The parameters of {@link UPDATE_ROLE} applying a validated patch to `current` at `now` (ms). */
export function roleUpdateValues<L>(
  current: RoleRecord,
  patch: ReturnType<typeof rolePatchValues>,
  now: number,
  encode: ValueEncoding<L, unknown>,
): (string | number | null | L)[] {
  const name = patch.name ?? current.name;
  return [
    name,
    v.nameKey(name),
    patch.description ?? current.description,
    encode.list(patch.permissions ?? current.permissions),
    encode.list(patch.denied ?? current.deniedPermissions),
    now,
    current.id,
  ];
}

/** Bumps the version of every holder of a role (parameter `[role id]`), so cached matchers are rebuilt. */
export const BUMP_ROLE_HOLDERS =
  'UPDATE users SET version = version + 1 WHERE id IN (SELECT user_id FROM user_roles WHERE role_id = ?)';

/**
 * The validated inputs of `AuthStore.setPasswordHash`: the hash and whether the security stamp rotates
 * (`options.rotateStamp`, default true). @throws ValidationError `passwordHash` (`required`) when the
 * hash is not a non-empty string.
 */
export function passwordChange(passwordHash: unknown, options?: { rotateStamp?: boolean }) {
  if (typeof passwordHash !== 'string' || passwordHash.length === 0) {
    throw new ValidationError('passwordHash', 'required');
  }
  return { passwordHash, rotate: options?.rotateStamp ?? true };
}

/** The key (trimmed, lower-case) a permission code is stored under. */
export const permissionKey = (code: string): string => String(code).trim().toLowerCase();

/** Sets a permission's description: parameters `[description or null, permission key]`. */
export const UPDATE_PERMISSION = 'UPDATE permissions SET description = ? WHERE code = ?';

/** Updates a client's settings; parameters: {@link clientUpdateValues}. */
export const UPDATE_CLIENT = `UPDATE clients SET display_name = ?, secret_hash = ?, is_enabled = ?, redirect_uris = ?,
  allowed_grant_types = ?, allowed_scopes = ?, permissions = ?, version = version + 1, updated_at = ?
  WHERE client_id = ?`;

/**
 * The parameters of {@link UPDATE_CLIENT} applying a validated patch to `current` at `now` (ms); a
 * `secretHash` in the raw patch is checked against the client type (spec 001 "Client": public clients
 * have no secret). @throws ValidationError `secretHash` as `clientSecret` does.
 */
export function clientUpdateValues<L, B>(
  current: ClientRecord,
  values: ReturnType<typeof clientPatchValues>,
  secretHash: unknown,
  now: number,
  encode: ValueEncoding<L, B>,
): (string | number | null | L | B)[] {
  return [
    values.displayName ?? current.displayName,
    secretHash === undefined ? current.secretHash : clientSecret(current.clientType, secretHash),
    encode.bool(values.isEnabled ?? current.isEnabled),
    encode.list(values.redirectUris ?? current.redirectUris),
    encode.list(values.grantTypes ?? current.allowedGrantTypes),
    encode.list(values.scopes ?? current.allowedScopes),
    encode.list(values.permissions ?? current.permissions),
    now,
    current.clientId,
  ];
}

/** How the stores page through clients (`page` helpers): search on the lower-cased id, order by id. */
export const CLIENT_LIST = {
  table: 'clients c',
  select: CLIENT_SELECT,
  search: 'lower(c.client_id)',
  order: 'c.client_id',
} as const;

/** Bumps a client's version: parameters `[now ms, client id]`. */
export const BUMP_CLIENT = 'UPDATE clients SET version = version + 1, updated_at = ? WHERE client_id = ?';

/** Sets a client's extension metadata: parameters `[client id, metadata (JSON)]`. */
export const UPSERT_CLIENT_METADATA = `INSERT INTO client_metadata (client_id, metadata) VALUES (?, ?)
  ON CONFLICT (client_id) DO UPDATE SET metadata = excluded.metadata`;

/** Sets a client's registration access token hash (RFC 7592): parameters `[client id, hash, now ms]`. */
export const UPSERT_REGISTRATION_TOKEN = `INSERT INTO client_registrations (client_id, access_token_hash, created_at)
  VALUES (?, ?, ?) ON CONFLICT (client_id) DO UPDATE SET access_token_hash = excluded.access_token_hash`;
