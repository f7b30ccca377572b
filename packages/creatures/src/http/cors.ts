/**
 * CORS of the creature server (Fetch standard, "CORS protocol"): a request whose `Origin` is allowed gets
 * `Access-Control-Allow-Origin` (the origin itself with `Vary: Origin`, or `*` when every origin is
 * allowed). Preflight (`OPTIONS`) answers are the `/graphql` route's (`answerOptions`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Sets the CORS response headers of one request. */
export type CorsHeaders = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The CORS step for `origins` (exact origins such as `https://app.example`, or `'*'`), or undefined when
 * no origin is allowed (the server then sets no CORS header at all).
 */
export function createCors(origins: readonly string[] | '*'): CorsHeaders | undefined {
  if (origins !== '*' && origins.length === 0) return undefined;
  return (req, res) => {
    const origin = req.headers.origin;
    if (!origin) return;
    if (origins === '*') res.setHeader('access-control-allow-origin', '*');
    else if (origins.includes(origin)) {
      res.setHeader('access-control-allow-origin', origin);
      res.setHeader('vary', 'Origin');
    }
  };
}
