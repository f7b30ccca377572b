/**
 * Bearer-token verification for the permission middleware (spec 001 "Middleware": signature, expiry; the subject
 * checks — enabled, not locked, security stamp unchanged — are done by `AuthorizationService` against the
 * store). The OAuth server plugs its keys into {@link JwtTokenVerifier}, or supplies its own
 * {@link TokenVerifier}.
 */
import {
  type CryptoKey,
  createLocalJWKSet,
  errors,
  type JSONWebKeySet,
  type JWTVerifyGetKey,
  jwtVerify,
  type KeyObject,
} from 'jose';
import type { DpopProofChecker } from './dpop-proof.ts';
import { InvalidTokenError } from './errors.ts';

/** Claim carrying the user's security stamp in access tokens (same name as the token service uses). */
export const SECURITY_STAMP_CLAIM = 'sst';

/**
 * A verified token. `kind` is `user` when the token carries a security stamp ({@link SECURITY_STAMP_CLAIM}),
 * `client` when it has none and `sub` equals `client_id` (client credentials, RFC 9068 §2.2).
 */
export interface VerifiedToken {
  readonly kind: 'user' | 'client';
  /** The `sub` claim: user id or client id. */
  readonly subject: string;
  /** The `sst` claim for user tokens, null for client tokens. */
  readonly securityStamp: string | null;
  /** The `client_id` claim, if present. */
  readonly clientId: string | null;
  /** The `scope` claim split on spaces. */
  readonly scopes: readonly string[];
  /** `iat` in seconds since the epoch, if present. */
  readonly issuedAt: number | null;
  /** `exp` in seconds since the epoch. */
  readonly expiresAt: number;
  readonly claims: Readonly<Record<string, unknown>>;
  /** `cnf.jkt` of a DPoP-bound token (RFC 9449 §6.1), whose proof was verified; absent for bearer tokens. */
  readonly jkt?: string;
}

/**
 * How a token was presented (RFC 9449 §7): the `Authorization` scheme, the `DPoP` header(s), and the
 * request's method and absolute URL (the proof's `htm` and `htu`).
 */
export interface TokenPresentation {
  readonly scheme: 'Bearer' | 'DPoP';
  readonly proof?: string | readonly string[];
  readonly method: string;
  /** Absolute URL (`https://host/path?query`); query and fragment are ignored for `htu`. */
  readonly url: string;
}

/** Verifies an access token string. */
export interface TokenVerifier {
  /**
   * @param presentation how the token came (default: a `Bearer` token without proof).
   * @throws InvalidTokenError when the token is malformed, badly signed, expired or lacks required claims;
   * `DpopProofError` (a subclass) when the DPoP proof is refused.
   */
  verify(token: string, presentation?: TokenPresentation): Promise<VerifiedToken>;
}

/** The verification key(s) of {@link JwtTokenVerifier}. */
export type JwtVerificationKey = JWTVerifyGetKey | JSONWebKeySet | KeyObject | Uint8Array | CryptoKey;

/** Options of {@link JwtTokenVerifier}. */
export interface JwtTokenVerifierOptions {
  /**
   * The key: a JWKS object (`{ keys: [...] }`, public keys), a jose key-getter function (e.g.
   * `createLocalJWKSet(...)` or one reading the current keys of the token service), or a single key.
   */
  key: JwtVerificationKey;
  /** Required `iss`. */
  issuer?: string;
  /** Required `aud` (one of). */
  audience?: string | string[];
  /** Allowed JWS algorithms (default: asymmetric `ES256`, `ES384`, `EdDSA`, `RS256`, `PS256`). */
  algorithms?: string[];
  /** Required `typ` header, e.g. `at+jwt` (RFC 9068 §2.1). Default: not checked. */
  typ?: string;
  /** Clock skew tolerated on `exp`/`nbf`, seconds (default 0). */
  clockToleranceSec?: number;
  /** Clock, ms epoch (default `Date.now`). */
  now?: () => number;
  /**
   * DPoP proof verification (RFC 9449 §7). Without it, DPoP-bound tokens (`cnf.jkt`) and the `DPoP`
   * scheme are refused.
   */
  dpop?: DpopProofChecker;
}

const DEFAULT_ALGORITHMS = ['ES256', 'ES384', 'EdDSA', 'Ed25519', 'RS256', 'PS256'];
const MAX_TOKEN_LENGTH = 16 * 1024;

/**
 * Verifies JWT access tokens with `jose` (RFC 7519 §7.2, RFC 9068 §4): signature, `exp` (required), `nbf`,
 * `iss`, `aud`, `sub`; for DPoP-bound tokens (`cnf.jkt`) the `DPoP` scheme and a valid proof of the bound
 * key (RFC 9449 §7.1; a bound token sent as `Bearer` is refused, §7.2).
 */
export class JwtTokenVerifier implements TokenVerifier {
  readonly #key: JWTVerifyGetKey | KeyObject | Uint8Array | CryptoKey;
  readonly #options: JwtTokenVerifierOptions;
  readonly #now: () => number;

  /** @param options key(s), expected issuer/audience/typ, algorithms, clock. */
  constructor(options: JwtTokenVerifierOptions) {
    const key = options.key;
    this.#key =
      key && typeof key === 'object' && 'keys' in key && Array.isArray((key as JSONWebKeySet).keys)
        ? createLocalJWKSet(key as JSONWebKeySet)
        : (key as JWTVerifyGetKey | KeyObject | Uint8Array | CryptoKey);
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /**
   * Verifies signature, `exp` (required), `nbf`, `iss`, `aud`, `typ`, the DPoP binding, then classifies the
   * subject.
   * @throws InvalidTokenError (malformed, bad signature, expired, wrong issuer/audience, user token without
   * `sst`, DPoP-bound token sent as `Bearer`, `DPoP` scheme for an unbound token); `DpopProofError` for a
   * refused proof (`invalid_dpop_proof`, `use_dpop_nonce`).
   */
  async verify(token: string, presentation?: TokenPresentation): Promise<VerifiedToken> {
    if (typeof token !== 'string' || token.length === 0 || token.length > MAX_TOKEN_LENGTH) {
      throw new InvalidTokenError('token missing or too long');
    }
    let payload: Record<string, unknown>;
    try {
      const result = await jwtVerify(token, this.#key as JWTVerifyGetKey, {
        issuer: this.#options.issuer,
        audience: this.#options.audience,
        algorithms: this.#options.algorithms ?? DEFAULT_ALGORITHMS,
        typ: this.#options.typ,
        clockTolerance: this.#options.clockToleranceSec ?? 0,
        currentDate: new Date(this.#now()),
        requiredClaims: ['exp', 'sub'],
      });
      payload = result.payload as Record<string, unknown>;
    } catch (error) {
      const message =
        error instanceof errors.JWTExpired
          ? 'token expired'
          : error instanceof errors.JOSEError
            ? `token rejected (${error.code})`
            : 'token rejected';
      throw new InvalidTokenError(message, { cause: error });
    }
    const jkt = await this.#checkBinding(token, payload, presentation);
    const sub = payload.sub;
    if (typeof sub !== 'string' || sub.length === 0) throw new InvalidTokenError('token has no subject');
    const stamp = payload[SECURITY_STAMP_CLAIM];
    const clientId = typeof payload.client_id === 'string' ? payload.client_id : null;
    let kind: 'user' | 'client';
    if (typeof stamp === 'string' && stamp.length > 0) kind = 'user';
    else if (stamp === undefined && clientId === sub) kind = 'client';
    else throw new InvalidTokenError('user token without security stamp');
    return {
      kind,
      subject: sub,
      securityStamp: kind === 'user' ? (stamp as string) : null,
      clientId,
      scopes: typeof payload.scope === 'string' ? payload.scope.split(' ').filter(Boolean) : [],
      issuedAt: typeof payload.iat === 'number' ? payload.iat : null,
      expiresAt: payload.exp as number,
      claims: payload,
      ...(jkt === undefined ? {} : { jkt }),
    };
  }

  /** RFC 9449 §7: the proof of a DPoP-bound token; @returns its `cnf.jkt`, undefined for bearer tokens. */
  async #checkBinding(
    token: string,
    payload: Record<string, unknown>,
    presentation: TokenPresentation | undefined,
  ): Promise<string | undefined> {
    const cnf = payload.cnf;
    const jkt = typeof cnf === 'object' && cnf !== null ? (cnf as { jkt?: unknown }).jkt : undefined;
    if (jkt !== undefined && typeof jkt !== 'string')
      throw new InvalidTokenError('token cnf.jkt is malformed');
    if (presentation?.scheme !== 'DPoP') {
      if (jkt !== undefined) throw new InvalidTokenError('DPoP-bound token presented as a Bearer token');
      return undefined;
    }
    if (jkt === undefined) throw new InvalidTokenError('token is not DPoP-bound (use the Bearer scheme)');
    if (!this.#options.dpop) throw new InvalidTokenError('DPoP is not supported here');
    await this.#options.dpop.verify({
      proof: presentation.proof,
      method: presentation.method,
      url: presentation.url,
      accessToken: token,
      jkt,
    });
    return jkt;
  }
}
