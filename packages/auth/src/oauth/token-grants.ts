/**
 * The grants of the token endpoint (`token-endpoint.ts`): password (RFC 6749 §4.3), refresh with rotation
 * and reuse detection (§6, RFC 9700 §4.14.2, DPoP-bound refresh tokens RFC 9449 §5), authorization code
 * with PKCE (§4.1.3, RFC 7636 §4.5–4.6, `dpop_jkt` RFC 9449 §10) and client credentials (§4.4), and the
 * issuing of access, refresh and ID tokens they share.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { AuditCategory, AuditOutcome, type ClientRecord, type UserRecord } from '../store/types.ts';
import type { AuthenticatedClient } from './clients.ts';
import { familyIdFor, familyMatchesStamp, type OAuthContext, userActive } from './context.ts';
import type { DpopProof } from './dpop.ts';
import { codeDpopJkt } from './dpop-code.ts';
import { OAuthError } from './errors.ts';
import { type FormParams, requiredParam } from './form.ts';
import { idTokenUserClaims, issueIdToken, releasesClaims, userClaims } from './id-token.ts';
import { checkPassword, limitedOAuthError } from './limits.ts';
import { type PkceMethod, verifyPkce } from './pkce.ts';
import { resolveScope, scopeTokens } from './scope.ts';
import type { TokenResponse } from './token-endpoint.ts';
import { hashRefreshToken, hashToken, newRefreshToken, type TokenSubject } from './tokens.ts';

const INVALID_USER_CREDENTIALS = 'invalid username or password';

/**
 * What the access token is bound or restricted to: the DPoP proof's key (RFC 9449) and the resource
 * indicators (RFC 8707).
 */
export interface TokenBinding {
  readonly proof: DpopProof | undefined;
  readonly audience: string[] | undefined;
}

/** RFC 6749 §4.3. All credential failures are `invalid_grant` alike (spec 001 rule). */
export async function passwordGrant(
  req: FastifyRequest,
  ctx: OAuthContext,
  { client }: AuthenticatedClient,
  form: FormParams,
  { proof, audience }: TokenBinding,
): Promise<TokenResponse> {
  const userName = form.get('username');
  const password = form.get('password');
  if (userName === undefined) throw new OAuthError('invalid_request', 'username is required');
  if (password === undefined) throw new OAuthError('invalid_request', 'password is required');
  const scope = resolveScope(form.get('scope'), client.allowedScopes);
  const checked = await checkPassword(req, ctx, userName, password, client.clientId);
  if (checked.limited) throw limitedOAuthError(checked.limited);
  const { outcome } = checked;
  if (!outcome.ok) throw new OAuthError('invalid_grant', INVALID_USER_CREDENTIALS);
  // The password grant has no step for a second factor: a user who has one, or for whom (or for whose
  // client) an administrator requires one, signs in through the authorization endpoint instead. Same
  // answer as a wrong password; the reason goes to the audit log.
  if (
    (await ctx.store.factors.getTotp(outcome.user.id)) !== undefined ||
    (await ctx.store.factors.isMfaRequired(outcome.user.id, client.clientId))
  ) {
    await ctx.store.appendAudit({
      category: AuditCategory.Login,
      outcome: AuditOutcome.Denied,
      subjectId: outcome.user.id,
      subjectName: outcome.user.userName,
      clientId: client.clientId,
      failureCode: 'second_factor_required',
      remoteAddress: clientAddress(req),
    });
    throw new OAuthError('invalid_grant', INVALID_USER_CREDENTIALS);
  }
  const familyId = familyIdFor(randomUUID(), outcome.user.securityStamp);
  return issue(
    ctx,
    client,
    outcome.user,
    scope,
    familyId,
    { proof, audience },
    {
      nonce: null,
      authTime: Math.floor(ctx.now() / 1000),
      amr: ['pwd'],
    },
  );
}

/**
 * RFC 6749 §6 with rotation and reuse detection (RFC 9700 §4.14.2). A DPoP-bound refresh token (RFC 9449
 * §5) is accepted only with a proof of the same key, and its successor stays bound to that key.
 */
export async function refreshGrant(
  req: FastifyRequest,
  ctx: OAuthContext,
  client: ClientRecord,
  form: FormParams,
  { proof, audience }: TokenBinding,
): Promise<TokenResponse> {
  const presented = requiredParam(form, 'refresh_token');
  const now = ctx.now();
  const tokenHash = hashRefreshToken(presented);
  // One query: the token and its user's status (enabled, lockout, security stamp).
  const found = await ctx.store.findRefreshTokenWithOwner(tokenHash);
  const stored = found?.token;
  if (!stored || stored.clientId !== client.clientId)
    throw new OAuthError('invalid_grant', 'refresh token is invalid');
  if (stored.revokedAt !== null) throw new OAuthError('invalid_grant', 'refresh token was revoked');
  if (stored.usedAt !== null) {
    await reuseDetected(req, ctx, stored.familyId, client.clientId, stored.userId);
    throw new OAuthError('invalid_grant', 'refresh token was already used');
  }
  if (stored.expiresAt <= now) throw new OAuthError('invalid_grant', 'refresh token expired');
  if (stored.dpopJkt !== null) {
    if (!proof)
      throw new OAuthError('invalid_dpop_proof', 'the refresh token is DPoP-bound: a DPoP proof is required');
    if (proof.jkt !== stored.dpopJkt)
      throw new OAuthError('invalid_grant', 'the refresh token is bound to another DPoP key');
  }
  const requested = form.get('scope');
  const scope = requested === undefined ? stored.scope : resolveScope(requested, scopeTokens(stored.scope));
  const user = found.owner;
  if (stored.userId !== null) {
    if (!user || !userActive(user, now) || !familyMatchesStamp(stored.familyId, user.securityStamp)) {
      await ctx.store.revokeRefreshTokenFamily(stored.familyId, now);
      throw new OAuthError('invalid_grant', 'the user of this refresh token is missing or disabled');
    }
  }
  const next = newRefreshToken(now);
  const nextHash = hashRefreshToken(next);
  const subject: TokenSubject = user
    ? { kind: 'user', id: user.id, userName: user.userName, securityStamp: user.securityStamp }
    : { kind: 'client', id: client.clientId };
  // The rotation's group commit and the signatures (libuv's thread pool) run at the same time; the tokens
  // leave the server only once the rotation is committed, and are dropped when it loses to a replay.
  const [rotated, accessToken, idToken] = await Promise.all([
    ctx.store.rotateRefreshToken(
      tokenHash,
      {
        tokenHash: nextHash,
        familyId: stored.familyId,
        clientId: client.clientId,
        userId: stored.userId,
        scope: stored.scope,
        createdAt: now,
        expiresAt: now + ctx.config.refreshTokenTtlSeconds * 1000,
        dpopJkt: stored.dpopJkt,
        sessionId: stored.sessionId,
        authTime: stored.authTime,
        amr: stored.amr,
      },
      now,
    ),
    // The refreshed tokens describe the original sign-in: its `auth_time`, `amr` and `acr` (OIDC Core §12.2).
    ctx.tokens.accessToken({
      subject,
      clientId: client.clientId,
      scope,
      authTime: stored.authTime ?? undefined,
      amr: stored.amr,
      jkt: proof?.jkt,
      audience,
    }),
    // OIDC Core §12.2: a refresh of an `openid` grant returns a new ID token (same `auth_time` and `sid`;
    // no `at_hash`, optional at the token endpoint, so that both tokens are signed in parallel).
    user && scopeTokens(scope).includes('openid')
      ? (releasesClaims(scopeTokens(scope))
          ? idTokenUserClaims(ctx.store, client, user.id, scopeTokens(scope))
          : Promise.resolve(undefined)
        ).then((claims) =>
          issueIdToken(ctx, {
            user,
            clientId: client.clientId,
            authTime: stored.authTime,
            amr: stored.amr,
            sid: stored.sessionId,
            userClaims: claims,
          }),
        )
      : undefined,
  ]);
  if (!rotated) {
    // A concurrent request rotated it first: this is a replay.
    await reuseDetected(req, ctx, stored.familyId, client.clientId, stored.userId);
    throw new OAuthError('invalid_grant', 'refresh token was already used');
  }
  const response: TokenResponse = {
    access_token: accessToken,
    token_type: proof ? 'DPoP' : 'Bearer',
    expires_in: ctx.config.accessTokenTtlSeconds,
    scope,
    refresh_token: next,
  };
  if (idToken !== undefined) response.id_token = idToken;
  return response;
}

export async function reuseDetected(
  req: FastifyRequest,
  ctx: OAuthContext,
  familyId: string,
  clientId: string,
  userId: string | null,
): Promise<void> {
  const now = ctx.now();
  const revoked = await ctx.store.revokeRefreshTokenFamily(familyId, now);
  await ctx.store.appendAudit({
    category: AuditCategory.Token,
    outcome: AuditOutcome.Denied,
    subjectId: userId,
    clientId,
    failureCode: 'refresh_token_reuse',
    remoteAddress: clientAddress(req),
    details: { familyRevoked: revoked },
  });
}

/** RFC 6749 §4.1.3 with PKCE (RFC 7636 §4.5–4.6). */
export async function authorizationCodeGrant(
  req: FastifyRequest,
  ctx: OAuthContext,
  client: ClientRecord,
  form: FormParams,
  { proof, audience }: TokenBinding,
): Promise<TokenResponse> {
  const code = requiredParam(form, 'code');
  // RFC 9449 §10: a code issued for dpop_jkt needs a proof of that key, checked before the code is used up.
  const boundJkt = codeDpopJkt(code);
  if (boundJkt !== undefined) {
    if (!proof)
      throw new OAuthError(
        'invalid_grant',
        'the authorization code is bound to a DPoP key: send a DPoP proof',
      );
    if (proof.jkt !== boundJkt)
      throw new OAuthError(
        'invalid_grant',
        'the DPoP proof key does not match the dpop_jkt of the authorization request',
      );
  }
  const now = ctx.now();
  const codeHash = hashToken(code);
  const record = await ctx.store.consumeAuthorizationCode(codeHash, now);
  if (!record) {
    const replayed = await ctx.store.findAuthorizationCode(codeHash);
    if (replayed && replayed.clientId === client.clientId) {
      // RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it.
      const user = await ctx.store.getUser(replayed.userId);
      if (user) {
        await reuseDetected(req, ctx, familyIdFor(codeHash, user.securityStamp), client.clientId, user.id);
      }
    }
    throw new OAuthError('invalid_grant', 'authorization code is invalid or was already used');
  }
  if (record.clientId !== client.clientId)
    throw new OAuthError('invalid_grant', 'authorization code was not issued to this client');
  if (record.expiresAt <= now) throw new OAuthError('invalid_grant', 'authorization code expired');
  if (form.get('redirect_uri') !== record.redirectUri)
    throw new OAuthError('invalid_grant', 'redirect_uri does not match');
  const verifier = form.get('code_verifier');
  if (record.codeChallenge !== null) {
    if (verifier === undefined) throw new OAuthError('invalid_grant', 'code_verifier is required');
    if (!verifyPkce(verifier, record.codeChallenge, (record.codeChallengeMethod ?? 'plain') as PkceMethod)) {
      throw new OAuthError('invalid_grant', 'PKCE verification failed');
    }
  } else if (verifier !== undefined) {
    throw new OAuthError(
      'invalid_grant',
      'code_verifier sent but the authorization request had no code_challenge',
    );
  }
  const user = await ctx.store.getUser(record.userId);
  if (!user || !userActive(user, now))
    throw new OAuthError('invalid_grant', 'the user is missing or disabled');
  return issue(
    ctx,
    client,
    user,
    record.scope,
    familyIdFor(codeHash, user.securityStamp),
    { proof, audience },
    {
      nonce: record.nonce,
      authTime: record.authTime ?? undefined,
      amr: record.amr,
      sessionId: record.sessionId,
    },
  );
}

/** RFC 6749 §4.4: confidential clients only; the token's subject is the client; no refresh token (§4.4.3). */
export async function clientCredentialsGrant(
  ctx: OAuthContext,
  { client }: AuthenticatedClient,
  form: FormParams,
  { proof, audience }: TokenBinding,
): Promise<TokenResponse> {
  if (client.clientType !== 'confidential') {
    throw new OAuthError('unauthorized_client', 'client_credentials requires a confidential client');
  }
  const scope = resolveScope(form.get('scope'), client.allowedScopes);
  const accessToken = await ctx.tokens.accessToken({
    subject: { kind: 'client', id: client.clientId },
    clientId: client.clientId,
    scope,
    jkt: proof?.jkt,
    audience,
  });
  return {
    access_token: accessToken,
    token_type: proof ? 'DPoP' : 'Bearer',
    expires_in: ctx.config.accessTokenTtlSeconds,
    scope,
  };
}

/**
 * Issues the access token (DPoP-bound when a proof came, RFC 9449 §5), a refresh token when the client may
 * refresh (bound to the proof's key for public clients, §5), and an ID token for `openid`.
 */
export async function issue(
  ctx: OAuthContext,
  client: ClientRecord,
  user: UserRecord,
  scope: string,
  familyId: string,
  { proof, audience }: TokenBinding,
  oidc: {
    nonce: string | null;
    authTime: number | undefined;
    amr?: readonly string[];
    sessionId?: string | null;
  },
): Promise<TokenResponse> {
  const now = ctx.now();
  const accessToken = await ctx.tokens.accessToken({
    subject: { kind: 'user', id: user.id, userName: user.userName, securityStamp: user.securityStamp },
    clientId: client.clientId,
    scope,
    authTime: oidc.authTime,
    amr: oidc.amr,
    jkt: proof?.jkt,
    audience,
  });
  const response: TokenResponse = {
    access_token: accessToken,
    token_type: proof ? 'DPoP' : 'Bearer',
    expires_in: ctx.config.accessTokenTtlSeconds,
    scope,
  };
  if (client.allowedGrantTypes.includes('refresh_token')) {
    const refresh = newRefreshToken(now);
    await ctx.store.insertRefreshToken({
      tokenHash: hashRefreshToken(refresh),
      familyId,
      clientId: client.clientId,
      userId: user.id,
      scope,
      createdAt: now,
      expiresAt: now + ctx.config.refreshTokenTtlSeconds * 1000,
      dpopJkt: client.clientType === 'public' && proof ? proof.jkt : null,
      sessionId: oidc.sessionId ?? null,
      authTime: oidc.authTime ?? null,
      amr: oidc.amr ?? null,
    });
    response.refresh_token = refresh;
  }
  if (scopeTokens(scope).includes('openid')) {
    const scopes = scopeTokens(scope);
    response.id_token = await issueIdToken(ctx, {
      userClaims:
        client.metadata.claimsInIdToken !== false && releasesClaims(scopes)
          ? await userClaims(ctx.store, user, scopes)
          : undefined,
      user,
      clientId: client.clientId,
      nonce: oidc.nonce,
      authTime: oidc.authTime,
      amr: oidc.amr,
      sid: oidc.sessionId,
      accessToken,
    });
  }
  return response;
}
