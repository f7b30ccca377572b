/**
 * The request log: when the logger's level is `debug` (or lower), every finished response is logged at
 * `debug` as `{ method, url, status, ms }` with the message "request" (`ms`: time from the request's
 * arrival at the handler to the end of the response, in milliseconds, three decimals). At higher levels
 * it costs one level check per request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';

/** Logs `req` once `res` has finished, if `logger` is at `debug` level; otherwise does nothing. */
export function logRequest(logger: Logger, req: IncomingMessage, res: ServerResponse): void {
  if (!logger.isLevelEnabled('debug')) return;
  const started = performance.now();
  res.once('finish', () =>
    logger.debug(
      {
        method: req.method,
        url: req.url,
        status: res.statusCode,
        ms: +(performance.now() - started).toFixed(3),
      },
      'request',
    ),
  );
}
