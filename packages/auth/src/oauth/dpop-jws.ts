/**
 * The JWS part of DPoP proof verification (RFC 9449 §4.3 checks 2–8): a compact JWT with `typ: dpop+jwt`,
 * an accepted asymmetric `alg`, a public `jwk` header (no private members, `use` absent or `sig`, `alg`
 * absent or equal) whose key verifies the signature, the claims `iat`, `jti`, `htm`, `htu` present and
 * `iat` within the accepted window. Verification is `jose`'s `jwtVerify`. The request-specific checks
 * (`htm`, `htu`, `ath`, key binding, nonce, `jti` replay) stay with {@link DpopProofVerifier} (`dpop.ts`).
 *
 * Runs on the event loop or in the crypto worker (`crypto-worker.ts`, batched by `crypto-pool.ts`), so it
 * imports nothing but `jose` and reports refusals as {@link ProofJwsRejected} with a message only.
 */
import {
  type CryptoKey,
  calculateJwkThumbprint,
  decodeProtectedHeader,
  errors,
  importJWK,
  type JWK,
  type JWTPayload,
  jwtVerify,
} from 'jose';

/** Imported proof keys kept (clients reuse one key for many proofs). */
const KEY_CACHE_LIMIT = 1024;
/** Private-key members of a JWK: a `jwk` header holding one is refused (RFC 9449 §4.3 check 7). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k', 'priv'];

/** A refused proof signature or header; `message` names the failed check (sent as `error_description`). */
export class ProofJwsRejected extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ProofJwsRejected';
  }
}

/** The accepted window and algorithms of a check. */
export interface ProofJwsPolicy {
  /** Accepted JWS algorithms. */
  readonly algorithms: readonly string[];
  /** The verifier's clock at the request, ms since epoch. */
  readonly nowMs: number;
  /** Oldest accepted `iat`, seconds before `nowMs`. */
  readonly maxAgeSeconds: number;
  /** Tolerated clock difference, seconds. */
  readonly clockSkewSeconds: number;
}

/** A proof whose JWS part passed: its claims, its `jwk` header and that key's RFC 7638 thumbprint. */
export interface ProofJws {
  readonly payload: JWTPayload;
  readonly jwk: JWK;
  /** JWK SHA-256 thumbprint (RFC 7638) of `jwk`, base64url. */
  readonly jkt: string;
}

/** A proof key imported once: the public key and its RFC 7638 thumbprint. */
interface ProofKey {
  readonly key: CryptoKey;
  readonly jkt: string;
}

/** Checks the JWS part of DPoP proofs, with each `jwk` header imported once (import and thumbprint cost more than the check itself). */
export class ProofJwsChecker {
  /** Imported `jwk` headers by `alg` and JSON text. */
  readonly #keys = new Map<string, ProofKey>();

  /**
   * The public key of a proof's `jwk` header for `alg` (RFC 9449 §4.3 checks 5–7): a JSON object, `use`
   * absent or `sig`, `alg` absent or equal to the header's, no private members.
   * @throws ProofJwsRejected
   */
  async #proofKey(alg: string, jwk: unknown): Promise<ProofKey> {
    if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk))
      throw new ProofJwsRejected("DPoP proof 'jwk' header must be a JSON object");
    const cacheKey = `${alg}\n${JSON.stringify(jwk)}`;
    const cached = this.#keys.get(cacheKey);
    if (cached) return cached;
    const members = jwk as Record<string, unknown>;
    if (PRIVATE_MEMBERS.some((m) => m in members))
      throw new ProofJwsRejected("DPoP proof 'jwk' must be a public key");
    if (members.use !== undefined && members.use !== 'sig')
      throw new ProofJwsRejected("DPoP proof 'jwk' use must be 'sig'");
    if (members.alg !== undefined && members.alg !== alg)
      throw new ProofJwsRejected("DPoP proof 'jwk' alg differs from 'alg'");
    let key: CryptoKey;
    try {
      key = (await importJWK(members as JWK, alg)) as CryptoKey;
    } catch (error) {
      throw new ProofJwsRejected("DPoP proof 'jwk' is not a usable key for its 'alg'", { cause: error });
    }
    if (key.type !== 'public') throw new ProofJwsRejected("DPoP proof 'jwk' must be a public key");
    const entry = { key, jkt: await calculateJwkThumbprint(members as JWK, 'sha256') };
    if (this.#keys.size >= KEY_CACHE_LIMIT) this.#keys.delete(this.#keys.keys().next().value as string);
    this.#keys.set(cacheKey, entry);
    return entry;
  }

  /**
   * Checks a compact proof (already shape-checked: three base64url parts) under `policy`.
   * @throws ProofJwsRejected naming the failed check.
   */
  async check(proof: string, policy: ProofJwsPolicy): Promise<ProofJws> {
    try {
      const header = decodeProtectedHeader(proof);
      if (header.typ !== 'dpop+jwt') throw new ProofJwsRejected("DPoP proof 'typ' must be 'dpop+jwt'");
      if (typeof header.alg !== 'string' || !policy.algorithms.includes(header.alg))
        throw new ProofJwsRejected('DPoP proof rejected: signing algorithm not allowed');
      const proofKey = await this.#proofKey(header.alg, header.jwk);
      const result = await jwtVerify(proof, proofKey.key, {
        typ: 'dpop+jwt',
        algorithms: [...policy.algorithms],
        currentDate: new Date(policy.nowMs),
        maxTokenAge: policy.maxAgeSeconds,
        clockTolerance: policy.clockSkewSeconds,
        requiredClaims: ['iat', 'jti', 'htm', 'htu'],
      });
      return { payload: result.payload, jwk: result.protectedHeader.jwk as JWK, jkt: proofKey.jkt };
    } catch (error) {
      if (error instanceof ProofJwsRejected) throw error;
      const detail =
        error instanceof errors.JWTExpired
          ? "'iat' is too old"
          : error instanceof errors.JWTClaimValidationFailed
            ? `claim '${error.claim}' ${error.reason === 'check_failed' ? "failed its check ('iat' in the future?)" : error.reason}`
            : error instanceof errors.JOSEAlgNotAllowed
              ? 'signing algorithm not allowed'
              : error instanceof errors.JWSSignatureVerificationFailed
                ? 'signature does not verify with the embedded jwk'
                : 'malformed JWS or jwk header';
      throw new ProofJwsRejected(`DPoP proof rejected: ${detail}`, { cause: error });
    }
  }
}
