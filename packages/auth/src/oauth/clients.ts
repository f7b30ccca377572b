/**
 * Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3.1,
 * spec 001: "A client must exist, be enabled, and present a matching secret; otherwise invalid_client"),
 * and by JWT assertion (`private_key_jwt` and `client_secret_jwt`, RFC 7523 §2.2, OpenID Connect Core §9,
 * see `client-auth-jwt.ts` and `client-secrets.ts`).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { PasswordHasher } from '../passwords.ts';
import type { AuthStore, ClientRecord } from '../store/types.ts';
import {
  assertionClientId,
  type ClientAssertionVerifier,
  JWT_BEARER_ASSERTION_TYPE,
} from './client-auth-jwt.ts';
import { ClientSecrets } from './client-secrets.ts';
import { OAuthError } from './errors.ts';
import { type FormParams, parseBasicAuth } from './form.ts';

/** How a client authenticated (RFC 8414 `token_endpoint_auth_methods_supported` values). */
export type ClientAuthMethod =
  | 'client_secret_basic'
  | 'client_secret_post'
  | 'client_secret_jwt'
  | 'private_key_jwt'
  | 'none';

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
  readonly #secrets: ClientSecrets;
  readonly #verified = new Map<string, VerifiedSecret>();
  readonly #assertions: ClientAssertionVerifier | undefined;

  /**
   * @param assertions verifier of client assertions; without it they are refused.
   * @param secrets the stored forms of client secrets; default: hashes only (no `client_secret_jwt`).
   */
  constructor(
    store: AuthStore,
    hasher: PasswordHasher,
    assertions?: ClientAssertionVerifier,
    secrets?: ClientSecrets,
  ) {
    this.#store = store;
    this.#secrets = secrets ?? new ClientSecrets(hasher, undefined);
    this.#assertions = assertions;
  }

  /**
   * Identifies and authenticates the client of a request: HTTP Basic or form `client_id` +
   * `client_secret`; `client_assertion_type` + `client_assertion` (`private_key_jwt`, `client_secret_jwt`:
   * the method the client is registered for); a public client sends
   * only `client_id`. A client whose metadata names a `tokenEndpointAuthMethod` must use that method.
   * @throws OAuthError `invalid_request` for a malformed Basic header, two authentication methods at once
   * (RFC 6749 §2.3) or an assertion without its type; `invalid_client` when no client is identified, it is
   * missing or disabled, the secret is missing or wrong (confidential) or present (public), the method is
   * not the registered one, or the assertion is refused (RFC 7523 §3).
   */
  async authenticate(req: FastifyRequest, form: FormParams): Promise<AuthenticatedClient> {
    const basic = parseBasicAuth(req.headers.authorization);
    const formId = form.get('client_id');
    const formSecret = form.get('client_secret');
    const assertionType = form.get('client_assertion_type');
    const assertion = form.get('client_assertion');
    if (assertionType !== undefined || assertion !== undefined) {
      if (basic || formSecret !== undefined) {
        throw new OAuthError(
          'invalid_request',
          'use one client authentication method, not a secret and an assertion',
        );
      }
      return this.#authenticateAssertion(formId, assertionType, assertion);
    }
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
    const registered = client.metadata.tokenEndpointAuthMethod;
    if (registered !== undefined && registered !== method) {
      throw new OAuthError('invalid_client', `client must authenticate with ${registered}`);
    }
    if (method === 'none' || secret === undefined || client.secretHash === null) {
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    if (!(await this.#verifySecret(client.clientId, client.secretHash, secret))) {
      throw new OAuthError('invalid_client', 'client authentication failed');
    }
    return { client, method };
  }

  /** RFC 7523 §2.2: `client_assertion_type` must be the JWT bearer type; the assertion names the client. */
  async #authenticateAssertion(
    formId: string | undefined,
    assertionType: string | undefined,
    assertion: string | undefined,
  ): Promise<AuthenticatedClient> {
    if (assertionType === undefined)
      throw new OAuthError('invalid_request', 'client_assertion_type is required');
    if (assertion === undefined) throw new OAuthError('invalid_request', 'client_assertion is required');
    if (assertionType !== JWT_BEARER_ASSERTION_TYPE) {
      throw new OAuthError(
        'invalid_client',
        `client_assertion_type '${assertionType.slice(0, 80)}' is not supported`,
      );
    }
    if (!this.#assertions) throw new OAuthError('invalid_client', 'JWT client authentication is not enabled');
    const clientId = formId ?? assertionClientId(assertion);
    if (clientId === undefined) throw new OAuthError('invalid_client', 'client_assertion names no client');
    const client = await this.#store.getClient(clientId);
    if (!client?.isEnabled || client.clientType !== 'confidential')
      throw new OAuthError('invalid_client', 'client authentication failed');
    const registered = client.metadata.tokenEndpointAuthMethod;
    if (registered === 'client_secret_jwt') {
      const secret = client.secretHash === null ? undefined : this.#secrets.open(clientId, client.secretHash);
      if (!secret) {
        throw new OAuthError(
          'invalid_client',
          'client_secret_jwt: the client has no sealed secret (rotate its secret) or the server has no client-secret key',
        );
      }
      const verified = await this.#assertions.verify(client, assertion, secret);
      return { client, method: verified.method };
    }
    if (registered !== 'private_key_jwt') {
      throw new OAuthError('invalid_client', 'client is not registered for JWT client authentication');
    }
    await this.#assertions.verify(client, assertion);
    return { client, method: 'private_key_jwt' };
  }

  async #verifySecret(clientId: string, secretHash: string, secret: string): Promise<boolean> {
    const digest = sha256(secret);
    const cached = this.#verified.get(clientId);
    if (cached && cached.secretHash === secretHash) {
      if (timingSafeEqual(cached.digest, digest)) return true;
    }
    if (!(await this.#secrets.verify(clientId, secretHash, secret))) return false;
    if (this.#verified.size >= CACHE_LIMIT)
      this.#verified.delete(this.#verified.keys().next().value as string);
    this.#verified.set(clientId, { secretHash, digest });
    return true;
  }
}
