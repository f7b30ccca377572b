/**
 * Records and the storage interface of the auth core (spec 001 "Resources and their fields").
 *
 * Every method is async so that a PostgreSQL implementation can follow without touching callers. Every
 * mutating method is one transaction: it either fully applies (including the optional audit event passed in
 * {@link ChangeOptions}) or throws and changes nothing. Times are milliseconds since the Unix epoch.
 *
 * Errors: `ValidationError` (bad field, names it), `NotFoundError`, `ConflictError` (unique constraint),
 * `ConstraintError` (e.g. deleting a built-in system role) — see `../errors.ts`.
 */

import type { PgQueryClient } from '../ratelimit.ts';
import type { GrantType, TokenEndpointAuthMethod } from './constants.ts';
import type { FactorStore } from './factors.ts';
import type { LinkStore } from './links.ts';

/** A user account. `isLockedOut` is derived: `lockoutEnd !== null && lockoutEnd > now`. */
export interface UserRecord {
  /** Stable opaque id (UUID); the `sub` of tokens issued to the user. */
  readonly id: string;
  /** Unique user name (unique case-insensitively), 1–256 characters as entered. */
  readonly userName: string;
  /** PHC-encoded password hash, or null for an account without a password. */
  readonly passwordHash: string | null;
  /** `IsEnabled`: false means the account is disabled. */
  readonly isEnabled: boolean;
  /** End of the current lockout (ms epoch), or null. The account is locked out while `lockoutEnd > now`. */
  readonly lockoutEnd: number | null;
  /** Consecutive failed credential validations (including attempts in flight). */
  readonly accessFailedCount: number;
  /** Random value rotated on disable, lock and password change; tokens carry it (claim `sst`). */
  readonly securityStamp: string;
  /** `Roles`: names of the roles held. */
  readonly roles: readonly string[];
  /** `DirectPermissions`: grant patterns held directly. */
  readonly directPermissions: readonly string[];
  /** `DeniedPermissions`: deny patterns held directly. */
  readonly deniedPermissions: readonly string[];
  /** Full name for display (OIDC `name` claim, scope `profile`), or null. */
  readonly displayName: string | null;
  /** Given name (OIDC `given_name`), or null. */
  readonly givenName: string | null;
  /** Family name (OIDC `family_name`), or null. */
  readonly familyName: string | null;
  /** E-mail address (OIDC `email`, scope `email`), or null. */
  readonly email: string | null;
  /** Whether the e-mail address was verified (OIDC `email_verified`). */
  readonly emailVerified: boolean;
  /** Telephone number in E.164 form, e.g. `+4930123456` (OIDC `phone_number`, scope `phone`), or null. */
  readonly phoneNumber: string | null;
  /** Whether the telephone number was verified (OIDC `phone_number_verified`). */
  readonly phoneNumberVerified: boolean;
  /** Postal address (OIDC `address`, scope `address`, §5.1.1), or null. */
  readonly address: UserAddress | null;
  /** Incremented on every change of the record (part of the matcher cache key). */
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/**
 * A postal address (OpenID Connect Core 1.0 §5.1.1 Address Claim), stored as given: each member at most
 * 256 characters; `formatted` and `streetAddress` may span lines (`\n`), the others have no control
 * characters. At least one member is set. In claims the members are `formatted`, `street_address`,
 * `locality`, `region`, `postal_code`, `country`.
 */
export interface UserAddress {
  /** The full address for display or a mailing label, lines separated by `\n`. */
  readonly formatted?: string;
  /** House number, street, and more lines (`\n`) when needed. */
  readonly streetAddress?: string;
  /** City or locality. */
  readonly locality?: string;
  /** State, province, prefecture or region. */
  readonly region?: string;
  readonly postalCode?: string;
  /** Country name or ISO 3166-1 code. */
  readonly country?: string;
}

/**
 * Profile fields of a user (OpenID Connect Core 1.0 §5.1 standard claims `name`, `given_name`,
 * `family_name`, `email`, `email_verified`, `phone_number`, `phone_number_verified`, `address`). Text fields:
 * at most 256 characters, no control characters; `email`: at most 254 characters, `local@domain`;
 * `phoneNumber`: E.164 (`+` and 2–15 digits, optionally `;ext=` and up to 10 digits); `address`: see
 * {@link UserAddress}. null clears a field.
 */
export interface UserProfileInput {
  displayName?: string | null;
  givenName?: string | null;
  familyName?: string | null;
  email?: string | null;
  emailVerified?: boolean;
  phoneNumber?: string | null;
  phoneNumberVerified?: boolean;
  address?: UserAddress | null;
}

/** Input of {@link AuthStore.createUser}. */
export interface NewUser extends UserProfileInput {
  userName: string;
  passwordHash?: string | null;
  isEnabled?: boolean;
  roles?: readonly string[];
  directPermissions?: readonly string[];
  deniedPermissions?: readonly string[];
}

/**
 * Input of {@link AuthStore.updateUser}: the fields of {@link NewUser} but the password hash (see
 * {@link AuthStore.setPasswordHash}); omitted fields stay unchanged. Disabling rotates the security stamp.
 */
export type UserPatch = Partial<Omit<NewUser, 'passwordHash'>>;

/** A role. Built-in system roles (`isSystem`) cannot be deleted, renamed, or have their rules changed. */
export interface RoleRecord {
  readonly id: string;
  /** Unique (case-insensitively) name, 1–64 characters of letters, digits, `_`, `-`, `.`, space. */
  readonly name: string;
  readonly description: string;
  /** `Permissions`: grant patterns. */
  readonly permissions: readonly string[];
  /** `DeniedPermissions`: deny patterns. */
  readonly deniedPermissions: readonly string[];
  /**
   * `ParentRoles`: names of the roles this role inherits from (their grants and denies apply to its holders,
   * transitively). The graph has no cycles (the store refuses them).
   */
  readonly parentRoles: readonly string[];
  readonly isSystem: boolean;
  /** Incremented on every change (part of the matcher cache key of its holders). */
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Input of {@link AuthStore.createRole}. */
export interface NewRole {
  name: string;
  description?: string;
  permissions?: readonly string[];
  deniedPermissions?: readonly string[];
  /** Names of existing roles to inherit from (see {@link RoleRecord.parentRoles}). */
  parentRoles?: readonly string[];
}

/** Input of {@link AuthStore.updateRole}: the fields of {@link NewRole}; omitted fields stay unchanged. */
export type RolePatch = Partial<NewRole>;

/** A catalog entry for a concrete permission code (grants may also use wildcard patterns not in the catalog). */
export interface PermissionRecord {
  /** Normalized concrete code (primary key). */
  readonly code: string;
  readonly description: string;
  readonly createdAt: number;
}

/** Input of {@link AuthStore.createPermission}. */
export interface NewPermission {
  code: string;
  description?: string;
}

/**
 * OpenID Connect settings of a client: `postLogoutRedirectUris` (absolute URIs without fragment, at most 50),
 * `backchannelLogoutUri` (absolute `http(s)` URI without fragment, or null), `requireConsent`.
 */
export interface ClientOidcInput {
  postLogoutRedirectUris?: readonly string[];
  backchannelLogoutUri?: string | null;
  requireConsent?: boolean;
}

/** OAuth client type (RFC 6749 §2.1). Public clients have no secret. */
export type ClientType = 'public' | 'confidential';

export type { GrantType, TokenEndpointAuthMethod } from './constants.ts';
export { GRANT_TYPES, TOKEN_ENDPOINT_AUTH_METHODS } from './constants.ts';

/** An OAuth client. */
export interface ClientRecord {
  /** `client_id` (primary key): 1–128 characters of `A-Z a-z 0-9 . _ ~ -`. */
  readonly clientId: string;
  readonly displayName: string;
  readonly clientType: ClientType;
  /** PHC-encoded secret hash (confidential clients), null for public clients. */
  readonly secretHash: string | null;
  readonly isEnabled: boolean;
  /** Absolute redirect URIs without fragment (RFC 6749 §3.1.2), compared exactly. */
  readonly redirectUris: readonly string[];
  /** `AllowedGrantTypes`. */
  readonly allowedGrantTypes: readonly GrantType[];
  /** `AllowedScopes`: scope tokens (RFC 6749 §3.3). */
  readonly allowedScopes: readonly string[];
  /** `Permissions`: grant patterns the client holds as a subject (client_credentials tokens). */
  readonly permissions: readonly string[];
  /**
   * Where RP-initiated logout may send the user back (OIDC RP-Initiated Logout 1.0 §3,
   * `post_logout_redirect_uris`), compared exactly.
   */
  readonly postLogoutRedirectUris: readonly string[];
  /** OIDC Back-Channel Logout 1.0 §2.2 `backchannel_logout_uri`: receives logout tokens, or null. */
  readonly backchannelLogoutUri: string | null;
  /** Third-party client: the user must consent to the scopes it requests (consent page), remembered per user. */
  readonly requireConsent: boolean;
  /** OAuth extension settings (RFC 7591 client metadata); `{}` when none were set. */
  readonly metadata: ClientMetadata;
  readonly version: number;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** Input of {@link AuthStore.createClient}. Confidential clients need `secretHash`; public ones must not have one. */
export interface NewClient extends ClientOidcInput {
  clientId: string;
  displayName?: string;
  clientType: ClientType;
  secretHash?: string | null;
  isEnabled?: boolean;
  redirectUris?: readonly string[];
  allowedGrantTypes?: readonly string[];
  allowedScopes?: readonly string[];
  permissions?: readonly string[];
}

/**
 * Input of {@link AuthStore.updateClient}: the fields of {@link NewClient} but `clientId` and `clientType`
 * (which never change); omitted fields stay unchanged.
 */
export type ClientPatch = Partial<Omit<NewClient, 'clientId' | 'clientType'>>;

/**
 * OAuth extension settings of a client (RFC 7591 §2 client metadata, camelCase). Every field is optional;
 * an absent field takes the server's default.
 */
export interface ClientMetadata {
  /**
   * RFC 9449 §5.2 `dpop_bound_access_tokens` ("DPoP required"): token requests without a valid DPoP proof
   * are refused and every access token is DPoP-bound.
   */
  readonly dpopBoundAccessTokens?: boolean;
  /** RFC 9126 §6 `require_pushed_authorization_requests`: authorization requests must use PAR. */
  readonly requirePushedAuthorizationRequests?: boolean;
  /**
   * RFC 7591 §2 `token_endpoint_auth_method`: when set, the only method the client may use. Unset:
   * `client_secret_basic`/`client_secret_post` (confidential) or `none` (public).
   */
  readonly tokenEndpointAuthMethod?: TokenEndpointAuthMethod;
  /** RFC 7591 §2 `jwks`: the client's public keys (`private_key_jwt`), inline. */
  readonly jwks?: { readonly keys: readonly Readonly<Record<string, unknown>>[] };
  /** RFC 7591 §2 `jwks_uri`: where the client's public keys are published (`https`, or `http` on loopback). */
  readonly jwksUri?: string;
  /**
   * RFC 8707 resource indicators the client may request (absolute URIs without fragment). Unset: only the
   * server's default audience.
   */
  readonly allowedResources?: readonly string[];
  /**
   * Token exchange policy (RFC 8693): `subjectClients` are the client ids whose users' access tokens this
   * client may exchange (`*`: any); `impersonation` allows requests without `actor_token`, `delegation`
   * requests with one (the new token gets an `act` claim). Unset: the client may not exchange tokens.
   */
  readonly tokenExchange?: {
    readonly subjectClients: readonly string[];
    readonly impersonation?: boolean;
    readonly delegation?: boolean;
  };
  /**
   * Origins (`scheme://host[:port]`, https or loopback http) whose browser scripts may call the token,
   * UserInfo, revocation, end-session, discovery and JWKS endpoints for this client (CORS, Fetch Standard
   * §3.2). Unset: the origins of its redirect URIs (as Keycloak's `+`); `[]`: none.
   */
  readonly webOrigins?: readonly string[];
  /**
   * Put the claims of the granted `profile`, `email`, `roles` and `permissions` scopes
   * into the ID token too (default true, as Auth.js and most relying parties expect); false keeps them
   * UserInfo-only (OIDC Core §5.4 when an access token is issued, node-oidc-provider's conformant mode).
   */
  readonly claimsInIdToken?: boolean;
}

/** Audit event categories used by the core (free text is accepted; these are the conventional ones). */
export const AuditCategory = Object.freeze({
  Login: 'Login',
  Token: 'Token',
  Authorization: 'Authorization',
  Admin: 'Admin',
} as const);
/** One of {@link AuditCategory} (or another category string). */
export type AuditCategory = (typeof AuditCategory)[keyof typeof AuditCategory];

/** Audit outcomes. */
export const AuditOutcome = Object.freeze({
  Success: 'Success',
  Denied: 'Denied',
  Failure: 'Failure',
} as const);
/** One of {@link AuditOutcome}. */
export type AuditOutcome = (typeof AuditOutcome)[keyof typeof AuditOutcome];

/** An audit event (spec 001 "Audit event": `Category`, `Outcome`, subject, client, failure code, time, address). */
export interface AuditEvent {
  /** Monotonic id assigned by the store. */
  readonly id: number;
  /** When it happened (ms epoch). */
  readonly time: number;
  readonly category: string;
  readonly outcome: string;
  /** User id or client id the event is about, if known. */
  readonly subjectId: string | null;
  /** User name as presented (e.g. the login name tried), if any. */
  readonly subjectName: string | null;
  readonly clientId: string | null;
  /** Failure code, e.g. `invalid_credentials`, `account_disabled`, `locked_out`. */
  readonly failureCode: string | null;
  readonly remoteAddress: string | null;
  /** Extra structured data (no secrets). */
  readonly details: Readonly<Record<string, unknown>> | null;
}

/** Input of {@link AuthStore.appendAudit}; `time` defaults to the store's clock. */
export interface NewAuditEvent {
  time?: number;
  category: string;
  outcome: string;
  subjectId?: string | null;
  subjectName?: string | null;
  clientId?: string | null;
  failureCode?: string | null;
  remoteAddress?: string | null;
  details?: Record<string, unknown> | null;
}

/** Filter and paging of {@link AuthStore.listAudit}. Results are newest first. */
export interface AuditQuery {
  category?: string;
  outcome?: string;
  subjectId?: string;
  clientId?: string;
  /** Inclusive lower bound, ms epoch. */
  from?: number;
  /** Exclusive upper bound, ms epoch. */
  to?: number;
  /** Default 0. */
  offset?: number;
  /** Default 50, maximum 1000. */
  limit?: number;
}

/** Paging of list methods. */
export interface ListQuery {
  /** Default 0. */
  offset?: number;
  /** Default 50, maximum 1000. */
  limit?: number;
  /** Case-insensitive substring filter on the name / id. */
  search?: string;
}

/** One page of a list. */
export interface Page<T> {
  readonly items: readonly T[];
  /** Total number of matching records. */
  readonly total: number;
}

/** Options of mutating methods: `audit` is written in the same transaction as the change. */
export interface ChangeOptions {
  audit?: NewAuditEvent;
}

/** Everything needed to authorize a user: the record and its roles (one consistent read). */
export interface UserSubject {
  readonly user: UserRecord;
  /**
   * The roles the user holds and, transitively, their parent roles (each once, ordered by name): every
   * role whose rules apply to the user.
   */
  readonly roles: readonly RoleRecord[];
}

/** Result of {@link AuthStore.beginAccessAttempt}. */
export interface AccessAttempt {
  /** False when the account is locked out (or enough attempts are in flight to lock it). */
  readonly allowed: boolean;
  /** The consecutive-failure number this attempt holds (1-based) when allowed. */
  readonly attempt: number;
  /** Lockout end when not allowed because of an active lockout. */
  readonly lockoutEnd: number | null;
}

/** A stored refresh token (the token itself is never stored, only its SHA-256 hash). */
export interface RefreshTokenRecord {
  /** Hex/base64url SHA-256 of the opaque token (primary key). */
  readonly tokenHash: string;
  /** Rotation family: every token rotated from the same original shares it (RFC 9700 §4.14.2). */
  readonly familyId: string;
  readonly clientId: string;
  readonly userId: string | null;
  /** Space-separated scope. */
  readonly scope: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  /** When it was exchanged (rotated), or null. Reuse of a used token should revoke the family. */
  readonly usedAt: number | null;
  readonly revokedAt: number | null;
  /** Hash of the token that replaced it on rotation. */
  readonly replacedBy: string | null;
  /**
   * JWK SHA-256 thumbprint of the DPoP key the token is bound to (RFC 9449 §5: public clients' refresh
   * tokens), or null when unbound.
   */
  readonly dpopJkt: string | null;
  /** Login session (`sid`) the token descends from; RP-initiated logout revokes its tokens. */
  readonly sessionId: string | null;
  /** Time of the user authentication, seconds since epoch, or null. */
  readonly authTime: number | null;
  /**
   * Authentication methods (`amr`, RFC 8176) of the sign-in the token descends from, e.g. `['pwd', 'otp',
   * 'mfa']`; empty when unknown (client tokens, brokered sign-ins). Refreshed tokens carry them again.
   */
  readonly amr: readonly string[];
}

/** What the refresh grant needs of a refresh token's user (spec 001 user fields; no roles or permissions). */
export interface RefreshTokenOwner {
  readonly id: string;
  readonly userName: string;
  readonly isEnabled: boolean;
  /** Lockout end, ms epoch, or null. */
  readonly lockoutEnd: number | null;
  readonly securityStamp: string;
}

/** Result of {@link AuthStore.findRefreshTokenWithOwner}. */
export interface RefreshTokenWithOwner {
  readonly token: RefreshTokenRecord;
  /** The token's user; undefined when the token has no user or the user no longer exists. */
  readonly owner: RefreshTokenOwner | undefined;
}

/** Input of {@link AuthStore.insertRefreshToken}. */
export interface NewRefreshToken {
  tokenHash: string;
  familyId: string;
  clientId: string;
  userId?: string | null;
  scope?: string;
  createdAt: number;
  expiresAt: number;
  /** DPoP key thumbprint the token is bound to (RFC 9449 §5), or null. */
  dpopJkt?: string | null;
  /** Login session (`sid`) the token descends from, or null (password grant, client credentials). */
  sessionId?: string | null;
  /** Time of the user authentication, seconds since epoch (`auth_time` of ID tokens on refresh), or null. */
  authTime?: number | null;
  /** Authentication methods of the sign-in (RFC 8176 `amr`), kept for refreshed tokens; none when omitted. */
  amr?: readonly string[] | null;
}

/** A stored authorization code (only its hash is stored), single-use (RFC 6749 §4.1.2, RFC 7636). */
export interface AuthorizationCodeRecord {
  readonly codeHash: string;
  readonly clientId: string;
  readonly userId: string;
  readonly redirectUri: string;
  readonly scope: string;
  readonly codeChallenge: string | null;
  /** `S256` or `plain` (RFC 7636 §4.3), null without PKCE. */
  readonly codeChallengeMethod: string | null;
  readonly nonce: string | null;
  /** Time of the user authentication, seconds since epoch (`auth_time`), or null. */
  readonly authTime: number | null;
  /** The login session (`sid`) the code was issued in, or null. */
  readonly sessionId: string | null;
  /** Authentication methods (`amr`, RFC 8176), e.g. `['pwd']`. */
  readonly amr: readonly string[];
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly usedAt: number | null;
}

/** Input of {@link AuthStore.insertAuthorizationCode}. */
export interface NewAuthorizationCode {
  codeHash: string;
  clientId: string;
  userId: string;
  redirectUri: string;
  scope?: string;
  codeChallenge?: string | null;
  codeChallengeMethod?: string | null;
  nonce?: string | null;
  /** Seconds since epoch. */
  authTime?: number | null;
  sessionId?: string | null;
  amr?: readonly string[];
  createdAt: number;
  expiresAt: number;
}

/** A token signing key as JWK JSON (RFC 7517). The private JWK is stored as given — protect the database. */
export interface SigningKeyRecord {
  /** Key id (`kid`), primary key. */
  readonly kid: string;
  /** JWS algorithm, e.g. `ES256`, `RS256`, `EdDSA`. */
  readonly alg: string;
  readonly privateJwk: Readonly<Record<string, unknown>>;
  readonly publicJwk: Readonly<Record<string, unknown>>;
  readonly createdAt: number;
  /** When the key stopped signing (still published for verification until `expiresAt`), or null. */
  readonly retiredAt: number | null;
  /** When the key may be dropped from the JWKS, or null. */
  readonly expiresAt: number | null;
}

/** Input of {@link AuthStore.insertSigningKey}. */
export interface NewSigningKey {
  kid: string;
  alg: string;
  privateJwk: Record<string, unknown>;
  publicJwk: Record<string, unknown>;
  createdAt: number;
  expiresAt?: number | null;
}

/** A user's consent to a third-party client's scopes (remembered until revoked). */
export interface ConsentRecord {
  readonly userId: string;
  readonly clientId: string;
  /** Scope tokens consented to (sorted). */
  readonly scopes: readonly string[];
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** A pushed authorization request (RFC 9126): the parameters behind one `request_uri`, stored by hash. */
export interface PushedRequestRecord {
  /** SHA-256 of the random part of the `request_uri` (primary key). */
  readonly requestHash: string;
  readonly clientId: string;
  /** The authorization request parameters as pushed (client authentication parameters removed). */
  readonly params: Readonly<Record<string, string>>;
  readonly createdAt: number;
  readonly expiresAt: number;
  /** When an authorization code was issued from it (one-time use), or null. */
  readonly usedAt: number | null;
}

/** State of a device authorization (RFC 8628 §3.3–3.5). */
export type DeviceCodeStatus = 'pending' | 'approved' | 'denied' | 'used';

/** A device authorization request (RFC 8628 §3.1–3.2): the device code is stored only as its hash. */
export interface DeviceCodeRecord {
  readonly deviceCodeHash: string;
  /** The user code as stored: upper case, without separators (e.g. `BDWPHQKN`). */
  readonly userCode: string;
  readonly clientId: string;
  readonly scope: string;
  readonly status: DeviceCodeStatus;
  /** The user who approved or denied, or null while pending. */
  readonly userId: string | null;
  /** Minimum polling interval, seconds (raised by 5 on each `slow_down`, §3.5). */
  readonly intervalSeconds: number;
  readonly lastPolledAt: number | null;
  readonly createdAt: number;
  readonly expiresAt: number;
}

/** A login-page session (cookie value stored hashed). */
export interface LoginSessionRecord {
  readonly sessionHash: string;
  readonly userId: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly revokedAt: number | null;
  /** Public session id (OIDC `sid` claim, Back-Channel Logout 1.0 §2.4), or null for older sessions. */
  readonly sid: string | null;
  /** Authentication methods used (RFC 8176 `amr` values), e.g. `['pwd']`. */
  readonly amr: readonly string[];
}

/** Input of {@link AuthStore.createLoginSession}. */
export interface NewLoginSession {
  sessionHash: string;
  userId: string;
  createdAt: number;
  expiresAt: number;
  /** Public session id (22+ base64url characters); unique. */
  sid?: string | null;
  /** Default `['pwd']`. */
  amr?: readonly string[];
}

/**
 * Storage of the auth core: `SqliteAuthStore` (embedded, the default) or `PostgresAuthStore` (several
 * instances behind one database). All methods may throw the typed errors of `../errors.ts`.
 */
export interface AuthStore {
  // ── users ──
  /** @throws ValidationError (bad field or unknown role), ConflictError (`userName` taken). */
  createUser(input: NewUser, options?: ChangeOptions): Promise<UserRecord>;
  /** The user with that id, or undefined. */
  getUser(id: string): Promise<UserRecord | undefined>;
  /** Case-insensitive lookup by user name. */
  findUserByName(userName: string): Promise<UserRecord | undefined>;
  /** Users ordered by user name; `search` filters on the name. @throws ValidationError (bad offset/limit). */
  listUsers(query?: ListQuery): Promise<Page<UserRecord>>;
  /** Disabling (`isEnabled: false`) rotates the security stamp. @throws NotFoundError, ValidationError, ConflictError. */
  updateUser(id: string, patch: UserPatch, options?: ChangeOptions): Promise<UserRecord>;
  /** Sets the password hash; rotates the security stamp unless `rotateStamp` is false (used for rehash on login). @throws NotFoundError. */
  setPasswordHash(
    id: string,
    passwordHash: string,
    options?: ChangeOptions & { rotateStamp?: boolean },
  ): Promise<UserRecord>;
  /** Locks the account until `until` (ms epoch) and rotates the security stamp. @throws NotFoundError. */
  lockUser(id: string, until: number, options?: ChangeOptions): Promise<UserRecord>;
  /** Ends a lockout and resets the failure count. @throws NotFoundError. */
  unlockUser(id: string, options?: ChangeOptions): Promise<UserRecord>;
  /** @throws NotFoundError. */
  deleteUser(id: string, options?: ChangeOptions): Promise<void>;
  /** The user and its roles, or undefined when the user does not exist. */
  getUserSubject(id: string): Promise<UserSubject | undefined>;

  // ── lockout (credential validation) ──
  /**
   * Atomically claims one attempt: when the account is not locked at `now` and fewer than `maxFailures`
   * attempts are counted, increments `accessFailedCount` and returns `{allowed: true, attempt}`; otherwise
   * `{allowed: false}`. An expired lockout is cleared first. Counting before the password check means
   * concurrent attempts can never exceed `maxFailures` guesses.
   */
  beginAccessAttempt(userId: string, now: number, maxFailures: number): Promise<AccessAttempt>;
  /**
   * Completes a failed attempt: when `attempt >= maxFailures`, locks the account until `now + lockoutMs`,
   * resets the count and rotates the security stamp. @returns whether this call locked the account.
   */
  failAccessAttempt(
    userId: string,
    attempt: number,
    now: number,
    maxFailures: number,
    lockoutMs: number,
  ): Promise<boolean>;
  /** Completes a successful attempt: resets the failure count and clears the lockout. */
  succeedAccessAttempt(userId: string): Promise<void>;

  // ── roles ──
  /**
   * @throws ValidationError (bad field, unknown parent role: `parentRoles[i]` / `unknown_role`),
   * ConflictError (`name` taken).
   */
  createRole(input: NewRole, options?: ChangeOptions): Promise<RoleRecord>;
  /** The role with that id, or undefined. */
  getRole(id: string): Promise<RoleRecord | undefined>;
  /** Case-insensitive lookup by role name. */
  findRoleByName(name: string): Promise<RoleRecord | undefined>;
  /** Roles ordered by name. @throws ValidationError (bad offset/limit). */
  listRoles(query?: ListQuery): Promise<Page<RoleRecord>>;
  /**
   * Every change bumps the role's version; the matcher cache key of a user covers the versions of all
   * roles in its closure ({@link UserSubject.roles}), so a change of a parent role reaches the holders of
   * every role inheriting from it. A system role's `parentRoles` cannot change (its rules are fixed).
   * @throws NotFoundError, ValidationError (`parentRoles` / `cycle` when the role would inherit from itself,
   * directly or through other roles), ConflictError, ConstraintError (system role renamed or rules changed).
   */
  updateRole(id: string, patch: RolePatch, options?: ChangeOptions): Promise<RoleRecord>;
  /** Removes the role from its holders too. @throws NotFoundError, ConstraintError (`system_role`). */
  deleteRole(id: string, options?: ChangeOptions): Promise<void>;

  // ── permission catalog ──
  /** @throws ValidationError (code not concrete / not normalizable), ConflictError. */
  createPermission(input: NewPermission, options?: ChangeOptions): Promise<PermissionRecord>;
  /** The catalog entry of a code (normalized lookup), or undefined. */
  getPermission(code: string): Promise<PermissionRecord | undefined>;
  /** Catalog entries ordered by code. @throws ValidationError (bad offset/limit). */
  listPermissions(query?: ListQuery): Promise<Page<PermissionRecord>>;
  /** @throws NotFoundError. */
  updatePermission(
    code: string,
    patch: { description?: string },
    options?: ChangeOptions,
  ): Promise<PermissionRecord>;
  /** @throws NotFoundError. */
  deletePermission(code: string, options?: ChangeOptions): Promise<void>;

  // ── clients ──
  /** @throws ValidationError, ConflictError (`clientId` taken). */
  createClient(input: NewClient, options?: ChangeOptions): Promise<ClientRecord>;
  /** The client with that id (case-sensitive), or undefined. */
  getClient(clientId: string): Promise<ClientRecord | undefined>;
  /** Clients ordered by id. @throws ValidationError (bad offset/limit). */
  listClients(query?: ListQuery): Promise<Page<ClientRecord>>;
  /** @throws NotFoundError, ValidationError. */
  updateClient(clientId: string, patch: ClientPatch, options?: ChangeOptions): Promise<ClientRecord>;
  /** Also deletes the client's refresh tokens and authorization codes. @throws NotFoundError. */
  deleteClient(clientId: string, options?: ChangeOptions): Promise<void>;

  // ── audit ──
  /** Appends one audit event. @throws ValidationError (missing category/outcome). */
  appendAudit(event: NewAuditEvent): Promise<AuditEvent>;
  /** Audit events, newest first, filtered and paged. @throws ValidationError (bad filter or paging). */
  listAudit(query?: AuditQuery): Promise<Page<AuditEvent>>;

  // ── token lifecycle ──
  /** @throws ConflictError when the hash exists. */
  insertRefreshToken(input: NewRefreshToken): Promise<RefreshTokenRecord>;
  /** The refresh token with that hash, or undefined. */
  findRefreshToken(tokenHash: string): Promise<RefreshTokenRecord | undefined>;
  /**
   * The refresh token with that hash together with its user's status, read in one query (the refresh
   * grant's lookup), or undefined when no token has that hash.
   */
  findRefreshTokenWithOwner(tokenHash: string): Promise<RefreshTokenWithOwner | undefined>;
  /**
   * Atomically marks an unused, unrevoked token as used (rotation) and records its successor.
   * @returns false when it was already used or revoked (replay — the caller should revoke the family).
   */
  markRefreshTokenUsed(tokenHash: string, now: number, replacedBy: string | null): Promise<boolean>;
  /**
   * Rotation in one transaction (RFC 9700 §4.14.2): marks `tokenHash` used — only when it is unused and
   * unrevoked — and stores `next` as its successor.
   * @returns false, changing nothing, when the token is missing, already used or revoked (a replay).
   * @throws ConflictError when `next.tokenHash` exists.
   */
  rotateRefreshToken(tokenHash: string, next: NewRefreshToken, now: number): Promise<boolean>;
  /** Revokes one token. @returns whether it was found and not yet revoked. */
  revokeRefreshToken(tokenHash: string, now: number): Promise<boolean>;
  /**
   * Revokes the tokens of a family that can still be exchanged (neither used nor revoked): RFC 9700
   * §4.14.2 "revoke the active refresh token". Used tokens stay as they are; presenting one again is a
   * replay either way. @returns the number newly revoked.
   */
  revokeRefreshTokenFamily(familyId: string, now: number): Promise<number>;
  /** Revokes every refresh token of a user (e.g. on password reset). @returns the number newly revoked. */
  revokeUserRefreshTokens(userId: string, now: number): Promise<number>;
  /** @throws ConflictError when the hash exists. */
  insertAuthorizationCode(input: NewAuthorizationCode): Promise<AuthorizationCodeRecord>;
  /** The authorization code with that hash (used or not), or undefined. */
  findAuthorizationCode(codeHash: string): Promise<AuthorizationCodeRecord | undefined>;
  /**
   * Atomically marks an unused code as used and returns it (single use, RFC 6749 §4.1.2).
   * @returns undefined when missing or already used (the caller decides about expiry and ownership).
   */
  consumeAuthorizationCode(codeHash: string, now: number): Promise<AuthorizationCodeRecord | undefined>;
  /** @throws ConflictError when the kid exists. */
  insertSigningKey(input: NewSigningKey): Promise<SigningKeyRecord>;
  /** Keys newest first; retired and expired ones only when `includeRetired`. */
  listSigningKeys(options?: { includeRetired?: boolean; now?: number }): Promise<SigningKeyRecord[]>;
  /** Stops signing with a key; it stays listed (with `includeRetired`) until `expiresAt`. @throws NotFoundError. */
  retireSigningKey(kid: string, at: number, expiresAt: number | null): Promise<void>;
  /** @throws ConflictError when the hash exists. */
  createLoginSession(input: NewLoginSession): Promise<LoginSessionRecord>;
  /** The login session with that hash (revoked or not), or undefined. */
  getLoginSession(sessionHash: string): Promise<LoginSessionRecord | undefined>;
  /** @returns whether it was found and not yet revoked. */
  revokeLoginSession(sessionHash: string, now: number): Promise<boolean>;
  /** The login session with that public id (`sid`), or undefined. */
  findLoginSessionBySid(sid: string): Promise<LoginSessionRecord | undefined>;
  /**
   * Ends a login session (OIDC RP-Initiated Logout 1.0 §2): revokes it and every refresh token issued in it.
   * @returns the number of refresh tokens newly revoked.
   */
  endLoginSession(sessionHash: string, now: number): Promise<number>;
  /** Records that `clientId` received tokens in session `sid` (for Back-Channel Logout 1.0). Idempotent. */
  addSessionClient(sid: string, clientId: string, now: number): Promise<void>;
  /** The clients that received tokens in session `sid` (ordered by client id). */
  listSessionClients(sid: string): Promise<ClientRecord[]>;

  // ── consent (third-party clients) ──
  /** The scopes `userId` consented to for `clientId`, or undefined when never asked. */
  getConsent(userId: string, clientId: string): Promise<ConsentRecord | undefined>;
  /**
   * Records (or widens: the union with what was granted before) a user's consent to a client's scopes.
   * @throws ConstraintError (`foreign_key`) when the user or client does not exist.
   */
  grantConsent(
    userId: string,
    clientId: string,
    scopes: readonly string[],
    options?: ChangeOptions,
  ): Promise<ConsentRecord>;
  /** Consents, newest first, filtered by user and/or client. @throws ValidationError (bad paging). */
  listConsents(query?: {
    userId?: string;
    clientId?: string;
    offset?: number;
    limit?: number;
  }): Promise<Page<ConsentRecord>>;
  /** Withdraws a consent. @throws NotFoundError when there is none. */
  revokeConsent(userId: string, clientId: string, options?: ChangeOptions): Promise<void>;
  /** Deletes expired refresh tokens, codes, sessions and signing keys. @returns rows deleted. */
  purgeExpired(now: number): Promise<number>;

  // ── OAuth extensions ──
  /**
   * Records (or replaces) the hash of a dynamically registered client's registration access token
   * (RFC 7592 §3). @throws NotFoundError when the client does not exist.
   */
  setRegistrationAccessToken(clientId: string, tokenHash: string, now: number): Promise<void>;
  /** The registration access token hash of a dynamically registered client, or undefined. */
  findRegistrationAccessToken(clientId: string): Promise<string | undefined>;
  /** Stores a device authorization request. @throws ConflictError when the hash or user code exists. */
  insertDeviceCode(
    input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
  ): Promise<DeviceCodeRecord>;
  /** The device authorization with that (normalized) user code, or undefined. */
  findDeviceCodeByUserCode(userCode: string): Promise<DeviceCodeRecord | undefined>;
  /**
   * One poll of the token endpoint (RFC 8628 §3.4–3.5), atomically: records the poll time and, when the
   * previous poll of a pending request is less than its interval ago, raises the interval by 5 s.
   * @returns the record as it was before this poll and whether the client polled too fast, or undefined.
   */
  pollDeviceCode(
    deviceCodeHash: string,
    now: number,
  ): Promise<{ record: DeviceCodeRecord; slowDown: boolean } | undefined>;
  /**
   * The user's decision on a pending, unexpired request (RFC 8628 §3.3).
   * @returns false when the request is not pending any more or expired.
   */
  decideDeviceCode(userCode: string, approved: boolean, userId: string, now: number): Promise<boolean>;
  /** Marks an approved request used (its tokens are issued once). @returns false when not approved (or used). */
  consumeDeviceCode(deviceCodeHash: string): Promise<boolean>;
  /** Stores a pushed authorization request (RFC 9126 §2.2). @throws ConflictError when the hash exists. */
  insertPushedRequest(input: Omit<PushedRequestRecord, 'usedAt'>): Promise<PushedRequestRecord>;
  /** The pushed request with that hash (used or not, expired or not), or undefined. */
  findPushedRequest(requestHash: string): Promise<PushedRequestRecord | undefined>;
  /**
   * Marks a pushed request used (RFC 9126 §4: one-time use).
   * @returns false when it is missing, expired at `now` or already used.
   */
  consumePushedRequest(requestHash: string, now: number): Promise<boolean>;
  /**
   * Records a one-time key (a DPoP proof or client assertion `jti`, RFC 9449 §11.1, RFC 7523 §3) under
   * `kind` until `expiresAt` (ms epoch). Atomic across every connection to the store.
   * @returns false when the key is already recorded and not expired at `now` (a replay).
   */
  claimReplayKey(kind: string, key: string, expiresAt: number, now: number): Promise<boolean>;
  /**
   * Replaces a client's {@link ClientMetadata} (validated; `{}` clears it).
   * @throws NotFoundError (client), ValidationError (naming the field).
   */
  setClientMetadata(
    clientId: string,
    metadata: ClientMetadata,
    options?: ChangeOptions,
  ): Promise<ClientRecord>;

  /**
   * Calls `listener` whenever any process sharing this store inserts or retires a signing key, so that
   * every instance's key manager reloads at once (not only at its periodic reload). Optional: a store only
   * one process uses (SQLite) leaves it out. @returns a function that stops watching.
   */
  watchSigningKeys?(listener: () => void): Promise<() => Promise<void>>;

  /**
   * A `pg`-style query client over this store's database for the shared brute-force counters (the
   * `rate_limits` table; see `RateLimits.postgres`). Optional: a store only one process uses (SQLite)
   * leaves it out and the counters stay in memory.
   */
  rateLimitClient?(): PgQueryClient;

  /** Links of local users to upstream OpenID provider accounts (identity brokering, `./links.ts`). */
  readonly links: LinkStore;

  /** Second factors: TOTP factors, recovery codes and two-factor requirements (`./factors.ts`). */
  readonly factors: FactorStore;

  /** Releases the storage (closes the database). */
  close(): Promise<void>;
}
