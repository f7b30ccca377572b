/**
 * Closing a connection without losing the answer (RFC 9112 §9.6 "Tear-down"): when the server answers
 * a request it will not read to the end (a body over the limit, a head over node's header limit) and
 * closes the connection while the client is still sending, a plain close leaves unread bytes in the
 * server's receive buffer and the kernel answers with a TCP reset, which makes the client's stack drop
 * the answer it has not read yet. A lingering close instead sends the answer, half-closes (FIN), and
 * keeps reading and dropping what the client sends until it closes its side, for at most
 * {@link LINGER_MS} ms or {@link LINGER_BYTES} bytes; only then is the socket destroyed.
 */
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

/** Longest time a lingering close keeps reading, in ms. */
export const LINGER_MS = 2000;
/** Most bytes a lingering close reads and drops before it destroys the socket. */
export const LINGER_BYTES = 4 * 1024 * 1024;

/**
 * Ends `socket` after writing `last` (if given) and lingers: reads and drops incoming bytes until the
 * peer ends its side, {@link LINGER_MS} ms pass or {@link LINGER_BYTES} bytes arrive, then destroys it.
 * Removes the socket's other `data` listeners (node's HTTP parser): nothing more is parsed on it.
 */
export function closeLingering(socket: Duplex, last?: string): void {
  if (socket.destroyed) return;
  let read = 0;
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.removeAllListeners('data');
  socket.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > LINGER_BYTES) socket.destroy();
  });
  socket.once('end', () => socket.destroy());
  socket.once('close', () => clearTimeout(timer));
  socket.on('error', () => {});
  if (last === undefined) socket.end();
  else socket.end(last);
  socket.resume();
}

/**
 * Makes the connection of `res` close lingering ({@link closeLingering}) instead of at once once the
 * response (which must carry `Connection: close`) has been sent: node ends such a connection through
 * the socket's `destroySoon`, which is replaced on this one socket.
 */
export function lingerAfter(res: ServerResponse): void {
  const socket = res.socket as (Duplex & { destroySoon?: () => void }) | null;
  if (!socket) return;
  socket.destroySoon = () => closeLingering(socket);
}

const REASONS: Record<string, [number, string, string]> = {
  HPE_HEADER_OVERFLOW: [
    431,
    'Request Header Fields Too Large',
    'The request line and headers exceed the limit of 16 KiB; send a long query with POST',
  ],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'The request did not arrive in time'],
};

/**
 * The server's `clientError` listener: answers a request node could not parse (431 for a head over
 * node's 16 KiB limit, 408 for a request that timed out, 400 otherwise) with a JSON GraphQL error whose
 * `extensions.code` names the reason (`REQUEST_HEADER_FIELDS_TOO_LARGE`, `REQUEST_TIMEOUT`,
 * `BAD_REQUEST`), then closes lingering. A connection the client reset, whose response has already
 * begun, or that is no longer writable, is destroyed.
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  const [status, reason, message] = REASONS[err.code ?? ''] ?? [
    400,
    'Bad Request',
    'The request is not valid HTTP/1.1',
  ];
  const code = reason.toUpperCase().replace(/ /g, '_');
  const body = JSON.stringify({ errors: [{ message, extensions: { code } }] });
  closeLingering(
    socket,
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
