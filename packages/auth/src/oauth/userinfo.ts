/**
 * The UserInfo endpoint `GET|POST /connect/userinfo` (OpenID Connect Core 1.0 §5.3): the claims about the
 * user that the access token's scopes release (see `userClaims`). The token is a bearer token (RFC 6750):
 * the `Authorization: Bearer` header, or for `POST` the form field `access_token` (§2.2); never both. A
 * DPoP-bound token (`cnf.jkt`) comes as `Authorization: DPoP <token>` with a `DPoP` proof of the bound key
 * for this method and URL carrying the token's `ath` (RFC 9449 §7.1); its refusals carry a
 * `WWW-Authenticate: DPoP algs=…` challenge (and `DPoP-Nonce` when a nonce is required, §9).
 * Refusals follow RFC 6750 §3: 401 without an error code when no token came, 401 `invalid_token` (bad
 * signature, expired, not a user token, user missing, disabled, locked or with a new security stamp, client
 * disabled), 403 `insufficient_scope` (no `openid`), 400 `invalid_request` (two tokens, malformed header or
 * body) — each with `WWW-Authenticate: Bearer realm=…` and a JSON body `{ error, error_description }`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isToken68, parseAuthorization } from '../authorization-header.ts';
import { SECURITY_STAMP_CLAIM } from '../token-verifier.ts';
import { type OAuthContext, userActive } from './context.ts';
import { DpopProofError, dpopChallenge } from './dpop.ts';
import { NOT_FORM, registerFormParser } from './form.ts';
import { userClaims } from './id-token.ts';
import { scopeTokens } from './scope.ts';

/** Path of the UserInfo endpoint. */
export const USERINFO_PATH = '/connect/userinfo';

/** RFC 6750 §3.1 and RFC 9449 §7.1 error codes of the UserInfo endpoint. */
export type BearerErrorCode =
  | 'invalid_request'
  | 'invalid_token'
  | 'insufficient_scope'
  | 'invalid_dpop_proof'
  | 'use_dpop_nonce';

const STATUS: Readonly<Record<BearerErrorCode, number>> = {
  invalid_request: 400,
  invalid_token: 401,
  insufficient_scope: 403,
  invalid_dpop_proof: 401,
  use_dpop_nonce: 401,
};

/** A refusal of the UserInfo endpoint (RFC 6750 §3.1); `error` undefined means "no token presented". */
class BearerError extends Error {
  readonly error: BearerErrorCode | undefined;
  /** The scheme the token came with: a DPoP one is answered with a DPoP challenge. */
  readonly scheme: 'Bearer' | 'DPoP';
  /** The nonce to use (`use_dpop_nonce`). */
  readonly nonce: string | undefined;
  constructor(
    error: BearerErrorCode | undefined,
    description: string,
    scheme: 'Bearer' | 'DPoP' = 'Bearer',
    nonce?: string,
  ) {
    super(description);
    this.error = error;
    this.scheme = scheme;
    this.nonce = nonce;
  }
}

/** A presented access token and the scheme it came with. */
interface Presented {
  readonly scheme: 'Bearer' | 'DPoP';
  readonly token: string;
}

/** The presented access token. @throws BearerError (none, malformed, two of them). */
function presentedToken(req: FastifyRequest): Presented {
  const parsed = parseAuthorization(req.headers.authorization);
  let fromHeader: string | undefined;
  let scheme: 'Bearer' | 'DPoP' = 'Bearer';
  if (parsed.kind === 'token') {
    scheme = parsed.scheme;
    fromHeader = parsed.token;
  } else if (parsed.kind === 'malformed' && parsed.scheme !== 'Basic') {
    if (parsed.problem === 'charset')
      throw new BearerError('invalid_token', 'malformed token', parsed.scheme);
    throw new BearerError('invalid_request', 'malformed Authorization header');
  } else if (parsed.kind !== 'none') {
    throw new BearerError(undefined, 'a Bearer token is required');
  }
  let fromBody: string | undefined;
  if (req.method === 'POST' && req.body !== undefined && req.body !== null) {
    if (req.body === NOT_FORM) {
      if (fromHeader === undefined)
        throw new BearerError('invalid_request', 'body must be application/x-www-form-urlencoded');
    } else if (req.body instanceof URLSearchParams) {
      const values = req.body.getAll('access_token');
      if (values.length > 1) throw new BearerError('invalid_request', 'access_token must not be repeated');
      fromBody = values[0] || undefined;
    }
  }
  if (fromHeader !== undefined && fromBody !== undefined)
    throw new BearerError('invalid_request', 'send the token in one place only (RFC 6750 §2)');
  const token = fromHeader ?? fromBody;
  if (token === undefined) throw new BearerError(undefined, 'a Bearer token is required');
  if (!isToken68(token)) throw new BearerError('invalid_token', 'malformed token', scheme);
  return { scheme, token };
}

function quoted(value: string): string {
  return value.replace(/[\\"]/g, '').replace(/[^\x20-\x7e]/g, '');
}

function refuse(reply: FastifyReply, ctx: OAuthContext, err: BearerError): FastifyReply {
  let challenge: string;
  if (err.scheme === 'DPoP' && ctx.dpop) {
    challenge = dpopChallenge(ctx.dpop.algorithms, err.error, err.error && quoted(err.message));
    if (err.nonce) reply.header('dpop-nonce', err.nonce);
  } else {
    const parts = [`Bearer realm="${quoted(ctx.config.issuer)}"`];
    if (err.error !== undefined) {
      parts.push(`error="${err.error}"`, `error_description="${quoted(err.message)}"`);
      if (err.error === 'insufficient_scope') parts.push('scope="openid"');
    }
    challenge = parts.join(', ');
  }
  reply
    .code(err.error === undefined ? 401 : STATUS[err.error])
    .header('www-authenticate', challenge)
    .header('cache-control', 'no-store')
    .type('application/json; charset=utf-8');
  return err.error === undefined
    ? reply.send({ error: 'unauthorized', error_description: err.message })
    : reply.send({ error: err.error, error_description: err.message });
}

/** The claims for a valid request. @throws BearerError. */
async function claimsFor(req: FastifyRequest, ctx: OAuthContext): Promise<Record<string, unknown>> {
  const { scheme, token } = presentedToken(req);
  const payload = await ctx.tokens.verifyAccessToken(token);
  if (!payload || typeof payload.sub !== 'string')
    throw new BearerError('invalid_token', 'the access token is invalid or expired', scheme);
  const jkt = (payload.cnf as { jkt?: unknown } | undefined)?.jkt;
  if (payload.cnf !== undefined && scheme === 'Bearer')
    throw new BearerError(
      'invalid_token',
      'a sender-constrained (DPoP) token cannot be used as a Bearer token',
    );
  if (scheme === 'DPoP') {
    if (typeof jkt !== 'string' || !ctx.dpop)
      throw new BearerError('invalid_token', 'the access token is not DPoP-bound', scheme);
    try {
      await ctx.dpop.verify({
        proof: req.headers.dpop,
        method: req.method,
        url: `${ctx.config.issuer}${USERINFO_PATH}`,
        accessToken: token,
        jkt,
      });
    } catch (error) {
      if (error instanceof DpopProofError)
        throw new BearerError(error.dpopError, error.message, scheme, error.nonce);
      throw error;
    }
  }
  const stamp = payload[SECURITY_STAMP_CLAIM];
  if (typeof stamp !== 'string') throw new BearerError('invalid_token', 'not a user access token');
  const user = await ctx.store.getUser(payload.sub);
  if (!user || !userActive(user, ctx.now()) || user.securityStamp !== stamp)
    throw new BearerError(
      'invalid_token',
      'the user is missing or disabled, or the token was revoked',
      scheme,
    );
  const clientId = typeof payload.client_id === 'string' ? payload.client_id : '';
  const client = await ctx.store.getClient(clientId);
  if (!client?.isEnabled) throw new BearerError('invalid_token', 'the client is missing or disabled', scheme);
  const scopes = scopeTokens(typeof payload.scope === 'string' ? payload.scope : '');
  if (!scopes.includes('openid'))
    throw new BearerError('insufficient_scope', "the access token lacks the 'openid' scope", scheme);
  return userClaims(ctx.store, user, scopes);
}

/** Registers `GET` and `POST /connect/userinfo` on an encapsulated context (its own form parser). */
export function registerUserInfoEndpoint(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    scope.setErrorHandler((error: { statusCode?: number }, _req, reply) => {
      const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
      if (status >= 400 && status < 500)
        return refuse(reply, ctx, new BearerError('invalid_request', 'malformed request'));
      reply.log.error(error);
      return reply.code(500).send({ error: 'server_error', error_description: 'internal error' });
    });
    scope.route({
      method: ['GET', 'POST'],
      url: USERINFO_PATH,
      handler: async (req, reply) => {
        try {
          const claims = await claimsFor(req, ctx);
          return reply
            .header('cache-control', 'no-store')
            .type('application/json; charset=utf-8')
            .send(claims);
        } catch (err) {
          if (err instanceof BearerError) return refuse(reply, ctx, err);
          throw err;
        }
      },
    });
  });
}
