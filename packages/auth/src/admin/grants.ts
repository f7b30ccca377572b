/**
 * Shared rules of the administration API's changes: the granting fields that need a second permission
 * (spec 001 "Authentication", separation-of-duties rules 1–3), their normalization, and the new values an
 * audit event records (secrets left out, size bounded).
 */
import { normalizePermissionCodes } from '../permissions.ts';
import type { UserProfileInput } from '../store/types.ts';
import { nameKey, roleNameList } from '../store/validation.ts';
import { AdminPermission } from './access.ts';

/** Fields whose values never enter an audit event. */
export const SECRET_FIELDS = new Set(['password', 'passwordHash', 'clientSecret', 'secretHash']);
/** Largest `details.values` kept in an audit event, in characters of JSON; larger ones keep field names only. */
export const MAX_AUDIT_VALUES_LENGTH = 8192;

/** New values of a change for its audit event: secrets and absent fields left out, size bounded. */
export function auditValues(values: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (value !== undefined && !SECRET_FIELDS.has(key)) out[key] = value;
  }
  return JSON.stringify(out).length <= MAX_AUDIT_VALUES_LENGTH
    ? out
    : { truncated: true, fields: Object.keys(out) };
}

/** What an administration change is about (recorded in its audit event's `details.target`). */
export interface AdminTarget {
  readonly type: 'user' | 'role' | 'permission' | 'client';
  readonly id?: string;
  readonly name?: string;
}

export const sameSet = (
  a: readonly string[],
  b: readonly string[],
  key: (x: string) => string = (x) => x,
) => {
  const left = new Set(a.map(key));
  const right = new Set(b.map(key));
  return left.size === right.size && [...left].every((x) => right.has(x));
};

/**
 * A field that grants something (roles or permission codes) and so needs a second permission to set or
 * change (spec 001 "Authentication", separation-of-duties rules 1–3).
 */
export interface GrantRule {
  readonly field: string;
  /** The permission needed, besides the route's own, to grant through `field`. */
  readonly permission: string;
  /** Normalizes a present value (400 on a name or code that cannot be normalized). */
  readonly normalize: (value: string[], field: string) => string[];
  /** Identity of an element when comparing with the current value (default: exact). */
  readonly key?: (x: string) => string;
}

const roleGrant: GrantRule = {
  field: 'roles',
  permission: AdminPermission.Roles,
  normalize: (value, field) => roleNameList(value, field),
  key: nameKey,
};
const permissionGrant = (field: string): GrantRule => ({
  field,
  permission: AdminPermission.Permissions,
  normalize: (value, name) => normalizePermissionCodes(value, name),
});
/** The granting fields of users, roles and clients, in the order they are normalized and checked. */
export const USER_GRANTS = [
  roleGrant,
  permissionGrant('directPermissions'),
  permissionGrant('deniedPermissions'),
];
export const ROLE_GRANTS = [permissionGrant('permissions'), permissionGrant('deniedPermissions')];
export const CLIENT_GRANTS = [permissionGrant('permissions')];

export type Grants = Record<string, string[] | undefined>;

/** The normalized values of `rules`' fields of `body` (absent ones undefined), in the rules' order. */
export function normalizeGrants(rules: readonly GrantRule[], body: Record<string, unknown>): Grants {
  const out: Grants = {};
  for (const rule of rules) {
    const value = body[rule.field] as string[] | undefined;
    out[rule.field] = value === undefined ? undefined : rule.normalize(value, rule.field);
  }
  return out;
}

/** Names of the fields of `patch` that are set (not undefined), in order. */
export const setKeys = (patch: object) =>
  Object.entries(patch)
    .filter(([, value]) => value !== undefined)
    .map(([key]) => key);

/** The profile fields of a user body (absent ones undefined). */
export const profileOf = (body: UserProfileInput): UserProfileInput => ({
  displayName: body.displayName,
  givenName: body.givenName,
  familyName: body.familyName,
  email: body.email,
  emailVerified: body.emailVerified,
  phoneNumber: body.phoneNumber,
  phoneNumberVerified: body.phoneNumberVerified,
  address: body.address,
});
