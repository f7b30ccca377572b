/**
 * Authentication of the REST runtime: the operator's API key compared in constant time, managed API keys
 * (`tenancy/keys.ts`, `e2b_<40 hex>`, stored hashed), and optionally JWT access tokens of the auth service
 * verified against its JWKS (RFC 7517, RFC 9068) with the permission codes `sandbox.boxes.read`,
 * `sandbox.boxes.write`, `sandbox.exec` (and `sandbox.operator`). A credential travels as
 * `Authorization: Bearer <credential>` or, as E2B clients send it, `X-API-KEY: <credential>`. Without the
 * operator key or a JWKS configured the server only serves loopback clients (as the operator, unless
 * they present a managed key). Every caller is a {@link Principal} with a tenant.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from 'jose';
import type { KeyStore } from './tenancy/keys.ts';
import { isReservedTenant, isTenant, OPERATOR_TENANT } from './tenancy/tenant.ts';
import { HttpError, Permission } from './wire.ts';

/** Access tokens of the auth service: where its keys are and what the tokens must say. */
export interface JwtAuthOptions {
  /** URL of the auth service's JWKS document, e.g. `http://127.0.0.1:8200/.well-known/jwks.json`. */
  jwksUrl: string;
  /** Required `iss` claim. */
  issuer?: string;
  /** Required `aud` claim (one of). */
  audience?: string | string[];
  /**
   * Tokens must carry a `tenant` claim (a token without one is 401 `invalid_tenant`); default false:
   * a token without it acts as the tenant named by its `sub`.
   */
  requireTenantClaim?: boolean;
}

/** Credentials the server accepts. Neither `apiKey` nor `jwt` set: loopback clients only. */
export interface AuthOptions {
  /** The operator's API key (any non-empty string; compare is constant-time): every permission, every tenant. */
  apiKey?: string;
  /** Accept JWT access tokens of the auth service (tenant: the `tenant` claim, else `sub`). */
  jwt?: JwtAuthOptions;
  /** Managed API keys (`sandbox keys`); absent: none accepted. */
  keys?: KeyStore;
}

/**
 * Who made a request: the credential's kind, subject, tenant and permissions.
 * - `api_key`: the operator key (`--api-key`); `loopback`: a loopback client of a server without
 *   credentials. Both are operators of tenant `operator` with every permission.
 * - `managed_key`: a managed API key (`keyId` names it); its tenant and permissions are the key's.
 * - `token`: an access token; tenant from its `tenant` claim, else its `sub` (unless
 *   `requireTenantClaim`). A reserved tenant id (`operator`) is refused unless the token holds
 *   `sandbox.operator`: being the operator never comes from a name.
 * `operator` is true for the operator key, loopback clients, and credentials holding `sandbox.operator`:
 * an operator sees and acts on every tenant's resources.
 */
export interface Principal {
  kind: 'api_key' | 'loopback' | 'token' | 'managed_key';
  subject: string;
  /** The tenant owning what this caller creates and the only one whose resources it sees (unless operator). */
  tenant: string;
  /** True when the caller sees every tenant (see above). */
  operator: boolean;
  /** Id of the managed API key used (`managed_key` only). */
  keyId?: string;
  permissions: ReadonlySet<string> | 'all';
  /** When the credential stops being valid (a token's `exp`, a key's expiry), ms since the epoch; absent: no expiry. */
  expiresAt?: number;
}

/** True when `principal` holds `permission` (`sandbox.operator` holds every permission). */
export function holds(principal: Principal, permission: string): boolean {
  return (
    principal.permissions === 'all' ||
    principal.permissions.has(permission) ||
    principal.permissions.has(Permission.operator)
  );
}

/** The principal of the operator key and of loopback clients of a server without credentials. */
export function operatorPrincipal(kind: 'api_key' | 'loopback'): Principal {
  return { kind, subject: kind, tenant: OPERATOR_TENANT, operator: true, permissions: 'all' };
}

/**
 * The credential of a request: `Authorization: Bearer <credential>`, else `X-API-KEY: <credential>`;
 * null when neither is present.
 */
export function presentedCredential(request: IncomingMessage): string | null {
  const header = request.headers.authorization;
  const match = typeof header === 'string' ? /^Bearer +([^\s]+) *$/i.exec(header) : null;
  if (match) return match[1]!;
  const key = request.headers['x-api-key'];
  if (typeof key === 'string' && key.trim() !== '') return key.trim();
  return null;
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
  readonly #keys: KeyStore | null;

  /** @throws Error when `apiKey` is an empty string or `jwt.jwksUrl` is not an http(s) URL. */
  constructor(options: AuthOptions) {
    if (options.apiKey !== undefined && (typeof options.apiKey !== 'string' || options.apiKey === '')) {
      throw new Error('apiKey must be a non-empty string');
    }
    this.#apiKeyDigest = options.apiKey ? digest(options.apiKey) : null;
    this.#jwt = options.jwt ?? null;
    this.#keys = options.keys ?? null;
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
   * Authenticates a request and checks that it holds `permission` (see {@link Principal}).
   * @throws HttpError 401 (missing or invalid credential, a token whose tenant claim is missing or
   *   malformed; `WWW-Authenticate` is the caller's job), 403 (a valid credential without the permission,
   *   or a non-loopback client of a server without credentials).
   */
  async check(request: IncomingMessage, permission: Permission): Promise<Principal> {
    const presented = presentedCredential(request);
    if (!this.required) {
      if (!isLoopback(request.socket.remoteAddress)) {
        throw new HttpError('loopback_only', 'this server only serves loopback clients');
      }
      if (presented === null) return operatorPrincipal('loopback');
    }
    if (presented === null) {
      throw new HttpError(
        'missing_credentials',
        'missing credentials (Authorization: Bearer <API key or access token>, or X-API-KEY: <API key>)',
      );
    }
    if (this.#apiKeyDigest && timingSafeEqual(digest(presented), this.#apiKeyDigest)) {
      return operatorPrincipal('api_key');
    }
    const managed = this.#keys?.verify(presented) ?? null;
    if (managed) {
      const principal: Principal = {
        kind: 'managed_key',
        subject: `key:${managed.id}`,
        tenant: managed.tenant,
        operator: managed.permissions.includes(Permission.operator),
        keyId: managed.id,
        permissions: new Set(managed.permissions),
        ...(managed.expiresAt ? { expiresAt: Date.parse(managed.expiresAt) } : {}),
      };
      return this.#permitted(principal, permission, 'API key');
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
        throw new HttpError('invalid_token', `invalid access token: ${(error as Error).message}`);
      }
      const granted = tokenPermissions(claims);
      const operator = granted.has(Permission.operator);
      const tenant = this.#tenantOf(claims, operator);
      const principal: Principal = {
        kind: 'token',
        subject: String(claims.sub),
        tenant,
        operator,
        permissions: granted,
        ...(typeof claims.exp === 'number' ? { expiresAt: claims.exp * 1000 } : {}),
      };
      return this.#permitted(principal, permission, 'access token');
    }
    throw new HttpError('invalid_credentials', 'invalid API key or access token');
  }

  /**
   * The tenant a verified token acts as: its `tenant` claim, else (unless `requireTenantClaim`) its `sub`.
   * @throws HttpError 401 `invalid_tenant` when that claim is missing, not a tenant id, or a reserved
   *   tenant id while the token does not hold `sandbox.operator`.
   */
  #tenantOf(claims: JWTPayload, operator: boolean): string {
    const claim = claims.tenant !== undefined || this.#jwt?.requireTenantClaim ? 'tenant' : 'sub';
    const tenant = claims[claim];
    const refuse = (why: string) =>
      new HttpError('invalid_tenant', `the access token's ${claim} claim ${why}`);
    if (tenant === undefined) throw refuse('is missing');
    if (!isTenant(tenant)) {
      throw refuse(
        'is not a tenant id (1-128 characters of letters, digits, "_", ".", "@", ":", "|" or "-", starting with a letter or digit)',
      );
    }
    if (isReservedTenant(tenant) && !operator) {
      throw refuse(
        `names the reserved tenant '${tenant}' (operators hold the ${Permission.operator} permission)`,
      );
    }
    return tenant;
  }

  #permitted(principal: Principal, permission: Permission, what: string): Principal {
    if (!holds(principal, permission)) {
      throw new HttpError('missing_permission', `the ${what} lacks the permission ${permission}`);
    }
    return principal;
  }
}
