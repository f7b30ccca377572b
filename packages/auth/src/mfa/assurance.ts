/**
 * How a user signed in, as tokens say it: `amr` (RFC 8176 §2 values: `pwd` password, `otp` one-time
 * code, `mfa` more than one factor) and `acr` (OIDC Core §2), one of {@link ACR}: `urn:seed:acr:pwd` for a
 * single factor, `urn:seed:acr:mfa` for two. A client asks for two factors with `acr_values` (OIDC Core
 * §3.1.2.1) or an administrator requires them for the user, one of the user's roles or the client.
 */

/** The `acr` values this server issues and understands in `acr_values`. */
export const ACR = Object.freeze({
  /** One factor (a password). */
  password: 'urn:seed:acr:pwd',
  /** Two factors (password and TOTP code or recovery code). */
  mfa: 'urn:seed:acr:mfa',
} as const);

/** The `acr_values_supported` of the discovery document. */
export const ACR_VALUES_SUPPORTED: readonly string[] = Object.freeze([ACR.password, ACR.mfa]);

/** The `acr` of a session with these `amr` values. */
export function acrFor(amr: readonly string[] | undefined): string {
  return amr?.includes('mfa') ? ACR.mfa : ACR.password;
}

/**
 * True when `acr_values` (space-separated, in order of preference) asks for two factors: its first value
 * this server knows is {@link ACR.mfa}. Unknown values are skipped; none known asks for nothing.
 */
export function acrValuesNeedMfa(acrValues: string | undefined | null): boolean {
  if (!acrValues) return false;
  for (const value of acrValues.split(' ')) {
    if (value === ACR.mfa) return true;
    if (value === ACR.password) return false;
  }
  return false;
}

/** `amr` after a second factor of kind `method` (`otp`): the earlier values plus `method` and `mfa`. */
export function amrWithSecondFactor(amr: readonly string[], method: string): string[] {
  return [...new Set([...amr, method, 'mfa'])];
}

/** True when a session's `amr` already has two factors. */
export function hasMfa(amr: readonly string[] | undefined): boolean {
  return amr?.includes('mfa') ?? false;
}
