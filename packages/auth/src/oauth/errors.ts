/**
 * OAuth 2.0 error responses of the token endpoint (spec 001, "Errors › Token endpoint"; RFC 6749 §5.2)
 * and of the revocation / introspection endpoints (RFC 7009 §2.2.1, RFC 7662 §2.3).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

/** The OAuth error codes this server emits from `/connect/token`, `/connect/revocation` and `/connect/introspect`. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'unsupported_token_type'
  | 'invalid_dpop_proof'
  | 'use_dpop_nonce'
  | 'invalid_target'
  | 'authorization_pending'
  | 'slow_down'
  | 'access_denied'
  | 'expired_token'
  | 'temporarily_unavailable';

/** HTTP status per error code: spec 001's token-endpoint error table, plus 429 for the brute-force limits. */
export const OAUTH_ERROR_STATUS: Readonly<Record<OAuthErrorCode, number>> = Object.freeze({
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  invalid_scope: 400,
  unsupported_token_type: 400,
  invalid_dpop_proof: 400,
  use_dpop_nonce: 400,
  invalid_target: 400,
  authorization_pending: 400,
  slow_down: 400,
  access_denied: 400,
  expired_token: 400,
  // RFC 6749 §4.1.2.1's code for a server that cannot answer for now, here with 429 and `Retry-After`
  // (RFC 6585 §4): the brute-force limits refused the attempt.
  temporarily_unavailable: 429,
});

/**
 * A refusal of a token-endpoint request. `error` is the RFC 6749 §5.2 code, `description` the human
 * readable `error_description` (never contains secrets, never distinguishes account states for the
 * password grant). `status` follows {@link OAUTH_ERROR_STATUS}. `headers` are added to the answer (e.g.
 * `DPoP-Nonce` with `use_dpop_nonce`, RFC 9449 §8).
 */
export class OAuthError extends Error {
  readonly error: OAuthErrorCode;
  readonly description: string;
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  constructor(error: OAuthErrorCode, description: string, headers: Record<string, string> = {}) {
    super(`${error}: ${description}`);
    this.name = 'OAuthError';
    this.error = error;
    this.description = description;
    this.status = OAUTH_ERROR_STATUS[error];
    this.headers = headers;
  }
}

/**
 * Sets the headers every token-endpoint response carries (RFC 6749 §5.1/§5.2, spec 001):
 * `Cache-Control: no-store` and `Pragma: no-cache`.
 */
export function setNoStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}

/**
 * Writes an {@link OAuthError} as the RFC 6749 §5.2 JSON body `{ error, error_description }` with the
 * no-store headers, plus `WWW-Authenticate: Basic realm="..."` for `invalid_client` (RFC 6749 §5.2: the
 * server responds 401 and includes the header matching the scheme the client tried; spec 001 asks for
 * `Basic` on every `invalid_client`).
 */
export function sendOAuthError(reply: FastifyReply, err: OAuthError, realm = 'auth'): FastifyReply {
  setNoStore(reply);
  for (const [name, value] of Object.entries(err.headers)) reply.header(name, value);
  if (err.error === 'invalid_client')
    reply.header('www-authenticate', `Basic realm="${realm}", charset="UTF-8"`);
  return reply
    .code(err.status)
    .type('application/json; charset=utf-8')
    .send({ error: err.error, error_description: err.description });
}

/**
 * Fastify error handler for the form endpoints: client mistakes caught before the route runs (body too
 * large → 413, unparsable body → 400) still answer in the RFC 6749 §5.2 shape with the no-store headers;
 * anything else is a server error (500, generic description, nothing leaked).
 */
export function oauthErrorHandler(
  error: { statusCode?: number; code?: string },
  _req: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  if (error instanceof OAuthError) return sendOAuthError(reply, error);
  const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
  setNoStore(reply).type('application/json; charset=utf-8');
  if (status === 413) {
    return reply.code(413).send({ error: 'invalid_request', error_description: 'request body is too large' });
  }
  if (status >= 400 && status < 500) {
    return reply.code(400).send({ error: 'invalid_request', error_description: 'malformed request' });
  }
  reply.log.error(error);
  return reply.code(500).send({ error: 'server_error', error_description: 'internal error' });
}
