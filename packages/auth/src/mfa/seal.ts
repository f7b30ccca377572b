/**
 * Encryption at rest of second-factor secrets (TOTP seeds) with the server's MFA key: AES-256-GCM
 * (NIST SP 800-38D) with a random 96-bit IV, the key derived from the configured secret by HKDF-SHA-256
 * (RFC 5869) per purpose, and the owner (the user id) as additional authenticated data, so a sealed seed
 * copied onto another user's row does not open. Format: `v1.<iv>.<ciphertext>.<tag>` (base64url).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** Shortest accepted MFA key (`mfa.key`, `AUTH_MFA_KEY`), characters. */
export const MIN_MFA_KEY_LENGTH = 32;

/** A purpose-specific 256-bit key derived from the MFA key (HKDF-SHA-256, RFC 5869). */
export function deriveKey(secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'seed-auth mfa', purpose, 32));
}

/** Thrown when a sealed value does not open (wrong key, wrong owner, altered or malformed). */
export class SealError extends Error {
  readonly code = 'sealed_value_invalid';
}

/** Seals and opens secrets bound to an owner id (see the module comment). */
export class SecretSealer {
  readonly #key: Buffer;

  /**
   * @param secret the MFA key (at least {@link MIN_MFA_KEY_LENGTH} characters).
   * @throws RangeError `mfa.key: at least 32 characters` when it is shorter.
   */
  constructor(secret: string) {
    if (typeof secret !== 'string' || secret.length < MIN_MFA_KEY_LENGTH)
      throw new RangeError(`mfa.key: at least ${MIN_MFA_KEY_LENGTH} characters`);
    this.#key = deriveKey(secret, 'totp seed');
  }

  /** Encrypts `plain` for `owner`. @returns `v1.<iv>.<ciphertext>.<tag>`. */
  seal(plain: string, owner: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    cipher.setAAD(Buffer.from(owner, 'utf8'));
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return ['v1', iv, body, cipher.getAuthTag()]
      .map((p) => (typeof p === 'string' ? p : p.toString('base64url')))
      .join('.');
  }

  /** Decrypts a value sealed for `owner`. @throws SealError when it does not open. */
  open(sealed: string, owner: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 4 || parts[0] !== 'v1') throw new SealError('unknown sealed-value format');
    const [iv, body, tag] = parts.slice(1).map((p) => Buffer.from(p, 'base64url')) as [
      Buffer,
      Buffer,
      Buffer,
    ];
    if (iv.length !== 12 || tag.length !== 16) throw new SealError('malformed sealed value');
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
      decipher.setAAD(Buffer.from(owner, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
    } catch (cause) {
      throw new SealError('sealed value does not open with this key and owner', { cause });
    }
  }
}
