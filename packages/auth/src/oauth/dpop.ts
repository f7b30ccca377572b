/**
 * DPoP proofs (RFC 9449): verification of the `DPoP` header (§4.3), server nonces (§8, §9), the JWK
 * thumbprint that binds tokens (`cnf.jkt`, §6.1) and the access-token hash (`ath`, §4.2). Used by the
 * token endpoint (§5) and by the permission middleware's token verifier (§7).
 *
 * Replay protection (§11.1): every accepted proof's `jti` is claimed in a {@link ReplayCache}; with the
 * store-backed cache, two server instances sharing one store refuse each other's replays.
 */
import { createHash, createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { JWK, JWTPayload } from 'jose';
import {
  DPOP_SIGNING_ALGS,
  type DpopErrorCode,
  DpopProofError,
  type DpopProofExpectation,
  dpopChallenge,
} from '../dpop-proof.ts';

export { DPOP_SIGNING_ALGS, type DpopErrorCode, DpopProofError, type DpopProofExpectation, dpopChallenge };

import { cryptoPool } from './crypto-pool.ts';
import { ProofJwsRejected } from './dpop-jws.ts';

/**
 * One-time keys shared by every server instance (the store's `replay_cache` table). `claim` records `key`
 * under `kind` until `expiresAt` (ms epoch) and answers false when it is already recorded and unexpired.
 */
export interface ReplayCache {
  claim(kind: string, key: string, expiresAt: number): Promise<boolean>;
}

/** Longest `DPoP` header accepted, in characters (a proof with an RSA-4096 JWK is about 1.5 KiB). */
const MAX_PROOF_LENGTH = 8 * 1024;
/** Longest `jti` accepted, in characters. */
const MAX_JTI_LENGTH = 256;

/**
 * Server-provided DPoP nonces (RFC 9449 §8): stateless, `<step>.<HMAC-SHA256(secret, step)>` where `step`
 * counts `windowMs` periods. A nonce is accepted during its own period and the next one, so it lives
 * between one and two windows. Instances that share `secret` accept each other's nonces.
 */
export class DpopNonces {
  readonly #secret: Buffer;
  readonly #windowMs: number;
  readonly #now: () => number;

  /**
   * @param secret HMAC key (at least 16 bytes; a string is taken as UTF-8). Default: 32 random bytes
   * (then only this process accepts its nonces).
   * @param windowMs length of one nonce period, ms (default 5 minutes).
   * @throws RangeError when the secret is shorter than 16 bytes or the window is not a positive integer.
   */
  constructor(options: { secret?: string | Uint8Array; windowMs?: number; now?: () => number } = {}) {
    const secret =
      options.secret === undefined
        ? randomBytes(32)
        : Buffer.from(typeof options.secret === 'string' ? Buffer.from(options.secret) : options.secret);
    if (secret.length < 16) throw new RangeError('dpop nonce secret: at least 16 bytes');
    const windowMs = options.windowMs ?? 300_000;
    if (!Number.isSafeInteger(windowMs) || windowMs <= 0)
      throw new RangeError('dpop nonce windowMs: positive integer (ms)');
    this.#secret = secret;
    this.#windowMs = windowMs;
    this.#now = options.now ?? Date.now;
  }

  #mac(step: number): Buffer {
    return createHmac('sha256', this.#secret).update(`dpop-nonce:${step}`).digest();
  }

  /** The nonce of the current period. */
  current(): string {
    const step = Math.floor(this.#now() / this.#windowMs);
    return `${step.toString(36)}.${this.#mac(step).toString('base64url')}`;
  }

  /** True when `nonce` was issued in the current or the previous period (HMAC compared in constant time). */
  isValid(nonce: unknown): boolean {
    if (typeof nonce !== 'string' || nonce.length > 64) return false;
    const dot = nonce.indexOf('.');
    if (dot <= 0) return false;
    const step = Number.parseInt(nonce.slice(0, dot), 36);
    const current = Math.floor(this.#now() / this.#windowMs);
    if (!Number.isSafeInteger(step) || (step !== current && step !== current - 1)) return false;
    if (nonce.slice(0, dot) !== step.toString(36)) return false;
    const given = Buffer.from(nonce.slice(dot + 1), 'base64url');
    const expected = this.#mac(step);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

/** Options of {@link DpopProofVerifier}. */
export interface DpopProofVerifierOptions {
  /** Where proof `jti`s are recorded (share it between instances: the store). */
  readonly replay: ReplayCache;
  /** Server nonces; when set and `requireNonce` is true, proofs must carry a current nonce (§8). */
  readonly nonces?: DpopNonces;
  /** Require a server nonce in every proof (default false). */
  readonly requireNonce?: boolean;
  /** Accepted JWS algorithms (default {@link DPOP_SIGNING_ALGS}). */
  readonly algorithms?: readonly string[];
  /** Oldest accepted proof: `iat` at most this many seconds in the past (default 300). */
  readonly maxAgeSeconds?: number;
  /** Tolerated clock difference, seconds, for `iat` in the future and in the past (default 5). */
  readonly clockSkewSeconds?: number;
  /** Clock, ms epoch (default `Date.now`). */
  readonly now?: () => number;
}

/** An accepted proof. */
export interface DpopProof {
  /** JWK SHA-256 thumbprint of the proof's public key (RFC 7638), base64url: the `cnf.jkt` value. */
  readonly jkt: string;
  readonly jti: string;
  /** Seconds since the epoch. */
  readonly iat: number;
  /** The public key (the `jwk` header). */
  readonly jwk: JWK;
}

/** `ath`: base64url SHA-256 of an access token's ASCII characters (RFC 9449 §4.2). */
export function accessTokenHash(accessToken: string): string {
  return createHash('sha256').update(accessToken, 'ascii').digest('base64url');
}

/**
 * `htu` comparison form (RFC 9449 §4.3 check 9, RFC 3986 §6.2.2–6.2.3): scheme and host lower-cased,
 * default port dropped, empty path as `/`, no query or fragment. @returns undefined for a non-URL.
 */
export function normalizeHtu(url: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname || '/'}`;
  } catch {
    return undefined;
  }
}

/**
 * Verifies DPoP proofs (RFC 9449 §4.3): one header; a JWT with `typ: dpop+jwt`, an asymmetric `alg` and a
 * public `jwk` header whose key verifies the signature; `htm` and `htu` matching the request; `iat` within
 * the accepted window; `ath` matching the presented access token; the bound key (`cnf.jkt`) when one is
 * expected; the server nonce when required; and a `jti` never seen before (recorded in the replay cache
 * until the proof could no longer be accepted).
 */
export class DpopProofVerifier {
  readonly #replay: ReplayCache;
  readonly #nonces: DpopNonces | undefined;
  readonly #requireNonce: boolean;
  readonly #algorithms: string[];
  readonly #maxAge: number;
  readonly #skew: number;
  readonly #now: () => number;

  /** @throws RangeError when `requireNonce` is set without `nonces`, or a window is not a non-negative integer. */
  constructor(options: DpopProofVerifierOptions) {
    this.#replay = options.replay;
    this.#nonces = options.nonces;
    this.#requireNonce = options.requireNonce ?? false;
    if (this.#requireNonce && !this.#nonces) throw new RangeError('dpop requireNonce: needs nonces');
    this.#algorithms = [...(options.algorithms ?? DPOP_SIGNING_ALGS)];
    this.#maxAge = options.maxAgeSeconds ?? 300;
    this.#skew = options.clockSkewSeconds ?? 5;
    for (const [name, value] of [
      ['maxAgeSeconds', this.#maxAge],
      ['clockSkewSeconds', this.#skew],
    ] as const) {
      if (!Number.isSafeInteger(value) || value < 0)
        throw new RangeError(`dpop ${name}: non-negative integer (seconds)`);
    }
    this.#now = options.now ?? Date.now;
  }

  /** Accepted algorithms (`dpop_signing_alg_values_supported`). */
  get algorithms(): readonly string[] {
    return this.#algorithms;
  }

  /** The nonce clients should use next, when nonces are on. */
  currentNonce(): string | undefined {
    return this.#nonces?.current();
  }

  /**
   * Verifies one request's proof.
   * @throws DpopProofError `invalid_dpop_proof` naming the failed check, or `use_dpop_nonce` (with the
   * nonce to use) when a required nonce is missing or stale.
   */
  async verify(expected: DpopProofExpectation): Promise<DpopProof> {
    const proof = single(expected.proof);
    // The JWS part (checks 2-8: typ, alg, jwk, signature, iat window) runs in the crypto worker.
    let payload: JWTPayload;
    let jwk: JWK;
    let jkt: string;
    try {
      ({ payload, jwk, jkt } = await cryptoPool.checkDpopProof(proof, {
        algorithms: this.#algorithms,
        nowMs: this.#now(),
        maxAgeSeconds: this.#maxAge,
        clockSkewSeconds: this.#skew,
      }));
    } catch (error) {
      if (error instanceof ProofJwsRejected) throw invalid(error.message, error);
      throw error;
    }
    const { jti, htm, htu, iat } = payload as { jti: unknown; htm: unknown; htu: unknown; iat: number };
    if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH)
      throw invalid(`DPoP proof 'jti' must be a string of 1-${MAX_JTI_LENGTH} characters`);
    if (htm !== expected.method) throw invalid("DPoP proof 'htm' does not match the request method");
    const proofHtu = typeof htu === 'string' ? normalizeHtu(htu) : undefined;
    if (proofHtu === undefined || proofHtu !== normalizeHtu(expected.url))
      throw invalid("DPoP proof 'htu' does not match the request URL");
    if (expected.accessToken !== undefined) {
      if (typeof payload.ath !== 'string') throw invalid("DPoP proof lacks 'ath' (access token hash)");
      if (!safeEqual(payload.ath, accessTokenHash(expected.accessToken)))
        throw invalid("DPoP proof 'ath' does not match the access token");
    }
    if (expected.jkt !== undefined && !safeEqual(jkt, expected.jkt))
      throw invalid('DPoP proof key does not match the key the token is bound to');
    if (this.#nonces && (this.#requireNonce || payload.nonce !== undefined)) {
      if (!this.#nonces.isValid(payload.nonce)) {
        throw new DpopProofError(
          'use_dpop_nonce',
          payload.nonce === undefined ? 'a DPoP nonce is required' : 'the DPoP nonce is stale or invalid',
          this.#nonces.current(),
        );
      }
    }
    // Recorded last: a proof refused for another reason does not use up its jti. Kept until no clock could
    // accept the proof again (iat + max age + skew).
    const until = (iat + this.#maxAge + this.#skew) * 1000;
    const key = hash('sha256', `${jkt}\n${jti}`, 'base64url');
    if (!(await this.#replay.claim('dpop', key, until)))
      throw invalid("DPoP proof was already used ('jti' replay)");
    return { jkt, jti, iat, jwk };
  }
}

function single(proof: string | readonly string[] | undefined): string {
  if (proof === undefined || proof === '') throw invalid('DPoP proof missing');
  if (typeof proof !== 'string') {
    if (proof.length !== 1) throw invalid('exactly one DPoP header is allowed');
    return single(proof[0]);
  }
  if (proof.length > MAX_PROOF_LENGTH) throw invalid('DPoP proof too long');
  if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(proof))
    throw invalid('DPoP proof is not a compact JWS');
  return proof;
}

function invalid(message: string, cause?: unknown): DpopProofError {
  return new DpopProofError('invalid_dpop_proof', message, undefined, cause ? { cause } : undefined);
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
