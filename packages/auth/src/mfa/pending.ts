/**
 * The pending sign-in between the password and the second factor: an encrypted JWT (JWE compact, `dir` +
 * `A256GCM`, RFC 7516/7518, with `jose`) in an `HttpOnly`, `SameSite=Strict` cookie on `/login`. It says
 * who passed the password step (user id and a tag of the security stamp, so a password reset or disable
 * ends it), the `amr` so far and, during enrolment, the candidate TOTP seed (never in clear: the whole
 * token is encrypted with a key derived from the MFA key). It expires after `mfa.pendingTtlSeconds`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { EncryptJWT, jwtDecrypt } from 'jose';
import { stampTag } from '../oauth/context.ts';
import type { MfaSettings } from './config.ts';

/** Name of the pending sign-in cookie. */
export const PENDING_COOKIE = 'seed_auth_mfa';
/** Path the cookie is sent to. */
const COOKIE_PATH = '/login';

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
  const now = Math.floor(nowMs / 1000);
  const token = await new EncryptJWT({
    stamp: pending.stamp,
    amr: [...pending.amr],
    ...(pending.totpSecret ? { totp: pending.totpSecret } : {}),
  })
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
    .setSubject(pending.userId)
    .setIssuedAt(now)
    .setExpirationTime(now + mfa.pendingTtlSeconds)
    .encrypt(mfa.pendingKey);
  reply.setCookie(PENDING_COOKIE, token, {
    httpOnly: true,
    sameSite: 'strict',
    path: COOKIE_PATH,
    secure,
    maxAge: mfa.pendingTtlSeconds,
  });
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
  const token = req.cookies[PENDING_COOKIE];
  if (!token || token.length > 2048) return undefined;
  try {
    const { payload } = await jwtDecrypt(token, mfa.pendingKey, {
      currentDate: new Date(nowMs),
      keyManagementAlgorithms: ['dir'],
      contentEncryptionAlgorithms: ['A256GCM'],
    });
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
  } catch {
    return undefined;
  }
}

/** True when the pending sign-in was made under the user's current security stamp. */
export function pendingMatches(pending: PendingSignIn, securityStamp: string): boolean {
  return pending.stamp === stampTag(securityStamp);
}

/** Clears the pending cookie on `reply`. */
export function clearPending(reply: FastifyReply, secure: boolean): void {
  reply.clearCookie(PENDING_COOKIE, { path: COOKIE_PATH, httpOnly: true, sameSite: 'strict', secure });
}
