/**
 * Validation of {@link ClientMetadata}: the OAuth extension settings of a client (RFC 7591 §2 client
 * metadata; RFC 9449 §5.2, RFC 9126 §6, RFC 7523, RFC 8707).
 */
import { ValidationError } from '../errors.ts';
import { type ClientMetadata, TOKEN_ENDPOINT_AUTH_METHODS, type TokenEndpointAuthMethod } from './types.ts';

/** Most keys accepted in an inline `jwks`. */
const MAX_KEYS = 10;
/** Largest inline `jwks`, in characters of JSON. */
const MAX_JWKS_JSON = 16 * 1024;
/** Most resource indicators per client. */
const MAX_RESOURCES = 32;
/** Private-key members of a JWK (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2): refused in client keys. */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const FIELDS = new Set([
  'dpopBoundAccessTokens',
  'requirePushedAuthorizationRequests',
  'tokenEndpointAuthMethod',
  'jwks',
  'jwksUri',
  'allowedResources',
  'tokenExchange',
  'webOrigins',
  'claimsInIdToken',
]);
/** Most web origins per client. */
const MAX_WEB_ORIGINS = 32;

function bool(value: unknown, field: string): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'boolean') throw new ValidationError(field, 'boolean', `${field}: must be a boolean`);
  return value;
}

/**
 * A URL that is `https`, or `http` on a loopback host (`localhost`, `127.0.0.1`, `[::1]`), without
 * fragment. @throws ValidationError (`url`).
 */
export function httpsUrl(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length > 2048)
    throw new ValidationError(field, 'url', `${field}: must be a URL of at most 2048 characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, 'url', `${field}: must be an absolute URL`);
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback))
    throw new ValidationError(field, 'url', `${field}: must use https (http only on loopback hosts)`);
  if (url.hash || value.includes('#'))
    throw new ValidationError(field, 'url', `${field}: must not have a fragment`);
  return value;
}

/**
 * A web origin (RFC 6454 §6.2 serialization): `https://host[:port]`, or `http` on a loopback host, without
 * path, query or fragment. @returns the serialized origin. @throws ValidationError (`origin`).
 */
export function webOrigin(value: unknown, field: string): string {
  const url = httpsUrl(value, field);
  const origin = new URL(url).origin;
  if (origin !== url && `${origin}/` !== url)
    throw new ValidationError(field, 'origin', `${field}: must be an origin (scheme://host[:port], no path)`);
  return origin;
}

/**
 * A resource indicator (RFC 8707 §2): an absolute URI without fragment.
 * @throws ValidationError (`resource`).
 */
export function resourceIndicator(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > 2048)
    throw new ValidationError(
      field,
      'resource',
      `${field}: must be an absolute URI of at most 2048 characters`,
    );
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, 'resource', `${field}: must be an absolute URI`);
  }
  if (url.hash || value.includes('#'))
    throw new ValidationError(field, 'resource', `${field}: must not have a fragment (RFC 8707 §2)`);
  return value;
}

/** The token exchange policy: `subjectClients` (1–64 client ids or `*`), `impersonation`, `delegation`. */
function tokenExchange(value: unknown, field: string): NonNullable<ClientMetadata['tokenExchange']> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError(field, 'object', `${field}: must be an object`);
  const input = value as Record<string, unknown>;
  for (const key of Object.keys(input)) {
    if (!['subjectClients', 'impersonation', 'delegation'].includes(key))
      throw new ValidationError(`${field}.${key}`, 'unknown', `${field}: unknown field '${key}'`);
  }
  const clients = input.subjectClients;
  if (!Array.isArray(clients) || clients.length === 0 || clients.length > 64)
    throw new ValidationError(
      `${field}.subjectClients`,
      'array',
      `${field}.subjectClients: 1-64 client ids or '*'`,
    );
  clients.forEach((id, i) => {
    if (typeof id !== 'string' || !/^(\*|[A-Za-z0-9._~-]{1,128})$/.test(id))
      throw new ValidationError(
        `${field}.subjectClients[${i}]`,
        'client_id',
        `${field}.subjectClients[${i}]: a client id or '*'`,
      );
  });
  const out: { subjectClients: string[]; impersonation?: boolean; delegation?: boolean } = {
    subjectClients: [...new Set(clients as string[])],
  };
  const impersonation = bool(input.impersonation, `${field}.impersonation`);
  const delegation = bool(input.delegation, `${field}.delegation`);
  if (impersonation !== undefined) out.impersonation = impersonation;
  if (delegation !== undefined) out.delegation = delegation;
  return out;
}

function jwks(value: unknown, field: string): ClientMetadata['jwks'] {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || !Array.isArray((value as { keys?: unknown }).keys))
    throw new ValidationError(field, 'jwks', `${field}: must be a JWK Set { "keys": [...] }`);
  const keys = (value as { keys: unknown[] }).keys;
  if (keys.length === 0 || keys.length > MAX_KEYS)
    throw new ValidationError(field, 'jwks', `${field}.keys: 1-${MAX_KEYS} keys`);
  if (JSON.stringify(value).length > MAX_JWKS_JSON)
    throw new ValidationError(field, 'max_length', `${field}: at most ${MAX_JWKS_JSON} characters of JSON`);
  keys.forEach((key, i) => {
    const name = `${field}.keys[${i}]`;
    if (typeof key !== 'object' || key === null || Array.isArray(key))
      throw new ValidationError(name, 'jwk', `${name}: must be a JWK object`);
    const jwk = key as Record<string, unknown>;
    if (!['RSA', 'EC', 'OKP'].includes(jwk.kty as string))
      throw new ValidationError(name, 'jwk', `${name}: kty must be RSA, EC or OKP (public keys)`);
    for (const member of PRIVATE_MEMBERS) {
      if (member in jwk)
        throw new ValidationError(name, 'public_key', `${name}: private key member '${member}' not allowed`);
    }
  });
  return { keys: keys as Record<string, unknown>[] };
}

/**
 * Validates client metadata: only the known fields, each of its type; `jwks` holds 1–10 public JWKs and
 * excludes `jwksUri` (RFC 7591 §2); `private_key_jwt` needs one of them; `allowedResources` are RFC 8707
 * resource indicators. @returns a copy without undefined fields.
 * @throws ValidationError naming the field and the rule.
 */
export function clientMetadata(value: unknown, field = 'metadata'): ClientMetadata {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError(field, 'object', `${field}: must be an object`);
  const input = value as Record<string, unknown>;
  for (const key of Object.keys(input)) {
    if (!FIELDS.has(key))
      throw new ValidationError(`${field}.${key}`, 'unknown', `${field}: unknown field '${key}'`);
  }
  const method = input.tokenEndpointAuthMethod;
  if (method !== undefined && !(TOKEN_ENDPOINT_AUTH_METHODS as readonly unknown[]).includes(method)) {
    throw new ValidationError(
      `${field}.tokenEndpointAuthMethod`,
      'enum',
      `${field}.tokenEndpointAuthMethod: one of ${TOKEN_ENDPOINT_AUTH_METHODS.join(', ')}`,
    );
  }
  const keys = jwks(input.jwks, `${field}.jwks`);
  const jwksUri = input.jwksUri === undefined ? undefined : httpsUrl(input.jwksUri, `${field}.jwksUri`);
  if (keys && jwksUri)
    throw new ValidationError(
      `${field}.jwks`,
      'exclusive',
      `${field}: jwks and jwksUri are mutually exclusive`,
    );
  if (method === 'private_key_jwt' && !keys && !jwksUri)
    throw new ValidationError(`${field}.jwks`, 'required', `${field}: private_key_jwt needs jwks or jwksUri`);
  let resources: string[] | undefined;
  if (input.allowedResources !== undefined) {
    if (!Array.isArray(input.allowedResources) || input.allowedResources.length > MAX_RESOURCES)
      throw new ValidationError(
        `${field}.allowedResources`,
        'array',
        `${field}.allowedResources: an array of at most ${MAX_RESOURCES} URIs`,
      );
    resources = input.allowedResources.map((r, i) => resourceIndicator(r, `${field}.allowedResources[${i}]`));
  }
  const out: {
    -readonly [K in keyof ClientMetadata]: ClientMetadata[K];
  } = {};
  const dpop = bool(input.dpopBoundAccessTokens, `${field}.dpopBoundAccessTokens`);
  const par = bool(input.requirePushedAuthorizationRequests, `${field}.requirePushedAuthorizationRequests`);
  if (dpop !== undefined) out.dpopBoundAccessTokens = dpop;
  if (par !== undefined) out.requirePushedAuthorizationRequests = par;
  if (method !== undefined) out.tokenEndpointAuthMethod = method as TokenEndpointAuthMethod;
  if (keys) out.jwks = keys;
  if (jwksUri) out.jwksUri = jwksUri;
  if (resources) out.allowedResources = [...new Set(resources)];
  if (input.tokenExchange !== undefined)
    out.tokenExchange = tokenExchange(input.tokenExchange, `${field}.tokenExchange`);
  if (input.webOrigins !== undefined) {
    if (!Array.isArray(input.webOrigins) || input.webOrigins.length > MAX_WEB_ORIGINS)
      throw new ValidationError(
        `${field}.webOrigins`,
        'array',
        `${field}.webOrigins: an array of at most ${MAX_WEB_ORIGINS} origins`,
      );
    out.webOrigins = [...new Set(input.webOrigins.map((o, i) => webOrigin(o, `${field}.webOrigins[${i}]`)))];
  }
  const claimsInIdToken = bool(input.claimsInIdToken, `${field}.claimsInIdToken`);
  if (claimsInIdToken !== undefined) out.claimsInIdToken = claimsInIdToken;
  return out;
}
