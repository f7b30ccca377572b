/**
 * JSON Schemas (draft 2020-12 subset understood by Ajv 8 and OpenAPI 3.1) of the administration API's
 * requests and responses (spec 001 "Administration REST API", issue 6). They drive request validation
 * (wrong types, unknown fields and oversized strings give 400 before any handler runs), response
 * serialization (only the listed fields leave the server — never a password or secret hash) and the
 * OpenAPI document served at `{BasePath}/api/openapi.json`.
 *
 * Limits mirror the store's rules (`../store/validation.ts`, `../permissions.ts`, `../passwords.ts`) so the
 * schema refuses what the store would refuse anyway, earlier and cheaper.
 */
import { MAX_PERMISSION_CODE_LENGTH } from '../permissions.ts';

/** Longest user name, in characters (store rule). */
export const MAX_USER_NAME = 256;
/** Longest role name, in characters (store rule). */
export const MAX_ROLE_NAME = 64;
/** Longest free-text description or display name, in characters. */
export const MAX_TEXT = 1024;
/** Longest client id, in characters (store rule). */
export const MAX_CLIENT_ID = 128;
/** Longest password or client secret accepted, in characters (matches `MAX_PASSWORD_LENGTH`). */
export const MAX_SECRET = 1024;
/** Largest page (`limit`) of a list request. */
export const MAX_PAGE = 1000;
/** Default page size of a list request. */
export const DEFAULT_PAGE = 50;

type Schema = Record<string, unknown>;

const permissionList: Schema = {
  type: 'array',
  maxItems: 1000,
  items: { type: 'string', minLength: 1, maxLength: MAX_PERMISSION_CODE_LENGTH },
  description:
    'Permission codes or patterns: dot-separated segments; `*` one segment, trailing `**` the rest.',
};
const roleList: Schema = {
  type: 'array',
  maxItems: 200,
  items: { type: 'string', minLength: 1, maxLength: MAX_ROLE_NAME },
  description: 'Role names.',
};
const grantTypes: Schema = {
  type: 'array',
  maxItems: 10,
  items: {
    type: 'string',
    enum: [
      'authorization_code',
      'refresh_token',
      'password',
      'client_credentials',
      'urn:ietf:params:oauth:grant-type:token-exchange',
      'urn:ietf:params:oauth:grant-type:device_code',
    ],
  },
  description: '`AllowedGrantTypes`.',
};
const scopes: Schema = {
  type: 'array',
  maxItems: 200,
  items: { type: 'string', minLength: 1, maxLength: 128 },
  description: '`AllowedScopes`: scope tokens (RFC 6749 §3.3).',
};
const redirectUris: Schema = {
  type: 'array',
  maxItems: 50,
  items: { type: 'string', minLength: 1, maxLength: 2048 },
  description: 'Absolute redirect URIs without fragment, compared exactly (RFC 6749 §3.1.2).',
};
const timestamp: Schema = { type: 'string', format: 'date-time', description: 'RFC 3339 date-time (UTC).' };
const nullableTimestamp: Schema = {
  type: ['string', 'null'],
  format: 'date-time',
  description: 'RFC 3339 date-time (UTC), or null.',
};
const stringArray: Schema = { type: 'array', items: { type: 'string' } };
const nullableString: Schema = { type: ['string', 'null'] };

/** Longest profile text (display, given and family name), in characters (store rule). */
export const MAX_PROFILE_TEXT = 256;
/** Longest e-mail address, in characters (RFC 5321 §4.5.3.1.3, store rule). */
export const MAX_EMAIL = 254;

/** Profile fields of a user body (OIDC Core §5.1 claims `name`, `given_name`, `family_name`, `email`). */
const profileFields: Record<string, Schema> = {
  displayName: {
    type: ['string', 'null'],
    maxLength: MAX_PROFILE_TEXT,
    description: 'Full name (claim `name`, scope `profile`); null or blank clears it.',
  },
  givenName: { type: ['string', 'null'], maxLength: MAX_PROFILE_TEXT, description: 'Claim `given_name`.' },
  familyName: { type: ['string', 'null'], maxLength: MAX_PROFILE_TEXT, description: 'Claim `family_name`.' },
  email: {
    type: ['string', 'null'],
    maxLength: MAX_EMAIL,
    description: 'E-mail address `local@domain` (claim `email`, scope `email`); null clears it.',
  },
  emailVerified: { type: 'boolean', description: 'Claim `email_verified`.' },
};

/**
 * The schema of a record the API returns: an object with exactly these `properties`, every one of them
 * always present (`required` lists them all, in order).
 */
function record(properties: Record<string, Schema>): Schema {
  return { type: 'object', required: Object.keys(properties), properties };
}

/** The error body of every 4xx/5xx answer of the administration API (spec: `{ "error": "message" }`). */
export const errorSchema: Schema = {
  type: 'object',
  required: ['error'],
  properties: { error: { type: 'string', description: 'What went wrong, naming the field and rule.' } },
};

/**
 * The middleware's denial body (spec 001 "Middleware denial body"), for 401/403 from the permission check.
 * Open (`additionalProperties`) so that a body replaced by `OnDenied` is serialized as given.
 */
export const denialSchema: Schema = {
  type: 'object',
  additionalProperties: true,
  properties: {
    error: { type: 'string' },
    error_description: { type: 'string' },
    permission: { type: ['string', 'null'] },
  },
};

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

// ── clients ──

/**
 * OAuth extension settings of a client (RFC 7591 §2 client metadata in camelCase; `PUT
 * /clients/{clientId}/metadata`). The store checks the rules the schema cannot (URLs, public keys only,
 * `jwks` xor `jwksUri`, `private_key_jwt` needs keys) and answers 400 naming the field.
 */
export const clientMetadataSchema: Schema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    dpopBoundAccessTokens: {
      type: 'boolean',
      description:
        'RFC 9449 §5.2 `dpop_bound_access_tokens` ("DPoP required"): token requests need a DPoP proof.',
    },
    requirePushedAuthorizationRequests: {
      type: 'boolean',
      description: 'RFC 9126 §6: authorization requests must be pushed (`/connect/par`).',
    },
    tokenEndpointAuthMethod: {
      type: 'string',
      enum: ['client_secret_basic', 'client_secret_post', 'client_secret_jwt', 'private_key_jwt', 'none'],
      description:
        'RFC 7591 §2 `token_endpoint_auth_method`: the only method the client may use. `client_secret_jwt` (RFC 7523, OIDC Core §9) needs the server client-secret key (`AUTH_CLIENT_SECRET_KEY`): the secret is then stored sealed (AES-256-GCM) instead of hashed, and choosing it issues a new secret, returned once as `clientSecret`.',
    },
    jwks: {
      type: 'object',
      required: ['keys'],
      properties: {
        keys: {
          type: 'array',
          minItems: 1,
          maxItems: 10,
          items: { type: 'object', additionalProperties: true },
        },
      },
      description: 'RFC 7591 §2 `jwks`: public keys for `private_key_jwt`.',
    },
    jwksUri: {
      type: 'string',
      maxLength: 2048,
      description: 'RFC 7591 §2 `jwks_uri` (https, or http on loopback).',
    },
    allowedResources: {
      type: 'array',
      maxItems: 32,
      items: { type: 'string', maxLength: 2048 },
      description: 'RFC 8707 resource indicators the client may request (the access token `aud`).',
    },
    tokenExchange: {
      type: 'object',
      additionalProperties: false,
      required: ['subjectClients'],
      properties: {
        subjectClients: {
          type: 'array',
          minItems: 1,
          maxItems: 64,
          items: { type: 'string', maxLength: 128 },
        },
        impersonation: { type: 'boolean' },
        delegation: { type: 'boolean' },
      },
      description: "RFC 8693 policy: whose users' tokens the client may exchange ('*': any), and how.",
    },
  },
};

/** A client as the API shows it (no secret hash). */
export const clientSchema: Schema = record({
  clientId: { type: 'string' },
  displayName: { type: 'string' },
  clientType: { type: 'string', enum: ['public', 'confidential'] },
  hasSecret: { type: 'boolean' },
  secretStorage: {
    type: ['string', 'null'],
    enum: ['hashed', 'sealed', null],
    description:
      '`hashed` (scrypt), `sealed` (AES-256-GCM under the server key, for `client_secret_jwt`), null without a secret.',
  },
  isEnabled: { type: 'boolean' },
  redirectUris: stringArray,
  allowedGrantTypes: stringArray,
  allowedScopes: stringArray,
  permissions: stringArray,
  postLogoutRedirectUris: stringArray,
  backchannelLogoutUri: nullableString,
  requireConsent: { type: 'boolean' },
  metadata: clientMetadataSchema,
  createdAt: timestamp,
  updatedAt: timestamp,
});

/** A client plus its new plain-text secret (shown once, on create and on secret rotation). */
export const clientWithSecretSchema: Schema = {
  ...clientSchema,
  properties: {
    ...(clientSchema.properties as Schema),
    clientSecret: {
      type: 'string',
      description: 'The new secret in plain text. Shown only in this response; store it now.',
    },
  },
};

/** OpenID Connect settings of a client body (logout and consent). */
const clientOidcFields: Record<string, Schema> = {
  postLogoutRedirectUris: {
    ...redirectUris,
    description:
      'Where RP-initiated logout may send the user back (`post_logout_redirect_uris`), compared exactly.',
  },
  backchannelLogoutUri: {
    type: ['string', 'null'],
    maxLength: 2048,
    description: 'Absolute http(s) URI receiving logout tokens (Back-Channel Logout 1.0), or null.',
  },
  requireConsent: {
    type: 'boolean',
    description: 'Third-party client: users must consent to its scopes on the consent page.',
  },
};

/** Body of `POST /clients`. */
export const createClientBody: Schema = {
  type: 'object',
  additionalProperties: false,
  required: ['clientId', 'clientType'],
  properties: {
    clientId: { type: 'string', minLength: 1, maxLength: MAX_CLIENT_ID },
    displayName: { type: 'string', maxLength: MAX_TEXT },
    clientType: { type: 'string', enum: ['public', 'confidential'] },
    clientSecret: {
      type: 'string',
      minLength: 16,
      maxLength: MAX_SECRET,
      description: 'Confidential clients only; when omitted a random secret is generated and returned once.',
    },
    isEnabled: { type: 'boolean' },
    redirectUris,
    allowedGrantTypes: grantTypes,
    allowedScopes: scopes,
    permissions: {
      ...permissionList,
      description: '`Permissions`. Non-empty needs `auth.admin.permissions` (separation of duties).',
    },
    ...clientOidcFields,
  },
};

/** Body of `PATCH /clients/{clientId}`. */
export const updateClientBody: Schema = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    displayName: { type: 'string', maxLength: MAX_TEXT },
    isEnabled: { type: 'boolean' },
    redirectUris,
    allowedGrantTypes: grantTypes,
    allowedScopes: scopes,
    permissions: { ...permissionList, description: 'Changing it needs `auth.admin.permissions`.' },
    ...clientOidcFields,
  },
};

/** Body of `POST /clients/{clientId}/secret` (optional: without `clientSecret` one is generated). */
export const rotateSecretBody: Schema = {
  type: ['object', 'null'],
  additionalProperties: false,
  properties: { clientSecret: { type: 'string', minLength: 16, maxLength: MAX_SECRET } },
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
