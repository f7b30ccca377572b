/**
 * TOTP (RFC 6238) with `otpauth`: SHA-1, 6 digits, 30-second steps (the parameters every authenticator app
 * understands), 160-bit random seeds (RFC 4226 §4 R6), one step of clock drift accepted either way
 * (RFC 6238 §5.2). {@link verifyTotp} returns the matched time step so that the caller can claim it in the
 * store and refuse a second use of the same code (§5.2: "the verifier MUST NOT accept the second attempt").
 * Enrolment shows the `otpauth://` key URI (Google Authenticator key-URI format) as an inline SVG QR code
 * (`qrcode`) and the seed as base32 text.
 */
import { Secret, TOTP } from 'otpauth';
import QRCode from 'qrcode';

/** Step length, seconds (RFC 6238 §4.1 `X`). */
export const TOTP_PERIOD_SECONDS = 30;
/** Code length, digits. */
export const TOTP_DIGITS = 6;
/** Steps of drift accepted before and after the current one. */
export const TOTP_WINDOW = 1;

/** A fresh seed, base32 (32 characters, 160 bits). */
export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

function totp(secretBase32: string, label = 'user', issuer = 'seed'): TOTP {
  return new TOTP({
    issuer,
    label,
    secret: Secret.fromBase32(secretBase32),
    algorithm: 'SHA1',
    digits: TOTP_DIGITS,
    period: TOTP_PERIOD_SECONDS,
  });
}

/** True when `code` has the shape of a TOTP code (6 ASCII digits, spaces ignored). */
export function isTotpCode(code: string): boolean {
  return /^\d{6}$/.test(code.replace(/\s+/g, ''));
}

/**
 * Checks `code` against the seed at time `now` (ms epoch).
 * @returns the RFC 6238 time step `T` the code belongs to, or undefined when it matches none in the window.
 */
export function verifyTotp(secretBase32: string, code: string, now: number): number | undefined {
  const token = code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(token)) return undefined;
  const otp = totp(secretBase32);
  const delta = otp.validate({ token, timestamp: now, window: TOTP_WINDOW });
  if (delta === null) return undefined;
  return otp.counter({ timestamp: now }) + delta;
}

/** The code of the seed at time `now` (ms epoch) — for tests and tools that act as the authenticator. */
export function totpCode(secretBase32: string, now: number): string {
  return totp(secretBase32).generate({ timestamp: now });
}

/** The `otpauth://totp/…` key URI of a seed for `label` (the user name) and `issuer`. */
export function totpUri(secretBase32: string, label: string, issuer: string): string {
  return totp(secretBase32, label, issuer).toString();
}

/** The key URI as a QR code, an SVG document (inline in the enrolment page; no external image). */
export function totpQrSvg(uri: string): Promise<string> {
  return QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2, width: 200 });
}
