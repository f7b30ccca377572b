/**
 * The paths by which the authorization server's pages and endpoints link to one another (spec 001
 * "Authorization endpoint", "Login page"), and the query helper they build redirects with. A leaf module:
 * the authorization endpoint, the consent page and the login pages all import it, none of them each other
 * for a path.
 */

/** Path of the login page. */
export const LOGIN_PATH = '/login';
/** Path of the second-factor page of the login. */
export const OTP_PATH = '/login/otp';
/** Path of the authorization endpoint (RFC 6749 §3.1). */
export const AUTHORIZE_PATH = '/connect/authorize';

/** `uri` with parameters added to its query (RFC 6749 §4.1.2: keep the existing query). @throws TypeError for a `uri` that is no absolute URL. */
export function withQuery(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  return url.toString();
}
