/**
 * Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3.1,
 * spec 001: "A client must exist, be enabled, and present a matching secret; otherwise invalid_client").
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { PasswordHasher } from '../passwords.ts';
import type { AuthStore, ClientRecord } from '../store/types.ts';
import { OAuthError } from './errors.ts';
import { type FormParams, parseBasicAuth } from './form.ts';

/** How a client authenticated (RFC 8414 `token_endpoint_auth_methods_supported` values). */
export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'none';

/** An authenticated client. */
export interface AuthenticatedClient {
  readonly client: ClientRecord;
  readonly method: ClientAuthMethod;
}

/** Secrets verified recently, kept as SHA-256 digests keyed by client id and bound to the stored hash. */
interface VerifiedSecret {
  readonly secretHash: string;
  readonly digest: Buffer;
}

/** Entries kept in the verified-secret cache. */
const CACHE_LIMIT = 1024;

const sha256 = (value: string) => createHash('sha256').update(value).digest();

/**
 * Authenticates clients. Client secrets are stored as scrypt hashes; verifying one costs ~100 ms, so a
 * secret verified once is remembered as its SHA-256 digest (never the secret) together with the stored
 * hash it matched: a later request with the same secret compares digests in constant time, and any change
 * of the stored secret invalidates the entry.
 */
export class ClientAuthenticator {
  readonly #store: AuthStore;
  readonly #hasher: PasswordHasher;
  readonly #verified = new Map<string, VerifiedSecret>();

  constructor(store: AuthStore, hasher: PasswordHasher) {
    this.#store = store;
    this.#hasher = hasher;
  }

  /**
   * Identifies and authenticates the client of a request: HTTP Basic or form `client_id` +
   * `client_secret`; a public client sends only `client_id`.
   * @throws OAuthError `invalid_request` for a malformed Basic header or two authentication methods at
   * once (RFC 6749 §2.3); `invalid_client` when no client is identified, it is missing or disabled, or the
   * secret is missing or wrong (confidential) or present (public).
   */
  async authenticate(req: FastifyRequest, form: FormParams): Promise<AuthenticatedClient> {
    const basic = parseBasicAuth(req.headers.authorization);
    const formId = form.get('client_id');
    const formSecret = form.get('client_secret');
    let clientId: string | undefined;
    let secret: string | undefined;
    let method: ClientAuthMethod;
    if (basic) {
      if (formSecret !== undefined) {
        throw new OAuthError(
          'invalid_request',
          'use one client authentication method, not Basic and client_secret',
        );
      }
      if (formId !== undefined && formId !== basic.clientId) {
        throw new OAuthError('invalid_request', 'client_id does not match the Basic authorization header');
      }
      clientId = basic.clientId;
      secret = basic.clientSecret;
      method = 'client_secret_basic';
    } else {
      clientId = formId;
      secret = formSecret;
      method = secret === undefined ? 'none' : 'client_secret_post';
    }
    if (clientId === undefined) throw new OAuthError('invalid_client', 'client authentication required');
    const client = await this.#store.getClient(clientId);
    if (!client?.isEnabled) throw new OAuthError('invalid_client', 'client authentication failed');
    if (client.clientType === 'public') {
      if (method !== 'none') throw new OAuthError('invalid_client', 'client authentication failed');
      return { client, method };
    }
    if (method === 'none' || secret === undefined || client.secretHash === null) {
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    if (!(await this.#verifySecret(client.clientId, client.secretHash, secret))) {
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    return { client, method };
  }

  async #verifySecret(clientId: string, secretHash: string, secret: string): Promise<boolean> {
    const digest = sha256(secret);
    const cached = this.#verified.get(clientId);
    if (cached && cached.secretHash === secretHash) {
      if (timingSafeEqual(cached.digest, digest)) return true;
    }
    if (!(await this.#hasher.verify(secret, secretHash))) return false;
    if (this.#verified.size >= CACHE_LIMIT)
      this.#verified.delete(this.#verified.keys().next().value as string);
    this.#verified.set(clientId, { secretHash, digest });
    return true;
  }
}
