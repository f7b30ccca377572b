/**
 * Small HTTP helpers shared by the creature server's routes: JSON error answers and bounded body reading
 * (answering 413 for a body over the limit).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CreatureErrorCode } from '../errors.ts';
import { lingerAfter } from './linger.ts';

/** `application/json; charset=utf-8`. */
export const JSON_TYPE = 'application/json; charset=utf-8';

const EMPTY = Buffer.alloc(0);

/** Bodies of bytes up to this size are written in one `write` with the head (see {@link endWith}). */
export const ONE_WRITE_BYTES = 16 * 1024;

/**
 * Writes the status line, `headers` (a flat name/value list for `writeHead`) and `body`, and ends the
 * response. A body of bytes up to 16 KiB is handed to node as a latin1 string of the same bytes (one
 * character per byte): node appends a string body to the head's text and writes both in one `write`
 * (node writes the head and a `Buffer` body as a `writev` of two chunks), and latin1 encodes every
 * character back to its byte, so the bytes on the wire are those of `body`. A text body is written as
 * UTF-8 (also in one `write`); larger byte bodies are written as they are.
 */
export function endWith(
  res: ServerResponse,
  status: number,
  headers: readonly string[],
  body: string | Buffer | undefined,
): void {
  res.writeHead(status, headers as string[]);
  if (body !== undefined && typeof body !== 'string' && body.length <= ONE_WRITE_BYTES)
    res.end(body.toString('latin1'), 'latin1');
  else res.end(body);
}

/**
 * Answers `{"errors":[{"message", "extensions": {"code"}}]}` with `status` (GraphQL-shaped, so GraphQL
 * clients show the message). `code` is omitted when not given.
 */
export function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
  code?: CreatureErrorCode,
): void {
  const body = JSON.stringify({ errors: [code ? { message, extensions: { code } } : { message }] });
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/**
 * Reads a request body of at most `limit` bytes and calls `done` with its bytes (the one chunk itself
 * when it came in one), or with `undefined` as soon as the body is over the limit (the rest is drained
 * and dropped).
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  done: (body: Buffer | undefined) => void,
): void {
  // The first chunk is kept on its own: most bodies arrive in one, and need no list and no concatenation.
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let size = 0;
  let over = false;
  req.on('data', (chunk: Buffer) => {
    if (over) return;
    size += chunk.length;
    if (size > limit) {
      over = true;
      first = undefined;
      more = undefined;
      done(undefined);
      return;
    }
    if (first === undefined) first = chunk;
    else if (more === undefined) more = [first, chunk];
    else more.push(chunk);
  });
  req.on('end', () => {
    if (!over) done(more !== undefined ? Buffer.concat(more) : (first ?? EMPTY));
  });
  // An aborted upload: the client is gone, nothing to answer.
  req.on('error', () => {});
}

/**
 * Answers `413` with code `PAYLOAD_TOO_LARGE` and `message`, and closes the connection lingering
 * (`linger.ts`), so the client reads the answer while the rest of its body is dropped.
 */
export function answerTooLarge(res: ServerResponse, message: string): void {
  lingerAfter(res);
  sendError(res, 413, message, { connection: 'close' }, 'PAYLOAD_TOO_LARGE');
}

/**
 * Reads the body of a POST within `limit` bytes and passes its bytes to `next`; a body over the limit
 * (by its `content-length`, or as it arrives) is answered `413` (`PAYLOAD_TOO_LARGE`, connection closed
 * lingering, `linger.ts`, so the client reads the answer) here and `next` is not called.
 */
export function readBodyWithin(
  req: IncomingMessage,
  res: ServerResponse,
  limit: number,
  next: (body: Buffer) => void,
): void {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) {
    answerTooLarge(res, `Request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
    req.resume();
    return;
  }
  readBody(req, limit, (body) => {
    if (body === undefined) answerTooLarge(res, `Request body exceeds the limit of ${limit} bytes`);
    else next(body);
  });
}
