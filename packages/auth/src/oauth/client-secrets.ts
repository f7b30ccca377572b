/**
 * How client secrets are stored (the `secretHash` field of a client record).
 *
 * - Clients that authenticate with the secret itself (`client_secret_basic`, `client_secret_post`, RFC 6749
 *   §2.3.1) get a scrypt hash: the server only ever needs to compare.
 * - Clients registered for `client_secret_jwt` (RFC 7523 §2.2, OpenID Connect Core §9) sign their
 *   assertions with HMAC keyed by the secret, so the server needs the secret itself to verify them. Their
 *   secret is sealed: AES-256-GCM under a key derived (HKDF-SHA-256) from the server's client-secret key
 *   (`AUTH_CLIENT_SECRET_KEY`, option `oauth.clientSecretKey`), a random 96-bit IV per seal, and the client
 *   id as additional authenticated data, so a sealed secret copied onto another client does not open.
 *   Stored as `sealed:v1:<key id>:<iv>.<ciphertext>.<tag>` (base64url); the key id (8 characters of a
 *   SHA-256 of the derived key) names the key that sealed it. Without a configured key `client_secret_jwt`
 *   is unavailable.
 *
 * Secrets never appear in logs, errors or audit events; comparisons are constant-time.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import type { PasswordHasher } from '../passwords.ts';
import type { TokenEndpointAuthMethod } from '../store/types.ts';

const SEALED_PREFIX = 'sealed:v1:';
/** Shortest accepted client-secret key, characters (a random 32-byte key is 43 in base64url). */
export const MIN_CLIENT_SECRET_KEY_LENGTH = 32;

/** True when a stored secret is sealed (a `client_secret_jwt` client's) rather than hashed. */
export function isSealedSecret(stored: string | null): boolean {
  return stored?.startsWith(SEALED_PREFIX) ?? false;
}

/** Stores and checks client secrets in the two forms of the module documentation. */
export class ClientSecrets {
  readonly #hasher: PasswordHasher;
  readonly #key: Buffer | undefined;
  readonly #keyId: string | undefined;

  /**
   * @param key the server's client-secret key (at least {@link MIN_CLIENT_SECRET_KEY_LENGTH} characters);
   * undefined disables `client_secret_jwt`.
   * @throws RangeError for a shorter key.
   */
  constructor(hasher: PasswordHasher, key: string | undefined) {
    this.#hasher = hasher;
    if (key !== undefined) {
      if (key.length < MIN_CLIENT_SECRET_KEY_LENGTH)
        throw new RangeError(`clientSecretKey: at least ${MIN_CLIENT_SECRET_KEY_LENGTH} characters`);
      this.#key = Buffer.from(hkdfSync('sha256', key, 'seed-auth', 'client-secret-seal v1', 32));
      this.#keyId = createHash('sha256').update(this.#key).digest('base64url').slice(0, 8);
    }
  }

  /** Whether `client_secret_jwt` is available (a client-secret key is configured). */
  get sealingEnabled(): boolean {
    return this.#key !== undefined;
  }

  /**
   * The stored form of `secret` for a client that authenticates with `method`: sealed for
   * `client_secret_jwt`, a scrypt hash otherwise.
   * @throws RangeError when `method` is `client_secret_jwt` and no client-secret key is configured.
   */
  async store(
    clientId: string,
    secret: string,
    method: TokenEndpointAuthMethod | undefined,
  ): Promise<string> {
    if (method !== 'client_secret_jwt') return this.#hasher.hash(secret);
    const key = this.#requireKey();
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(clientId, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    const parts = [iv, ciphertext, cipher.getAuthTag()].map((b) => b.toString('base64url'));
    return `${SEALED_PREFIX}${this.#keyId}:${parts.join('.')}`;
  }

  /**
   * The secret of a sealed stored form (the HMAC key of a `client_secret_jwt` client).
   * @returns undefined when `stored` is not sealed, was sealed under another key or for another client, or
   * was altered (GCM tag mismatch).
   */
  open(clientId: string, stored: string): Buffer | undefined {
    if (!isSealedSecret(stored) || this.#key === undefined) return undefined;
    const [keyId, body] = stored.slice(SEALED_PREFIX.length).split(':');
    if (keyId !== this.#keyId || body === undefined) return undefined;
    const [iv, ciphertext, tag] = body.split('.').map((part) => Buffer.from(part, 'base64url'));
    if (!iv || !ciphertext || !tag || iv.length !== 12 || tag.length !== 16) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, iv);
      decipher.setAAD(Buffer.from(clientId, 'utf8'));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
    } catch {
      return undefined;
    }
  }

  /**
   * Whether `presented` is the client's secret, for either stored form (scrypt verification, or opening
   * the sealed form and comparing SHA-256 digests in constant time).
   */
  async verify(clientId: string, stored: string, presented: string): Promise<boolean> {
    if (!isSealedSecret(stored)) return this.#hasher.verify(presented, stored);
    const secret = this.open(clientId, stored);
    if (!secret) return false;
    const digest = (value: Buffer | string) => createHash('sha256').update(value).digest();
    return timingSafeEqual(digest(secret), digest(presented));
  }

  #requireKey(): Buffer {
    if (!this.#key)
      throw new RangeError(
        'client_secret_jwt needs the server client-secret key (AUTH_CLIENT_SECRET_KEY / oauth.clientSecretKey)',
      );
    return this.#key;
  }
}
