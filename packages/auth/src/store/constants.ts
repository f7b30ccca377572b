/**
 * The value lists of the store that the admin page's browser build (`../admin/web/`) shares with the
 * server. This module imports nothing, so the page can bundle it without the server's modules.
 */

/**
 * Grant types a client may be allowed (RFC 6749 §4, `AllowedGrantTypes`), and token exchange
 * (RFC 8693 §2.1).
 */
export const GRANT_TYPES = [
  'authorization_code',
  'refresh_token',
  'password',
  'client_credentials',
  'urn:ietf:params:oauth:grant-type:token-exchange',
  'urn:ietf:params:oauth:grant-type:device_code',
] as const;
/** One of {@link GRANT_TYPES}. */
export type GrantType = (typeof GRANT_TYPES)[number];

/** `token_endpoint_auth_method` values (RFC 7591 §2, RFC 7523 §2.2, OIDC Core §9). */
export const TOKEN_ENDPOINT_AUTH_METHODS = [
  'client_secret_basic',
  'client_secret_post',
  'client_secret_jwt',
  'private_key_jwt',
  'none',
] as const;
/** One of {@link TOKEN_ENDPOINT_AUTH_METHODS}. */
export type TokenEndpointAuthMethod = (typeof TOKEN_ENDPOINT_AUTH_METHODS)[number];
