/**
 * Self-service on the login pages:
 *
 * - `GET/POST /login/forgot`: a password-reset request by user name or e-mail address. The answer never
 *   says whether an account matched; with a matching, active account that has an e-mail address, a
 *   single-use link (`/login/reset?token=…`, 256 random bits, only its SHA-256 stored, 30 minutes by
 *   default) is mailed over SMTP (`../mail/mailer.ts`). Requests count against the `reset` rate limit.
 * - `GET/POST /login/reset`: a new password for a valid link; the link is used once; the reset rotates the
 *   security stamp (tokens issued before are refused), revokes the user's refresh tokens and ends every
 *   login session, as an administrator's reset does.
 * - `POST /login/account/verify-email` and `GET /login/verify-email?token=…`: e-mail verification by a
 *   single-use link; it verifies the address only while the account still has that address.
 * - `GET/POST /login/register` (only with `selfService.registration`, off by default): anyone creates an
 *   account (user name, e-mail, password; no roles), is signed in and gets a verification link.
 * - `GET /login/account`: the signed-in user's account page (change password, e-mail verification, TOTP
 *   and passkeys, sessions with "End", linked upstream providers).
 *
 * Unknown, expired and used links all show the same page; the audit log has the reason (Category
 * `Login`, failure codes `link_unknown`, `link_expired`, `link_used`; `details.event` `password_reset`,
 * `email_verified`, `reset_requested`, …).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { ConflictError, ValidationError } from '../errors.ts';
import type { OAuthContext } from '../oauth/context.ts';
import { userActive } from '../oauth/context.ts';
import { NOT_FORM } from '../oauth/form.ts';
import { attemptSucceeded, limitAttempt, refuseLimitedPage } from '../oauth/limits.ts';
import { clearSessionCookie, readSession, startSession } from '../oauth/session.ts';
import { hashToken } from '../oauth/tokens.ts';
import type { AccountTokenPurpose } from '../store/account.ts';
import { AuditCategory, AuditOutcome, type UserRecord } from '../store/types.ts';
import {
  ADDRESS_FORM_FIELDS,
  accountPage,
  done,
  forgotForm,
  forgotSent,
  linkInvalid,
  registerForm,
  resetForm,
} from './page-account.ts';
import type { LoginPageKit } from './second-factor.ts';

/** Path of the account page. */
export const ACCOUNT_PATH = '/login/account';
/** Shortest password accepted by the self-service forms, characters. */
export const MIN_PASSWORD_LENGTH = 8;
const MAX_PASSWORD_LENGTH = 1024;

/** A link token: 256 random bits, base64url (43 characters). */
const newLinkToken = () => randomBytes(32).toString('base64url');
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/** Registers the self-service routes on the login page's scope (form parser and CSRF set up). */
export function registerSelfService(scope: FastifyInstance, ctx: OAuthContext, kit: LoginPageKit): void {
  const { formField, page } = kit;
  const redirect = (reply: FastifyReply, to: string) =>
    reply.header('cache-control', 'no-store').redirect(to, 302);
  const audit = (
    req: FastifyRequest,
    user: Pick<UserRecord, 'id' | 'userName'> | undefined,
    event: string,
    failureCode: string | null,
    subjectName?: string,
  ) =>
    ctx.store.appendAudit({
      category: AuditCategory.Login,
      outcome: failureCode === null ? AuditOutcome.Success : AuditOutcome.Denied,
      subjectId: user?.id ?? null,
      subjectName: user?.userName ?? subjectName ?? null,
      failureCode,
      remoteAddress: clientAddress(req),
      details: { event },
    });

  /** Issues a link token of `purpose` for `user` at `email` and mails it. @returns false when sending failed. */
  const sendLink = async (
    req: FastifyRequest,
    user: UserRecord,
    email: string,
    purpose: AccountTokenPurpose,
  ): Promise<boolean> => {
    const self = ctx.config.selfService!;
    const token = newLinkToken();
    const now = ctx.now();
    await ctx.store.factors.account.issueToken(hashToken(token), {
      userId: user.id,
      purpose,
      email,
      createdAt: now,
      expiresAt: now + self.linkTtlSeconds * 1000,
    });
    const issuer = ctx.config.issuer;
    const path = purpose === 'reset' ? '/login/reset' : '/login/verify-email';
    const link = `${issuer}${path}?${new URLSearchParams({ token })}`;
    const minutes = Math.round(self.linkTtlSeconds / 60);
    try {
      await self.mailer.send({
        from: self.from ?? `no-reply@${new URL(issuer).hostname}`,
        to: email,
        subject: purpose === 'reset' ? 'Set a new password' : 'Verify your e-mail address',
        text:
          purpose === 'reset'
            ? `Someone asked to set a new password for ${user.userName}.\n\nOpen this link within ${minutes} minutes to set one:\n${link}\n\nIf it was not you, ignore this message.\n`
            : `Open this link within ${minutes} minutes to verify the e-mail address of ${user.userName}:\n${link}\n`,
      });
      return true;
    } catch {
      await audit(
        req,
        user,
        purpose === 'reset' ? 'reset_requested' : 'email_verification_requested',
        'mail_failed',
      );
      return false;
    }
  };

  /** Why a link token cannot be used: `link_unknown`, `link_expired` or `link_used`. */
  const linkFailure = async (tokenHash: string | undefined): Promise<string> => {
    const found = tokenHash ? await ctx.store.factors.account.findToken(tokenHash) : undefined;
    if (!found) return 'link_unknown';
    return found.usedAt !== null ? 'link_used' : 'link_expired';
  };

  scope.get('/login/forgot', async (_req, reply) =>
    ctx.config.selfService
      ? page(reply, forgotForm({ csrfToken: reply.generateCsrf() }))
      : redirect(reply, '/login'),
  );

  scope.post('/login/forgot', { preHandler: scope.csrfProtection }, async (req, reply) => {
    if (req.body === NOT_FORM)
      return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
    if (!ctx.config.selfService) return redirect(reply, '/login');
    const account = (formField(req.body, 'account') ?? '').trim().slice(0, 256);
    const limited = await limitAttempt(req, ctx, 'reset', account || undefined);
    if (!limited.ok) return refuseLimitedPage(reply, limited);
    let user = account ? await ctx.store.findUserByName(account) : undefined;
    if (!user && account.includes('@')) {
      const id = await ctx.store.factors.account.findUserIdByEmail(account);
      user = id ? await ctx.store.getUser(id) : undefined;
    }
    if (!user) await audit(req, undefined, 'reset_requested', 'unknown_account', account);
    else if (!userActive(user, ctx.now())) await audit(req, user, 'reset_requested', 'account_disabled');
    else if (!user.email) await audit(req, user, 'reset_requested', 'no_email');
    else if (await sendLink(req, user, user.email, 'reset')) await audit(req, user, 'reset_requested', null);
    return page(reply, forgotSent());
  });

  const REGISTER_ERRORS: Record<string, string> = {
    '1': 'Choose a user name of 3-64 letters, digits, dots, dashes or underscores.',
    '2': 'Enter an e-mail address like name@example.org.',
    '3': 'The passwords must match and have at least 8 characters.',
    '4': 'That user name is taken.',
  };
  scope.get('/login/register', async (req, reply) => {
    if (!ctx.config.selfService?.registration) return redirect(reply, '/login');
    const err = String((req.query as Record<string, unknown>).err ?? '');
    return page(reply, registerForm({ csrfToken: reply.generateCsrf(), error: REGISTER_ERRORS[err] }));
  });

  scope.post('/login/register', { preHandler: scope.csrfProtection }, async (req, reply) => {
    if (req.body === NOT_FORM)
      return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
    if (!ctx.config.selfService?.registration) return redirect(reply, '/login');
    const userName = (formField(req.body, 'username') ?? '').trim();
    const email = (formField(req.body, 'email') ?? '').trim();
    const password = formField(req.body, 'password') ?? '';
    const back = (code: string) => redirect(reply, `/login/register?err=${code}`);
    if (!/^[A-Za-z0-9._-]{3,64}$/.test(userName)) return back('1');
    if (email.length > 254 || !/^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/.test(email)) return back('2');
    if (
      password.length < MIN_PASSWORD_LENGTH ||
      password.length > MAX_PASSWORD_LENGTH ||
      password !== formField(req.body, 'password2')
    )
      return back('3');
    // Registrations count against the per-IP `reset` limit (one address creating many accounts).
    const limited = await limitAttempt(req, ctx, 'reset', undefined);
    if (!limited.ok) return refuseLimitedPage(reply, limited);
    let user: UserRecord;
    try {
      user = await ctx.store.createUser({ userName, email, passwordHash: await ctx.hasher.hash(password) });
    } catch (error) {
      if (error instanceof ConflictError || error instanceof ValidationError)
        return back(error instanceof ConflictError ? '4' : '1');
      throw error;
    }
    await audit(req, user, 'registered', null);
    await sendLink(req, user, email, 'verify_email');
    await startSession(req, reply, ctx, user.id);
    return redirect(reply, `${ACCOUNT_PATH}?sent=1`);
  });

  scope.get('/login/reset', async (req, reply) => {
    const token = String((req.query as Record<string, unknown>).token ?? '');
    const found = TOKEN_SHAPE.test(token)
      ? await ctx.store.factors.account.findToken(hashToken(token))
      : undefined;
    if (found?.purpose !== 'reset' || found.usedAt !== null || found.expiresAt <= ctx.now())
      return page(reply.code(400), linkInvalid());
    return page(
      reply,
      resetForm({
        csrfToken: reply.generateCsrf(),
        token,
        failed: (req.query as Record<string, unknown>).err === '1',
      }),
    );
  });

  scope.post('/login/reset', { preHandler: scope.csrfProtection }, async (req, reply) => {
    if (req.body === NOT_FORM)
      return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
    const token = formField(req.body, 'token') ?? '';
    const password = formField(req.body, 'password') ?? '';
    const tokenHash = TOKEN_SHAPE.test(token) ? hashToken(token) : undefined;
    if (
      password.length < MIN_PASSWORD_LENGTH ||
      password.length > MAX_PASSWORD_LENGTH ||
      password !== formField(req.body, 'password2')
    )
      return redirect(reply, `/login/reset?${new URLSearchParams({ token, err: '1' })}`);
    const now = ctx.now();
    const used = tokenHash ? await ctx.store.factors.account.useToken(tokenHash, 'reset', now) : undefined;
    const user = used ? await ctx.store.getUser(used.userId) : undefined;
    if (!used || !user || !userActive(user, now)) {
      await audit(req, user, 'password_reset', used ? 'account_disabled' : await linkFailure(tokenHash));
      return page(reply.code(400), linkInvalid());
    }
    await ctx.store.setPasswordHash(user.id, await ctx.hasher.hash(password));
    await ctx.store.revokeUserRefreshTokens(user.id, now);
    await ctx.store.factors.account.revokeAllSessions(user.id, now);
    await attemptSucceeded(req, ctx, 'reset', user.userName);
    await audit(req, user, 'password_reset', null);
    clearSessionCookie(reply, ctx);
    return page(reply, done('Password changed', 'Your password has been changed.', '/login', 'Sign in'));
  });

  scope.get('/login/verify-email', async (req, reply) => {
    const token = String((req.query as Record<string, unknown>).token ?? '');
    const tokenHash = TOKEN_SHAPE.test(token) ? hashToken(token) : undefined;
    const now = ctx.now();
    const used = tokenHash
      ? await ctx.store.factors.account.useToken(tokenHash, 'verify_email', now)
      : undefined;
    const user = used ? await ctx.store.getUser(used.userId) : undefined;
    const current = user?.email?.toLowerCase();
    if (!used || !user || current !== used.email.toLowerCase()) {
      await audit(req, user, 'email_verified', used ? 'email_changed' : await linkFailure(tokenHash));
      return page(reply.code(400), linkInvalid());
    }
    await ctx.store.updateUser(user.id, { emailVerified: true });
    await audit(req, user, 'email_verified', null);
    return page(reply, done('E-mail verified', `${used.email} is verified.`, ACCOUNT_PATH, 'Your account'));
  });

  scope.post('/login/account/verify-email', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active) return redirect(reply, '/login');
    const { user } = active;
    if (!ctx.config.selfService || !user.email || user.emailVerified)
      return redirect(reply, `${ACCOUNT_PATH}?err=1`);
    const sent = await sendLink(req, user, user.email, 'verify_email');
    if (sent) await audit(req, user, 'email_verification_requested', null);
    return redirect(reply, sent ? `${ACCOUNT_PATH}?sent=1` : `${ACCOUNT_PATH}?err=1`);
  });

  scope.get(ACCOUNT_PATH, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active) return redirect(reply, '/login');
    const { user, session } = active;
    const query = req.query as Record<string, unknown>;
    const [totp, passkeys, sessions, links] = await Promise.all([
      ctx.store.factors.getTotp(user.id),
      ctx.store.factors.passkeys.list(user.id),
      ctx.store.factors.account.listSessions(user.id, ctx.now()),
      ctx.store.links.listLinks(user.id),
    ]);
    return page(
      reply,
      accountPage({
        csrfToken: reply.generateCsrf(),
        userName: user.userName,
        email: user.email,
        emailVerified: user.emailVerified,
        phoneNumber: user.phoneNumber,
        phoneNumberVerified: user.phoneNumberVerified,
        address: user.address,
        mail: ctx.config.selfService !== null,
        totp: totp !== undefined,
        mfa: ctx.config.mfa !== null,
        passkeys: passkeys.length,
        sessions,
        currentSid: session.sid,
        links: links.map((l) => ({ providerId: l.providerId, email: l.email })),
        notice:
          query.sent === '1'
            ? 'A verification link has been sent.'
            : query.changed === '1'
              ? 'Your password has been changed.'
              : query.contact === '1'
                ? 'Your contact details have been saved.'
                : undefined,
        failed: query.err === '1',
      }),
    );
  });

  scope.post('/login/account/password', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active) return redirect(reply, '/login');
    const { user, session } = active;
    const password = formField(req.body, 'password') ?? '';
    if (
      password.length < MIN_PASSWORD_LENGTH ||
      password.length > MAX_PASSWORD_LENGTH ||
      password !== formField(req.body, 'password2')
    )
      return redirect(reply, `${ACCOUNT_PATH}?err=1`);
    const check = await ctx.credentials.validate(user.userName, formField(req.body, 'current') ?? '', {
      category: AuditCategory.Login,
      clientId: null,
      remoteAddress: clientAddress(req),
    });
    if (!check.ok) return redirect(reply, `${ACCOUNT_PATH}?err=1`);
    const now = ctx.now();
    await ctx.store.setPasswordHash(user.id, await ctx.hasher.hash(password));
    await ctx.store.revokeUserRefreshTokens(user.id, now);
    await ctx.store.factors.account.revokeAllSessions(user.id, now);
    await audit(req, user, 'password_changed', null);
    // Every other session ends; this browser continues in a new session with the same factors.
    await startSession(req, reply, ctx, user.id, session.amr);
    return redirect(reply, `${ACCOUNT_PATH}?changed=1`);
  });

  // The user's own telephone number and postal address (OIDC Core §5.1 `phone_number`, `address`). A new
  // number is unverified; bad input (the store's rules) answers with the page's generic failure.
  scope.post('/login/account/contact', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active || req.body === NOT_FORM) return redirect(reply, '/login');
    const { user } = active;
    const phone = (formField(req.body, 'phone_number') ?? '').trim();
    const address = Object.fromEntries(
      ADDRESS_FORM_FIELDS.map(([field, member]) => [member, formField(req.body, field) ?? '']),
    );
    try {
      await ctx.store.updateUser(user.id, {
        phoneNumber: phone,
        phoneNumberVerified: phone === user.phoneNumber ? user.phoneNumberVerified : false,
        address,
      });
    } catch (error) {
      if (error instanceof ValidationError) return redirect(reply, `${ACCOUNT_PATH}?err=1`);
      throw error;
    }
    await audit(req, user, 'contact_changed', null);
    return redirect(reply, `${ACCOUNT_PATH}?contact=1`);
  });

  scope.post('/login/account/totp/remove', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active) return redirect(reply, '/login');
    if (!active.session.amr.includes('mfa') || !(await ctx.store.factors.removeTotp(active.user.id)))
      return redirect(reply, `${ACCOUNT_PATH}?err=1`);
    await audit(req, active.user, 'factor_removed', null);
    return redirect(reply, ACCOUNT_PATH);
  });

  scope.post('/login/account/sessions/end', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active) return redirect(reply, '/login');
    const sid = formField(req.body, 'sid') ?? '';
    if (!(await ctx.store.factors.account.revokeSession(active.user.id, sid, ctx.now())))
      return redirect(reply, `${ACCOUNT_PATH}?err=1`);
    await audit(req, active.user, 'session_ended', null);
    if (sid === active.session.sid) {
      clearSessionCookie(reply, ctx);
      return redirect(reply, '/login');
    }
    return redirect(reply, ACCOUNT_PATH);
  });
}
