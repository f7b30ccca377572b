/**
 * Request checks and answer helpers of the `/graphql` route (`graphql.ts`): the CSRF guard's header and
 * media type lists, parameter and content-type checks, and `304 Not Modified` answers for GET queries.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { getOperationAST, parse } from 'graphql';
import { etagMatches } from './images.ts';
import { checkParams, mediaTypeOf } from './params.ts';

/** Headers any of which lets a POST with a "simple" content type through the CSRF guard. */
export const PREFLIGHT_HEADERS = [
  'graphql-require-preflight',
  'apollo-require-preflight',
  'x-apollo-operation-name',
];
/** Content types a browser may POST cross-site without a preflight (the CSRF guard refuses them). */
export const SIMPLE_CONTENT_TYPES = new Set([
  '',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
]);

/** The URL with percent-escapes decoded, or as it is when an escape is malformed. */
export function decodeURIComponentSafe(url: string): string {
  try {
    return decodeURIComponent(url);
  } catch {
    return url;
  }
}

/** Whether a query text's operation is a subscription (false when it does not parse). */
export function isSubscription(query: string, operationName: string | undefined): boolean {
  try {
    return getOperationAST(parse(query), operationName)?.operation === 'subscription';
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
