/**
 * The brute-force limits at the endpoints that check secrets (see `../ratelimit.ts`): {@link limitAttempt}
 * counts an attempt before the check and audits the first refusal of each window, {@link attemptSucceeded}
 * gives the points back after a correct secret, {@link refuseLimitedPage} and {@link limitedOAuthError}
 * are the answers: 429 with `Retry-After` (RFC 6585 §4, RFC 9110 §10.2.3).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import type { CredentialValidationResult } from '../credentials.ts';
import type { LimitDecision, LimitKind } from '../ratelimit.ts';
import { AuditCategory, AuditOutcome } from '../store/types.ts';
import type { OAuthContext } from './context.ts';
import { OAuthError } from './errors.ts';

/** A refusal of the limits. */
export type LimitRefusal = Extract<LimitDecision, { ok: false }>;

/** Longest account key counted (longer user names are cut; the store refuses them anyway). */
const MAX_ACCOUNT_KEY = 256;

/**
 * Counts one attempt of `kind` by the request's IP and for `account` (a user name or id) when the server
 * has limits. The first refusal of a window writes one audit event (Category `Login`, Outcome `Denied`,
 * failure code `rate_limited`, `details: { kind, scope, retryAfterSeconds }`); later ones only count in
 * the metrics, so that an attack cannot fill the audit log.
 * @returns `{ ok: true }` or the refusal.
 */
export async function limitAttempt(
  req: FastifyRequest,
  ctx: OAuthContext,
  kind: LimitKind,
  account: string | undefined,
  clientId: string | null = null,
): Promise<LimitDecision> {
  if (!ctx.limits) return { ok: true };
  const name = account?.slice(0, MAX_ACCOUNT_KEY);
  const decision = await ctx.limits.consume(kind, { ip: clientAddress(req), account: name });
  if (!decision.ok && decision.first) {
    await ctx.store.appendAudit({
      category: AuditCategory.Login,
      outcome: AuditOutcome.Denied,
      subjectName: name ?? null,
      clientId,
      failureCode: 'rate_limited',
      remoteAddress: clientAddress(req),
      details: { kind, scope: decision.scope, retryAfterSeconds: decision.retryAfterSeconds },
    });
  }
  return decision;
}

/** Gives back the points of a successful attempt (see `RateLimits.reward`). */
export async function attemptSucceeded(
  req: FastifyRequest,
  ctx: OAuthContext,
  kind: LimitKind,
  account: string | undefined,
): Promise<void> {
  await ctx.limits?.reward(kind, { ip: clientAddress(req), account: account?.slice(0, MAX_ACCOUNT_KEY) });
}

/**
 * Checks a user name and password under the brute-force limits: counts the attempt ({@link limitAttempt},
 * kind `password`), validates the credentials (one audit event, Category `Login`; spec 001 "Events": a
 * failed one with Outcome `Denied` and the failure code, `clientId` telling password-grant validations
 * apart from the login pages'), and gives the points back when they are right ({@link attemptSucceeded}).
 * @param clientId the client of a password grant; null on the login pages.
 * @returns `limited`: the refusal of the limits (the credentials are not checked), else the outcome.
 */
export async function checkPassword(
  req: FastifyRequest,
  ctx: OAuthContext,
  userName: string,
  password: string,
  clientId: string | null = null,
): Promise<{ limited: LimitRefusal } | { limited: undefined; outcome: CredentialValidationResult }> {
  const limited = await limitAttempt(req, ctx, 'password', userName, clientId);
  if (!limited.ok) return { limited };
  const outcome = await ctx.credentials.validate(userName, password, {
    category: AuditCategory.Login,
    clientId,
    remoteAddress: clientAddress(req),
  });
  if (outcome.ok) await attemptSucceeded(req, ctx, 'password', userName);
  return { limited: undefined, outcome };
}

/**
 * The token endpoint's refusal (RFC 6749 §5.2 body): 429 `temporarily_unavailable` with `Retry-After`.
 * The description does not say whether the IP or the account was limited.
 */
export function limitedOAuthError(refusal: LimitRefusal): OAuthError {
  return new OAuthError('temporarily_unavailable', 'too many attempts; retry later', {
    'retry-after': String(refusal.retryAfterSeconds),
  });
}

/**
 * Answers a page's refused attempt: 429, `Retry-After`, `Cache-Control: no-store`, and a short HTML page
 * saying when to try again (no scripts or external assets).
 */
export function refuseLimitedPage(reply: FastifyReply, refusal: LimitRefusal): FastifyReply {
  const minutes = Math.ceil(refusal.retryAfterSeconds / 60);
  return reply
    .code(429)
    .header('retry-after', String(refusal.retryAfterSeconds))
    .header('cache-control', 'no-store')
    .header('content-security-policy', "default-src 'none'; frame-ancestors 'none'")
    .header('x-content-type-options', 'nosniff')
    .type('text/html; charset=utf-8')
    .send(
      `<!doctype html><html lang="en"><meta charset="utf-8"><title>Too many attempts</title>` +
        `<h1>Too many attempts</h1><p>Too many sign-in attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.</p>` +
        `<p><a href="/login">Back to sign-in</a></p></html>`,
    );
}
