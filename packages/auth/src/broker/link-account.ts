/**
 * Linking an upstream account by proving the local one: when a first brokered sign-in cannot be linked
 * automatically — the provider did not confirm the e-mail address as verified, or the local account with
 * that address has not verified it — the user is asked to sign in with the local account's user name and
 * password; once that succeeds the upstream account is linked to it (and later brokered sign-ins find the
 * link). Nothing is linked or provisioned without that proof.
 *
 * - The pending link (provider, upstream subject, its e-mail, the `return_to`) travels in an HttpOnly cookie
 *   holding a JWT signed with the server's own signing key (`typ` {@link PENDING_LINK_TYP}, audience the link
 *   page URL, 10 minutes), so it cannot be forged or altered and every instance sharing the keys accepts it.
 * - `POST /login/upstream/link` (CSRF-protected): the password check is the login page's (per-IP and
 *   per-account limits, the credential audit event). A failure shows the same form with one generic error.
 *   Success links, audits `upstream.link` with `details.method` `password`, and continues as a password
 *   sign-in: the local second factor when due, else a session with `amr` `["pwd"]`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { jwtVerify } from 'jose';
import { clientAddress } from '../client-address.ts';
import type { OAuthContext } from '../oauth/context.ts';
import { checkPassword, refuseLimitedPage } from '../oauth/limits.ts';
import { escapeHtml, layout } from '../oauth/page.ts';
import { startSession } from '../oauth/session.ts';
import type { UserRecord } from '../store/types.ts';
import type { UpstreamProvider } from './config.ts';
import { auditUpstreamSuccess } from './local-user.ts';

/** Path of the link form (GET shows it, POST checks the local password). */
export const LINK_PATH = '/login/upstream/link';
/** Cookie holding the signed pending link. */
export const LINK_COOKIE = 'seed_auth_upstream_link';
/** JWS `typ` of the pending-link token: no other token of this server verifies as one. */
export const PENDING_LINK_TYP = 'seed-upstream-link+jwt';
/** Lifetime of a pending link, seconds. */
const LINK_TTL_SECONDS = 600;

/** An upstream account waiting to be linked: provider id, upstream `sub`, its e-mail, the `return_to`. */
export interface PendingLink {
  readonly providerId: string;
  readonly subject: string;
  readonly email: string | null;
  readonly returnTo: string | null;
}

/** What the brokering routes and the link routes take from the login page. */
export interface BrokerPageKit {
  /** The login page's check of `return_to` (only authorization requests of this server are followed). */
  readonly safeReturnTo: (value: unknown) => string | undefined;
  /** The login page's reader of a form field (the link form). */
  readonly formField: (body: unknown, name: string) => string | undefined;
  /**
   * The login page's second-factor step for a user who has a factor or must use one: @returns the answer
   * that sends the user there, or undefined when no second factor is due. A brokered sign-in replaces the
   * password only, never the local second factor.
   */
  readonly secondFactor?: (
    req: FastifyRequest,
    reply: FastifyReply,
    user: UserRecord,
    returnTo: string | undefined,
  ) => Promise<FastifyReply | undefined>;
}

/** What the link routes need: the login page's kit and the configured providers by id. */
export interface LinkAccountOptions extends BrokerPageKit {
  readonly providers: ReadonlyMap<string, UpstreamProvider>;
}

const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function linkForm(reply: FastifyReply, provider: UpstreamProvider, email: string | null, failed: boolean) {
  const name = escapeHtml(provider.name);
  return reply
    .code(failed ? 400 : 200)
    .headers(PAGE_HEADERS)
    .type('text/html; charset=utf-8')
    .send(
      layout(
        'Link your account',
        `<h1>Link your ${name} account</h1>
<p id="link-reason">${name} did not confirm ${email ? `<strong>${escapeHtml(email)}</strong> as a verified address` : 'a verified e-mail address'}, so it is not linked to an account here on its own.
If you have an account here, sign in with its password once to link it; afterwards "Sign in with ${name}" opens it directly.</p>
${failed ? '<p class="error" role="alert">The user name or password is not correct.</p>\n' : ''}<form method="post" action="${LINK_PATH}">
<input type="hidden" name="_csrf" value="${escapeHtml(reply.generateCsrf())}">
<label for="username">User name</label>
<input type="text" id="username" name="username" autocomplete="username" required maxlength="256" autofocus>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required maxlength="1024">
<button type="submit" id="link">Sign in and link</button>
</form>
<p><a href="/login">Cancel</a></p>`,
      ),
    );
}

/**
 * Answers a first brokered sign-in that needs the local password: sets the signed pending-link cookie and
 * shows the link form (200).
 */
export async function askToLink(
  reply: FastifyReply,
  ctx: OAuthContext,
  provider: UpstreamProvider,
  link: PendingLink,
): Promise<FastifyReply> {
  const now = Math.floor(ctx.now() / 1000);
  const token = await ctx.keys.active().signJwt(PENDING_LINK_TYP, {
    iss: ctx.config.issuer,
    aud: `${ctx.config.issuer}${LINK_PATH}`,
    iat: now,
    exp: now + LINK_TTL_SECONDS,
    p: link.providerId,
    sub: link.subject,
    email: link.email,
    r: link.returnTo,
  });
  reply.setCookie(LINK_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: ctx.config.issuer.startsWith('https:'),
    path: LINK_PATH,
    maxAge: LINK_TTL_SECONDS,
  });
  return linkForm(reply, provider, link.email, false);
}

/** The pending link of the request's cookie, when present, signed by this server and unexpired. */
async function readPendingLink(req: FastifyRequest, ctx: OAuthContext): Promise<PendingLink | undefined> {
  const token = req.cookies[LINK_COOKIE];
  if (!token || token.length > 8192) return undefined;
  try {
    const { payload } = await jwtVerify(token, ctx.keys.keyGetter(), {
      issuer: ctx.config.issuer,
      audience: `${ctx.config.issuer}${LINK_PATH}`,
      typ: PENDING_LINK_TYP,
      currentDate: new Date(ctx.now()),
    });
    if (typeof payload.p !== 'string' || typeof payload.sub !== 'string') return undefined;
    return {
      providerId: payload.p,
      subject: payload.sub,
      email: typeof payload.email === 'string' ? payload.email : null,
      returnTo: typeof payload.r === 'string' ? payload.r : null,
    };
  } catch {
    return undefined;
  }
}

/**
 * Registers `GET`/`POST` {@link LINK_PATH} on the login page's context (cookies and CSRF protection there).
 * `fail` answers a refusal with the brokering failure page (status, audit failure code, sentence).
 */
export function registerLinkAccount(
  app: FastifyInstance,
  ctx: OAuthContext,
  options: LinkAccountOptions,
  fail: (
    req: FastifyRequest,
    reply: FastifyReply,
    provider: UpstreamProvider | undefined,
    status: number,
    code: string,
    message: string,
  ) => Promise<FastifyReply>,
): void {
  const expired = (req: FastifyRequest, reply: FastifyReply) =>
    fail(
      req,
      reply,
      undefined,
      400,
      'upstream_state',
      'the sign-in expired or was started elsewhere. Start again.',
    );

  app.get(LINK_PATH, async (req, reply) => {
    const pending = await readPendingLink(req, ctx);
    const provider = pending && options.providers.get(pending.providerId);
    if (!pending || !provider) return expired(req, reply);
    return linkForm(reply, provider, pending.email, false);
  });

  app.post(LINK_PATH, { preHandler: app.csrfProtection }, async (req, reply) => {
    const pending = await readPendingLink(req, ctx);
    const provider = pending && options.providers.get(pending.providerId);
    if (!pending || !provider) return expired(req, reply);
    const userName = options.formField(req.body, 'username') ?? '';
    const password = options.formField(req.body, 'password') ?? '';
    if (userName === '' || password === '') return linkForm(reply, provider, pending.email, true);
    const checked = await checkPassword(req, ctx, userName, password);
    if (checked.limited) return refuseLimitedPage(reply, checked.limited);
    const { outcome } = checked;
    if (!outcome.ok) return linkForm(reply, provider, pending.email, true);
    const user = outcome.user;
    const created = await ctx.store.links.createLink({
      providerId: provider.id,
      subject: pending.subject,
      userId: user.id,
      email: pending.email,
      createdAt: ctx.now(),
    });
    if (!created && (await ctx.store.links.findLink(provider.id, pending.subject))?.userId !== user.id)
      return fail(
        req,
        reply,
        provider,
        403,
        'upstream_link_conflict',
        'this account is already linked to another account of the provider.',
      );
    reply.clearCookie(LINK_COOKIE, { path: LINK_PATH });
    await auditUpstreamSuccess(ctx, user, clientAddress(req), {
      action: 'upstream.link',
      provider: provider.id,
      method: 'password',
    });
    const returnTo = options.safeReturnTo(pending.returnTo);
    // The step answers itself (a Fastify reply is thenable, so its return value is not relied on).
    await options.secondFactor?.(req, reply, user, returnTo);
    if (reply.sent) return reply;
    await startSession(req, reply, ctx, user.id, ['pwd']);
    return reply.header('cache-control', 'no-store').redirect(returnTo ?? '/login', 302);
  });
}
