/**
 * The authorization endpoint `GET /connect/authorize` (RFC 6749 §3.1, §4.1.1–4.1.2.1; RFC 7636 §4.3;
 * RFC 9207 `iss`; spec 001 "Authorization endpoint"): `client_id` and `redirect_uri` are validated first
 * and a failure answers 400 `text/plain` without redirecting; every later error redirects (302) to the
 * client with `error`, `error_description` and `state`. Users without a session go to the login page and
 * come back here.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { acrValuesNeedMfa, hasMfa } from '../mfa/assurance.ts';
import { AuditCategory, AuditOutcome, type ClientRecord } from '../store/types.ts';
import { CONSENT_PATH, consentStep, withoutConsentPrompt } from './consent.ts';
import type { OAuthContext } from './context.ts';
import { dpopBoundCode, isJwkThumbprint } from './dpop-code.ts';
import { OAuthError } from './errors.ts';
import { authorizationParams } from './par.ts';
import { AUTHORIZE_PATH, LOGIN_PATH, OTP_PATH, withQuery } from './paths.ts';
import { isValidPkceString, type PkceMethod } from './pkce.ts';
import { resolveScope } from './scope.ts';
import { readSession } from './session.ts';
import { hashToken, newOpaqueToken } from './tokens.ts';

/**
 * Error values the authorization endpoint redirects with (spec 001, plus OIDC Core §3.1.2.6
 * `login_required`, `interaction_required` and `consent_required` for `prompt=none`).
 */
export type AuthorizeErrorCode =
  | 'invalid_request'
  | 'unauthorized_client'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'login_required'
  | 'interaction_required'
  | 'consent_required';

/** `prompt` values understood (OIDC Core §3.1.2.1); `select_account` has nothing to select here (one session). */
const PROMPT_VALUES = new Set(['none', 'login', 'consent', 'select_account']);

/**
 * The URL the login page returns to: the same authorization request without what the sign-in satisfies —
 * `login` removed from `prompt` and `max_age` dropped (the new session's `auth_time` is returned in the ID
 * token for the client to check, OIDC Core §3.1.2.1) — so the request does not send the user back to the
 * login page again.
 */
export function afterLoginUrl(requestUrl: string): string {
  const q = requestUrl.indexOf('?');
  const params = new URLSearchParams(q === -1 ? '' : requestUrl.slice(q + 1));
  const prompt = (params.get('prompt') ?? '').split(' ').filter((p) => p !== '' && p !== 'login');
  if (prompt.length > 0) params.set('prompt', prompt.join(' '));
  else params.delete('prompt');
  params.delete('max_age');
  return `${AUTHORIZE_PATH}?${params}`;
}

class AuthorizeRedirectError extends Error {
  readonly error: AuthorizeErrorCode;
  constructor(error: AuthorizeErrorCode, description: string) {
    super(description);
    this.error = error;
  }
}

/** The query as single values; repeated parameters are reported (RFC 6749 §3.1). */
function queryParams(req: FastifyRequest): {
  get(name: string): string | undefined;
  repeated: string | undefined;
} {
  const raw = req.url.indexOf('?') === -1 ? '' : req.url.slice(req.url.indexOf('?') + 1);
  const params = new URLSearchParams(raw);
  const seen = new Set<string>();
  let repeated: string | undefined;
  for (const key of params.keys()) {
    if (seen.has(key)) repeated ??= key;
    seen.add(key);
  }
  return {
    get(name) {
      const v = params.get(name);
      return v === null || v === '' ? undefined : v;
    },
    repeated,
  };
}

function plainError(reply: FastifyReply, message: string): FastifyReply {
  return reply
    .code(400)
    .header('cache-control', 'no-store')
    .type('text/plain; charset=utf-8')
    .send(`${message}\n`);
}

/** Registers `GET /connect/authorize`. */
export function registerAuthorizeEndpoint(app: FastifyInstance, ctx: OAuthContext): void {
  app.get(AUTHORIZE_PATH, async (req, reply) => {
    // RFC 9126 §4: with request_uri, the pushed parameters replace the query.
    const resolved = await authorizationParams(req, ctx, queryParams(req));
    if ('error' in resolved) return plainError(reply, resolved.error);
    const q = resolved.params;
    // 1. client_id and redirect_uri: failures never redirect (RFC 6749 §4.1.2.1).
    const clientId = q.get('client_id');
    if (clientId === undefined) return plainError(reply, 'invalid_request: client_id is required');
    if (q.repeated === 'client_id')
      return plainError(reply, 'invalid_request: client_id must not be repeated');
    const client = await ctx.store.getClient(clientId);
    if (!client?.isEnabled) return plainError(reply, 'invalid_client: unknown or disabled client_id');
    if (q.repeated === 'redirect_uri')
      return plainError(reply, 'invalid_request: redirect_uri must not be repeated');
    let redirectUri = q.get('redirect_uri');
    if (redirectUri === undefined) {
      if (client.redirectUris.length !== 1) {
        return plainError(
          reply,
          'invalid_request: redirect_uri is required (the client has several registered)',
        );
      }
      redirectUri = client.redirectUris[0]!;
    } else if (!client.redirectUris.includes(redirectUri)) {
      return plainError(reply, 'invalid_request: redirect_uri is not registered for this client');
    }
    const state = q.get('state');
    const fail = (error: AuthorizeErrorCode, description: string) =>
      reply
        .code(302)
        .header('cache-control', 'no-store')
        .redirect(
          withQuery(redirectUri, { error, error_description: description, state, iss: ctx.config.issuer }),
          302,
        );
    try {
      const request = validate(q, client, ctx);
      const active = await readSession(req, ctx);
      const now = ctx.now();
      const tooOld =
        active !== undefined &&
        request.maxAge !== undefined &&
        now - active.session.createdAt > request.maxAge * 1000;
      if (!active || tooOld || request.prompt.includes('login')) {
        if (request.prompt.includes('none')) {
          throw new AuthorizeRedirectError(
            'login_required',
            active ? 'the authentication is older than max_age' : 'the user is not signed in',
          );
        }
        return reply
          .header('cache-control', 'no-store')
          .redirect(`${LOGIN_PATH}?${new URLSearchParams({ return_to: afterLoginUrl(req.url) })}`, 302);
      }
      // Step-up (OIDC Core §3.1.2.1 `acr_values`; administrators' requirements): a session without a second
      // factor goes to the second-factor page, which upgrades it and comes back here.
      if (
        !hasMfa(active.session.amr) &&
        (acrValuesNeedMfa(request.acrValues) ||
          (await ctx.store.factors.isMfaRequired(active.user.id, client.clientId)))
      ) {
        if (request.prompt.includes('none'))
          throw new AuthorizeRedirectError('interaction_required', 'a second factor is required');
        return reply
          .header('cache-control', 'no-store')
          .redirect(`${OTP_PATH}?${new URLSearchParams({ return_to: afterLoginUrl(req.url) })}`, 302);
      }
      const consent = await consentStep(ctx, client, active.user, request.scope, request.prompt);
      if (consent === 'required') {
        if (request.prompt.includes('none'))
          throw new AuthorizeRedirectError('consent_required', 'the user has not consented to this client');
        return reply
          .header('cache-control', 'no-store')
          .redirect(
            `${CONSENT_PATH}?${new URLSearchParams({ return_to: withoutConsentPrompt(req.url) })}`,
            302,
          );
      }
      // RFC 9449 §10: a code requested with dpop_jkt carries the thumbprint; the stored hash covers it.
      const code = dpopBoundCode(newOpaqueToken(), request.dpopJkt);
      const sid = active.session.sid;
      await ctx.store.insertAuthorizationCode({
        codeHash: hashToken(code),
        clientId: client.clientId,
        userId: active.user.id,
        redirectUri,
        scope: request.scope,
        codeChallenge: request.codeChallenge,
        codeChallengeMethod: request.codeChallengeMethod,
        nonce: request.nonce ?? null,
        authTime: Math.floor(active.session.createdAt / 1000),
        sessionId: sid,
        amr: active.session.amr,
        createdAt: now,
        expiresAt: now + ctx.config.authorizationCodeTtlSeconds * 1000,
      });
      if (sid !== null) await ctx.store.addSessionClient(sid, client.clientId, now);
      await ctx.store.appendAudit({
        category: AuditCategory.Authorization,
        outcome: AuditOutcome.Success,
        subjectId: active.user.id,
        subjectName: active.user.userName,
        clientId: client.clientId,
        remoteAddress: clientAddress(req),
      });
      return reply
        .header('cache-control', 'no-store')
        .redirect(withQuery(redirectUri, { code, state, iss: ctx.config.issuer }), 302);
    } catch (err) {
      if (err instanceof AuthorizeRedirectError) return fail(err.error, err.message);
      throw err;
    }
  });
}

interface ValidAuthorizationRequest {
  readonly scope: string;
  readonly codeChallenge: string;
  readonly codeChallengeMethod: PkceMethod;
  readonly nonce: string | undefined;
  readonly prompt: readonly string[];
  /** `max_age` in seconds (OIDC Core §3.1.2.1), or undefined. */
  readonly maxAge: number | undefined;
  /** `dpop_jkt` (RFC 9449 §10): the DPoP key the code is bound to, when DPoP is on and it was sent. */
  readonly dpopJkt: string | undefined;
  /** `acr_values` (OIDC Core §3.1.2.1), space-separated, or undefined. */
  readonly acrValues: string | undefined;
}

/** Checks everything after client and redirect URI. @throws AuthorizeRedirectError. */
function validate(
  q: ReturnType<typeof queryParams>,
  client: ClientRecord,
  ctx: OAuthContext,
): ValidAuthorizationRequest {
  if (q.repeated !== undefined)
    throw new AuthorizeRedirectError('invalid_request', `parameter '${q.repeated}' must not be repeated`);
  const responseType = q.get('response_type');
  if (responseType === undefined)
    throw new AuthorizeRedirectError('invalid_request', 'response_type is required');
  if (responseType !== 'code') {
    throw new AuthorizeRedirectError('unsupported_response_type', "only response_type 'code' is supported");
  }
  if (
    !ctx.config.grantTypes.includes('authorization_code') ||
    !client.allowedGrantTypes.includes('authorization_code')
  ) {
    throw new AuthorizeRedirectError(
      'unauthorized_client',
      'the authorization code grant is not enabled for this client',
    );
  }
  let scope: string;
  try {
    scope = resolveScope(q.get('scope'), client.allowedScopes);
  } catch (err) {
    if (err instanceof OAuthError) throw new AuthorizeRedirectError('invalid_scope', err.description);
    throw err;
  }
  const codeChallenge = q.get('code_challenge');
  if (codeChallenge === undefined) {
    throw new AuthorizeRedirectError('invalid_request', 'code_challenge is required (PKCE, RFC 7636)');
  }
  if (!isValidPkceString(codeChallenge)) {
    throw new AuthorizeRedirectError(
      'invalid_request',
      'code_challenge must be 43-128 unreserved characters',
    );
  }
  const method = q.get('code_challenge_method') ?? 'plain';
  if (method !== 'S256' && method !== 'plain') {
    throw new AuthorizeRedirectError('invalid_request', "code_challenge_method must be 'S256'");
  }
  if (method === 'plain' && (client.clientType === 'public' || !ctx.config.allowPlainPkce)) {
    throw new AuthorizeRedirectError(
      'invalid_request',
      "code_challenge_method 'plain' is not allowed; use 'S256'",
    );
  }
  const nonce = q.get('nonce');
  if (nonce !== undefined && nonce.length > 512)
    throw new AuthorizeRedirectError('invalid_request', 'nonce is too long');
  const prompt = [...new Set((q.get('prompt') ?? '').split(' ').filter(Boolean))];
  for (const value of prompt) {
    if (!PROMPT_VALUES.has(value))
      throw new AuthorizeRedirectError(
        'invalid_request',
        `prompt value '${value.slice(0, 32)}' is not supported`,
      );
  }
  if (prompt.includes('none') && prompt.length > 1)
    throw new AuthorizeRedirectError(
      'invalid_request',
      "prompt 'none' must not be combined with other values",
    );
  const rawMaxAge = q.get('max_age');
  if (rawMaxAge !== undefined && !/^\d{1,10}$/.test(rawMaxAge))
    throw new AuthorizeRedirectError('invalid_request', 'max_age must be a non-negative integer (seconds)');
  const loginHint = q.get('login_hint');
  if (loginHint !== undefined && loginHint.length > 256)
    throw new AuthorizeRedirectError('invalid_request', 'login_hint is too long (at most 256 characters)');
  const maxAge = rawMaxAge === undefined ? undefined : Number(rawMaxAge);
  const dpopJkt = ctx.dpop ? q.get('dpop_jkt') : undefined;
  if (dpopJkt !== undefined && !isJwkThumbprint(dpopJkt))
    throw new AuthorizeRedirectError(
      'invalid_request',
      'dpop_jkt must be a base64url JWK SHA-256 thumbprint (RFC 7638, 43 characters)',
    );
  const acrValues = q.get('acr_values');
  if (acrValues !== undefined && acrValues.length > 512)
    throw new AuthorizeRedirectError('invalid_request', 'acr_values is too long (at most 512 characters)');
  return { scope, codeChallenge, codeChallengeMethod: method, nonce, prompt, maxAge, dpopJkt, acrValues };
}
