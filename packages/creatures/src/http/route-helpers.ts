/**
 * Request checks and answer helpers of the `/graphql` route (`graphql.ts`): parameter and content-type checks, `304 Not Modified` answers for GET queries, the
 * explorer page and `OPTIONS` answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getOperationAST } from 'graphql';
import { EXPLORER_CSP, EXPLORER_HTML } from '../explorer.ts';
import { parseWithLimits } from '../parse-limits.ts';
import { etagMatches } from './images.ts';
import { checkParams, fromSearch, mediaTypeOf } from './params.ts';

/** The URL with percent-escapes decoded, or as it is when an escape is malformed. */
export function decodeURIComponentSafe(url: string): string {
  try {
    return decodeURIComponent(url);
  } catch {
    return url;
  }
}

/** Whether a query text's operation is a subscription (false when it does not parse within the parse limits). */
export function isSubscription(query: string, operationName: string | undefined): boolean {
  try {
    return getOperationAST(parseWithLimits(query), operationName)?.operation === 'subscription';
  } catch {
    return false;
  }
}

/** {@link checkParams}, or undefined where it would throw. */
export function checkParamsOrUndefined(params: Record<string, unknown>) {
  try {
    return checkParams(params);
  } catch {
    return undefined;
  }
}

/** Whether a `Content-Type` is JSON in UTF-8 (the only POST body the fast path takes). */
export function isJson(contentType: string): boolean {
  if (contentType === 'application/json') return true;
  const [mediaType, charset] = mediaTypeOf(contentType);
  return mediaType === 'application/json' && (charset === undefined || charset === 'charset=utf-8');
}

/** `vary` joined with what the response already varies on (CORS sets `Vary: Origin`). */
export function varyWith(res: ServerResponse, vary: string): string {
  const existing = res.getHeader('vary');
  return existing ? `${String(existing)}, ${vary}` : vary;
}

/**
 * Answers `304 Not Modified` (RFC 9110 §15.4.5: the validator and caching headers, no body) when the
 * request's `If-None-Match` matches the `etag` in the flat `headers` list; returns whether it did.
 */
export function notModified(req: IncomingMessage, res: ServerResponse, headers: readonly string[]): boolean {
  const header = req.headers['if-none-match'];
  if (!header) return false;
  const at = headers.indexOf('etag');
  if (at < 0 || !etagMatches(header, headers[at + 1]!)) return false;
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === 'etag' || headers[i] === 'cache-control' || headers[i] === 'vary')
      kept.push(headers[i]!, headers[i + 1]!);
  }
  res.writeHead(304, kept);
  res.end();
  return true;
}

/**
 * The parameters of a GET's URL or a JSON POST body as an object; undefined when they do not parse or are
 * not an object (the full handler then reports it).
 */
export function paramsOf(method: string, url: string, body: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = method === 'GET' ? fromSearch(url) : JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Answers a browser's GET of `/graphql` with the GraphiQL explorer page (with its CSP). */
export function answerExplorer(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': EXPLORER_HTML.length,
    'content-security-policy': EXPLORER_CSP,
    'x-content-type-options': 'nosniff',
  });
  res.end(EXPLORER_HTML);
}

/**
 * Answers `OPTIONS /graphql`: `204` with `Allow`, and for an allowed CORS origin (set on `res` before) the
 * preflight headers (methods, the requested headers, a 10-minute max age).
 */
export function answerOptions(req: IncomingMessage, res: ServerResponse): void {
  const headers: Record<string, string> = { allow: 'GET, POST, OPTIONS' };
  if (res.hasHeader('access-control-allow-origin')) {
    headers['access-control-allow-methods'] = 'GET, POST, OPTIONS';
    headers['access-control-allow-headers'] =
      req.headers['access-control-request-headers'] ?? 'content-type, graphql-require-preflight';
    headers['access-control-max-age'] = '600';
  }
  res.writeHead(204, headers);
  res.end();
}
