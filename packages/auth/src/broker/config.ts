/**
 * Configuration of the upstream OpenID providers this server brokers (OpenID Connect Core 1.0 as a
 * relying party): the server option `upstreamProviders` or the variable `AUTH_UPSTREAM_PROVIDERS` (a JSON
 * array of the same objects). Client secrets live in the configuration only, never in the store.
 */

/** Local user fields an upstream claim can fill, and the claim each takes by default. */
export const DEFAULT_CLAIM_MAPPING = Object.freeze({
  userName: 'preferred_username',
  email: 'email',
  displayName: 'name',
  givenName: 'given_name',
  familyName: 'family_name',
});

/** Which upstream claim fills which local field (claim names, OIDC Core §5.1 or the provider's own). */
export type ClaimMapping = { readonly [K in keyof typeof DEFAULT_CLAIM_MAPPING]: string };

/** One upstream provider as configured. */
export interface UpstreamProviderConfig {
  /** Id in URLs, links and audit events: 1–32 of `a-z 0-9 -`, starting with a letter or digit. */
  readonly id: string;
  /** Button text on the login page ("Sign in with <name>"), 1–64 characters. */
  readonly name: string;
  /** Issuer identifier (OIDC Discovery 1.0 §4): `https`, or `http` on a loopback host. */
  readonly issuer: string;
  readonly clientId: string;
  /** Secret for `client_secret_basic`; unset: a public client (PKCE only, `none`). */
  readonly clientSecret?: string;
  /** Requested scopes (default `openid profile email`; `openid` is always requested). */
  readonly scopes?: readonly string[];
  /** Claim mapping over {@link DEFAULT_CLAIM_MAPPING}. */
  readonly claims?: Partial<ClaimMapping>;
  /** Role names new users provisioned from this provider get (default none). */
  readonly roles?: readonly string[];
  /** Create a local user on a first sign-in that matches no one (default true). */
  readonly provision?: boolean;
}

/** A provider after validation (defaults applied). */
export interface UpstreamProvider {
  readonly id: string;
  readonly name: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string | undefined;
  readonly scopes: readonly string[];
  readonly claims: ClaimMapping;
  readonly roles: readonly string[];
  readonly provision: boolean;
  /** True for an `http` issuer on a loopback host (insecure requests allowed to it only). */
  readonly loopbackHttp: boolean;
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

function text(value: unknown, field: string, max: number, pattern?: RegExp): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > max ||
    (pattern && !pattern.test(value))
  )
    throw new RangeError(`${field}: ${pattern ? 'invalid' : `1-${max} characters`}`);
  return value;
}

function strings(value: unknown, field: string, pattern: RegExp): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > 32)
    throw new RangeError(`${field}: an array of at most 32 strings`);
  return value.map((v, i) => text(v, `${field}[${i}]`, 128, pattern));
}

/**
 * Validates the configured providers (unique ids, URLs, names).
 * @throws RangeError naming the field, e.g. `upstreamProviders[0].issuer: must be https (http only on loopback)`.
 */
export function resolveUpstreamProviders(input: unknown): UpstreamProvider[] {
  if (input === undefined) return [];
  if (!Array.isArray(input) || input.length > 16)
    throw new RangeError('upstreamProviders: an array of at most 16 providers');
  const ids = new Set<string>();
  return input.map((raw, i): UpstreamProvider => {
    const f = `upstreamProviders[${i}]`;
    if (typeof raw !== 'object' || raw === null) throw new RangeError(`${f}: must be an object`);
    const p = raw as Record<string, unknown>;
    for (const key of Object.keys(p)) {
      if (
        ![
          'id',
          'name',
          'issuer',
          'clientId',
          'clientSecret',
          'scopes',
          'claims',
          'roles',
          'provision',
        ].includes(key)
      )
        throw new RangeError(`${f}.${key}: unknown field`);
    }
    const id = text(p.id, `${f}.id`, 32, /^[a-z0-9][a-z0-9-]*$/);
    if (ids.has(id)) throw new RangeError(`${f}.id: '${id}' is used twice`);
    if (id === 'link') throw new RangeError(`${f}.id: 'link' is reserved (the account-link page)`);
    ids.add(id);
    const issuer = text(p.issuer, `${f}.issuer`, 2048);
    let url: URL;
    try {
      url = new URL(issuer);
    } catch {
      throw new RangeError(`${f}.issuer: must be an absolute URL`);
    }
    const loopbackHttp = url.protocol === 'http:' && LOOPBACK.has(url.hostname);
    if (url.protocol !== 'https:' && !loopbackHttp)
      throw new RangeError(`${f}.issuer: must be https (http only on loopback)`);
    const claims: Record<string, string> = { ...DEFAULT_CLAIM_MAPPING };
    if (p.claims !== undefined) {
      if (typeof p.claims !== 'object' || p.claims === null)
        throw new RangeError(`${f}.claims: must be an object`);
      for (const [field, claim] of Object.entries(p.claims)) {
        if (!(field in DEFAULT_CLAIM_MAPPING)) throw new RangeError(`${f}.claims.${field}: unknown field`);
        claims[field] = text(claim, `${f}.claims.${field}`, 128);
      }
    }
    const scopes = strings(p.scopes, `${f}.scopes`, /^[\x21\x23-\x5B\x5D-\x7E]+$/);
    if (p.provision !== undefined && typeof p.provision !== 'boolean')
      throw new RangeError(`${f}.provision: must be a boolean`);
    return {
      id,
      name: text(p.name, `${f}.name`, 64),
      issuer,
      clientId: text(p.clientId, `${f}.clientId`, 256),
      clientSecret:
        p.clientSecret === undefined ? undefined : text(p.clientSecret, `${f}.clientSecret`, 1024),
      scopes: [...new Set(['openid', ...(scopes.length > 0 ? scopes : ['profile', 'email'])])],
      claims: claims as ClaimMapping,
      roles: strings(p.roles, `${f}.roles`, /^.{1,128}$/),
      provision: p.provision !== false,
      loopbackHttp,
    };
  });
}

/**
 * Reads `AUTH_UPSTREAM_PROVIDERS` (a JSON array of {@link UpstreamProviderConfig}).
 * @throws RangeError when it is not JSON (the message never repeats the value: it holds secrets).
 */
export function upstreamProvidersFromEnv(env: Readonly<Record<string, string | undefined>>): unknown {
  const raw = env.AUTH_UPSTREAM_PROVIDERS;
  if (raw === undefined || raw === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    throw new RangeError('AUTH_UPSTREAM_PROVIDERS: must be a JSON array of provider objects');
  }
}
