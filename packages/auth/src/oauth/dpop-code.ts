/**
 * Authorization codes bound to a DPoP key (RFC 9449 §10, `dpop_jkt`). The thumbprint travels inside the
 * code: `<256 random bits, base64url>.<jkt>`. The store keeps only the SHA-256 of the whole code, so the
 * suffix cannot be changed or removed without the code no longer matching its record; the token endpoint
 * reads it back and refuses the code unless the request's DPoP proof is signed by that key — before the
 * code is used up, so that someone holding a stolen code but not the key cannot spend it.
 */

/** Separator between the random part and the thumbprint (not a base64url character). */
const SEPARATOR = '.';

/** True for a base64url SHA-256 JWK thumbprint (RFC 7638): 43 base64url characters. */
export function isJwkThumbprint(value: string): boolean {
  return /^[A-Za-z0-9_-]{43}$/.test(value);
}

/** The code to hand out: `random` alone, or bound to `jkt` when one was requested. */
export function dpopBoundCode(random: string, jkt: string | undefined): string {
  return jkt === undefined ? random : `${random}${SEPARATOR}${jkt}`;
}

/**
 * The DPoP key thumbprint a presented code is bound to (whatever follows the separator: unbound codes have
 * none), or undefined for an unbound code.
 */
export function codeDpopJkt(code: string): string | undefined {
  const at = code.indexOf(SEPARATOR);
  return at === -1 ? undefined : code.slice(at + 1);
}
