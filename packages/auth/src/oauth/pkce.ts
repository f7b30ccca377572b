/**
 * Proof Key for Code Exchange (RFC 7636). The server side: validating the challenge at the
 * authorization endpoint (§4.4) and the verifier at the token endpoint (§4.6).
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** `code_challenge_method` values (RFC 7636 §4.3). `plain` is refused unless a client is configured for it. */
export type PkceMethod = 'S256' | 'plain';

/** RFC 7636 §4.1: `code-verifier = 43*128unreserved`; the S256 challenge has the same alphabet (43 chars). */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;

/** True when `value` has the syntax of a code verifier or challenge (43–128 unreserved characters). */
export function isValidPkceString(value: string): boolean {
  return VERIFIER.test(value);
}

/** The S256 transformation: `BASE64URL(SHA256(ASCII(code_verifier)))` (RFC 7636 §4.2). */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/**
 * Checks a `code_verifier` against the stored challenge (RFC 7636 §4.6), in constant time.
 * Returns false for a syntactically invalid verifier.
 */
export function verifyPkce(verifier: string, challenge: string, method: PkceMethod): boolean {
  if (!isValidPkceString(verifier)) return false;
  const computed = Buffer.from(method === 'S256' ? s256(verifier) : verifier);
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}
