/**
 * Building blocks of the administration API's JSON Schemas (`schemas.ts`, `schemas-clients.ts`): the
 * limits that mirror the store's rules, shared field schemas, the record helper and the error bodies.
 */
import { MAX_PERMISSION_CODE_LENGTH } from '../permissions.ts';
import { GRANT_TYPES } from '../store/types.ts';

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

export type Schema = Record<string, unknown>;

export const permissionList: Schema = {
  type: 'array',
  maxItems: 1000,
  items: { type: 'string', minLength: 1, maxLength: MAX_PERMISSION_CODE_LENGTH },
  description:
    'Permission codes or patterns: dot-separated segments; `*` one segment, trailing `**` the rest.',
};
export const roleList: Schema = {
  type: 'array',
  maxItems: 200,
  items: { type: 'string', minLength: 1, maxLength: MAX_ROLE_NAME },
  description: 'Role names.',
};
export const grantTypes: Schema = {
  type: 'array',
  maxItems: 10,
  items: {
    type: 'string',
    enum: [...GRANT_TYPES],
  },
  description: '`AllowedGrantTypes`.',
};
export const scopes: Schema = {
  type: 'array',
  maxItems: 200,
  items: { type: 'string', minLength: 1, maxLength: 128 },
  description: '`AllowedScopes`: scope tokens (RFC 6749 §3.3).',
};
export const redirectUris: Schema = {
  type: 'array',
  maxItems: 50,
  items: { type: 'string', minLength: 1, maxLength: 2048 },
  description: 'Absolute redirect URIs without fragment, compared exactly (RFC 6749 §3.1.2).',
};
export const timestamp: Schema = {
  type: 'string',
  format: 'date-time',
  description: 'RFC 3339 date-time (UTC).',
};
export const nullableTimestamp: Schema = {
  type: ['string', 'null'],
  format: 'date-time',
  description: 'RFC 3339 date-time (UTC), or null.',
};
export const stringArray: Schema = { type: 'array', items: { type: 'string' } };
export const nullableString: Schema = { type: ['string', 'null'] };

/** Longest profile text (display, given and family name), in characters (store rule). */
export const MAX_PROFILE_TEXT = 256;
/** Longest e-mail address, in characters (RFC 5321 §4.5.3.1.3, store rule). */
export const MAX_EMAIL = 254;

/**
 * Profile fields of a user body (OIDC Core §5.1 claims `name`, `given_name`, `family_name`, `email`,
 * `phone_number`, `address`).
 */
export const profileFields: Record<string, Schema> = {
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
  phoneNumber: {
    type: ['string', 'null'],
    maxLength: 32,
    description:
      'Telephone number in E.164 form, `+` and 2–15 digits, optionally `;ext=` and digits (claim `phone_number`, scope `phone`); null clears it.',
  },
  phoneNumberVerified: { type: 'boolean', description: 'Claim `phone_number_verified`.' },
  address: {
    type: ['object', 'null'],
    additionalProperties: false,
    description:
      'Postal address (claim `address`, scope `address`, OIDC Core §5.1.1); blank members are dropped, null clears it.',
    properties: {
      formatted: {
        type: 'string',
        maxLength: MAX_PROFILE_TEXT,
        description: 'Full address; lines separated by `\\n`.',
      },
      streetAddress: {
        type: 'string',
        maxLength: MAX_PROFILE_TEXT,
        description: 'Claim member `street_address`; may span lines.',
      },
      locality: { type: 'string', maxLength: MAX_PROFILE_TEXT },
      region: { type: 'string', maxLength: MAX_PROFILE_TEXT },
      postalCode: { type: 'string', maxLength: MAX_PROFILE_TEXT, description: 'Claim member `postal_code`.' },
      country: { type: 'string', maxLength: MAX_PROFILE_TEXT },
    },
  },
};

/**
 * The schema of a record the API returns: an object with exactly these `properties`, every one of them
 * always present (`required` lists them all, in order).
 */
export function record(properties: Record<string, Schema>): Schema {
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
