/**
 * WebAuthn ceremony state between the options request and the response: the challenge (§13.4.3: at least
 * 16 random bytes, made by `@simplewebauthn/server`), the ceremony (`register` or `authenticate`) and the
 * user it is for, in an encrypted cookie (JWE `dir` + `A256GCM` with the MFA key's derived key;
 * `HttpOnly`, `SameSite=Strict`, path `/login`) that lives 5 minutes. A challenge is used once: the
 * verifying request claims it in the store's replay cache first (every instance shares it).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { MfaSettings } from '../mfa/config.ts';
import {
  clearSealedCookie,
  readSealedCookie,
  type SealedCookie,
  setSealedCookie,
} from '../mfa/sealed-cookie.ts';
import type { OAuthContext } from '../oauth/context.ts';

/** Name of the ceremony cookie. */
export const CHALLENGE_COOKIE = 'seed_auth_webauthn';
/** Lifetime of a challenge, seconds (also the `timeout` given to the browser). */
export const CHALLENGE_TTL_SECONDS = 300;

const ceremonyCookie: SealedCookie = {
  name: CHALLENGE_COOKIE,
  path: '/login',
  ttlSeconds: CHALLENGE_TTL_SECONDS,
};

/** A ceremony in progress. */
export interface PendingCeremony {
  readonly ceremony: 'register' | 'authenticate';
  /** base64url challenge. */
  readonly challenge: string;
  /** The user it is for (registration; a second-factor assertion), or undefined (passwordless). */
  readonly userId: string | undefined;
  /** Expiry, ms epoch. */
  readonly expiresAt: number;
}

/** Sets the ceremony cookie. */
export async function setCeremony(
  reply: FastifyReply,
  mfa: MfaSettings,
  ceremony: Omit<PendingCeremony, 'expiresAt'>,
  nowMs: number,
  secure: boolean,
): Promise<void> {
  const claims = {
    cer: ceremony.ceremony,
    ch: ceremony.challenge,
    ...(ceremony.userId ? { uid: ceremony.userId } : {}),
  };
  await setSealedCookie(reply, ceremonyCookie, mfa.pendingKey, claims, nowMs, secure);
}

/** Clears the ceremony cookie. */
export function clearCeremony(reply: FastifyReply, secure: boolean): void {
  clearSealedCookie(reply, ceremonyCookie, secure);
}

/**
 * Reads the request's ceremony of kind `ceremony` and claims its challenge (single use).
 * @returns the ceremony, or a failure code: `passkey_challenge_missing` (no, expired or altered cookie, or
 * another ceremony) or `passkey_challenge_replayed` (already used).
 */
export async function takeCeremony(
  req: FastifyRequest,
  ctx: OAuthContext,
  mfa: MfaSettings,
  ceremony: PendingCeremony['ceremony'],
): Promise<PendingCeremony | 'passkey_challenge_missing' | 'passkey_challenge_replayed'> {
  const now = ctx.now();
  const payload = await readSealedCookie(req, ceremonyCookie, mfa.pendingKey, now);
  if (!payload) return 'passkey_challenge_missing';
  if (payload.cer !== ceremony || typeof payload.ch !== 'string' || typeof payload.exp !== 'number')
    return 'passkey_challenge_missing';
  const expiresAt = payload.exp * 1000;
  if (!(await ctx.store.claimReplayKey('webauthn', payload.ch, expiresAt, now)))
    return 'passkey_challenge_replayed';
  return {
    ceremony,
    challenge: payload.ch,
    userId: typeof payload.uid === 'string' ? payload.uid : undefined,
    expiresAt,
  };
}
