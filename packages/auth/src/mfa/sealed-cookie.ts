/**
 * A short-lived cookie whose claims are sealed (JWE compact, `dir` + `A256GCM`, RFC 7516/7518, with
 * `jose`): encrypted and authenticated with a server key, `HttpOnly`, `SameSite=Strict`, sent only to its
 * path. The pending second-factor sign-in (`./pending.ts`) and the WebAuthn ceremony state
 * (`../webauthn/challenge.ts`) travel this way.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { EncryptJWT, type JWTPayload, jwtDecrypt } from 'jose';

/** Longest cookie value read, characters; a longer one is ignored unread. */
const MAX_SEALED_COOKIE_LENGTH = 2048;

/** Where a sealed cookie lives and how long. */
export interface SealedCookie {
  readonly name: string;
  /** Path the cookie is sent to. */
  readonly path: string;
  /** Lifetime of the cookie and of its token (`exp`), seconds. */
  readonly ttlSeconds: number;
}

/**
 * Sets `cookie` on `reply` holding `claims` sealed with `key` (32 bytes), issued at `nowMs` (ms epoch) and
 * expiring `cookie.ttlSeconds` later. @param secure the `Secure` attribute (https issuer).
 */
export async function setSealedCookie(
  reply: FastifyReply,
  cookie: SealedCookie,
  key: Uint8Array,
  claims: JWTPayload,
  nowMs: number,
  secure: boolean,
): Promise<void> {
  const now = Math.floor(nowMs / 1000);
  const token = await new EncryptJWT(claims)
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM' })
    .setIssuedAt(now)
    .setExpirationTime(now + cookie.ttlSeconds)
    .encrypt(key);
  reply.setCookie(cookie.name, token, {
    httpOnly: true,
    sameSite: 'strict',
    path: cookie.path,
    secure,
    maxAge: cookie.ttlSeconds,
  });
}

/**
 * The claims of the request's `cookie`, or undefined when there is none, or it is too long, expired at
 * `nowMs` (ms epoch), altered or sealed with another key.
 */
export async function readSealedCookie(
  req: FastifyRequest,
  cookie: SealedCookie,
  key: Uint8Array,
  nowMs: number,
): Promise<JWTPayload | undefined> {
  const token = req.cookies[cookie.name];
  if (!token || token.length > MAX_SEALED_COOKIE_LENGTH) return undefined;
  try {
    const { payload } = await jwtDecrypt(token, key, {
      currentDate: new Date(nowMs),
      keyManagementAlgorithms: ['dir'],
      contentEncryptionAlgorithms: ['A256GCM'],
    });
    return payload;
  } catch {
    return undefined;
  }
}

/** Clears `cookie` on `reply`. */
export function clearSealedCookie(
  reply: FastifyReply,
  cookie: Pick<SealedCookie, 'name' | 'path'>,
  secure: boolean,
): void {
  reply.clearCookie(cookie.name, { path: cookie.path, httpOnly: true, sameSite: 'strict', secure });
}
