/**
 * The answer to a request whose handling failed unexpectedly (a route threw, or its promise rejected):
 * the error is logged with the request's method and URL, and the client gets `500` with the GraphQL-shaped
 * body `{"errors":[{"message":"Internal server error","extensions":{"code":"INTERNAL_SERVER_ERROR"}}]}`
 * when nothing was sent yet; once the head is
 * out, the connection is cut instead, so a half-written answer never looks complete.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { sendError } from './respond.ts';

/** Called when answering failed unexpectedly: answers 500 if nothing was sent yet, else ends the response. */
export type FailHandler = (req: IncomingMessage, res: ServerResponse, err: unknown) => void;

/** The {@link FailHandler} that logs to `logger` (level `error`, message "request failed"). */
export function createFailHandler(logger: Logger): FailHandler {
  return (req, res, err) => {
    logger.error({ err, method: req.method, url: req.url }, 'request failed');
    if (!res.headersSent) sendError(res, 500, 'Internal server error', {}, 'INTERNAL_SERVER_ERROR');
    else res.destroy();
  };
}
