/**
 * Pushed Authorization Requests (RFC 9126): `POST /connect/par` takes the authorization request parameters
 * from an authenticated client (§2.1) and answers a one-time `request_uri` (§2.2); the authorization
 * endpoint then takes its parameters from the pushed request only (§4). "PAR required" (§5, §6): per client
 * (metadata `requirePushedAuthorizationRequests`) or for every client (`par.requirePushedAuthorizationRequests`).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ClientRecord } from '../store/types.ts';
import type { OAuthContext } from './context.ts';
import { tokenRequestProof } from './dpop-token.ts';
import { OAuthError, oauthErrorHandler, sendOAuthError, setNoStore } from './errors.ts';
import { registerFormParser, requireForm } from './form.ts';
import { resolveScope } from './scope.ts';
import { readSession } from './session.ts';
import { hashToken } from './tokens.ts';

/** Path of the pushed authorization request endpoint. */
export const PAR_PATH = '/connect/par';
/** Prefix of the `request_uri` values this server issues (RFC 9126 §2.2). */
export const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';

/** Form parameters that authenticate the client and are not part of the authorization request. */
const CLIENT_AUTH_PARAMS = new Set(['client_secret', 'client_assertion', 'client_assertion_type']);
/** Most parameters accepted in one pushed request. */
const MAX_PARAMS = 64;

/** Registers `POST /connect/par` on an encapsulated context (form parser, OAuth error shape). */
export function registerParEndpoint(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    scope.setErrorHandler(oauthErrorHandler);
    scope.post(PAR_PATH, async (req, reply) => {
      try {
        const body = await pushRequest(req, ctx);
        return setNoStore(reply).code(201).type('application/json; charset=utf-8').send(body);
      } catch (err) {
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    });
  });
}

/**
 * RFC 9126 §2.1–2.3: authenticates the client like the token endpoint, refuses `request_uri` in the body,
 * checks what can be checked before the user is involved (response type, registered redirect URI, scope),
 * stores the parameters (with `dpop_jkt` from a DPoP proof, RFC 9449 §10.1) and returns the `request_uri`.
 * @throws OAuthError `invalid_request`, `invalid_client`, `unauthorized_client`, `invalid_scope`,
 * `invalid_dpop_proof` (a bad proof, or one whose key differs from `dpop_jkt`).
 */
async function pushRequest(
  req: FastifyRequest,
  ctx: OAuthContext,
): Promise<{ request_uri: string; expires_in: number }> {
  const settings = ctx.config.par;
  if (!settings) throw new OAuthError('invalid_request', 'pushed authorization requests are disabled');
  const form = requireForm(req.body);
  const { client } = await ctx.clients.authenticate(req, form);
  const body = req.body as URLSearchParams;
  if (form.get('request_uri') !== undefined)
    throw new OAuthError('invalid_request', 'request_uri must not be pushed (RFC 9126 §2.1)');
  if (form.get('request') !== undefined)
    throw new OAuthError('invalid_request', 'request objects are not supported');
  if (form.get('response_type') !== 'code')
    throw new OAuthError('invalid_request', "response_type must be 'code'");
  if (!client.allowedGrantTypes.includes('authorization_code'))
    throw new OAuthError('unauthorized_client', 'client is not allowed the authorization code flow');
  const redirectUri = form.get('redirect_uri');
  if (redirectUri !== undefined && !client.redirectUris.includes(redirectUri))
    throw new OAuthError('invalid_request', 'redirect_uri is not registered for this client');
  resolveScope(form.get('scope'), client.allowedScopes);
  const params: Record<string, string> = {};
  let count = 0;
  for (const [name, value] of body) {
    if (CLIENT_AUTH_PARAMS.has(name) || value === '') continue;
    if (++count > MAX_PARAMS) throw new OAuthError('invalid_request', `at most ${MAX_PARAMS} parameters`);
    params[name] = value;
  }
  params.client_id = client.clientId;
  // RFC 9449 §10.1: a DPoP proof on the push binds the code to its key (dpop_jkt), and must agree with a
  // dpop_jkt parameter sent as well.
  const proof =
    req.headers.dpop === undefined ? undefined : await tokenRequestProof(req, ctx, client, PAR_PATH);
  if (proof) {
    if (params.dpop_jkt !== undefined && params.dpop_jkt !== proof.jkt)
      throw new OAuthError('invalid_dpop_proof', 'dpop_jkt does not match the key of the DPoP proof');
    params.dpop_jkt = proof.jkt;
  }
  const reference = randomBytes(32).toString('base64url');
  const now = ctx.now();
  await ctx.store.insertPushedRequest({
    requestHash: hashToken(reference),
    clientId: client.clientId,
    params,
    createdAt: now,
    expiresAt: now + settings.requestUriTtlSeconds * 1000,
  });
  return { request_uri: `${REQUEST_URI_PREFIX}${reference}`, expires_in: settings.requestUriTtlSeconds };
}

/** The parameter view the authorization endpoint reads (single values, first repeated name). */
export interface AuthorizeParams {
  get(name: string): string | undefined;
  readonly repeated: string | undefined;
}

/** True when the client must push its authorization requests (RFC 9126 §5, §6). */
export function parRequired(ctx: OAuthContext, client: ClientRecord): boolean {
  return (
    ctx.config.par !== null &&
    (ctx.config.par.requirePushedAuthorizationRequests ||
      client.metadata.requirePushedAuthorizationRequests === true)
  );
}

/**
 * The parameters of an authorization request (RFC 9126 §4): with `request_uri`, those pushed by the
 * client named by `client_id` (every other query parameter is ignored); without, the query itself, unless
 * the client must use PAR. A pushed request is used up when the user is signed in (the request goes on
 * to a code or an error redirect), so the login round trip can revisit it.
 * @returns the parameters, or `error` (answered 400 `text/plain`, no redirect: the redirect URI is not
 * trusted yet).
 */
export async function authorizationParams(
  req: FastifyRequest,
  ctx: OAuthContext,
  query: AuthorizeParams,
): Promise<{ params: AuthorizeParams } | { error: string }> {
  const requestUri = query.get('request_uri');
  const clientId = query.get('client_id');
  if (requestUri === undefined) {
    if (clientId !== undefined && ctx.config.par) {
      const client = await ctx.store.getClient(clientId);
      if (client?.isEnabled && parRequired(ctx, client)) {
        return { error: 'invalid_request: this client must use pushed authorization requests (RFC 9126)' };
      }
    }
    return { params: query };
  }
  if (!ctx.config.par) return { error: 'invalid_request: request_uri is not supported' };
  if (query.repeated === 'request_uri') return { error: 'invalid_request: request_uri must not be repeated' };
  if (clientId === undefined) return { error: 'invalid_request: client_id is required with request_uri' };
  if (!requestUri.startsWith(REQUEST_URI_PREFIX))
    return { error: 'invalid_request_uri: request_uri was not issued by this server' };
  const requestHash = hashToken(requestUri.slice(REQUEST_URI_PREFIX.length));
  const pushed = await ctx.store.findPushedRequest(requestHash);
  const now = ctx.now();
  if (!pushed || pushed.clientId !== clientId)
    return { error: 'invalid_request_uri: unknown request_uri for this client' };
  if (pushed.usedAt !== null) return { error: 'invalid_request_uri: request_uri was already used' };
  if (pushed.expiresAt <= now) return { error: 'invalid_request_uri: request_uri expired' };
  if ((await readSession(req, ctx)) && !(await ctx.store.consumePushedRequest(requestHash, now)))
    return { error: 'invalid_request_uri: request_uri was already used' };
  const values = pushed.params;
  return {
    params: {
      get: (name) => (Object.hasOwn(values, name) && values[name] !== '' ? values[name] : undefined),
      repeated: undefined,
    },
  };
}
