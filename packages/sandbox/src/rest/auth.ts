/**
 * Authentication of the REST runtime: a bearer API key compared in constant time, and
 * optionally JWT access tokens of the auth service verified against its JWKS (RFC 7517, RFC 9068) with
 * the permission codes `sandbox.boxes.read`, `sandbox.boxes.write`, `sandbox.exec`. Without any
 * credential configured the server only serves loopback clients.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import { HttpError, type Permission } from './wire.ts';

/** Access tokens of the auth service: where its keys are and what the tokens must say. */
export interface JwtAuthOptions {
  /** URL of the auth service's JWKS document, e.g. `http://127.0.0.1:8200/.well-known/jwks.json`. */
  jwksUrl: string;
  /** Required `iss` claim. */
  issuer?: string;
  /** Required `aud` claim (one of). */
  audience?: string | string[];
}

/** Credentials the server accepts. Neither set: loopback clients only, no credential needed. */
export interface AuthOptions {
  /** Bearer API key (any non-empty string; compare is constant-time). */
  apiKey?: string;
  /** Accept JWT access tokens of the auth service. */
  jwt?: JwtAuthOptions;
}

/** Who made a request: the API key holder or loopback client (every permission), or a token subject. */
export interface Principal {
  kind: 'api_key' | 'loopback' | 'token';
  subject: string;
  permissions: ReadonlySet<string> | 'all';
  /** When the credential stops being valid (a token's `exp`), ms since the epoch; absent: no expiry. */
  expiresAt?: number;
}

/** True for `127.0.0.0/8`, `::1`, IPv4-mapped loopback and `localhost`. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  if (address === 'localhost' || address === '::1') return true;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Permission codes a token grants: its `permissions` array claim plus its space-separated `scope`. */
export function tokenPermissions(claims: JWTPayload): Set<string> {
  const granted = new Set<string>();
  if (Array.isArray(claims.permissions))
    for (const p of claims.permissions) if (typeof p === 'string') granted.add(p);
  if (typeof claims.scope === 'string') for (const p of claims.scope.split(' ')) if (p) granted.add(p);
  return granted;
}

/** Checks requests against the configured credentials. */
export class Authenticator {
  readonly #apiKeyDigest: Buffer | null;
  readonly #jwt: JwtAuthOptions | null;
  readonly #jwks: ReturnType<typeof createRemoteJWKSet> | null;

  /** @throws Error when `apiKey` is an empty string or `jwt.jwksUrl` is not an http(s) URL. */
  constructor(options: AuthOptions) {
    if (options.apiKey !== undefined && (typeof options.apiKey !== 'string' || options.apiKey === '')) {
      throw new Error('apiKey must be a non-empty string');
    }
    this.#apiKeyDigest = options.apiKey ? digest(options.apiKey) : null;
    this.#jwt = options.jwt ?? null;
    if (this.#jwt) {
      let url: URL;
      try {
        url = new URL(this.#jwt.jwksUrl);
      } catch {
        throw new Error(`jwt.jwksUrl '${this.#jwt.jwksUrl}' is not a URL`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        throw new Error('jwt.jwksUrl must be http(s)');
      this.#jwks = createRemoteJWKSet(url);
    } else {
      this.#jwks = null;
    }
  }

  /** True when some credential is configured (the server may then listen on any address). */
  get required(): boolean {
    return this.#apiKeyDigest !== null || this.#jwt !== null;
  }

  /**
   * Authenticates a request and checks that it holds `permission`.
   * @throws HttpError 401 (missing or invalid credential; `WWW-Authenticate` is the caller's job), 403
   *   (a valid token without the permission, or a non-loopback client of a server without credentials).
   */
  async check(request: IncomingMessage, permission: Permission): Promise<Principal> {
    if (!this.required) {
      if (!isLoopback(request.socket.remoteAddress)) {
        throw new HttpError(
          403,
          'permission_error',
          'loopback_only',
          'this server only serves loopback clients',
        );
      }
      return { kind: 'loopback', subject: 'loopback', permissions: 'all' };
    }
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer +([^\s]+) *$/i.exec(header) : null;
    if (!match) {
      throw new HttpError(
        401,
        'authentication_error',
        'missing_credentials',
        'missing bearer credentials (Authorization: Bearer <api key or access token>)',
      );
    }
    const presented = match[1]!;
    if (this.#apiKeyDigest && timingSafeEqual(digest(presented), this.#apiKeyDigest)) {
      return { kind: 'api_key', subject: 'api_key', permissions: 'all' };
    }
    if (this.#jwks && this.#jwt && presented.split('.').length === 3) {
      let claims: JWTPayload;
      try {
        ({ payload: claims } = await jwtVerify(presented, this.#jwks, {
          ...(this.#jwt.issuer ? { issuer: this.#jwt.issuer } : {}),
          ...(this.#jwt.audience ? { audience: this.#jwt.audience } : {}),
          requiredClaims: ['exp', 'sub'],
        }));
      } catch (error) {
        throw new HttpError(
          401,
          'authentication_error',
          'invalid_token',
          `invalid access token: ${(error as Error).message}`,
        );
      }
      const granted = tokenPermissions(claims);
      if (!granted.has(permission)) {
        throw new HttpError(
          403,
          'permission_error',
          'missing_permission',
          `the access token lacks the permission ${permission}`,
        );
      }
      return {
        kind: 'token',
        subject: String(claims.sub),
        permissions: granted,
        ...(typeof claims.exp === 'number' ? { expiresAt: claims.exp * 1000 } : {}),
      };
    }
    throw new HttpError(
      401,
      'authentication_error',
      'invalid_credentials',
      'invalid API key or access token',
    );
  }
}
