/**
 * Token revocation `POST /connect/revocation` (RFC 7009) and introspection `POST /connect/introspect`
 * (RFC 7662). Both take form bodies and authenticate the client like the token endpoint.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthenticatedClient } from './clients.ts';
import { familyMatchesStamp, type OAuthContext, userActive } from './context.ts';
import { OAuthError, oauthErrorHandler, sendOAuthError, setNoStore } from './errors.ts';
import { registerFormParser, requiredParam, requireForm } from './form.ts';
import { ENDPOINT_PATHS } from './metadata.ts';
import { hashRefreshToken, SECURITY_STAMP_CLAIM } from './tokens.ts';

/** Registers the revocation and introspection endpoints on an encapsulated context. */
export function registerRevocationAndIntrospection(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    scope.setErrorHandler(oauthErrorHandler);

    scope.post(ENDPOINT_PATHS.revocation, async (req, reply) => {
      try {
        const form = requireForm(req.body);
        const token = form.get('token');
        const { client } = await ctx.clients.authenticate(req, form);
        if (token === undefined) throw new OAuthError('invalid_request', 'token is required');
        const hint = form.get('token_type_hint');
        if (hint !== undefined && hint !== 'refresh_token' && hint !== 'access_token') {
          throw new OAuthError(
            'unsupported_token_type',
            `token_type_hint '${hint.slice(0, 32)}' is not supported`,
          );
        }
        const stored = await ctx.store.findRefreshToken(hashRefreshToken(token));
        if (stored && stored.clientId === client.clientId) {
          // RFC 7009 §2.1: revoking a refresh token also ends the grant it belongs to.
          await ctx.store.revokeRefreshTokenFamily(stored.familyId, ctx.now());
        } else if (!stored && (await ctx.tokens.verifyAccessToken(token))) {
          // JWT access tokens are self-contained and short-lived: they cannot be revoked one by one.
          throw new OAuthError(
            'unsupported_token_type',
            'access tokens cannot be revoked; revoke the refresh token',
          );
        }
        // §2.2: invalid or foreign tokens get 200 as well (nothing to reveal).
        return setNoStore(reply).code(200).send();
      } catch (err) {
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    });

    scope.post(ENDPOINT_PATHS.introspection, async (req, reply) => {
      try {
        const form = requireForm(req.body);
        const authenticated = await ctx.clients.authenticate(req, form);
        if (authenticated.method === 'none') {
          throw new OAuthError(
            'invalid_client',
            'introspection requires an authenticated (confidential) client',
          );
        }
        const token = requiredParam(form, 'token');
        return setNoStore(reply).send(await introspect(req, ctx, authenticated, token));
      } catch (err) {
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    });
  });
}

/**
 * RFC 7662 §2.2 response. Access tokens: active when signature, issuer, audience and expiry hold and,
 * for user tokens, the user is enabled, not locked and the security stamp is unchanged. Refresh tokens:
 * active when unused, unrevoked, unexpired and owned by the asking client.
 */
async function introspect(
  _req: FastifyRequest,
  ctx: OAuthContext,
  { client }: AuthenticatedClient,
  token: string,
): Promise<Record<string, unknown>> {
  const now = ctx.now();
  const stored = await ctx.store.findRefreshToken(hashRefreshToken(token));
  if (stored) {
    if (
      stored.clientId !== client.clientId ||
      stored.usedAt !== null ||
      stored.revokedAt !== null ||
      stored.expiresAt <= now
    ) {
      return { active: false };
    }
    let userName: string | undefined;
    if (stored.userId !== null) {
      const user = await ctx.store.getUser(stored.userId);
      if (!user || !userActive(user, now) || !familyMatchesStamp(stored.familyId, user.securityStamp))
        return { active: false };
      userName = user.userName;
    }
    return {
      active: true,
      token_type: 'refresh_token',
      client_id: stored.clientId,
      scope: stored.scope,
      sub: stored.userId ?? stored.clientId,
      username: userName,
      iss: ctx.config.issuer,
      iat: Math.floor(stored.createdAt / 1000),
      exp: Math.floor(stored.expiresAt / 1000),
      cnf: stored.dpopJkt === null ? undefined : { jkt: stored.dpopJkt },
    };
  }
  const claims = await ctx.tokens.verifyAccessToken(token);
  if (!claims || typeof claims.sub !== 'string') return { active: false };
  const stamp = claims[SECURITY_STAMP_CLAIM];
  if (typeof stamp === 'string') {
    const user = await ctx.store.getUser(claims.sub);
    if (!user || !userActive(user, now) || user.securityStamp !== stamp) return { active: false };
  } else {
    const owner = await ctx.store.getClient(claims.sub);
    if (!owner?.isEnabled) return { active: false };
  }
  return {
    active: true,
    // RFC 9449 §6.2: a DPoP-bound token is introspected with its confirmation (`cnf.jkt`).
    token_type: claims.cnf ? 'DPoP' : 'Bearer',
    cnf: claims.cnf,
    client_id: claims.client_id,
    scope: claims.scope,
    sub: claims.sub,
    username: claims.preferred_username,
    aud: claims.aud,
    iss: claims.iss,
    exp: claims.exp,
    iat: claims.iat,
    jti: claims.jti,
  };
}
