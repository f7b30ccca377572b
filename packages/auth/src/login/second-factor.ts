/**
 * The second step of sign-in (TOTP, RFC 6238; recovery codes) and TOTP enrolment on the login pages:
 *
 * - {@link secondFactorAfterPassword}: after a correct password, a user with a TOTP factor, a user for whom
 *   an administrator requires two factors (per user, role or client), or a request whose `acr_values`
 *   asks for them, gets the pending sign-in cookie (`../mfa/pending.ts`) instead of a session and goes to
 *   `GET /login/otp` (or to enrolment when they have no factor yet).
 * - `GET/POST /login/otp`: a TOTP code or a recovery code (or a passkey, `./passkey.ts`); success starts
 *   the session with `amr` `pwd otp mfa` (RFC 8176). The same page serves step-up for a signed-in user (the authorization
 *   endpoint sends them here when `acr_values` or a requirement asks for two factors).
 * - `GET/POST /login/otp/enrol`: QR code and key, confirmed by a first code; then ten recovery codes are
 *   shown once and stored hashed.
 *
 * Wrong, replayed or malformed codes all get the same generic failure page; the real reason is in the
 * audit log (Category `Login`, Outcome `Denied`, failure codes `totp_invalid`, `totp_replayed`,
 * `recovery_code_invalid`, …, `details.event` `factor_failed`). Successes are audited with `details.event`
 * `factor_enrolled`, `factor_used` or `recovery_code_used`. Code checks count against the `totp` rate limit.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { acrValuesNeedMfa, amrWithSecondFactor } from '../mfa/assurance.ts';
import type { MfaSettings } from '../mfa/config.ts';
import { clearPending, type PendingSignIn, pendingMatches, readPending, setPending } from '../mfa/pending.ts';
import { hashRecoveryCode, newRecoveryCodes } from '../mfa/recovery.ts';
import { isTotpCode, newTotpSecret, totpQrSvg, totpUri, verifyTotp } from '../mfa/totp.ts';
import { type OAuthContext, stampTag, userActive } from '../oauth/context.ts';
import { NOT_FORM } from '../oauth/form.ts';
import { attemptSucceeded, limitAttempt, refuseLimitedPage } from '../oauth/limits.ts';
import { LOGIN_PATH, OTP_PATH } from '../oauth/paths.ts';
import { readSession, secureCookies, startSession } from '../oauth/session.ts';
import { AuditCategory, AuditOutcome, type UserRecord } from '../store/types.ts';
import { recoveryCodesPage, secondFactorUnavailable, totpEnrolForm, totpForm } from './page-mfa.ts';

/** Path of the TOTP enrolment page. */
export const OTP_ENROL_PATH = '/login/otp/enrol';

/** What the pages share with the login page. */
export interface LoginPageKit {
  readonly safeReturnTo: (value: unknown) => string | undefined;
  readonly formField: (body: unknown, name: string) => string | undefined;
  readonly page: (reply: FastifyReply, html: string) => FastifyReply;
}

/** Who is at the second-factor step: a pending sign-in (password passed) or a signed-in user (step-up). */
export interface FactorSubject {
  readonly user: UserRecord;
  readonly amr: readonly string[];
  readonly pending: PendingSignIn | undefined;
}

function pathWith(path: string, params: { err?: boolean; returnTo?: string }): string {
  const q = new URLSearchParams();
  if (params.err) q.set('err', '1');
  if (params.returnTo) q.set('return_to', params.returnTo);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** A parameter of the authorization request a `return_to` continues, or undefined. */
export function returnToParam(returnTo: string | undefined, name: string): string | undefined {
  if (returnTo === undefined || !returnTo.includes('?')) return undefined;
  const value = new URLSearchParams(returnTo.slice(returnTo.indexOf('?') + 1)).get(name);
  return value === null || value.length > 256 ? undefined : value;
}

/** The user at the second-factor step: the pending sign-in's (valid and current), else the session's. */
export async function subjectOf(
  req: FastifyRequest,
  ctx: OAuthContext,
  mfa: MfaSettings,
): Promise<FactorSubject | undefined> {
  const now = ctx.now();
  const pending = await readPending(req, mfa, now);
  if (pending) {
    const user = await ctx.store.getUser(pending.userId);
    if (user && userActive(user, now) && pendingMatches(pending, user.securityStamp))
      return { user, amr: pending.amr, pending };
  }
  const active = await readSession(req, ctx);
  return active ? { user: active.user, amr: active.session.amr, pending: undefined } : undefined;
}

/** Factor events go to the audit log under Category `Login` with `details.event` and `details.factor`. */
function auditFactor(
  ctx: OAuthContext,
  req: FastifyRequest,
  user: UserRecord,
  clientId: string | undefined,
  event: 'factor_enrolled' | 'factor_used' | 'recovery_code_used' | 'factor_failed',
  factor: 'totp' | 'recovery_code',
  failureCode: string | null,
): Promise<unknown> {
  return ctx.store.appendAudit({
    category: AuditCategory.Login,
    outcome: failureCode === null ? AuditOutcome.Success : AuditOutcome.Denied,
    subjectId: user.id,
    subjectName: user.userName,
    clientId: clientId ?? null,
    failureCode,
    remoteAddress: clientAddress(req),
    details: { event, factor },
  });
}

/**
 * Decides the step after a correct password (see the module comment).
 * @returns the redirect to the second-factor or enrolment page, or undefined when the password suffices
 * (the caller starts the session).
 */
export async function secondFactorAfterPassword(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: OAuthContext,
  user: UserRecord,
  returnTo: string | undefined,
  kit: LoginPageKit,
): Promise<FastifyReply | undefined> {
  const clientId = returnToParam(returnTo, 'client_id') ?? null;
  const factor =
    (await ctx.store.factors.getTotp(user.id)) !== undefined ||
    (await ctx.store.factors.passkeys.list(user.id)).length > 0;
  const required =
    factor ||
    acrValuesNeedMfa(returnToParam(returnTo, 'acr_values')) ||
    (await ctx.store.factors.isMfaRequired(user.id, clientId));
  if (!required) return undefined;
  const mfa = ctx.config.mfa;
  if (!mfa) {
    await ctx.store.appendAudit({
      category: AuditCategory.Login,
      outcome: AuditOutcome.Denied,
      subjectId: user.id,
      subjectName: user.userName,
      clientId,
      failureCode: 'second_factor_unavailable',
      remoteAddress: clientAddress(req),
      details: { event: 'factor_failed', factor: 'totp' },
    });
    return kit.page(reply, secondFactorUnavailable());
  }
  await setPending(
    reply,
    mfa,
    { userId: user.id, stamp: stampTag(user.securityStamp), amr: ['pwd'] },
    ctx.now(),
    secureCookies(ctx),
  );
  return reply
    .header('cache-control', 'no-store')
    .redirect(pathWith(factor ? OTP_PATH : OTP_ENROL_PATH, { returnTo }), 302);
}

/** Registers the second-factor and enrolment pages on the login page's scope (form parser and CSRF set up). */
export function registerSecondFactorPages(
  scope: FastifyInstance,
  ctx: OAuthContext,
  kit: LoginPageKit,
): void {
  const { safeReturnTo, formField, page } = kit;
  const toLogin = (reply: FastifyReply, returnTo: string | undefined) =>
    reply.header('cache-control', 'no-store').redirect(pathWith(LOGIN_PATH, { returnTo }), 302);
  /**
   * The MFA settings and the user at this step, or `done`: the reply already sent (MFA not configured:
   * the unavailable page; nobody at the step: back to the login page).
   */
  const factorStep = async (
    req: FastifyRequest,
    reply: FastifyReply,
    returnTo: string | undefined,
  ): Promise<{ mfa: MfaSettings; subject: FactorSubject } | { done: FastifyReply }> => {
    const mfa = ctx.config.mfa;
    if (!mfa) return { done: page(reply, secondFactorUnavailable()) };
    const subject = await subjectOf(req, ctx, mfa);
    return subject ? { mfa, subject } : { done: toLogin(reply, returnTo) };
  };

  scope.get(OTP_PATH, async (req, reply) => {
    const query = req.query as Record<string, unknown>;
    const returnTo = safeReturnTo(query.return_to);
    const step = await factorStep(req, reply, returnTo);
    if ('done' in step) return step.done;
    const { subject } = step;
    const totp = (await ctx.store.factors.getTotp(subject.user.id)) !== undefined;
    const passkey = (await ctx.store.factors.passkeys.list(subject.user.id)).length > 0;
    if (!totp && !passkey)
      return reply.header('cache-control', 'no-store').redirect(pathWith(OTP_ENROL_PATH, { returnTo }), 302);
    return page(
      reply,
      totpForm({ csrfToken: reply.generateCsrf(), returnTo, failed: query.err === '1', totp, passkey }),
    );
  });

  scope.post(OTP_PATH, { preHandler: scope.csrfProtection }, async (req, reply) => {
    if (req.body === NOT_FORM)
      return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
    const returnTo = safeReturnTo(formField(req.body, 'return_to'));
    const step = await factorStep(req, reply, returnTo);
    if ('done' in step) return step.done;
    const { mfa, subject } = step;
    const { user } = subject;
    const clientId = returnToParam(returnTo, 'client_id');
    const limited = await limitAttempt(req, ctx, 'totp', user.id, clientId ?? null);
    if (!limited.ok) return refuseLimitedPage(reply, limited);
    const code = (formField(req.body, 'code') ?? '').slice(0, 64);
    const now = ctx.now();
    let failure: string | undefined;
    let used: 'totp' | 'recovery_code' = 'totp';
    if (isTotpCode(code)) {
      const factor = await ctx.store.factors.getTotp(user.id);
      let secret: string | undefined;
      try {
        secret = factor ? mfa.sealer.open(factor.sealedSecret, user.id) : undefined;
      } catch {
        failure = 'totp_seed_unreadable';
      }
      if (!factor) failure = 'totp_not_enrolled';
      else if (secret !== undefined) {
        const step = verifyTotp(secret, code, now);
        if (step === undefined) failure = 'totp_invalid';
        else if (!(await ctx.store.factors.claimTotpStep(user.id, step, now))) failure = 'totp_replayed';
      }
    } else {
      used = 'recovery_code';
      const hash = hashRecoveryCode(code);
      if (hash === undefined) failure = 'code_malformed';
      else if (!(await ctx.store.factors.useRecoveryCode(user.id, hash, now)))
        failure = 'recovery_code_invalid';
    }
    if (failure !== undefined) {
      await auditFactor(ctx, req, user, clientId, 'factor_failed', used, failure);
      return reply
        .header('cache-control', 'no-store')
        .redirect(pathWith(OTP_PATH, { err: true, returnTo }), 302);
    }
    await attemptSucceeded(req, ctx, 'totp', user.id);
    await auditFactor(
      ctx,
      req,
      user,
      clientId,
      used === 'totp' ? 'factor_used' : 'recovery_code_used',
      used,
      null,
    );
    clearPending(reply, secureCookies(ctx));
    await startSession(req, reply, ctx, user.id, amrWithSecondFactor(subject.amr, 'otp'));
    return reply.header('cache-control', 'no-store').redirect(returnTo ?? LOGIN_PATH, 302);
  });

  scope.get(OTP_ENROL_PATH, async (req, reply) => {
    const query = req.query as Record<string, unknown>;
    const returnTo = safeReturnTo(query.return_to);
    const step = await factorStep(req, reply, returnTo);
    if ('done' in step) return step.done;
    const { mfa, subject } = step;
    // A second seed is not enrolled over an existing one here: the existing factor is asked for instead.
    if (await ctx.store.factors.getTotp(subject.user.id))
      return reply.header('cache-control', 'no-store').redirect(pathWith(OTP_PATH, { returnTo }), 302);
    const secret = subject.pending?.totpSecret ?? newTotpSecret();
    if (subject.pending?.totpSecret === undefined) {
      await setPending(
        reply,
        mfa,
        {
          userId: subject.user.id,
          stamp: stampTag(subject.user.securityStamp),
          amr: subject.amr,
          totpSecret: secret,
        },
        ctx.now(),
        secureCookies(ctx),
      );
    }
    const qrSvg = await totpQrSvg(totpUri(secret, subject.user.userName, mfa.totpIssuer));
    return page(
      reply,
      totpEnrolForm({
        csrfToken: reply.generateCsrf(),
        returnTo,
        failed: query.err === '1',
        qrSvg,
        secret,
        required: subject.pending !== undefined && subject.amr.length === 1,
      }),
    );
  });

  scope.post(OTP_ENROL_PATH, { preHandler: scope.csrfProtection }, async (req, reply) => {
    if (req.body === NOT_FORM)
      return reply.code(400).type('text/plain; charset=utf-8').send('form body expected\n');
    const returnTo = safeReturnTo(formField(req.body, 'return_to'));
    const mfa = ctx.config.mfa;
    if (!mfa) return page(reply, secondFactorUnavailable());
    const subject = await subjectOf(req, ctx, mfa);
    const secret = subject?.pending?.totpSecret;
    if (!subject || secret === undefined)
      return reply.header('cache-control', 'no-store').redirect(pathWith(OTP_ENROL_PATH, { returnTo }), 302);
    const { user } = subject;
    const clientId = returnToParam(returnTo, 'client_id');
    const limited = await limitAttempt(req, ctx, 'totp', user.id, clientId ?? null);
    if (!limited.ok) return refuseLimitedPage(reply, limited);
    const now = ctx.now();
    const step = verifyTotp(secret, formField(req.body, 'code') ?? '', now);
    const failure =
      step === undefined
        ? 'totp_enrol_invalid'
        : (await ctx.store.factors.getTotp(user.id))
          ? 'totp_already_enrolled'
          : undefined;
    if (failure !== undefined || step === undefined) {
      await auditFactor(ctx, req, user, clientId, 'factor_failed', 'totp', failure ?? 'totp_enrol_invalid');
      return reply
        .header('cache-control', 'no-store')
        .redirect(pathWith(OTP_ENROL_PATH, { err: true, returnTo }), 302);
    }
    await ctx.store.factors.setTotp(user.id, mfa.sealer.seal(secret, user.id), step, now);
    const codes = newRecoveryCodes();
    await ctx.store.factors.replaceRecoveryCodes(
      user.id,
      codes.map((c) => hashRecoveryCode(c)!),
      now,
    );
    await attemptSucceeded(req, ctx, 'totp', user.id);
    await auditFactor(ctx, req, user, clientId, 'factor_enrolled', 'totp', null);
    clearPending(reply, secureCookies(ctx));
    await startSession(req, reply, ctx, user.id, amrWithSecondFactor(subject.amr, 'otp'));
    return page(reply, recoveryCodesPage({ codes, continueTo: returnTo ?? LOGIN_PATH }));
  });
}
