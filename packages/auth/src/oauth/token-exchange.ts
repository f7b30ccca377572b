/**
 * OAuth 2.0 Token Exchange (RFC 8693): the grant `urn:ietf:params:oauth:grant-type:token-exchange` at the
 * token endpoint. A client trades a user's access token (`subject_token`) for a new access token for
 * itself: **impersonation** (no `actor_token`: the new token simply names the user) or **delegation**
 * (`actor_token`: the new token carries an `act` claim naming the actor, §4.1, nested when the actor
 * token is itself delegated). The client's metadata `tokenExchange` says which clients' tokens it may
 * exchange and which of the two modes it may use; `audience`/`resource` restrict the new token (§2.1,
 * RFC 8707). Every exchange, granted or refused, is audited (Category `Token`).
 */
import type { FastifyRequest } from 'fastify';
import type { JWTPayload } from 'jose';
import { clientAddress } from '../client-address.ts';
import { AuditCategory, AuditOutcome, type ClientRecord, type UserRecord } from '../store/types.ts';
import { type OAuthContext, userActive } from './context.ts';
import type { DpopProof } from './dpop.ts';
import { OAuthError } from './errors.ts';
import { type FormParams, requiredParam } from './form.ts';
import { resolveScope, scopeTokens } from './scope.ts';
import { SECURITY_STAMP_CLAIM } from './tokens.ts';

/** The grant type of RFC 8693 §2.1. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
/** Token type identifier of access tokens (RFC 8693 §3), the only type accepted and issued. */
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** Token type identifier of JWTs (RFC 8693 §3): this server's access tokens are JWTs, so it is accepted too. */
export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

const ACCEPTED_TYPES = new Set([ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE]);
/** Deepest `act` chain accepted (each delegation step adds one level). */
const MAX_ACT_DEPTH = 5;

/** Successful token-exchange response (RFC 8693 §2.2.1). */
export interface TokenExchangeResponse {
  access_token: string;
  issued_token_type: string;
  token_type: 'Bearer' | 'DPoP';
  /** Seconds. */
  expires_in: number;
  scope: string;
}

/** What the new token is bound or restricted to (DPoP key, RFC 8707 audience). */
export interface ExchangeBinding {
  readonly proof: DpopProof | undefined;
  readonly audience: string[] | undefined;
}

function actDepth(act: unknown): number {
  let depth = 0;
  let current = act;
  while (typeof current === 'object' && current !== null && depth <= MAX_ACT_DEPTH) {
    depth++;
    current = (current as { act?: unknown }).act;
  }
  return depth;
}

/**
 * Processes a token-exchange request for an authenticated `client` (RFC 8693 §2.1–2.2).
 * @throws OAuthError `invalid_request` (missing or invalid `subject_token`/`actor_token`, a subject token
 * that is not a user's, a `may_act` the actor does not satisfy, §2.2.2), `unsupported_token_type` (a token
 * type other than access token / JWT, or another `requested_token_type`), `unauthorized_client` (no
 * exchange policy, a mode the policy does not allow, a subject token from a client it does not list),
 * `invalid_scope`, `invalid_target` (through the RFC 8707 audience).
 */
export async function tokenExchangeGrant(
  req: FastifyRequest,
  ctx: OAuthContext,
  client: ClientRecord,
  form: FormParams,
  { proof, audience }: ExchangeBinding,
): Promise<TokenExchangeResponse> {
  const audit = async (outcome: string, failureCode: string | null, details: Record<string, unknown>) =>
    ctx.store.appendAudit({
      category: AuditCategory.Token,
      outcome,
      clientId: client.clientId,
      subjectId: typeof details.subject === 'string' ? details.subject : null,
      failureCode,
      remoteAddress: clientAddress(req),
      details: { action: 'token_exchange', ...details },
    });
  try {
    const result = await exchange(ctx, client, form, proof, audience);
    await audit(AuditOutcome.Success, null, result.details);
    return result.response;
  } catch (error) {
    if (error instanceof OAuthError)
      await audit(AuditOutcome.Denied, error.error, { reason: error.description });
    throw error;
  }
}

async function exchange(
  ctx: OAuthContext,
  client: ClientRecord,
  form: FormParams,
  proof: DpopProof | undefined,
  audience: string[] | undefined,
): Promise<{ response: TokenExchangeResponse; details: Record<string, unknown> }> {
  const subjectToken = requiredParam(form, 'subject_token');
  const subjectType = requiredParam(form, 'subject_token_type');
  if (!ACCEPTED_TYPES.has(subjectType))
    throw new OAuthError('unsupported_token_type', 'subject_token_type must be an access token or a JWT');
  const actorToken = form.get('actor_token');
  const actorType = form.get('actor_token_type');
  if (actorToken === undefined && actorType !== undefined)
    throw new OAuthError('invalid_request', 'actor_token_type given without actor_token');
  if (actorToken !== undefined && actorType === undefined)
    throw new OAuthError('invalid_request', 'actor_token_type is required with actor_token');
  if (actorType !== undefined && !ACCEPTED_TYPES.has(actorType))
    throw new OAuthError('unsupported_token_type', 'actor_token_type must be an access token or a JWT');
  const requested = form.get('requested_token_type');
  if (requested !== undefined && requested !== ACCESS_TOKEN_TYPE)
    throw new OAuthError('unsupported_token_type', 'only access tokens can be requested');

  const policy = client.metadata.tokenExchange;
  if (!policy) throw new OAuthError('unauthorized_client', 'client has no token exchange policy');
  const mode = actorToken === undefined ? 'impersonation' : 'delegation';
  if (mode === 'impersonation' && !policy.impersonation)
    throw new OAuthError('unauthorized_client', 'client may not impersonate (no actor_token)');
  if (mode === 'delegation' && !policy.delegation)
    throw new OAuthError('unauthorized_client', 'client may not act on behalf of users (actor_token)');

  const now = ctx.now();
  const subject = await ctx.tokens.verifyAccessToken(subjectToken);
  if (!subject || typeof subject.sub !== 'string')
    throw new OAuthError('invalid_request', 'subject_token is invalid or expired');
  const user = await activeUser(ctx, subject, now);
  if (!user) throw new OAuthError('invalid_request', 'subject_token must be an active user’s token');
  const fromClient = typeof subject.client_id === 'string' ? subject.client_id : '';
  if (!policy.subjectClients.includes('*') && !policy.subjectClients.includes(fromClient))
    throw new OAuthError('unauthorized_client', `client may not exchange tokens issued to '${fromClient}'`);

  let act: Record<string, unknown> | undefined;
  if (actorToken !== undefined) {
    const actor = await ctx.tokens.verifyAccessToken(actorToken);
    if (!actor || typeof actor.sub !== 'string')
      throw new OAuthError('invalid_request', 'actor_token is invalid or expired');
    if (typeof actor[SECURITY_STAMP_CLAIM] === 'string' && !(await activeUser(ctx, actor, now)))
      throw new OAuthError('invalid_request', 'actor_token belongs to a disabled user');
    const mayAct = subject.may_act as { sub?: unknown } | undefined;
    if (mayAct !== undefined && mayAct?.sub !== actor.sub)
      throw new OAuthError('invalid_request', "the actor is not allowed by the subject token's may_act");
    act = { sub: actor.sub };
    if (typeof actor.client_id === 'string') act.client_id = actor.client_id;
    if (actor.act !== undefined) act.act = actor.act;
    if (actDepth(act) > MAX_ACT_DEPTH)
      throw new OAuthError('invalid_request', 'delegation chain is too deep');
  }
  // The new token never carries more than the subject token and the client's allowed scopes.
  const granted = scopeTokens(typeof subject.scope === 'string' ? subject.scope : '');
  const scope = resolveScope(
    form.get('scope'),
    client.allowedScopes.filter((s) => granted.includes(s)),
  );
  const accessToken = await ctx.tokens.accessToken({
    subject: { kind: 'user', id: user.id, userName: user.userName, securityStamp: user.securityStamp },
    clientId: client.clientId,
    scope,
    jkt: proof?.jkt,
    audience,
    act,
  });
  return {
    response: {
      access_token: accessToken,
      issued_token_type: ACCESS_TOKEN_TYPE,
      token_type: proof ? 'DPoP' : 'Bearer',
      expires_in: ctx.config.accessTokenTtlSeconds,
      scope,
    },
    details: {
      mode,
      subject: user.id,
      subjectClient: fromClient,
      actor: act?.sub ?? null,
      audience: audience ?? null,
      scope,
    },
  };
}

/** The user of a verified access token when enabled, not locked and with an unchanged security stamp. */
async function activeUser(
  ctx: OAuthContext,
  claims: JWTPayload,
  now: number,
): Promise<UserRecord | undefined> {
  const stamp = claims[SECURITY_STAMP_CLAIM];
  if (typeof stamp !== 'string' || typeof claims.sub !== 'string') return undefined;
  const user = await ctx.store.getUser(claims.sub);
  return user && userActive(user, now) && user.securityStamp === stamp ? user : undefined;
}
