/**
 * What the authorization decision reads from a request and writes back on it (spec 001 "Middleware denial
 * body"): the access token of the `Authorization` header or of a WebSocket upgrade's query (RFC 6750 §2.1,
 * §2.3; RFC 9449 §7.1), the request facts a DPoP proof is checked against, and the status, headers
 * (`WWW-Authenticate`, `DPoP-Nonce`) and body of a denial.
 */
import { parseAuthorization } from './authorization-header.ts';
import { DPOP_SIGNING_ALGS, DpopProofError, dpopChallenge } from './dpop-proof.ts';
import type { PolicyRequest } from './policies.ts';
import { AuthorizationReason, reasonName } from './reasons.ts';
import type { TokenPresentation } from './token-verifier.ts';

/** Body of a denial (spec 001 "Middleware denial body"), same shape for 401 and 403. */
export interface DenialBody {
  /** `unauthorized` or `invalid_token` (401), `forbidden` (403). */
  error: 'unauthorized' | 'invalid_token' | 'forbidden';
  /** The AuthorizationReason name, e.g. `DeniedByRule`. */
  error_description: string;
  /** The permission code that caused the denial, or null. */
  permission: string | null;
}

/** How to answer a denial: status, headers (`WWW-Authenticate` per RFC 6750 §3) and body. */
export interface Denial {
  status: 401 | 403;
  headers: Record<string, string>;
  body: DenialBody;
}

/** Maps a denying reason to its answer (spec 001 status table). Exported for custom adapters. */
export function denialFor(
  reason: AuthorizationReason,
  authenticated: boolean,
  permission: string | null,
): Denial {
  const description = reasonName(reason);
  if (reason === AuthorizationReason.InvalidCredential) {
    return {
      status: 401,
      headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
      body: { error: 'invalid_token', error_description: description, permission: null },
    };
  }
  if (!authenticated) {
    return {
      status: 401,
      headers: { 'www-authenticate': 'Bearer' },
      body: { error: 'unauthorized', error_description: description, permission },
    };
  }
  return {
    status: 403,
    headers: {},
    body: { error: 'forbidden', error_description: description, permission },
  };
}

/**
 * The `access_token` query parameter of a WebSocket upgrade request (RFC 6750 §2.3; browsers cannot set
 * headers on a WebSocket), as an `Authorization` value `Bearer <token>`. Only for a `GET` carrying
 * `Upgrade: websocket` and no `Authorization` header; for every other request undefined — plain HTTP
 * requests never authenticate through the URL (tokens in URLs leak into logs and `Referer`).
 * @param url path and query as received (`/ws?access_token=…`).
 */
export function upgradeQueryToken(
  method: string | undefined,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  url: string | undefined,
): string | undefined {
  if (method !== 'GET' || headers.authorization !== undefined) return undefined;
  const upgrade = headers.upgrade;
  if (typeof upgrade !== 'string' || upgrade.trim().toLowerCase() !== 'websocket') return undefined;
  const q = url?.indexOf('?') ?? -1;
  if (q === -1) return undefined;
  const tokens = new URLSearchParams(url!.slice(q + 1)).getAll('access_token');
  if (tokens.length !== 1 || tokens[0] === '') return tokens.length > 1 ? 'Bearer ' : undefined;
  return `Bearer ${tokens[0]}`;
}

/**
 * The `Authorization` value a request presents to the permission middleware (both adapters): its
 * `Authorization` header, else — only when `queryTokenOnUpgrade` is set — {@link upgradeQueryToken}'s
 * value of a WebSocket upgrade; undefined when it presents none.
 */
export function requestAuthorization(
  method: string | undefined,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  url: string | undefined,
  queryTokenOnUpgrade: boolean | undefined,
): string | string[] | undefined {
  return headers.authorization ?? (queryTokenOnUpgrade ? upgradeQueryToken(method, headers, url) : undefined);
}

/**
 * The access token of an `Authorization: Bearer` or `Authorization: DPoP` header (RFC 6750 §2.1, RFC 9449
 * §7.1): `undefined` when none is presented (no header, another scheme such as Basic), `null` when a Bearer
 * or DPoP header is malformed.
 */
export function presentedToken(
  header: string | string[] | undefined,
): { scheme: 'Bearer' | 'DPoP'; token: string } | undefined | null {
  const parsed = parseAuthorization(header);
  if (parsed.kind === 'token') return { scheme: parsed.scheme, token: parsed.token };
  return parsed.kind === 'malformed' && parsed.scheme !== 'Basic' ? null : undefined;
}

/**
 * The request facts a DPoP proof is checked against (`htm`, `htu`, the `DPoP` header).
 * @param htu absolute request URL; default `http://<Host header><request.url>`.
 */
export function presentationOf(
  request: PolicyRequest,
  htu: string | undefined,
  scheme: 'Bearer' | 'DPoP',
): TokenPresentation {
  const headers = request.headers;
  const host = Array.isArray(headers.host) ? headers.host[0] : headers.host;
  return {
    scheme,
    proof: headers.dpop,
    method: request.method,
    url: htu ?? `http://${host ?? 'localhost'}${request.url}`,
  };
}

/**
 * `WWW-Authenticate` (and `DPoP-Nonce`) of a refused DPoP request (RFC 9449 §7.1, §9): the proof's error
 * (`invalid_dpop_proof`, `use_dpop_nonce`) or `invalid_token`.
 */
export function dpopDenialHeaders(error: unknown): Record<string, string> {
  if (error instanceof DpopProofError) {
    const headers: Record<string, string> = {
      'www-authenticate': dpopChallenge(DPOP_SIGNING_ALGS, error.dpopError, error.message),
    };
    if (error.nonce) headers['dpop-nonce'] = error.nonce;
    return headers;
  }
  return { 'www-authenticate': dpopChallenge(DPOP_SIGNING_ALGS, 'invalid_token') };
}
