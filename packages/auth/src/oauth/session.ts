/**
 * Login sessions behind the session cookie. The cookie value is 256 random bits; the store keeps only
 * its SHA-256. The cookie is `HttpOnly`, `SameSite=Lax` (so the top-level redirect from a client back to
 * `/connect/authorize` still carries it), `Path=/`, and `Secure` when the issuer is `https`.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthStore, LoginSessionRecord, UserRecord } from '../store/types.ts';
import { type OAuthContext, userActive } from './context.ts';
import { hashToken, newOpaqueToken } from './tokens.ts';

/** Name of the session cookie. */
export const SESSION_COOKIE = 'seed_auth_session';

/** A live session and its (enabled, unlocked) user. */
export interface ActiveSession {
  readonly session: LoginSessionRecord;
  readonly user: UserRecord;
}

/** True when cookies must be `Secure` (https issuer). */
export function secureCookies(ctx: OAuthContext): boolean {
  return ctx.config.issuer.startsWith('https:');
}

/**
 * The request's session when the cookie names a stored, unexpired, unrevoked session whose user is
 * still enabled and not locked out; otherwise undefined.
 */
export async function readSession(
  req: FastifyRequest,
  ctx: OAuthContext,
): Promise<ActiveSession | undefined> {
  const value = req.cookies[SESSION_COOKIE];
  if (!value || value.length > 128) return undefined;
  const session = await ctx.store.getLoginSession(hashToken(value));
  const now = ctx.now();
  if (!session || session.revokedAt !== null || session.expiresAt <= now) return undefined;
  const user = await ctx.store.getUser(session.userId);
  if (!user || !userActive(user, now)) return undefined;
  return { session, user };
}

/** A fresh public session id (OIDC `sid`): 128 random bits, base64url (22 characters). */
export function newSessionId(): string {
  return randomBytes(16).toString('base64url');
}

/**
 * Creates a session for `userId` (with a public id `sid` and the `amr` of the factors passed, RFC 8176 §2:
 * `['pwd']` by default, `['pwd', 'otp', 'mfa']` after a second factor) and sets the cookie on `reply`. A session the request already carried is revoked first, so a cookie planted before
 * sign-in never becomes an authenticated session (fixation).
 */
export async function startSession(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: OAuthContext,
  userId: string,
  amr: readonly string[] = ['pwd'],
): Promise<void> {
  const previous = req.cookies[SESSION_COOKIE];
  if (previous && previous.length <= 128) await ctx.store.revokeLoginSession(hashToken(previous), ctx.now());
  const value = newOpaqueToken();
  const now = ctx.now();
  const ttl = ctx.config.sessionTtlSeconds;
  await ctx.store.createLoginSession({
    sessionHash: hashToken(value),
    userId,
    createdAt: now,
    expiresAt: now + ttl * 1000,
    sid: newSessionId(),
    amr: [...amr],
  });
  reply.setCookie(SESSION_COOKIE, value, {
    httpOnly: true,
    sameSite: 'lax',
    path: '/',
    secure: secureCookies(ctx),
    maxAge: ttl,
  });
}

/**
 * Ends the request's session (if any): revokes it and the refresh tokens issued in it
 * ({@link AuthStore.endLoginSession}), and clears the cookie.
 * @returns the session record as it was before (undefined when the request carried none).
 */
export async function endSession(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: OAuthContext,
): Promise<LoginSessionRecord | undefined> {
  const value = req.cookies[SESSION_COOKIE];
  let session: LoginSessionRecord | undefined;
  if (value && value.length <= 128) {
    const hash = hashToken(value);
    session = await ctx.store.getLoginSession(hash);
    await ctx.store.endLoginSession(hash, ctx.now());
  }
  clearSessionCookie(reply, ctx);
  return session;
}

/** Clears the session cookie on `reply`. */
export function clearSessionCookie(reply: FastifyReply, ctx: OAuthContext): void {
  reply.clearCookie(SESSION_COOKIE, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: secureCookies(ctx),
  });
}
