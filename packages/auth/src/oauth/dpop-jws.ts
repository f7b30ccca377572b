/**
 * The JWS part of DPoP proof verification (RFC 9449 §4.3 checks 2–8): a compact JWT with `typ: dpop+jwt`,
 * an accepted asymmetric `alg`, a public `jwk` header (no private members, `use` absent or `sig`, `alg`
 * absent or equal) whose key verifies the signature, the claims `iat`, `jti`, `htm`, `htu` present and
 * `iat` within the accepted window (`exp` and `nbf` too when present, as `jose`'s `jwtVerify` checks them).
 * `jose` parses the header and the claims and verifies every algorithm but ES256; an ES256 signature is
 * checked by `node:crypto` `verify()` on libuv's thread pool with the `jwk` imported once as a `KeyObject`
 * and the signature converted to DER (RFC 7518 §3.4): about a third of the event-loop CPU of WebCrypto's
 * `subtle.verify`, which `jwtVerify` uses (measured on Node 24 with 16 checks in flight: 4–11 vs 16–19 µs).
 * The request-specific checks (`htm`, `htu`, `ath`, key binding, nonce, `jti` replay) stay with
 * {@link DpopProofVerifier} (`dpop.ts`).
 *
 * Runs on the event loop or in the crypto worker (`crypto-worker.ts`, batched by `crypto-pool.ts`), so it
 * imports nothing but `jose` and `node:crypto` and reports refusals as {@link ProofJwsRejected} with a
 * message only.
 */
import { createPublicKey, type KeyObject, verify } from 'node:crypto';
import {
  type CryptoKey,
  calculateJwkThumbprint,
  compactVerify,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  importJWK,
  type JWK,
  type JWTPayload,
} from 'jose';
import { p1363ToDer } from './jws-sign.ts';

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

/** A proof key imported once: the public key (a `KeyObject` for ES256) and its RFC 7638 thumbprint. */
interface ProofKey {
  readonly key: CryptoKey | KeyObject;
  readonly jkt: string;
}

/** Claims every proof must carry (RFC 9449 §4.2). */
const REQUIRED_CLAIMS = ['iat', 'jti', 'htm', 'htu'] as const;

/** `node:crypto` `verify()` on libuv's thread pool. @returns whether the signature verifies. */
function verifyOnThreadPool(data: Buffer, key: KeyObject, signature: Buffer): Promise<boolean> {
  return new Promise((resolve, reject) =>
    verify('sha256', data, key, signature, (error, valid) => (error ? reject(error) : resolve(valid))),
  );
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
    let key: CryptoKey | KeyObject;
    try {
      key = (await importJWK(members as JWK, alg)) as CryptoKey;
      if (alg === 'ES256' && key.type === 'public')
        key = createPublicKey({ key: members as JsonWebKeyInput['key'], format: 'jwk' });
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
      if (header.crit !== undefined)
        throw new ProofJwsRejected("DPoP proof rejected: no 'crit' header extension is supported");
      const proofKey = await this.#proofKey(header.alg, header.jwk);
      const signatureValid =
        header.alg === 'ES256'
          ? await verifyES256(proof, proofKey.key as KeyObject)
          : await compactVerify(proof, proofKey.key as CryptoKey, { algorithms: [header.alg] }).then(
              () => true,
            );
      if (!signatureValid)
        throw new ProofJwsRejected('DPoP proof rejected: signature does not verify with the embedded jwk');
      const payload = decodeJwt(proof);
      checkClaims(payload, policy);
      return { payload, jwk: header.jwk as JWK, jkt: proofKey.jkt };
    } catch (error) {
      if (error instanceof ProofJwsRejected) throw error;
      const detail =
        error instanceof errors.JOSEAlgNotAllowed
          ? 'signing algorithm not allowed'
          : error instanceof errors.JWSSignatureVerificationFailed
            ? 'signature does not verify with the embedded jwk'
            : 'malformed JWS or jwk header';
      throw new ProofJwsRejected(`DPoP proof rejected: ${detail}`, { cause: error });
    }
  }
}

type JsonWebKeyInput = Extract<Parameters<typeof createPublicKey>[0], { format: 'jwk' }>;

/** Checks an ES256 compact JWS (RFC 7515 §5.2, RFC 7518 §3.4): the 64-byte R‖S signature over `header.payload`. */
function verifyES256(proof: string, key: KeyObject): Promise<boolean> {
  const dot = proof.lastIndexOf('.');
  const signature = Buffer.from(proof.slice(dot + 1), 'base64url');
  if (signature.length !== 64) return Promise.resolve(false);
  return verifyOnThreadPool(Buffer.from(proof.slice(0, dot), 'latin1'), key, p1363ToDer(signature));
}

/**
 * The time and presence checks of a proof's claims (RFC 9449 §4.3 checks 4 and 11, with the rules of
 * `jose`'s `jwtVerify` for `iat`, `exp` and `nbf`): the {@link REQUIRED_CLAIMS} present, `iat` a number
 * no older than `maxAgeSeconds` and not in the future beyond `clockSkewSeconds`; `exp` (when present) not
 * passed and `nbf` (when present) reached, within the same tolerance.
 * @throws ProofJwsRejected naming the failed check.
 */
function checkClaims(payload: JWTPayload, policy: ProofJwsPolicy): void {
  for (const claim of REQUIRED_CLAIMS) {
    if (payload[claim] === undefined)
      throw new ProofJwsRejected(`DPoP proof rejected: claim '${claim}' missing`);
  }
  const now = Math.floor(policy.nowMs / 1000);
  const skew = policy.clockSkewSeconds;
  const { iat, exp, nbf } = payload;
  if (typeof iat !== 'number' || !Number.isFinite(iat))
    throw new ProofJwsRejected("DPoP proof rejected: claim 'iat' invalid");
  if (iat > now + skew)
    throw new ProofJwsRejected("DPoP proof rejected: claim 'iat' failed its check ('iat' in the future?)");
  if (now - iat - skew > policy.maxAgeSeconds)
    throw new ProofJwsRejected("DPoP proof rejected: 'iat' is too old");
  if (exp !== undefined && (typeof exp !== 'number' || exp <= now - skew))
    throw new ProofJwsRejected("DPoP proof rejected: claim 'exp' invalid or passed");
  if (nbf !== undefined && (typeof nbf !== 'number' || nbf > now + skew))
    throw new ProofJwsRejected("DPoP proof rejected: claim 'nbf' invalid or not yet reached");
}
