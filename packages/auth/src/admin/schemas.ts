/**
 * JSON Schemas (draft 2020-12 subset understood by Ajv 8 and OpenAPI 3.1) of the administration API's
 * requests and responses (spec 001 "Administration REST API"). They drive request validation
 * (wrong types, unknown fields and oversized strings give 400 before any handler runs), response
 * serialization (only the listed fields leave the server — never a password or secret hash) and the
 * OpenAPI document served at `{BasePath}/api/openapi.json`.
 *
 * Limits mirror the store's rules (`../store/validation.ts`, `../permissions.ts`, `../passwords.ts`) so the
 * schema refuses what the store would refuse anyway, earlier and cheaper.
 */
import { MAX_PERMISSION_CODE_LENGTH } from '../permissions.ts';
import {
  DEFAULT_PAGE,
  MAX_CLIENT_ID,
  MAX_PAGE,
  MAX_ROLE_NAME,
  MAX_SECRET,
  MAX_TEXT,
  MAX_USER_NAME,
  nullableString,
  nullableTimestamp,
  permissionList,
  profileFields,
  record,
  roleList,
  type Schema,
  stringArray,
  timestamp,
} from './schema-parts.ts';

export * from './schema-parts.ts';
export * from './schemas-clients.ts';

// ── users ──

/** A user as the API shows it (no password hash, no security stamp). */
export const userSchema: Schema = record({
  id: { type: 'string', description: 'Stable id (UUID); the `sub` of the user’s tokens.' },
  userName: { type: 'string' },
  isEnabled: { type: 'boolean', description: '`IsEnabled`: false means disabled.' },
  isLockedOut: { type: 'boolean', description: '`IsLockedOut`: a lockout is in force now.' },
  lockoutEnd: nullableTimestamp,
  accessFailedCount: { type: 'integer' },
  hasPassword: { type: 'boolean' },
  roles: stringArray,
  directPermissions: stringArray,
  deniedPermissions: stringArray,
  displayName: nullableString,
  givenName: nullableString,
  familyName: nullableString,
  email: nullableString,
  emailVerified: { type: 'boolean' },
  phoneNumber: nullableString,
  phoneNumberVerified: { type: 'boolean' },
  address: {
    type: ['object', 'null'],
    description: 'Postal address (OIDC Core §5.1.1 members in camelCase), or null.',
    properties: {
      formatted: { type: 'string' },
      streetAddress: { type: 'string' },
      locality: { type: 'string' },
      region: { type: 'string' },
      postalCode: { type: 'string' },
      country: { type: 'string' },
    },
  },
  createdAt: timestamp,
  updatedAt: timestamp,
});

/** Body of `POST /users`. */
export const createUserBody: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['userName'],
  properties: {
    userName: { type: 'string', minLength: 1, maxLength: MAX_USER_NAME },
    password: {
      type: 'string',
      minLength: 1,
      maxLength: MAX_SECRET,
      description: 'Initial password (optional: an account without password cannot sign in).',
    },
    isEnabled: { type: 'boolean', default: true },
    roles: {
      ...roleList,
      description: 'Role names. Non-empty needs `auth.admin.roles` (separation of duties).',
    },
    directPermissions: {
      ...permissionList,
      description: '`DirectPermissions`. Non-empty needs `auth.admin.permissions` (separation of duties).',
    },
    deniedPermissions: {
      ...permissionList,
      description: '`DeniedPermissions`. Non-empty needs `auth.admin.permissions` (separation of duties).',
    },
    ...profileFields,
  },
};

/** Body of `PATCH /users/{id}`: omitted fields stay unchanged. */
export const updateUserBody: Schema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    userName: { type: 'string', minLength: 1, maxLength: MAX_USER_NAME },
    isEnabled: {
      type: 'boolean',
      description: 'false disables the account (its tokens are refused at once).',
    },
    roles: { ...roleList, description: 'Changing it needs `auth.admin.roles` (separation of duties).' },
    directPermissions: {
      ...permissionList,
      description: 'Changing it needs `auth.admin.permissions` (separation of duties).',
    },
    deniedPermissions: {
      ...permissionList,
      description: 'Changing it needs `auth.admin.permissions` (separation of duties).',
    },
    ...profileFields,
  },
};

/** Body of `PUT /users/{id}/password`. */
export const setPasswordBody: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['password'],
  properties: { password: { type: 'string', minLength: 1, maxLength: MAX_SECRET } },
};

// ── roles ──

const parentRoleList: Schema = {
  ...roleList,
  description:
    '`ParentRoles`: names of existing roles whose grants and denies this role inherits (transitively). A cycle (the role itself, or a role that already inherits from it) is a 400.',
};

/** A role as the API shows it. */
export const roleSchema: Schema = record({
  id: { type: 'string' },
  name: { type: 'string' },
  description: { type: 'string' },
  permissions: stringArray,
  deniedPermissions: stringArray,
  parentRoles: {
    ...stringArray,
    description: '`ParentRoles`: names of the roles whose rules this role inherits (transitively).',
  },
  isSystem: {
    type: 'boolean',
    description: 'Built-in system role: cannot be deleted, renamed or re-ruled.',
  },
  createdAt: timestamp,
  updatedAt: timestamp,
});

/** Body of `POST /roles`. */
export const createRoleBody: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: MAX_ROLE_NAME },
    description: { type: 'string', maxLength: MAX_TEXT },
    permissions: {
      ...permissionList,
      description: '`Permissions`. Non-empty needs `auth.admin.permissions` (separation of duties).',
    },
    deniedPermissions: {
      ...permissionList,
      description: '`DeniedPermissions`. Non-empty needs `auth.admin.permissions` (separation of duties).',
    },
    parentRoles: parentRoleList,
  },
};

/** Body of `PATCH /roles/{id}`. */
export const updateRoleBody: Schema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: MAX_ROLE_NAME },
    description: { type: 'string', maxLength: MAX_TEXT },
    permissions: { ...permissionList, description: 'Changing it needs `auth.admin.permissions`.' },
    deniedPermissions: { ...permissionList, description: 'Changing it needs `auth.admin.permissions`.' },
    parentRoles: parentRoleList,
  },
};

// ── permissions ──

/** A permission catalog entry. */
export const permissionSchema: Schema = record({
  code: { type: 'string', description: 'Normalized concrete code (lower case).' },
  description: { type: 'string' },
  createdAt: timestamp,
});

/** Body of `POST /permissions`. */
export const createPermissionBody: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['code'],
  properties: {
    code: { type: 'string', minLength: 1, maxLength: MAX_PERMISSION_CODE_LENGTH },
    description: { type: 'string', maxLength: MAX_TEXT },
  },
};

/** Body of `PATCH /permissions/{code}`. */
export const updatePermissionBody: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['description'],
  properties: { description: { type: 'string', maxLength: MAX_TEXT } },
};

/** Body of routes that take none (`POST …/enable`, `DELETE …`): absent, or an empty JSON object. */
export const emptyBody: Schema = {
  type: ['object', 'null'],
  additionalProperties: false,
  maxProperties: 0,
  description: 'No body (or `{}`).',
};

// ── audit ──

/** An audit event as the API shows it. */
export const auditEventSchema: Schema = record({
  id: { type: 'integer' },
  time: timestamp,
  category: { type: 'string', description: '`Category`, e.g. `Login`, `Token`, `Admin`.' },
  outcome: { type: 'string', description: '`Outcome`, e.g. `Success`, `Denied`, `Failure`.' },
  subjectId: { type: ['string', 'null'] },
  subjectName: { type: ['string', 'null'] },
  clientId: { type: ['string', 'null'] },
  failureCode: { type: ['string', 'null'] },
  remoteAddress: { type: ['string', 'null'] },
  details: {
    type: ['object', 'null'],
    additionalProperties: true,
    description: 'Structured data; for `Admin` events `action`, `target` and the `changed` field names.',
  },
});

// ── consents ──

/** A user's remembered consent to a client's scopes. */
export const consentSchema: Schema = record({
  clientId: { type: 'string' },
  scopes: stringArray,
  createdAt: timestamp,
  updatedAt: timestamp,
});

/** Path parameters `{id}` and `{clientId}`. */
export const userClientParams: Schema = {
  type: 'object',
  required: ['id', 'clientId'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 128 },
    clientId: { type: 'string', minLength: 1, maxLength: MAX_CLIENT_ID },
  },
};

// ── me ──

/** `GET /me`: the caller and what the admin API lets it do (for an admin UI to show or hide actions). */
export const meSchema: Schema = record({
  subject: record({
    kind: { type: 'string', enum: ['user', 'client'] },
    id: { type: 'string', description: 'User id or client id (the token `sub`).' },
    name: { type: 'string', description: 'User name, or the client id.' },
    roles: { ...stringArray, description: 'Roles the user holds directly (empty for clients).' },
    clientId: { type: ['string', 'null'], description: 'Client the token was issued to.' },
  }),
  abilities: {
    type: 'object',
    description:
      'Per administration permission code (`auth.admin.read`, `auth.admin.users`, …): whether the caller holds it (deny rules applied).',
    additionalProperties: { type: 'boolean' },
  },
  can: record({
    readUsers: { type: 'boolean' },
    manageUsers: { type: 'boolean' },
    readRoles: { type: 'boolean' },
    manageRoles: { type: 'boolean' },
    readPermissions: { type: 'boolean' },
    managePermissions: { type: 'boolean' },
    readClients: { type: 'boolean' },
    manageClients: { type: 'boolean' },
    readAudit: { type: 'boolean' },
  }),
});

/** Query string of the routes that take none: any parameter is an unknown field (400). */
export const noQuery: Schema = { type: 'object', properties: {}, additionalProperties: false };

/** Query string of the list routes. */
export const listQuery: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE },
    search: { type: 'string', maxLength: 256, description: 'Case-insensitive substring of the name / id.' },
  },
};

/** Query string of `GET /audit`. */
export const auditQuery: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    category: { type: 'string', minLength: 1, maxLength: 64 },
    outcome: { type: 'string', minLength: 1, maxLength: 64 },
    subject: {
      type: 'string',
      minLength: 1,
      maxLength: 256,
      description: 'Subject id (user id or client id).',
    },
    clientId: { type: 'string', minLength: 1, maxLength: MAX_CLIENT_ID },
    from: { ...timestamp, description: 'Inclusive lower bound of `time` (RFC 3339).' },
    to: { ...timestamp, description: 'Exclusive upper bound of `time` (RFC 3339).' },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    limit: { type: 'integer', minimum: 1, maximum: MAX_PAGE, default: DEFAULT_PAGE },
  },
};

/** A page of a list: `items`, `total` matching, and the `offset`/`limit` used. */
export function pageOf(item: Schema): Schema {
  return {
    type: 'object',
    required: ['items', 'total', 'offset', 'limit'],
    properties: {
      items: { type: 'array', items: item },
      total: { type: 'integer' },
      offset: { type: 'integer' },
      limit: { type: 'integer' },
    },
  };
}

/** Path parameter `{id}`. */
export const idParams: Schema = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 128 } },
};
/** Path parameter `{code}`. */
export const codeParams: Schema = {
  type: 'object',
  required: ['code'],
  properties: { code: { type: 'string', minLength: 1, maxLength: MAX_PERMISSION_CODE_LENGTH } },
};
/** Path parameter `{clientId}`. */
export const clientIdParams: Schema = {
  type: 'object',
  required: ['clientId'],
  properties: { clientId: { type: 'string', minLength: 1, maxLength: MAX_CLIENT_ID } },
};
