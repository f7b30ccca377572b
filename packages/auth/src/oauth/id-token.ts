/**
 * OpenID Connect ID tokens and user claims (OpenID Connect Core 1.0):
 * - {@link issueIdToken}: the ID token of the token endpoint (§2, §3.1.3.3) and of refreshes (§12.2), with
 *   `nonce`, `auth_time`, `amr`, `sid` and `at_hash` (§3.1.3.6);
 * - {@link userClaims}: the claims a scope releases (§5.4: `profile`, `email`) plus this server's `roles`
 *   scope (`roles`, `permissions`, `denied_permissions`), for the UserInfo endpoint (§5.3).
 */
import { hash } from 'node:crypto';
import type { JWTPayload } from 'jose';
import { acrFor } from '../mfa/assurance.ts';
import { PermissionMatcher } from '../permissions.ts';
import type { AuthStore, ClientRecord, UserAddress, UserRecord } from '../store/types.ts';
import type { OAuthContext } from './context.ts';

/** The scope of this server that releases a user's effective roles and permission patterns. */
export const ROLES_SCOPE = 'roles';

/**
 * The scope of this server that releases a user's roles and effective permission codes (the concrete codes
 * the user is granted, deny rules applied) for a client's own permission checks.
 */
export const PERMISSIONS_SCOPE = 'permissions';

/** Scopes of OpenID Connect handled by this server (OIDC Core §5.4 plus {@link ROLES_SCOPE}, {@link PERMISSIONS_SCOPE}). */
export const OIDC_SCOPES = Object.freeze([
  'openid',
  'profile',
  'email',
  'phone',
  'address',
  ROLES_SCOPE,
  PERMISSIONS_SCOPE,
] as const);

/** Claims each scope releases (OIDC Core §5.4; `roles` and `permissions` are this server's). */
export const SCOPE_CLAIMS: Readonly<Record<string, readonly string[]>> = Object.freeze({
  openid: ['sub'],
  profile: ['name', 'given_name', 'family_name', 'preferred_username', 'updated_at'],
  email: ['email', 'email_verified'],
  phone: ['phone_number', 'phone_number_verified'],
  address: ['address'],
  [ROLES_SCOPE]: ['roles', 'permissions', 'denied_permissions'],
  [PERMISSIONS_SCOPE]: ['roles', 'effective_permissions'],
});

/** Most catalog codes checked for the `effective_permissions` claim (the catalog's first 1000, by code). */
export const MAX_EFFECTIVE_PERMISSIONS = 1000;

/**
 * The left half of the hash of `value` in base64url (OIDC Core §3.1.3.6 `at_hash`, §3.3.2.11 `c_hash`): the
 * hash is the one of the ID token's JWS algorithm — SHA-256 for `RS256`/`PS256`/`ES256`, SHA-384 and
 * SHA-512 for their 384/512 variants, SHA-512 for `EdDSA` (Ed25519).
 * @throws RangeError for an algorithm this server does not sign with.
 */
export function leftHalfHash(value: string, alg: string): string {
  const bits = alg === 'EdDSA' ? '512' : /^(?:RS|PS|ES)(256|384|512)$/.exec(alg)?.[1];
  if (bits === undefined) throw new RangeError(`leftHalfHash: unsupported algorithm '${alg}'`);
  const digest = hash(`sha${bits}`, value, 'buffer');
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

/** Input of {@link issueIdToken}. */
export interface IdTokenInput {
  readonly user: Pick<UserRecord, 'id' | 'userName'>;
  readonly clientId: string;
  /** The authorization request's `nonce` (never on refresh, §12.2). */
  readonly nonce?: string | null;
  /** Time of the user authentication, seconds since epoch. */
  readonly authTime?: number | null;
  /** Authentication methods (RFC 8176), e.g. `['pwd']`. */
  readonly amr?: readonly string[];
  /** Login session id (`sid`, Back-Channel Logout 1.0 §2.4; also checked by `id_token_hint` at logout). */
  readonly sid?: string | null;
  /** The access token issued with it: `at_hash` is computed over it. */
  readonly accessToken?: string;
  /**
   * Claims released by the granted scopes ({@link userClaims}), added unless the client keeps them
   * UserInfo-only (`claimsInIdToken: false`); the registered claims above take precedence.
   */
  readonly userClaims?: Readonly<Record<string, unknown>>;
}

/**
 * Signs an ID token (OIDC Core §2): `iss`, `sub`, `aud` (the client), `exp` (access-token lifetime), `iat`,
 * `preferred_username`, and when known `auth_time`, `nonce`, `amr`, `sid`, `at_hash`, plus the scope claims
 * given as `userClaims` (§5.4, §5.5). With `amr`, also `acr` (§2): `urn:seed:acr:mfa` when `amr` holds
 * `mfa`, else `urn:seed:acr:pwd` (`../mfa/assurance.ts`).
 */
export async function issueIdToken(ctx: OAuthContext, input: IdTokenInput): Promise<string> {
  const key = ctx.keys.active();
  const iat = Math.floor(ctx.now() / 1000);
  const claims: JWTPayload = {
    ...input.userClaims,
    iss: ctx.config.issuer,
    sub: input.user.id,
    aud: input.clientId,
    exp: iat + ctx.config.accessTokenTtlSeconds,
    iat,
    preferred_username: input.user.userName,
  };
  if (input.authTime !== undefined && input.authTime !== null) claims.auth_time = input.authTime;
  if (input.nonce) claims.nonce = input.nonce;
  if (input.amr && input.amr.length > 0) {
    claims.amr = [...input.amr];
    claims.acr = acrFor(input.amr);
  }
  if (input.sid) claims.sid = input.sid;
  if (input.accessToken !== undefined) claims.at_hash = leftHalfHash(input.accessToken, key.alg);
  return key.signJwt('JWT', claims);
}

/** True when `scopes` release claims beyond `sub` (any of {@link SCOPE_CLAIMS} but `openid`). */
export function releasesClaims(scopes: readonly string[]): boolean {
  return scopes.some((scope) => scope !== 'openid' && Object.hasOwn(SCOPE_CLAIMS, scope));
}

/**
 * The scope claims to put into an ID token for `client` (undefined when the client keeps them UserInfo-only
 * with `claimsInIdToken: false`, or the user is gone).
 */
export async function idTokenUserClaims(
  store: AuthStore,
  client: Pick<ClientRecord, 'metadata'>,
  userId: string,
  scopes: readonly string[],
): Promise<Record<string, unknown> | undefined> {
  if (client.metadata.claimsInIdToken === false) return undefined;
  const user = await store.getUser(userId);
  return user ? userClaims(store, user, scopes) : undefined;
}

/**
 * The concrete permission codes `user` is granted (deny rules applied): the catalog's codes (at most
 * {@link MAX_EFFECTIVE_PERMISSIONS}) and the user's and roles' concrete grant codes, each checked with the
 * same matcher as the permission middleware; sorted.
 */
async function effectivePermissions(
  store: AuthStore,
  allow: ReadonlySet<string>,
  deny: ReadonlySet<string>,
): Promise<string[]> {
  const matcher = new PermissionMatcher(allow, deny, false);
  const candidates = new Set(
    [...allow].filter((code) => !code.split('.').some((s) => s === '*' || s === '**')),
  );
  const catalog = await store.listPermissions({ limit: MAX_EFFECTIVE_PERMISSIONS });
  for (const permission of catalog.items) candidates.add(permission.code);
  return [...candidates].filter((code) => matcher.evaluate(code) === 'allow').sort();
}

/**
 * The claims the granted `scopes` release about `user` (OIDC Core §5.1, §5.4): always `sub`; `profile`:
 * `name`, `given_name`, `family_name` (when set), `preferred_username`, `updated_at` (seconds); `email`:
 * `email` and `email_verified` (when an address is set); `phone`: `phone_number` and `phone_number_verified`
 * (when a number is set); `address`: `address` (§5.1.1 members `formatted`, `street_address`, `locality`,
 * `region`, `postal_code`, `country`, those set); {@link ROLES_SCOPE}: `roles` (held roles and their
 * ancestors, sorted), `permissions` and `denied_permissions` (the grant and deny patterns of the user and
 * those roles, sorted); {@link PERMISSIONS_SCOPE}: `roles` and `effective_permissions` (concrete codes the
 * user is granted, deny rules applied, sorted). Absent values are left out, never sent as null (§5.3.2).
 */
export async function userClaims(
  store: AuthStore,
  user: UserRecord,
  scopes: readonly string[],
): Promise<Record<string, unknown>> {
  const claims: Record<string, unknown> = { sub: user.id };
  if (scopes.includes('profile')) {
    if (user.displayName !== null) claims.name = user.displayName;
    if (user.givenName !== null) claims.given_name = user.givenName;
    if (user.familyName !== null) claims.family_name = user.familyName;
    claims.preferred_username = user.userName;
    claims.updated_at = Math.floor(user.updatedAt / 1000);
  }
  if (scopes.includes('email') && user.email !== null) {
    claims.email = user.email;
    claims.email_verified = user.emailVerified;
  }
  if (scopes.includes('phone') && user.phoneNumber !== null) {
    claims.phone_number = user.phoneNumber;
    claims.phone_number_verified = user.phoneNumberVerified;
  }
  if (scopes.includes('address') && user.address !== null) claims.address = addressClaim(user.address);
  if (scopes.includes(ROLES_SCOPE) || scopes.includes(PERMISSIONS_SCOPE)) {
    const subject = await store.getUserSubject(user.id);
    const roles = subject?.roles ?? [];
    const allow = new Set(user.directPermissions);
    const deny = new Set(user.deniedPermissions);
    for (const role of roles) {
      for (const code of role.permissions) allow.add(code);
      for (const code of role.deniedPermissions) deny.add(code);
    }
    claims.roles = roles.map((role) => role.name).sort();
    if (scopes.includes(ROLES_SCOPE)) {
      claims.permissions = [...allow].sort();
      claims.denied_permissions = [...deny].sort();
    }
    if (scopes.includes(PERMISSIONS_SCOPE))
      claims.effective_permissions = await effectivePermissions(store, allow, deny);
  }
  return claims;
}

/** The OIDC Core §5.1.1 Address Claim of a stored address (snake_case members; unset ones left out). */
export function addressClaim(address: UserAddress): Record<string, string> {
  const claim: Record<string, string> = {};
  if (address.formatted !== undefined) claim.formatted = address.formatted;
  if (address.streetAddress !== undefined) claim.street_address = address.streetAddress;
  if (address.locality !== undefined) claim.locality = address.locality;
  if (address.region !== undefined) claim.region = address.region;
  if (address.postalCode !== undefined) claim.postal_code = address.postalCode;
  if (address.country !== undefined) claim.country = address.country;
  return claim;
}
