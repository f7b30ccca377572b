/**
 * The pending sign-in between the password and the second factor: an encrypted JWT (JWE compact, `dir` +
 * `A256GCM`, RFC 7516/7518, with `jose`) in an `HttpOnly`, `SameSite=Strict` cookie on `/login`. It says
 * who passed the password step (user id and a tag of the security stamp, so a password reset or disable
 * ends it), the `amr` so far and, during enrolment, the candidate TOTP seed (never in clear: the whole
 * token is encrypted with a key derived from the MFA key). It expires after `mfa.pendingTtlSeconds`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { stampTag } from '../oauth/context.ts';
import type { MfaSettings } from './config.ts';
import { clearSealedCookie, readSealedCookie, type SealedCookie, setSealedCookie } from './sealed-cookie.ts';

/** Name of the pending sign-in cookie. */
export const PENDING_COOKIE = 'seed_auth_mfa';

/** Where the pending cookie lives; it lives `mfa.pendingTtlSeconds`. */
const PENDING_PLACE = { name: PENDING_COOKIE, path: '/login' } as const;

/** The pending cookie under `mfa`'s settings. */
const pendingCookie = (mfa: MfaSettings): SealedCookie => ({
  ...PENDING_PLACE,
  ttlSeconds: mfa.pendingTtlSeconds,
});

/** What the pending cookie holds. */
export interface PendingSignIn {
  /** User id. */
  readonly userId: string;
  /** `stampTag` of the user's security stamp when the password was checked. */
  readonly stamp: string;
  /** `amr` of the factors passed so far (e.g. `['pwd']`). */
  readonly amr: readonly string[];
  /** Candidate TOTP seed (base32) during enrolment. */
  readonly totpSecret?: string;
}

/**
 * Sets the pending cookie on `reply`.
 * @param secure `Secure` attribute (https issuer).
 */
export async function setPending(
  reply: FastifyReply,
  mfa: MfaSettings,
  pending: PendingSignIn,
  nowMs: number,
  secure: boolean,
): Promise<void> {
  const claims = {
    sub: pending.userId,
    stamp: pending.stamp,
    amr: [...pending.amr],
    ...(pending.totpSecret ? { totp: pending.totpSecret } : {}),
  };
  await setSealedCookie(reply, pendingCookie(mfa), mfa.pendingKey, claims, nowMs, secure);
}

/**
 * The request's pending sign-in, or undefined when there is none or it is expired, altered or made with
 * another key.
 */
export async function readPending(
  req: FastifyRequest,
  mfa: MfaSettings,
  nowMs: number,
): Promise<PendingSignIn | undefined> {
  const payload = await readSealedCookie(req, pendingCookie(mfa), mfa.pendingKey, nowMs);
  if (!payload) return undefined;
  const amr = payload.amr;
  if (
    typeof payload.sub !== 'string' ||
    typeof payload.stamp !== 'string' ||
    !Array.isArray(amr) ||
    !amr.every((v) => typeof v === 'string')
  )
    return undefined;
  return {
    userId: payload.sub,
    stamp: payload.stamp,
    amr: amr as string[],
    totpSecret: typeof payload.totp === 'string' ? payload.totp : undefined,
  };
}

/** True when the pending sign-in was made under the user's current security stamp. */
export function pendingMatches(pending: PendingSignIn, securityStamp: string): boolean {
  return pending.stamp === stampTag(securityStamp);
}

/** Clears the pending cookie on `reply`. */
export function clearPending(reply: FastifyReply, secure: boolean): void {
  clearSealedCookie(reply, PENDING_PLACE, secure);
}
