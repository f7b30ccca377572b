/**
 * Token formats: JWT access tokens in the RFC 9068 profile, OpenID Connect ID tokens (OIDC Core §2),
 * opaque refresh tokens and authorization codes (256 random bits, stored as SHA-256 only; a refresh
 * token's stored key also carries its issue time, see {@link newRefreshToken}).
 */
import { hash, randomFillSync, randomUUID } from 'node:crypto';
import { type JWTPayload, jwtVerify } from 'jose';
import { acrFor } from '../mfa/assurance.ts';
import { SECURITY_STAMP_CLAIM } from '../token-verifier.ts';
import type { OAuthConfig } from './config.ts';
import type { KeyManager } from './keys.ts';

/** Claim carrying the user's security stamp (`sst`, the core verifier's name; spec 001 state rule). */
export { SECURITY_STAMP_CLAIM };

/** Bytes of an opaque token. */
const OPAQUE_TOKEN_BYTES = 32;
/**
 * CSPRNG output for {@link newOpaqueToken}, filled 4 KiB at a time (one `randomFillSync` per 128 tokens
 * instead of one `randomBytes` call per token, ≈ 1.6 µs less per token); each 32-byte slice is handed out
 * once, then the buffer is refilled.
 */
const randomPool = Buffer.alloc(128 * OPAQUE_TOKEN_BYTES);
let randomOffset = randomPool.length;

/** A fresh opaque token value: 32 random bytes (CSPRNG, `crypto.randomFillSync`), base64url (43 characters). */
export function newOpaqueToken(): string {
  if (randomOffset + OPAQUE_TOKEN_BYTES > randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  const token = randomPool.toString('base64url', randomOffset, randomOffset + OPAQUE_TOKEN_BYTES);
  randomOffset += OPAQUE_TOKEN_BYTES;
  return token;
}

/** SHA-256 of an opaque token, base64url: the only form in which tokens, codes and sessions are stored. */
export function hashToken(value: string): string {
  return hash('sha256', value, 'base64url');
}

/**
 * Hex digits of a refresh token's time prefix: its issue time in ms since the epoch, zero-padded so that
 * the prefixes sort by time as strings (12 digits last until the year 10889).
 */
const TIME_PREFIX_DIGITS = 12;
/** A refresh token as {@link newRefreshToken} makes it: time prefix, `.`, 43 base64url characters. */
const REFRESH_TOKEN_FORMAT = /^[0-9a-f]{12}\.[A-Za-z0-9_-]{43}$/;

/**
 * A fresh opaque refresh token (RFC 6749 §1.5): `<issue time, 12 hex digits>.<newOpaqueToken()>`, e.g.
 * `019ab5a4c3e1.Jx…` (56 characters). The secret part is 256 CSPRNG bits as for every opaque token; the
 * prefix is not secret (the access token issued with it carries the same time in `iat`). It makes the
 * stored key ({@link hashRefreshToken}) time-ordered, so that each new token's entry goes to the right edge
 * of the store's primary-key B-tree (SQLite and PostgreSQL alike) instead of a random leaf, so a rotation
 * writes fewer pages (SQLite WAL file, 16 rotations per commit: 27 → 16 µs of CPU per lookup and rotation).
 * @param now issue time, ms since the epoch.
 */
export function newRefreshToken(now: number): string {
  const prefix = Math.max(0, Math.floor(now)).toString(16).padStart(TIME_PREFIX_DIGITS, '0');
  return `${prefix}.${newOpaqueToken()}`;
}

/**
 * The stored key of a presented refresh token: for a token in {@link newRefreshToken}'s format its time
 * prefix, `.` and the SHA-256 of the whole token (base64url); for any other string (tokens issued before the
 * prefix existed, garbage) the bare SHA-256 as {@link hashToken}. The token itself is never stored, and a
 * lookup matches the full digest as before; a forged prefix only selects where the digest is looked for.
 */
export function hashRefreshToken(value: string): string {
  const digest = hashToken(value);
  return REFRESH_TOKEN_FORMAT.test(value) ? `${value.slice(0, TIME_PREFIX_DIGITS)}.${digest}` : digest;
}

/** Subject of an access token: a user (with its security stamp) or, for client credentials, the client. */
export type TokenSubject =
  | { readonly kind: 'user'; readonly id: string; readonly userName: string; readonly securityStamp: string }
  | { readonly kind: 'client'; readonly id: string };

/** Input of {@link TokenIssuer.accessToken}. */
export interface AccessTokenInput {
  readonly subject: TokenSubject;
  readonly clientId: string;
  /** Space-delimited scope granted. */
  readonly scope: string;
  /** Time of the user authentication, seconds since epoch, when known. */
  readonly authTime?: number;
  /** Authentication methods of the sign-in (RFC 8176), when known: the token gets `amr` and `acr`. */
  readonly amr?: readonly string[];
  /** DPoP key thumbprint: the token gets `cnf: { jkt }` (RFC 9449 §6.1). */
  readonly jkt?: string;
  /** `aud` from resource indicators (RFC 8707 §2.2); default the configured audience. */
  readonly audience?: readonly string[];
  /** The actor of a delegated token (RFC 8693 §4.1 `act` claim). */
  readonly act?: Readonly<Record<string, unknown>>;
}

/** Signs and verifies the server's JWTs with the keys of a {@link KeyManager}. */
export class TokenIssuer {
  readonly #config: OAuthConfig;
  readonly #keys: KeyManager;
  readonly #now: () => number;

  /** @param now clock, ms since epoch (`iat`/`exp` and verification follow it). */
  constructor(config: OAuthConfig, keys: KeyManager, now: () => number = Date.now) {
    this.#config = config;
    this.#keys = keys;
    this.#now = now;
  }

  #times(): { iat: number; exp: number } {
    const iat = Math.floor(this.#now() / 1000);
    return { iat, exp: iat + this.#config.accessTokenTtlSeconds };
  }

  /**
   * A JWT access token (RFC 9068 §2): header `typ: at+jwt`, claims `iss`, `exp`, `aud`, `sub`, `client_id`,
   * `iat`, `jti`, `scope`, plus `auth_time`, `amr` and `acr` (§2.2.1), `preferred_username` and the security
   * stamp ({@link SECURITY_STAMP_CLAIM}) for user tokens, and `cnf.jkt` for DPoP-bound tokens (RFC 9449 §6.1). For
   * client-credentials tokens `sub` is the client id (§2.2).
   */
  async accessToken(input: AccessTokenInput): Promise<string> {
    const key = this.#keys.active();
    const { iat, exp } = this.#times();
    const claims: JWTPayload = {
      iss: this.#config.issuer,
      sub: input.subject.id,
      aud:
        input.audience === undefined
          ? this.#config.audience
          : input.audience.length === 1
            ? input.audience[0]
            : [...input.audience],
      exp,
      iat,
      jti: randomUUID(),
      client_id: input.clientId,
      scope: input.scope,
    };
    if (input.subject.kind === 'user') {
      claims.preferred_username = input.subject.userName;
      claims[SECURITY_STAMP_CLAIM] = input.subject.securityStamp;
      if (input.authTime !== undefined) claims.auth_time = input.authTime;
      if (input.amr !== undefined && input.amr.length > 0) {
        claims.amr = [...input.amr];
        claims.acr = acrFor(input.amr);
      }
    }
    if (input.jkt !== undefined) claims.cnf = { jkt: input.jkt };
    if (input.act !== undefined) claims.act = input.act;
    return key.signJwt('at+jwt', claims);
  }

  /** An OpenID Connect ID token (OIDC Core §2) for `openid` requests: `aud` is the client id. */
  async idToken(input: {
    userId: string;
    userName: string;
    clientId: string;
    nonce?: string | null;
    authTime?: number;
  }): Promise<string> {
    const key = this.#keys.active();
    const { iat, exp } = this.#times();
    const claims: JWTPayload = {
      iss: this.#config.issuer,
      sub: input.userId,
      aud: input.clientId,
      exp,
      iat,
      preferred_username: input.userName,
    };
    if (input.nonce) claims.nonce = input.nonce;
    if (input.authTime !== undefined) claims.auth_time = input.authTime;
    return key.signJwt('JWT', claims);
  }

  /**
   * Verifies one of this server's access tokens: signature against the published keys, `typ: at+jwt`,
   * issuer, audience, expiry. @returns the claims, or undefined when the token is not valid.
   */
  async verifyAccessToken(token: string): Promise<JWTPayload | undefined> {
    try {
      const { payload } = await jwtVerify(token, this.#keys.keyGetter(), {
        issuer: this.#config.issuer,
        audience: this.#config.audience,
        typ: 'at+jwt',
        currentDate: new Date(this.#now()),
      });
      return payload;
    } catch {
      return undefined;
    }
  }
}
