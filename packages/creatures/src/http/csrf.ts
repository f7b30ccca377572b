/**
 * The CSRF guard of `/graphql` (GraphQL over HTTP, "Cross-site request forgery" guidance; the same rule as
 * Apollo Server's and GraphQL Yoga's `useCSRFPrevention`): a POST whose content type a browser may send
 * cross-site without a CORS preflight (none, `text/plain`, form encodings) is refused with 400
 * `CSRF_PREFLIGHT_REQUIRED` unless it carries one of {@link PREFLIGHT_HEADERS}, non-empty, which no
 * cross-site form or simple request can set.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendError } from './respond.ts';

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

/**
 * Applies the guard to a POST of media type `mediaType` (lower case, without parameters): answers 400
 * `CSRF_PREFLIGHT_REQUIRED` and returns true when it is refused; returns false, having sent nothing,
 * when it may go on.
 */
export function refusedAsCrossSite(req: IncomingMessage, res: ServerResponse, mediaType: string): boolean {
  if (!SIMPLE_CONTENT_TYPES.has(mediaType) || PREFLIGHT_HEADERS.some((h) => req.headers[h])) return false;
  sendError(
    res,
    400,
    `CSRF guard: a POST with content-type "${mediaType || '(none)'}" needs a non-empty GraphQL-Require-Preflight header; send content-type application/json`,
    {},
    'CSRF_PREFLIGHT_REQUIRED',
  );
  return true;
}
