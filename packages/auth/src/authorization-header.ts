/**
 * The one parser of the HTTP `Authorization` request header (RFC 9110 §11.6.2) for every part of the
 * server: the permission middleware, the userinfo endpoint, dynamic client registration and OAuth client
 * authentication. It knows three schemes and reports everything else as another scheme:
 *
 * - `Bearer <token68>` (RFC 6750 §2.1, the `b64token` syntax);
 * - `DPoP <token68>` (RFC 9449 §7.1, same syntax as Bearer);
 * - `Basic <base64(user-id ":" password)>` (RFC 7617 §2; the base64 must be canonical: padded, length a
 *   multiple of 4).
 *
 * Scheme names match case-insensitively (RFC 9110 §11.1). The parser only reads syntax; what a missing,
 * foreign or malformed value means (guest, `invalid_request`, `invalid_token`) is each caller's decision.
 */

/** The schemes this server reads. */
export type AuthorizationScheme = 'Bearer' | 'DPoP' | 'Basic';

/**
 * Why a header of a known scheme is malformed:
 * - `missing` — the scheme name with no credentials after it;
 * - `several` — more than one whitespace-separated part after the scheme (a token68 is one part);
 * - `charset` — one part, but not a token68 (Bearer/DPoP) or not canonical base64 (Basic);
 * - `no-colon` — Basic credentials that decode to text without the `:` separating user-id and password.
 */
export type AuthorizationProblem = 'missing' | 'several' | 'charset' | 'no-colon';

/** Result of {@link parseAuthorization}. */
export type ParsedAuthorization =
  /** No header, or an empty one. */
  | { readonly kind: 'none' }
  /** A scheme other than Bearer, DPoP and Basic (its name as sent, e.g. `Digest`). */
  | { readonly kind: 'other'; readonly scheme: string }
  /** A Bearer, DPoP or Basic header whose credentials do not parse. */
  | {
      readonly kind: 'malformed';
      readonly scheme: AuthorizationScheme;
      readonly problem: AuthorizationProblem;
    }
  /** A Bearer or DPoP access token (the token68 text, unchanged). */
  | { readonly kind: 'token'; readonly scheme: 'Bearer' | 'DPoP'; readonly token: string }
  /**
   * Basic credentials, base64-decoded as UTF-8 and split at the first `:` (RFC 7617 §2). No further
   * decoding: OAuth's form-encoding of client id and secret (RFC 6749 §2.3.1) is the caller's step.
   */
  | { readonly kind: 'basic'; readonly userId: string; readonly password: string };

/** RFC 7235 §2.1 `token68` (equal to RFC 6750 §2.1 `b64token`). */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;
/** Canonical base64 alphabet and padding (RFC 4648 §4); the length is checked separately. */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
/** The auth-scheme (an RFC 9110 `token`) and what follows it. */
const SCHEME = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+)(?:[ \t]+([\s\S]*))?$/;

/** Whether `value` is an RFC 7235 §2.1 `token68`, the syntax of a Bearer (RFC 6750 §2.1) or DPoP access token. */
export function isToken68(value: string): boolean {
  return TOKEN68.test(value);
}

const KNOWN: Readonly<Record<string, AuthorizationScheme>> = {
  bearer: 'Bearer',
  dpop: 'DPoP',
  basic: 'Basic',
};

/**
 * Parses an `Authorization` header value. A repeated header (`string[]`) is read by its first value.
 * Surrounding whitespace is ignored. Never throws; input of any length is read in linear time.
 * @param header the raw header value(s) as Node delivers them.
 * @returns see {@link ParsedAuthorization}; a value that is not `scheme [credentials]` at all is `other`
 * with the whole (trimmed) text as its scheme.
 */
export function parseAuthorization(header: string | readonly string[] | undefined): ParsedAuthorization {
  const raw = typeof header === 'string' ? header : header?.[0];
  const value = raw?.trim() ?? '';
  if (value === '') return { kind: 'none' };
  const match = SCHEME.exec(value);
  if (!match) return { kind: 'other', scheme: value };
  const scheme = KNOWN[match[1]!.toLowerCase()];
  if (scheme === undefined) return { kind: 'other', scheme: match[1]! };
  const credentials = (match[2] ?? '').trim();
  if (credentials === '') return { kind: 'malformed', scheme, problem: 'missing' };
  if (/\s/.test(credentials)) return { kind: 'malformed', scheme, problem: 'several' };
  if (scheme !== 'Basic') {
    return TOKEN68.test(credentials)
      ? { kind: 'token', scheme, token: credentials }
      : { kind: 'malformed', scheme, problem: 'charset' };
  }
  if (!BASE64.test(credentials) || credentials.length % 4 !== 0)
    return { kind: 'malformed', scheme, problem: 'charset' };
  const decoded = Buffer.from(credentials, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon === -1) return { kind: 'malformed', scheme, problem: 'no-colon' };
  return { kind: 'basic', userId: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
