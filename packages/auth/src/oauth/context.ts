/** The shared dependencies of the OAuth endpoints and the login page. */
import { hash } from 'node:crypto';
import type { UpstreamProvider } from '../broker/config.ts';
import type { CredentialValidator } from '../credentials.ts';
import type { PasswordHasher } from '../passwords.ts';
import type { RateLimits } from '../ratelimit.ts';
import type { AuthStore, UserRecord } from '../store/types.ts';
import type { ClientSecrets } from './client-secrets.ts';
import type { ClientAuthenticator } from './clients.ts';
import type { OAuthConfig } from './config.ts';
import type { DpopProofVerifier } from './dpop.ts';
import type { KeyManager } from './keys.ts';
import type { TokenIssuer } from './tokens.ts';

/** Everything the endpoints share. */
export interface OAuthContext {
  readonly config: OAuthConfig;
  readonly store: AuthStore;
  readonly keys: KeyManager;
  readonly tokens: TokenIssuer;
  readonly clients: ClientAuthenticator;
  /** Stored forms of client secrets (hashed, or sealed for `client_secret_jwt`). */
  readonly clientSecrets: ClientSecrets;
  /** Credential validation of the core (writes the audit event with the real reason). */
  readonly credentials: CredentialValidator;
  /** Password hashing (self-service password reset and change). */
  readonly hasher: PasswordHasher;
  /** Clock, ms since epoch. */
  readonly now: () => number;
  /** DPoP proof verification (RFC 9449), undefined when DPoP is off. */
  readonly dpop?: DpopProofVerifier;
  /**
   * Brute-force limits: password checks, TOTP codes, reset requests (`limits.consume('totp', { ip,
   * account })` before a check, `limits.reward(…)` after a success; see `limitAttempt`). Undefined: off.
   */
  readonly limits?: RateLimits;
  /** Upstream OpenID providers offered on the login page (identity brokering, `../broker/`). */
  readonly upstreamProviders?: readonly UpstreamProvider[];
}

/** True when the account may receive tokens now: enabled and not locked out. */
export function userActive(user: Pick<UserRecord, 'isEnabled' | 'lockoutEnd'>, now: number): boolean {
  return user.isEnabled && !(user.lockoutEnd !== null && user.lockoutEnd > now);
}

/** A short, non-reversible tag of a security stamp (22 base64url characters). */
export function stampTag(securityStamp: string): string {
  return hash('sha256', securityStamp, 'base64url').slice(0, 22);
}

/**
 * Refresh-token family id: `<base>.<stamp tag>`. The tag binds the family to the user's security stamp
 * at grant time, so a password reset, disable or lock (which rotate the stamp) ends every family issued
 * before it. `base` is random (password grant) or the authorization code's hash (code grant, so that a
 * replayed code can revoke what it produced, RFC 6749 §4.1.2).
 */
export function familyIdFor(base: string, securityStamp: string | null): string {
  return securityStamp === null ? base : `${base}.${stampTag(securityStamp)}`;
}

/** True when a family id was issued under the given security stamp. */
export function familyMatchesStamp(familyId: string, securityStamp: string): boolean {
  const dot = familyId.lastIndexOf('.');
  return dot !== -1 && familyId.slice(dot + 1) === stampTag(securityStamp);
}
