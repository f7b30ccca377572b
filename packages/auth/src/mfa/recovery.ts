/**
 * Recovery codes: ten single-use codes of 50 random bits each, shown once as `xxxxx-xxxxx` (lower-case
 * base32, RFC 4648 §6 alphabet) and stored as SHA-256 hashes. Their entropy is high enough that a fast
 * hash is safe (unlike passwords); the sign-in page also rate limits their checks with TOTP codes.
 */
import { hash, randomBytes } from 'node:crypto';

/** How many codes a set holds. */
export const RECOVERY_CODE_COUNT = 10;

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';

function randomCode(): string {
  const bytes = randomBytes(10);
  let out = '';
  for (let i = 0; i < 10; i++) out += ALPHABET[bytes[i]! & 31];
  return `${out.slice(0, 5)}-${out.slice(5)}`;
}

/** A fresh set of {@link RECOVERY_CODE_COUNT} codes in display form. */
export function newRecoveryCodes(): string[] {
  const codes = new Set<string>();
  while (codes.size < RECOVERY_CODE_COUNT) codes.add(randomCode());
  return [...codes];
}

/** The canonical form of what a user typed: lower case, without spaces and dashes; undefined when malformed. */
export function normalizeRecoveryCode(input: string): string | undefined {
  const code = input.replace(/[\s-]+/g, '').toLowerCase();
  return /^[a-z2-7]{10}$/.test(code) ? code : undefined;
}

/** The stored form of a code (display or typed form): SHA-256 of the canonical form, base64url. */
export function hashRecoveryCode(code: string): string | undefined {
  const canonical = normalizeRecoveryCode(code);
  return canonical === undefined ? undefined : hash('sha256', canonical, 'base64url');
}
