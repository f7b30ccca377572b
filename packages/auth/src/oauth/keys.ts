/**
 * Signing keys for JWT access tokens (RFC 9068 §2.1, RFC 7517 JWK) with two-phase rotation: a new key is
 * published in the JWKS first and signs only `publishAheadMs` later (so resource servers that cache the
 * JWKS already know it); the key it replaces stays published until every token it signed has expired. Keys are generated and used with `jose`; private keys are persisted as JWK JSON through
 * the auth store (`insertSigningKey`, `listSigningKeys`, `retireSigningKey`).
 */
import { createPrivateKey, randomUUID } from 'node:crypto';
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
import { cryptoPool, type PooledSigner } from './crypto-pool.ts';
import { type SigningAlg, SUPPORTED_SIGNING_ALGS } from './jws-sign.ts';

export { derToP1363, type SigningAlg, SUPPORTED_SIGNING_ALGS } from './jws-sign.ts';

/** Rotation settings. */
export interface KeyManagerOptions {
  /** Algorithm of newly generated keys. Default `RS256` (RFC 9068 §2.1). */
  readonly alg?: SigningAlg;
  /** Age after which the active key is replaced, ms. Default 30 days. */
  readonly rotationIntervalMs?: number;
  /** How long a new key is published before it signs, ms. Default 10 minutes (JWKS max-age is 5). */
  readonly publishAheadMs?: number;
  /** How long a retired key stays in the JWKS, ms; must be ≥ the access-token lifetime. Default 1 day. */
  readonly retiredKeyTtlMs?: number;
  /** Clock, ms since epoch (tests). */
  readonly now?: () => number;
}

interface LoadedKey extends ActiveSigningKey {
  readonly createdAt: number;
  /** The key's registration with the signing pool (released when the key is no longer a candidate). */
  readonly signer: PooledSigner;
}

/** The key that signs now. */
export interface ActiveSigningKey {
  readonly kid: string;
  readonly alg: string;
  /** The private key as a WebCrypto key (for `jose`'s `SignJWT`). */
  readonly privateKey: CryptoKey;
  /**
   * Signs a JWT: JWS Compact Serialization (RFC 7515 §7.1) of the UTF-8 JSON `payload` under the protected
   * header `{ alg, kid, typ }`, with the key imported once as a Node `KeyObject` and the encoded header
   * cached per `typ` (the token endpoint's hot path; `jose`'s `SignJWT` costs about twice as much CPU per
   * token through WebCrypto). The signature is computed off the event loop: by the process's signing
   * worker, which takes the signatures of one event-loop turn in one message (`crypto-pool.ts`), or on
   * libuv's thread pool while the worker is not available. Signature encodings: `jws-sign.ts`.
   * @returns a promise of `base64url(header).base64url(payload).base64url(signature)`.
   */
  signJwt(typ: string, payload: object): Promise<string>;
}

/** Loads a stored private JWK once: WebCrypto key for `jose`, Node key and cached headers for {@link ActiveSigningKey.signJwt}. */
async function loadKey(kid: string, alg: string, privateJwk: JWK, createdAt: number): Promise<LoadedKey> {
  const privateKey = (await importJWK(privateJwk, alg)) as CryptoKey;
  const signer = cryptoPool.register(
    alg,
    createPrivateKey({ key: privateJwk as JsonWebKeyInput['key'], format: 'jwk' }),
  );
  const headers = new Map<string, string>();
  return {
    kid,
    alg,
    privateKey,
    createdAt,
    signer,
    async signJwt(typ, payload) {
      let header = headers.get(typ);
      if (header === undefined) {
        header = Buffer.from(JSON.stringify({ alg, kid, typ })).toString('base64url');
        headers.set(typ, header);
      }
      const input = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
      return `${input}.${await signer.sign(input)}`;
    },
  };
}

type JsonWebKeyInput = Extract<Parameters<typeof createPrivateKey>[0], { format: 'jwk' }>;

type KeyStore = Pick<AuthStore, 'insertSigningKey' | 'listSigningKeys' | 'retireSigningKey'>;

/**
 * Holds the signing keys in memory, generates the first key on an empty store, rotates on schedule
 * ({@link KeyManager.rotateIfDue}, call it periodically) or on demand ({@link KeyManager.rotate}).
 *
 * Selection rule (so that several processes over one store agree): among the keys not retired, the
 * active key is the newest one created at least `publishAheadMs` ago, or the oldest one when none is that
 * old (first start). Once a newer key takes over, the older ones are retired in the store.
 */
export class KeyManager {
  readonly #store: KeyStore;
  readonly #alg: SigningAlg;
  readonly #rotationIntervalMs: number;
  readonly #publishAheadMs: number;
  readonly #retiredKeyTtlMs: number;
  readonly #now: () => number;
  /** Not-retired keys, oldest first. */
  #candidates: LoadedKey[] = [];
  #active: LoadedKey | undefined;
  /** When the next pending key takes over (ms since epoch), or Infinity. */
  #switchAt = Number.POSITIVE_INFINITY;
  #jwks: { keys: JWK[] } = { keys: [] };
  #rotating: Promise<void> | undefined;
  #localSet: JWTVerifyGetKey | undefined;
  #loadQueue: Promise<void> = Promise.resolve();
  /** Imported keys by kid (the not-retired ones of the last reload). */
  #loaded = new Map<string, LoadedKey>();

  /** @throws RangeError when `options.alg` is not one of {@link SUPPORTED_SIGNING_ALGS}. */
  constructor(store: KeyStore, options: KeyManagerOptions = {}) {
    this.#store = store;
    this.#alg = options.alg ?? 'RS256';
    if (!SUPPORTED_SIGNING_ALGS.includes(this.#alg)) {
      throw new RangeError(`alg: must be one of ${SUPPORTED_SIGNING_ALGS.join(', ')}`);
    }
    this.#rotationIntervalMs = options.rotationIntervalMs ?? 30 * 24 * 3600_000;
    this.#publishAheadMs = options.publishAheadMs ?? 10 * 60_000;
    this.#retiredKeyTtlMs = options.retiredKeyTtlMs ?? 24 * 3600_000;
    this.#now = options.now ?? Date.now;
  }

  /** Loads keys from the store and creates the first one when none exists (or rotation is due). */
  async init(): Promise<void> {
    await this.rotateIfDue();
  }

  /** The algorithm that new keys use. */
  get alg(): SigningAlg {
    return this.#alg;
  }

  /** The key that signs now (switches to a pending key once its publication time has passed). */
  active(): ActiveSigningKey {
    if (this.#now() >= this.#switchAt) this.#select();
    if (!this.#active) throw new Error('KeyManager: no active signing key (call init() first)');
    return this.#active;
  }

  /** The public JWK Set (RFC 7517 §5): pending, active and retired-but-not-expired keys. */
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

  /**
   * Reloads the keys (dropping those whose publication has ended, picking up keys other processes made)
   * and starts a rotation when the newest key is older than the rotation interval, has another algorithm,
   * or there is none. Call it periodically (the server does, every minute).
   */
  async rotateIfDue(): Promise<void> {
    await this.#load();
    const newest = this.#candidates.at(-1);
    if (newest && newest.alg === this.#alg && this.#now() - newest.createdAt < this.#rotationIntervalMs)
      return;
    await this.rotate();
  }

  /**
   * Generates and publishes a new key. It signs once it has been published for `publishAheadMs` (at once
   * when there is no key yet); the key it replaces is then retired and stays published for
   * `retiredKeyTtlMs`. `{ immediate: true }` (e.g. a suspected key compromise) retires the current keys
   * and signs with the new one right away.
   */
  async rotate(options: { immediate?: boolean } = {}): Promise<void> {
    if (this.#rotating) return this.#rotating;
    this.#rotating = (async () => {
      const { privateKey, publicKey } = await generateKeyPair(this.#alg, { extractable: true });
      const kid = randomUUID();
      const meta = { kid, alg: this.#alg, use: 'sig' };
      const now = this.#now();
      if (options.immediate) {
        // Emergency rotation: the current keys stop signing now (they stay published for their TTL).
        for (const key of this.#candidates)
          await this.#store.retireSigningKey(key.kid, now, now + this.#retiredKeyTtlMs);
      }
      await this.#store.insertSigningKey({
        kid,
        alg: this.#alg,
        privateJwk: { ...(await exportJWK(privateKey)), ...meta },
        publicJwk: { ...(await exportJWK(publicKey)), ...meta },
        createdAt: now,
      });
      await this.#load();
    })().finally(() => {
      this.#rotating = undefined;
    });
    return this.#rotating;
  }

  /** Reloads from the store; loads are serialized so a slow one never overwrites a newer state. */
  #load(): Promise<void> {
    const next = this.#loadQueue.then(() => this.#reload());
    this.#loadQueue = next.catch(() => {});
    return next;
  }

  async #reload(): Promise<void> {
    const now = this.#now();
    const stored = await this.#store.listSigningKeys({ includeRetired: true, now });
    const published = stored.filter((k) => k.expiresAt === null || k.expiresAt > now);
    const candidates: LoadedKey[] = [];
    for (const key of published
      .filter((k) => k.retiredAt === null)
      .sort((a, b) => a.createdAt - b.createdAt)) {
      // Each key is imported once per process; reloads (every minute) reuse the loaded key.
      const loaded =
        this.#loaded.get(key.kid) ?? (await loadKey(key.kid, key.alg, key.privateJwk as JWK, key.createdAt));
      candidates.push(loaded);
    }
    this.#candidates = candidates;
    const loaded = new Map(candidates.map((k) => [k.kid, k]));
    for (const [kid, key] of this.#loaded) if (!loaded.has(kid)) key.signer.release();
    this.#loaded = loaded;
    this.#jwks = Object.freeze({ keys: published.map((k) => ({ ...(k.publicJwk as JWK) })) });
    this.#localSet = undefined;
    this.#select();
  }

  /** Applies the selection rule; retires (in the background) candidates older than the active key. */
  #select(): void {
    const now = this.#now();
    const ready = this.#candidates.filter((k) => now - k.createdAt >= this.#publishAheadMs);
    const active = ready.at(-1) ?? this.#candidates[0];
    this.#active = active;
    const pending = this.#candidates.find((k) => active && k.createdAt > active.createdAt);
    this.#switchAt = pending ? pending.createdAt + this.#publishAheadMs : Number.POSITIVE_INFINITY;
    const older = active ? this.#candidates.filter((k) => k.createdAt < active.createdAt) : [];
    if (older.length > 0) {
      this.#candidates = this.#candidates.filter((k) => !older.includes(k));
      void Promise.all(
        older.map((k) => this.#store.retireSigningKey(k.kid, now, now + this.#retiredKeyTtlMs)),
      )
        .then(() => this.#load())
        .catch(() => {
          // Retiring is best effort: the selection rule gives the same active key without it.
        });
    }
  }
}
