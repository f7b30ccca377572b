/**
 * The login page (spec 001, "Login page"): `GET /login` renders a CSRF-protected HTML form;
 * `POST /login` validates the credentials. On failure it answers 302 back to `/login?err=1` (keeping the
 * pending authorization request) and the real reason goes only to the audit log (Category `Login`,
 * Outcome `Denied`, written by credential validation). On success it sets the session cookie and
 * continues the authorization request, unless a second factor is due (`./second-factor.ts`: TOTP or a
 * recovery code, or TOTP enrolment). `POST /logout` ends the session.
 */
import csrf from '@fastify/csrf-protection';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { registerUpstreamLogin, upstreamButtons } from '../broker/routes.ts';
import { clientAddress } from '../client-address.ts';
import { registerConsentPage } from '../oauth/consent.ts';
import type { OAuthContext } from '../oauth/context.ts';
import { DEVICE_VERIFICATION_PATH } from '../oauth/device.ts';
import { NOT_FORM, registerFormParser } from '../oauth/form.ts';
import { checkPassword, refuseLimitedPage } from '../oauth/limits.ts';
import { logout, registerEndSessionEndpoint } from '../oauth/logout.ts';
import { loginForm, signedIn } from '../oauth/page.ts';
import { AUTHORIZE_PATH, LOGIN_PATH } from '../oauth/paths.ts';
import { readSession, secureCookies, startSession } from '../oauth/session.ts';
import { AuditCategory, AuditOutcome } from '../store/types.ts';
import { passkeySignIn } from './page-passkeys.ts';
import { registerPasskeyPages } from './passkey.ts';
import { type LoginPageKit, registerSecondFactorPages, secondFactorAfterPassword } from './second-factor.ts';
import { registerSelfService } from './self-service.ts';

/** Name of the cookie holding the CSRF secret (double-submit with the form's `_csrf` field). */
export const CSRF_COOKIE = 'seed_auth_csrf';

/** Visible ASCII only: what a request target carries, and all a `Location` header may hold. */
const HEADER_SAFE = /^[\x21-\x7e]+$/;

/**
 * A `return_to` value is accepted only when it continues an authorization request on this server (so the
 * login page cannot be used as an open redirector) and consists of visible ASCII characters only (a CR, LF,
 * space, control or non-ASCII character could not go into the `Location` header). Anything else is
 * undefined: the caller falls back to the login page itself.
 */
export function safeReturnTo(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 4096 || !HEADER_SAFE.test(value)) return undefined;
  // The device verification page (RFC 8628 §3.3) also sends users here and back.
  if (value === DEVICE_VERIFICATION_PATH || value.startsWith(`${DEVICE_VERIFICATION_PATH}?`)) return value;
  return value.startsWith(`${AUTHORIZE_PATH}?`) ? value : undefined;
}

/** The login page's link to the password-reset request (self-service mail on). */
const FORGOT_LINK = '\n<p><a id="forgot" href="/login/forgot">Forgot your password?</a></p>';
/** The login page's link to self-registration (when turned on). */
const REGISTER_LINK = '\n<p><a id="register" href="/login/register">Create an account</a></p>';

const PAGE_HEADERS = {
  'cache-control': 'no-store',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function loginUrl(params: { err?: boolean; returnTo?: string }): string {
  const q = new URLSearchParams();
  if (params.err) q.set('err', '1');
  if (params.returnTo) q.set('return_to', params.returnTo);
  const s = q.toString();
  return s ? `${LOGIN_PATH}?${s}` : LOGIN_PATH;
}

/** The `login_hint` (OIDC Core §3.1.2.1) of a pending authorization request, to pre-fill the user name. */
function loginHint(returnTo: string | undefined): string | undefined {
  if (returnTo === undefined) return undefined;
  const hint = new URLSearchParams(returnTo.slice(returnTo.indexOf('?') + 1)).get('login_hint');
  return hint && hint.length <= 256 ? hint : undefined;
}

function formField(body: unknown, name: string): string | undefined {
  if (!(body instanceof URLSearchParams)) return undefined;
  const values = body.getAll(name);
  return values.length === 1 ? values[0] : undefined;
}

/** Registers `GET /login`, `POST /login` and `POST /logout` on an encapsulated context. */
export function registerLoginPage(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    await scope.register(csrf, {
      cookieKey: CSRF_COOKIE,
      cookieOpts: { path: '/', httpOnly: true, sameSite: 'strict', secure: secureCookies(ctx) },
      getToken: (req: FastifyRequest) => formField(req.body, '_csrf'),
    });

    const page = (reply: FastifyReply, html: string) =>
      reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(html);
    const kit: LoginPageKit = { safeReturnTo, formField, page };

    scope.get(LOGIN_PATH, async (req, reply) => {
      const query = req.query as Record<string, unknown>;
      const returnTo = safeReturnTo(query.return_to);
      const active = await readSession(req, ctx);
      const csrfToken = reply.generateCsrf();
      if (active && returnTo === undefined)
        return page(reply, signedIn({ userName: active.user.userName, csrfToken }));
      return page(
        reply,
        loginForm({
          csrfToken,
          returnTo,
          failed: query.err === '1',
          userName: loginHint(returnTo),
          after:
            upstreamButtons(ctx.upstreamProviders ?? [], returnTo) +
            (ctx.config.mfa ? passkeySignIn() : '') +
            (ctx.config.selfService ? FORGOT_LINK : '') +
            (ctx.config.selfService?.registration ? REGISTER_LINK : ''),
          passkeys: ctx.config.mfa !== null,
        }),
      );
    });

    scope.post(LOGIN_PATH, { preHandler: scope.csrfProtection }, async (req, reply) => {
      if (req.body === NOT_FORM)
        return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
      const returnTo = safeReturnTo(formField(req.body, 'return_to'));
      const userName = formField(req.body, 'username');
      const password = formField(req.body, 'password');
      const back = () =>
        reply.header('cache-control', 'no-store').redirect(loginUrl({ err: true, returnTo }), 302);
      if (!userName || !password) {
        await ctx.store.appendAudit({
          category: AuditCategory.Login,
          outcome: AuditOutcome.Denied,
          subjectName: userName?.slice(0, 256) ?? null,
          failureCode: 'missing_credentials',
          remoteAddress: clientAddress(req),
        });
        return back();
      }
      const checked = await checkPassword(req, ctx, userName, password);
      if (checked.limited) return refuseLimitedPage(reply, checked.limited);
      const { outcome } = checked;
      if (!outcome.ok) return back();
      // The step answers itself; a Fastify reply is thenable (awaiting it yields undefined), so whether it
      // answered is read from `reply.sent`.
      await secondFactorAfterPassword(req, reply, ctx, outcome.user, returnTo, kit);
      if (reply.sent) return reply;
      await startSession(req, reply, ctx, outcome.user.id);
      return reply.header('cache-control', 'no-store').redirect(returnTo ?? LOGIN_PATH, 302);
    });

    registerUpstreamLogin(scope, ctx, {
      providers: ctx.upstreamProviders ?? [],
      safeReturnTo,
      formField,
      secondFactor: (req, reply, user, returnTo) =>
        secondFactorAfterPassword(req, reply, ctx, user, returnTo, kit),
    });

    registerConsentPage(scope, ctx, safeReturnTo, formField, page);

    registerSecondFactorPages(scope, ctx, kit);
    registerPasskeyPages(scope, ctx, kit);
    registerSelfService(scope, ctx, kit);

    registerEndSessionEndpoint(scope, ctx, page, formField);

    scope.post('/logout', { preHandler: scope.csrfProtection }, async (req, reply) => {
      await logout(req, reply, ctx);
      return reply.header('cache-control', 'no-store').redirect(LOGIN_PATH, 302);
    });
  });
}
