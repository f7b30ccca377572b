/**
 * Signing keys for JWT access tokens (RFC 9068 §2.1, RFC 7517 JWK) with rotation: one active key signs;
 * keys it replaced stay published in the JWKS until every token they signed has expired, then they are
 * dropped. Keys are generated and used with `jose`; private keys are persisted as JWK JSON through
 * the auth store (`insertSigningKey`, `listSigningKeys`, `retireSigningKey`).
 */
import { randomUUID } from 'node:crypto';
import {
  type CryptoKey,
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
  type JWTVerifyGetKey,
} from 'jose';
import type { AuthStore } from '../store/types.ts';

/** JWS algorithms supported for access tokens. RFC 9068 §2.1 requires RS256 among them. */
export const SUPPORTED_SIGNING_ALGS = ['RS256', 'PS256', 'ES256', 'EdDSA'] as const;
/** One of {@link SUPPORTED_SIGNING_ALGS}. */
export type SigningAlg = (typeof SUPPORTED_SIGNING_ALGS)[number];

/** Rotation settings. */
export interface KeyManagerOptions {
  /** Algorithm of newly generated keys. Default `RS256` (RFC 9068 §2.1). */
  readonly alg?: SigningAlg;
  /** Age after which the active key is replaced, ms. Default 30 days. */
  readonly rotationIntervalMs?: number;
  /** How long a retired key stays in the JWKS, ms; must be ≥ the access-token lifetime. Default 1 day. */
  readonly retiredKeyTtlMs?: number;
  /** Clock, ms since epoch (tests). */
  readonly now?: () => number;
}

interface LoadedKey {
  readonly kid: string;
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly publicJwk: JWK;
  readonly createdAt: number;
}

/** The key that signs now. */
export interface ActiveSigningKey {
  readonly kid: string;
  readonly alg: string;
  readonly privateKey: CryptoKey;
}

/**
 * Holds the signing keys in memory, generates the first key on an empty repository, rotates on
 * schedule ({@link KeyManager.rotateIfDue}) or on demand ({@link KeyManager.rotate}).
 */
export class KeyManager {
  readonly #store: Pick<AuthStore, 'insertSigningKey' | 'listSigningKeys' | 'retireSigningKey'>;
  readonly #alg: SigningAlg;
  readonly #rotationIntervalMs: number;
  readonly #retiredKeyTtlMs: number;
  readonly #now: () => number;
  #active: LoadedKey | undefined;
  #jwks: { keys: JWK[] } = { keys: [] };
  #rotating: Promise<void> | undefined;
  #localSet: JWTVerifyGetKey | undefined;

  /** @throws RangeError when `options.alg` is not one of {@link SUPPORTED_SIGNING_ALGS}. */
  constructor(
    store: Pick<AuthStore, 'insertSigningKey' | 'listSigningKeys' | 'retireSigningKey'>,
    options: KeyManagerOptions = {},
  ) {
    this.#store = store;
    this.#alg = options.alg ?? 'RS256';
    if (!SUPPORTED_SIGNING_ALGS.includes(this.#alg)) {
      throw new RangeError(`alg: must be one of ${SUPPORTED_SIGNING_ALGS.join(', ')}`);
    }
    this.#rotationIntervalMs = options.rotationIntervalMs ?? 30 * 24 * 3600_000;
    this.#retiredKeyTtlMs = options.retiredKeyTtlMs ?? 24 * 3600_000;
    this.#now = options.now ?? Date.now;
  }

  /** Loads keys from the store and creates the first one when none is active (or rotation is due). */
  async init(): Promise<void> {
    await this.#load();
    await this.rotateIfDue();
  }

  /** The algorithm that new keys use. */
  get alg(): SigningAlg {
    return this.#alg;
  }

  /** The key that signs now. @throws Error before {@link KeyManager.init}. */
  active(): ActiveSigningKey {
    if (!this.#active) throw new Error('KeyManager: no active signing key (call init() first)');
    return this.#active;
  }

  /** The public JWK Set (RFC 7517 §5): the active key and retired keys still within their TTL. */
  jwks(): { keys: JWK[] } {
    return this.#jwks;
  }

  /**
   * A `jose` key getter (for `jwtVerify`, or the core's `JwtTokenVerifier`) that always selects from the
   * current JWKS, so verification follows rotations without restarting.
   */
  keyGetter(): JWTVerifyGetKey {
    return (header, token) => {
      this.#localSet ??= createLocalJWKSet(this.#jwks);
      return this.#localSet(header, token);
    };
  }

  /** Replaces the active key if it is older than the rotation interval, of another alg, or missing. */
  async rotateIfDue(): Promise<void> {
    const active = this.#active;
    if (active && active.alg === this.#alg && this.#now() - active.createdAt < this.#rotationIntervalMs)
      return;
    await this.rotate();
  }

  /** Generates a new key, makes it active and retires the previous one (published until its TTL ends). */
  async rotate(): Promise<void> {
    if (this.#rotating) return this.#rotating;
    this.#rotating = (async () => {
      const { privateKey, publicKey } = await generateKeyPair(this.#alg, { extractable: true });
      const kid = randomUUID();
      const meta = { kid, alg: this.#alg, use: 'sig' };
      const now = this.#now();
      const previous = this.#active;
      await this.#store.insertSigningKey({
        kid,
        alg: this.#alg,
        privateJwk: { ...(await exportJWK(privateKey)), ...meta },
        publicJwk: { ...(await exportJWK(publicKey)), ...meta },
        createdAt: now,
      });
      if (previous) await this.#store.retireSigningKey(previous.kid, now, now + this.#retiredKeyTtlMs);
      await this.#load();
    })().finally(() => {
      this.#rotating = undefined;
    });
    return this.#rotating;
  }

  async #load(): Promise<void> {
    const now = this.#now();
    const stored = await this.#store.listSigningKeys({ includeRetired: true, now });
    const published = stored.filter((k) => k.expiresAt === null || k.expiresAt > now);
    const current = published
      .filter((k) => k.retiredAt === null)
      .sort((a, b) => b.createdAt - a.createdAt)[0];
    if (current) {
      const privateKey = (await importJWK(current.privateJwk as JWK, current.alg)) as CryptoKey;
      this.#active = {
        kid: current.kid,
        alg: current.alg,
        privateKey,
        publicJwk: current.publicJwk as JWK,
        createdAt: current.createdAt,
      };
    }
    this.#jwks = Object.freeze({ keys: published.map((k) => ({ ...(k.publicJwk as JWK) })) });
    this.#localSet = undefined;
  }
}
