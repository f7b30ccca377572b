/**
 * JSON Schemas of the administration API's clients (`/clients`, secret rotation, OAuth extension settings
 * `PUT /clients/{clientId}/metadata`): requests, responses and the OpenAPI document (see `schemas.ts`).
 */
import {
  grantTypes,
  MAX_CLIENT_ID,
  MAX_SECRET,
  MAX_TEXT,
  nullableString,
  permissionList,
  record,
  redirectUris,
  type Schema,
  scopes,
  stringArray,
  timestamp,
} from './schema-parts.ts';

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
    webOrigins: {
      type: 'array',
      maxItems: 32,
      items: { type: 'string', maxLength: 2048 },
      description:
        'Origins (https, or http on loopback; no path) allowed to call the token, UserInfo, revocation, end-session, discovery and JWKS endpoints from a browser (CORS). Unset: the origins of the redirect URIs; empty: none.',
    },
    claimsInIdToken: {
      type: 'boolean',
      description:
        'Default true: the ID token carries the claims of the granted profile, email, roles and permissions scopes; false keeps them UserInfo-only (OIDC Core §5.4).',
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
