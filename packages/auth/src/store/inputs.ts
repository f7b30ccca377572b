/**
 * Validated inputs of the store methods, shared by the SQLite and PostgreSQL stores so that both accept
 * and refuse exactly the same input (spec 001 "Resources and their fields"). Every function throws
 * `ValidationError` naming the field; none touches a database.
 */
import { randomBytes } from 'node:crypto';
import { ConstraintError, ValidationError } from '../errors.ts';
import type {
  AuditQuery,
  ClientOidcInput,
  ClientPatch,
  NewAuditEvent,
  NewClient,
  NewRole,
  NewUser,
  RolePatch,
  RoleRecord,
  UserAddress,
  UserPatch,
  UserProfileInput,
} from './types.ts';
import * as v from './validation.ts';

/** A fresh security stamp: 128 random bits, base64url. */
export function newStamp(): string {
  return randomBytes(16).toString('base64url');
}

/** The validated OpenID Connect settings of a client input (undefined: unchanged). @throws ValidationError. */
export function clientOidcValues(input: ClientOidcInput) {
  return {
    postLogoutRedirectUris:
      input.postLogoutRedirectUris === undefined
        ? undefined
        : v.redirectUris(input.postLogoutRedirectUris, 'postLogoutRedirectUris'),
    backchannelLogoutUri:
      input.backchannelLogoutUri === undefined
        ? undefined
        : v.httpUri(input.backchannelLogoutUri, 'backchannelLogoutUri'),
    requireConsent:
      input.requireConsent === undefined ? undefined : v.bool(input.requireConsent, 'requireConsent', false),
  };
}

/** What {@link clientOidcValues} answers. */
export type ClientOidcValues = ReturnType<typeof clientOidcValues>;

/** The validated profile fields of a user input (undefined: absent, null: cleared). @throws ValidationError. */
export function profileValues(input: UserProfileInput): {
  displayName: string | null | undefined;
  givenName: string | null | undefined;
  familyName: string | null | undefined;
  email: string | null | undefined;
  emailVerified: boolean | undefined;
  phoneNumber: string | null | undefined;
  phoneNumberVerified: boolean | undefined;
  address: UserAddress | null | undefined;
} {
  return {
    displayName: v.profileText(input.displayName, 'displayName'),
    givenName: v.profileText(input.givenName, 'givenName'),
    familyName: v.profileText(input.familyName, 'familyName'),
    email: v.email(input.email),
    emailVerified:
      input.emailVerified === undefined ? undefined : v.bool(input.emailVerified, 'emailVerified', false),
    phoneNumber: v.phoneNumber(input.phoneNumber),
    phoneNumberVerified:
      input.phoneNumberVerified === undefined
        ? undefined
        : v.bool(input.phoneNumberVerified, 'phoneNumberVerified', false),
    address: v.address(input.address),
  };
}

/** Paging of list methods: `offset` ≥ 0 (default 0), `limit` 1–1000 (default 50). @throws ValidationError. */
export function paging(query: { offset?: number; limit?: number } | undefined): {
  offset: number;
  limit: number;
} {
  const offset = query?.offset ?? 0;
  const limit = query?.limit ?? 50;
  if (!Number.isInteger(offset) || offset < 0) throw new ValidationError('offset', 'non_negative_integer');
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
    throw new ValidationError('limit', 'range', 'limit: integer from 1 to 1000');
  }
  return { offset, limit };
}

/**
 * The `LIKE … ESCAPE '\'` pattern of a case-insensitive substring search (`%`, `_` and `\` escaped).
 * @throws ValidationError (`search`: not a string of at most 256 characters).
 */
export function likePattern(search: unknown): string {
  if (search !== undefined && (typeof search !== 'string' || search.length > 256)) {
    throw new ValidationError('search', 'string', 'search: a string of at most 256 characters');
  }
  return `%${((search as string | undefined) ?? '').toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * The secret hash a client of `clientType` may hold: none for public clients, a non-empty PHC string for
 * confidential ones. @throws ValidationError (`secretHash`).
 */
export function clientSecret(clientType: string, secretHash: unknown): string | null {
  if (clientType === 'public') {
    if (secretHash !== undefined && secretHash !== null) {
      throw new ValidationError('secretHash', 'public_client', 'secretHash: a public client has no secret');
    }
    return null;
  }
  if (typeof secretHash !== 'string' || secretHash.length === 0) {
    throw new ValidationError('secretHash', 'required', 'secretHash: required for a confidential client');
  }
  return secretHash;
}

/** The validated fields of {@link NewUser}. @throws ValidationError. */
export function newUserValues(input: NewUser) {
  const userName = v.userName(input?.userName);
  const passwordHash = input.passwordHash ?? null;
  if (passwordHash !== null && typeof passwordHash !== 'string')
    throw new ValidationError('passwordHash', 'string');
  return {
    userName,
    isEnabled: v.bool(input.isEnabled, 'isEnabled', true),
    roles: v.roleNameList(input.roles),
    direct: v.permissionList(input.directPermissions, 'directPermissions'),
    denied: v.permissionList(input.deniedPermissions, 'deniedPermissions'),
    passwordHash,
    profile: profileValues(input),
  };
}

/** The validated fields of a {@link UserPatch} (undefined: unchanged). @throws ValidationError. */
export function userPatchValues(patch: UserPatch) {
  return {
    userName: patch.userName === undefined ? undefined : v.userName(patch.userName),
    isEnabled: patch.isEnabled === undefined ? undefined : v.bool(patch.isEnabled, 'isEnabled', true),
    roles: patch.roles === undefined ? undefined : v.roleNameList(patch.roles),
    direct:
      patch.directPermissions === undefined
        ? undefined
        : v.permissionList(patch.directPermissions, 'directPermissions'),
    denied:
      patch.deniedPermissions === undefined
        ? undefined
        : v.permissionList(patch.deniedPermissions, 'deniedPermissions'),
    profile: profileValues(patch),
  };
}

/** The validated fields of {@link NewRole}. @throws ValidationError. */
export function newRoleValues(input: NewRole) {
  return {
    name: v.roleName(input?.name),
    description: v.optionalText(input.description, 'description'),
    permissions: v.permissionList(input.permissions, 'permissions'),
    denied: v.permissionList(input.deniedPermissions, 'deniedPermissions'),
    parents: v.roleNameList(input.parentRoles, 'parentRoles'),
  };
}

/** The validated fields of a {@link RolePatch} (undefined: unchanged). @throws ValidationError. */
export function rolePatchValues(patch: RolePatch) {
  return {
    name: patch.name === undefined ? undefined : v.roleName(patch.name),
    description:
      patch.description === undefined ? undefined : v.optionalText(patch.description, 'description'),
    permissions:
      patch.permissions === undefined ? undefined : v.permissionList(patch.permissions, 'permissions'),
    denied:
      patch.deniedPermissions === undefined
        ? undefined
        : v.permissionList(patch.deniedPermissions, 'deniedPermissions'),
    parents: patch.parentRoles === undefined ? undefined : v.roleNameList(patch.parentRoles, 'parentRoles'),
  };
}

/**
 * Checks a role update against the current record: whether the parent list changes, and — for a system
 * role — that only its description changes. @returns whether the parents stay as they are.
 * @throws ConstraintError (`system_role`).
 */
export function checkRoleUpdate(current: RoleRecord, values: ReturnType<typeof rolePatchValues>): boolean {
  const { name, permissions, denied, parents } = values;
  const sameParents =
    parents === undefined ||
    JSON.stringify(parents.map(v.nameKey).sort()) ===
      JSON.stringify(current.parentRoles.map(v.nameKey).sort());
  if (current.isSystem) {
    const same = (a: readonly string[] | undefined, b: readonly string[]) =>
      a === undefined || JSON.stringify(a) === JSON.stringify(b);
    if (
      (name !== undefined && v.nameKey(name) !== v.nameKey(current.name)) ||
      !same(permissions, current.permissions) ||
      !same(denied, current.deniedPermissions) ||
      !sameParents
    ) {
      throw new ConstraintError(
        'system_role',
        `role '${current.name}' is a built-in system role: only its description can change`,
      );
    }
  }
  return sameParents;
}

/** The validated fields of {@link NewClient}. @throws ValidationError. */
export function newClientValues(input: NewClient) {
  const clientId = v.clientId(input?.clientId);
  if (input.clientType !== 'public' && input.clientType !== 'confidential') {
    throw new ValidationError('clientType', 'enum', "clientType: 'public' or 'confidential'");
  }
  return {
    clientId,
    clientType: input.clientType,
    secretHash: clientSecret(input.clientType, input.secretHash),
    displayName: v.optionalText(input.displayName, 'displayName', 256),
    isEnabled: v.bool(input.isEnabled, 'isEnabled', true),
    redirectUris: v.redirectUris(input.redirectUris),
    grantTypes: v.grantTypes(input.allowedGrantTypes),
    scopes: v.scopes(input.allowedScopes),
    permissions: v.permissionList(input.permissions, 'permissions'),
    oidc: clientOidcValues(input),
  };
}

/** The validated fields of a {@link ClientPatch} (undefined: unchanged). @throws ValidationError. */
export function clientPatchValues(patch: ClientPatch) {
  return {
    displayName:
      patch.displayName === undefined ? undefined : v.optionalText(patch.displayName, 'displayName', 256),
    isEnabled: patch.isEnabled === undefined ? undefined : v.bool(patch.isEnabled, 'isEnabled', true),
    redirectUris: patch.redirectUris === undefined ? undefined : v.redirectUris(patch.redirectUris),
    grantTypes: patch.allowedGrantTypes === undefined ? undefined : v.grantTypes(patch.allowedGrantTypes),
    scopes: patch.allowedScopes === undefined ? undefined : v.scopes(patch.allowedScopes),
    permissions:
      patch.permissions === undefined ? undefined : v.permissionList(patch.permissions, 'permissions'),
    oidc: clientOidcValues(patch),
  };
}

/**
 * The validated columns of an audit event, in the order `time, category, outcome, subject_id,
 * subject_name, client_id, failure_code, remote_address, details` (details as JSON text or null; text
 * fields cut at 512 characters). @throws ValidationError (missing category/outcome, non-string field).
 */
export function auditValues(event: NewAuditEvent, now: number) {
  const category = v.requiredName(event?.category, 'category', 64);
  const outcome = v.requiredName(event.outcome, 'outcome', 64);
  const opt = (x: unknown, field: string) => {
    if (x === undefined || x === null) return null;
    if (typeof x !== 'string') throw new ValidationError(field, 'string');
    return x.slice(0, 512);
  };
  return [
    event.time ?? now,
    category,
    outcome,
    opt(event.subjectId, 'subjectId'),
    opt(event.subjectName, 'subjectName'),
    opt(event.clientId, 'clientId'),
    opt(event.failureCode, 'failureCode'),
    opt(event.remoteAddress, 'remoteAddress'),
    event.details ? JSON.stringify(event.details) : null,
  ] as const;
}

/**
 * The WHERE clause (with `?` placeholders, both stores' dialect) and its parameters for an audit-log
 * query (spec 001 "Audit log"): equality on `category`, `outcome`, `subjectId` and `clientId`, and the
 * half-open time range `from <= time < to` in ms since the epoch. `clause` is `''` when nothing filters.
 * @throws ValidationError naming the field when a filter is not a string or a bound not a finite number.
 */
export function auditWhere(query: Omit<AuditQuery, 'offset' | 'limit'>): {
  clause: string;
  params: (string | number)[];
} {
  const where: string[] = [];
  const params: (string | number)[] = [];
  const eq = (column: string, value: unknown, field: string) => {
    if (value === undefined) return;
    if (typeof value !== 'string') throw new ValidationError(field, 'string');
    where.push(`${column} = ?`);
    params.push(value);
  };
  eq('category', query.category, 'category');
  eq('outcome', query.outcome, 'outcome');
  eq('subject_id', query.subjectId, 'subjectId');
  eq('client_id', query.clientId, 'clientId');
  for (const [field, test] of [
    ['from', 'time >= ?'],
    ['to', 'time < ?'],
  ] as const) {
    const value = query[field];
    if (value === undefined) continue;
    if (!Number.isFinite(value)) throw new ValidationError(field, 'timestamp', `${field}: ms epoch number`);
    where.push(test);
    params.push(value);
  }
  return { clause: where.length ? `WHERE ${where.join(' AND ')}` : '', params };
}
