/** Scope handling (RFC 6749 §3.3): space-delimited, case-sensitive tokens of `%x21 / %x23-5B / %x5D-7E`. */
import { OAuthError } from './errors.ts';

const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/**
 * Resolves the requested scope against what the client may request (`AllowedScopes`). Absent scope means
 * the client's whole allowed set (RFC 6749 §3.3: "pre-defined default value"). Duplicates are dropped.
 * @returns the granted scope as a space-delimited string (possibly empty).
 * @throws OAuthError `invalid_scope` when a token is malformed or not allowed for the client (spec 001).
 */
export function resolveScope(requested: string | undefined, allowed: readonly string[]): string {
  if (requested === undefined) return allowed.join(' ');
  const tokens = [...new Set(requested.split(' ').filter((t) => t !== ''))];
  for (const token of tokens) {
    if (!SCOPE_TOKEN.test(token))
      throw new OAuthError('invalid_scope', 'scope contains an invalid character');
    if (!allowed.includes(token))
      throw new OAuthError('invalid_scope', `scope '${token}' is not allowed for this client`);
  }
  return tokens.join(' ');
}

/** Splits a space-delimited scope string into its tokens. */
export function scopeTokens(scope: string): string[] {
  return scope.split(' ').filter((t) => t !== '');
}
