/**
 * JWT client authentication (RFC 7523 §2.2 and §3, OpenID Connect Core §9): `private_key_jwt` (the client
 * signs with its private key; the server verifies with the client's `jwks` or `jwks_uri`) and
 * `client_secret_jwt` (the client signs with HMAC keyed by its client secret, HS256/HS384/HS512; the server
 * opens the client's sealed secret, see `client-secrets.ts`). The assertion's
 * `jti` is recorded in the store's replay cache until the assertion expires, so a replay is refused by every
 * server instance sharing the store.
 */
import { createHash } from 'node:crypto';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  errors,
  type JSONWebKeySet,
  type JWTPayload,
  type JWTVerifyGetKey,
  jwtVerify,
} from 'jose';
import { ASYMMETRIC_JWS_ALGS } from '../jws-algs.ts';
import type { ClientRecord } from '../store/types.ts';
import type { ReplayCache } from './dpop.ts';
import { OAuthError } from './errors.ts';

/** `client_assertion_type` of JWT client authentication (RFC 7523 §2.2). */
export const JWT_BEARER_ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** Signing algorithms accepted for `private_key_jwt` assertions (asymmetric only). */
export const CLIENT_ASSERTION_SIGNING_ALGS = ASYMMETRIC_JWS_ALGS;

/** HMAC algorithms accepted for `client_secret_jwt` assertions (RFC 7518 §3.2). */
export const CLIENT_SECRET_JWT_ALGS = ['HS256', 'HS384', 'HS512'] as const;

/** Longest accepted assertion, characters. */
const MAX_ASSERTION_LENGTH = 16 * 1024;

/** Options of {@link ClientAssertionVerifier}. */
export interface ClientAssertionVerifierOptions {
  /** Where assertion `jti`s are recorded (the store: shared by every instance). */
  readonly replay: ReplayCache;
  /**
   * The accepted audiences (RFC 7523 §3 item 3): the issuer identifier and the URLs of the endpoints that
   * authenticate clients. A function, because the issuer may be fixed after the server starts listening.
   */
  readonly audiences: () => readonly string[];
  /** Longest accepted assertion lifetime (`exp` − now), seconds. Default 600. */
  readonly maxLifetimeSeconds?: number;
  /** Clock tolerance for `exp`, `nbf` and `iat`, seconds. Default 5. */
  readonly clockSkewSeconds?: number;
  /** Timeout of a `jwks_uri` fetch, ms. Default 5000. */
  readonly jwksTimeoutMs?: number;
  /** Clock, ms epoch. Default `Date.now`. */
  readonly now?: () => number;
}

/** A verified client assertion. */
export interface VerifiedAssertion {
  readonly method: 'private_key_jwt' | 'client_secret_jwt';
  readonly jti: string;
}

/**
 * The client id an assertion names (`iss`, RFC 7523 §3 item 1), read without verifying it, to find the
 * client. @returns undefined when the assertion is not a JWT with a string `iss`.
 */
export function assertionClientId(assertion: string): string | undefined {
  try {
    const { iss, sub } = decodeJwt(assertion);
    return typeof iss === 'string' && iss.length > 0 ? iss : typeof sub === 'string' ? sub : undefined;
  } catch {
    return undefined;
  }
}

/** Verifies `private_key_jwt` and `client_secret_jwt` client assertions (RFC 7523 §3, OIDC Core §9). */
export class ClientAssertionVerifier {
  readonly #options: ClientAssertionVerifierOptions;
  readonly #now: () => number;
  /** Remote key sets by `jwks_uri` (jose caches and refreshes the keys, with a cooldown). */
  readonly #remote = new Map<string, JWTVerifyGetKey>();

  constructor(options: ClientAssertionVerifierOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  #keys(client: ClientRecord): JWTVerifyGetKey {
    const { jwks, jwksUri } = client.metadata;
    if (jwks) return createLocalJWKSet(jwks as unknown as JSONWebKeySet);
    if (!jwksUri)
      throw new OAuthError('invalid_client', 'client has no jwks or jwks_uri for private_key_jwt');
    let remote = this.#remote.get(jwksUri);
    if (!remote) {
      if (this.#remote.size >= 1024) this.#remote.clear();
      remote = createRemoteJWKSet(new URL(jwksUri), {
        timeoutDuration: this.#options.jwksTimeoutMs ?? 5000,
        cooldownDuration: 30_000,
        cacheMaxAge: 600_000,
      });
      this.#remote.set(jwksUri, remote);
    }
    return remote;
  }

  /**
   * Verifies `assertion` for `client` (RFC 7523 §3): signature by one of the client's keys with an
   * asymmetric algorithm (`private_key_jwt`) or, when `secret` is given, by HMAC with that client secret
   * (`client_secret_jwt`, {@link CLIENT_SECRET_JWT_ALGS}); `iss` and `sub` equal to the client id; `aud`
   * naming the issuer or an endpoint; `exp` present, in the future and at most `maxLifetimeSeconds` ahead;
   * `nbf`/`iat` not in the future; `jti` present and never seen before.
   * @throws OAuthError `invalid_client` for every failure (the description names the check).
   */
  async verify(client: ClientRecord, assertion: string, secret?: Uint8Array): Promise<VerifiedAssertion> {
    if (assertion.length > MAX_ASSERTION_LENGTH)
      throw new OAuthError('invalid_client', 'client_assertion is too long');
    const skew = this.#options.clockSkewSeconds ?? 5;
    let payload: JWTPayload;
    try {
      const options = {
        algorithms: secret ? [...CLIENT_SECRET_JWT_ALGS] : [...CLIENT_ASSERTION_SIGNING_ALGS],
        issuer: client.clientId,
        subject: client.clientId,
        audience: [...this.#options.audiences()],
        requiredClaims: ['exp', 'jti'],
        clockTolerance: skew,
        currentDate: new Date(this.#now()),
      };
      ({ payload } = secret
        ? await jwtVerify(assertion, secret, options)
        : await jwtVerify(assertion, this.#keys(client), options));
    } catch (error) {
      if (error instanceof OAuthError) throw error;
      const detail =
        error instanceof errors.JWTExpired
          ? 'expired'
          : error instanceof errors.JWTClaimValidationFailed
            ? `claim '${error.claim}' is invalid`
            : error instanceof errors.JOSEAlgNotAllowed
              ? 'signing algorithm not allowed'
              : error instanceof errors.JWKSNoMatchingKey ||
                  error instanceof errors.JWSSignatureVerificationFailed
                ? secret
                  ? 'the client secret does not verify the signature'
                  : 'no key of the client verifies the signature'
                : error instanceof errors.JWKSTimeout
                  ? "the client's jwks_uri did not answer in time"
                  : 'malformed assertion';
      throw new OAuthError('invalid_client', `client_assertion rejected: ${detail}`);
    }
    const now = Math.floor(this.#now() / 1000);
    const exp = payload.exp as number;
    if (exp - now > (this.#options.maxLifetimeSeconds ?? 600))
      throw new OAuthError('invalid_client', "client_assertion 'exp' is too far in the future");
    const jti = payload.jti as string;
    if (typeof jti !== 'string' || jti.length === 0 || jti.length > 256)
      throw new OAuthError('invalid_client', "client_assertion 'jti' must be a string of 1-256 characters");
    const key = createHash('sha256').update(`${client.clientId}\n${jti}`).digest('base64url');
    if (!(await this.#options.replay.claim('client_assertion', key, (exp + skew) * 1000)))
      throw new OAuthError('invalid_client', "client_assertion was already used ('jti' replay)");
    return { method: secret ? 'client_secret_jwt' : 'private_key_jwt', jti };
  }
}
