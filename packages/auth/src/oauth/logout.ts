/**
 * Logout: OpenID Connect RP-Initiated Logout 1.0 (`GET|POST /connect/endsession`, the
 * `end_session_endpoint`) and Back-Channel Logout 1.0 (logout tokens POSTed to the clients that registered a
 * `backchannel_logout_uri` and received tokens in the session).
 *
 * Ending a session revokes it and every refresh token issued in it, clears the cookie, writes a `Login` /
 * `Success` audit event (`details.action` `logout`) and notifies the session's clients. The user is logged
 * out at once when a valid `id_token_hint` names the current session (`sid`); otherwise a confirmation page
 * asks first (§2: "the OP SHOULD ask the End-User whether to log out"), so a cross-site request alone cannot
 * end a session. `post_logout_redirect_uri` must be registered for the client named by the hint or by
 * `client_id` (§3); the user is sent there with `state`. Request errors answer 400 `text/plain`, never a
 * redirect.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { decodeJwt, type JWTPayload, jwtVerify } from 'jose';
import { clientAddress } from '../client-address.ts';
import { AuditCategory, AuditOutcome, type ClientRecord, type LoginSessionRecord } from '../store/types.ts';
import type { OAuthContext } from './context.ts';
import { logoutConfirm, signedOut } from './logout-page.ts';
import { withQuery } from './paths.ts';
import { type ActiveSession, endSession, readSession } from './session.ts';

/** Path of the end-session endpoint (RP-Initiated Logout 1.0 §2). */
export const END_SESSION_PATH = '/connect/endsession';
/** Path of the confirmation form's POST target. */
export const END_SESSION_CONFIRM_PATH = '/connect/endsession/confirm';
/** Event URI of a logout token (Back-Channel Logout 1.0 §2.4). */
export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
/** How long a logout token is valid, seconds. */
export const LOGOUT_TOKEN_TTL_SECONDS = 120;
/** How long one back-channel POST may take, ms (Back-Channel Logout 1.0 §2.8: the OP must not wait forever). */
export const BACKCHANNEL_TIMEOUT_MS = 5000;

/** A refused end-session request (answered 400 `text/plain`, RP-Initiated Logout 1.0 §4). */
class LogoutRequestError extends Error {}

/** The validated parameters of an end-session request. */
interface LogoutRequest {
  readonly hint: JWTPayload | undefined;
  readonly client: ClientRecord | undefined;
  readonly redirectUri: string | undefined;
  readonly state: string | undefined;
}

/**
 * Verifies an `id_token_hint`: signed by this server's keys, issued by it. An expired hint is accepted
 * (§2: the OP should accept ID tokens whose expiry passed), so its time is checked as of its `iat`.
 * @throws LogoutRequestError when it is not one of this server's ID tokens.
 */
async function verifyHint(ctx: OAuthContext, token: string): Promise<JWTPayload> {
  try {
    const iat = decodeJwt(token).iat;
    const { payload, protectedHeader } = await jwtVerify(token, ctx.keys.keyGetter(), {
      issuer: ctx.config.issuer,
      currentDate: typeof iat === 'number' ? new Date(iat * 1000) : undefined,
    });
    if (protectedHeader.typ !== undefined && protectedHeader.typ !== 'JWT')
      throw new Error('not an ID token');
    if (typeof payload.sub !== 'string' || typeof payload.aud !== 'string')
      throw new Error('not an ID token');
    return payload;
  } catch {
    throw new LogoutRequestError('id_token_hint is not a valid ID token of this server');
  }
}

/** Validates the parameters (query or form). @throws LogoutRequestError. */
async function parseRequest(
  ctx: OAuthContext,
  get: (name: string) => string | undefined,
): Promise<LogoutRequest> {
  const rawHint = get('id_token_hint');
  const hint = rawHint === undefined ? undefined : await verifyHint(ctx, rawHint);
  const clientId = get('client_id');
  if (hint && clientId !== undefined && hint.aud !== clientId)
    throw new LogoutRequestError('client_id does not match the audience of id_token_hint');
  const id = (hint?.aud as string | undefined) ?? clientId;
  const client = id === undefined ? undefined : await ctx.store.getClient(id);
  if (id !== undefined && !client?.isEnabled) throw new LogoutRequestError('unknown or disabled client');
  const redirectUri = get('post_logout_redirect_uri');
  if (redirectUri !== undefined) {
    if (!client)
      throw new LogoutRequestError(
        'post_logout_redirect_uri needs id_token_hint or client_id to name the client',
      );
    if (!client.postLogoutRedirectUris.includes(redirectUri))
      throw new LogoutRequestError('post_logout_redirect_uri is not registered for this client');
  }
  const state = get('state');
  if (state !== undefined && state.length > 1024) throw new LogoutRequestError('state is too long');
  return { hint, client, redirectUri, state };
}

/**
 * Signs a logout token (Back-Channel Logout 1.0 §2.4): header `typ: logout+jwt`; claims `iss`, `aud` (the
 * client), `iat`, `exp`, `jti`, `sub`, `sid` and `events` with the back-channel logout event; never `nonce`.
 */
export async function logoutToken(
  ctx: OAuthContext,
  clientId: string,
  session: Pick<LoginSessionRecord, 'userId' | 'sid'>,
): Promise<string> {
  const iat = Math.floor(ctx.now() / 1000);
  const claims: JWTPayload = {
    iss: ctx.config.issuer,
    aud: clientId,
    iat,
    exp: iat + LOGOUT_TOKEN_TTL_SECONDS,
    jti: randomUUID(),
    sub: session.userId,
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
  };
  if (session.sid) claims.sid = session.sid;
  return ctx.keys.active().signJwt('logout+jwt', claims);
}

/**
 * POSTs a logout token to every client of the session that registered a back-channel logout URI
 * (form `logout_token`, §2.5), in parallel, each bounded by {@link BACKCHANNEL_TIMEOUT_MS}. Every delivery is
 * audited (`Login` / `Success`, or `Failure` with failure code `backchannel_logout_failed`).
 * @returns the client ids notified successfully (2xx).
 */
export async function notifyBackchannel(
  ctx: OAuthContext,
  session: Pick<LoginSessionRecord, 'userId' | 'sid'>,
): Promise<string[]> {
  if (!session.sid) return [];
  const clients = (await ctx.store.listSessionClients(session.sid)).filter((c) => c.backchannelLogoutUri);
  const results = await Promise.all(
    clients.map(async (client) => {
      let ok = false;
      try {
        const res = await fetch(client.backchannelLogoutUri!, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'cache-control': 'no-store' },
          body: new URLSearchParams({ logout_token: await logoutToken(ctx, client.clientId, session) }),
          redirect: 'manual',
          signal: AbortSignal.timeout(BACKCHANNEL_TIMEOUT_MS),
        });
        await res.body?.cancel();
        ok = res.ok;
      } catch {
        ok = false;
      }
      await ctx.store.appendAudit({
        category: AuditCategory.Login,
        outcome: ok ? AuditOutcome.Success : AuditOutcome.Failure,
        subjectId: session.userId,
        clientId: client.clientId,
        failureCode: ok ? null : 'backchannel_logout_failed',
        details: { action: 'backchannel_logout', sid: session.sid },
      });
      return ok ? client.clientId : undefined;
    }),
  );
  return results.filter((id): id is string => id !== undefined);
}

/**
 * Ends the request's login session: revokes it and its refresh tokens, clears the cookie, audits, and
 * notifies the session's back-channel clients. Does nothing but clear the cookie when there is no session.
 */
export async function logout(req: FastifyRequest, reply: FastifyReply, ctx: OAuthContext): Promise<void> {
  const session = await endSession(req, reply, ctx);
  if (!session || session.revokedAt !== null) return;
  await ctx.store.appendAudit({
    category: AuditCategory.Login,
    outcome: AuditOutcome.Success,
    subjectId: session.userId,
    remoteAddress: clientAddress(req),
    details: { action: 'logout', sid: session.sid },
  });
  await notifyBackchannel(ctx, session);
}

function badRequest(reply: FastifyReply, message: string): FastifyReply {
  return reply
    .code(400)
    .header('cache-control', 'no-store')
    .type('text/plain; charset=utf-8')
    .send(`invalid_request: ${message}\n`);
}

/** The hint names the current session: same user and same `sid`. */
function hintMatches(hint: JWTPayload | undefined, active: ActiveSession): boolean {
  return (
    hint !== undefined &&
    hint.sub === active.user.id &&
    typeof hint.sid === 'string' &&
    hint.sid === active.session.sid
  );
}

/**
 * Registers `GET|POST /connect/endsession` and `POST /connect/endsession/confirm` on the login page's
 * encapsulated context (form parser, CSRF protection). `page` sends HTML with the login page's headers;
 * `formField` reads one single-valued form field.
 */
export function registerEndSessionEndpoint(
  scope: FastifyInstance,
  ctx: OAuthContext,
  page: (reply: FastifyReply, html: string) => FastifyReply,
  formField: (body: unknown, name: string) => string | undefined,
): void {
  const finish = (reply: FastifyReply, request: LogoutRequest) => {
    reply.header('cache-control', 'no-store');
    if (request.redirectUri !== undefined)
      return reply.redirect(withQuery(request.redirectUri, { state: request.state }), 302);
    return page(reply, signedOut());
  };

  const handle = async (
    req: FastifyRequest,
    reply: FastifyReply,
    get: (name: string) => string | undefined,
  ) => {
    let request: LogoutRequest;
    try {
      request = await parseRequest(ctx, get);
    } catch (err) {
      if (err instanceof LogoutRequestError) return badRequest(reply, err.message);
      throw err;
    }
    const active = await readSession(req, ctx);
    if (!active) return finish(reply, request);
    if (hintMatches(request.hint, active)) {
      await logout(req, reply, ctx);
      return finish(reply, request);
    }
    return page(
      reply,
      logoutConfirm({
        csrfToken: reply.generateCsrf(),
        userName: active.user.userName,
        clientName: request.client ? request.client.displayName || request.client.clientId : undefined,
        fields: {
          client_id: request.client?.clientId,
          post_logout_redirect_uri: request.redirectUri,
          state: request.state,
        },
      }),
    );
  };

  scope.get(END_SESSION_PATH, async (req, reply) => {
    const query = new URLSearchParams(req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '');
    for (const key of new Set(query.keys())) {
      if (query.getAll(key).length > 1)
        return badRequest(reply, `parameter '${key.slice(0, 64)}' must not be repeated`);
    }
    return handle(req, reply, (name) => query.get(name) || undefined);
  });
  scope.post(END_SESSION_PATH, async (req, reply) => {
    if (!(req.body instanceof URLSearchParams))
      return badRequest(reply, 'body must be application/x-www-form-urlencoded');
    const body = req.body;
    for (const key of new Set(body.keys())) {
      if (body.getAll(key).length > 1)
        return badRequest(reply, `parameter '${key.slice(0, 64)}' must not be repeated`);
    }
    return handle(req, reply, (name) => body.get(name) || undefined);
  });
  scope.post(END_SESSION_CONFIRM_PATH, { preHandler: scope.csrfProtection }, async (req, reply) => {
    let request: LogoutRequest;
    try {
      request = await parseRequest(ctx, (name) => formField(req.body, name) || undefined);
    } catch (err) {
      if (err instanceof LogoutRequestError) return badRequest(reply, err.message);
      throw err;
    }
    await logout(req, reply, ctx);
    return finish(reply, request);
  });
}
