/**
 * A GET whose body is read into one reused buffer (the REST client's file and archive downloads over
 * plain HTTP). `node:http` hands every body chunk to JavaScript in a new buffer (and the socket read under
 * it in another); V8 collects them only once about 64 MiB of such memory outside its heap has built up,
 * so a 1 GiB download raised the client's RSS by up to 100 MiB. Here the socket reads into one buffer
 * (`net.connect`'s `onread`), the response is parsed in place by `http-parser-js` (body chunks are views
 * of that buffer), and the socket stays paused until the sink has taken the bytes, so the memory a
 * download holds is that one buffer, whatever the size of the body.
 *
 * One request per connection (`connection: close`); HTTPS downloads use `node:https` (`connection.ts`).
 */
import { validateHeaderName, validateHeaderValue } from 'node:http';
import { connect } from 'node:net';
import httpParser from 'http-parser-js';
import type { ChunkSink } from '../runtime/files/pump.ts';

const { HTTPParser } = httpParser;

/** Size of the buffer one download reads into (bytes). */
export const DOWNLOAD_BUFFER_BYTES = 256 * 1024;

/** Largest error body kept (bytes); the server's error bodies are small JSON objects. */
export const MAX_ERROR_BODY = 64 * 1024;

/** How a download ended: its HTTP status, and for a status outside 2xx the body as text. */
export interface DownloadResult {
  status: number;
  /** The response body (UTF-8) when the status is not 2xx; empty otherwise. */
  errorBody: string;
}

/** The request head: request line, `host`, the given headers and `connection: close`. */
function requestHead(target: URL, headers: Record<string, string>): string {
  const lines = [`GET ${target.pathname}${target.search} HTTP/1.1`, `host: ${target.host}`];
  for (const [name, value] of Object.entries(headers)) {
    validateHeaderName(name);
    validateHeaderValue(name, value);
    lines.push(`${name}: ${value}`);
  }
  lines.push('connection: close', '', '');
  return lines.join('\r\n');
}

/**
 * GETs `target` (an `http:` URL) and hands each body chunk to `sink`, waiting for it before reading on;
 * a chunk is a view of the reused buffer, valid until `sink`'s promise settles.
 * @returns the status, with the body as text when it is not 2xx (nothing is handed to `sink` then).
 * @throws Error when the server cannot be reached, sends a malformed response or ends the body early
 *   (`code` ECONNRESET-style codes kept from the socket); whatever `sink` rejects with.
 */
export function downloadInto(
  target: URL,
  headers: Record<string, string>,
  sink: ChunkSink,
): Promise<DownloadResult> {
  const head = requestHead(target, headers);
  return new Promise<DownloadResult>((resolve, reject) => {
    const buffer = Buffer.allocUnsafeSlow(DOWNLOAD_BUFFER_BYTES);
    const parser = new HTTPParser(HTTPParser.RESPONSE);
    let status = 0;
    let complete = false;
    let settled = false;
    /** Body chunks of the read being handled: views of `buffer`. */
    let pending: Buffer[] = [];
    const errorChunks: Buffer[] = [];
    let errorBytes = 0;

    const settle = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      fn();
    };
    const fail = (error: Error): void => settle(() => reject(error));
    const done = (): void =>
      settle(() => resolve({ status, errorBody: Buffer.concat(errorChunks).toString('utf8') }));

    parser[HTTPParser.kOnHeadersComplete] = (info) => {
      status = info.statusCode;
    };
    parser[HTTPParser.kOnBody] = (chunk, offset, length) => {
      const view = chunk.subarray(offset, offset + length);
      if (status >= 200 && status < 300) pending.push(view);
      else if (errorBytes < MAX_ERROR_BODY) {
        errorChunks.push(Buffer.from(view)); // copied: the buffer is read into again
        errorBytes += view.length;
      }
    };
    parser[HTTPParser.kOnMessageComplete] = () => {
      complete = true;
    };

    /** Hands the chunks of one read to the sink in order; then reads on (or ends). */
    const deliver = async (chunks: Buffer[]): Promise<void> => {
      for (const chunk of chunks) await sink(chunk);
    };

    const socket = connect({
      host: target.hostname.replace(/^\[|\]$/g, ''),
      port: Number(target.port || 80),
      onread: {
        buffer,
        callback: (bytes: number, read: Uint8Array): boolean => {
          if (settled) return false;
          const parsed = parser.execute(read as Buffer, 0, bytes);
          // Once the response is complete the parser waits for a next one: its accounting of that read
          // (header size) does not concern this response, whose bytes were all handed over.
          if (parsed instanceof Error && !complete) {
            fail(new Error(`malformed HTTP response: ${parsed.message}`));
            return false;
          }
          if (pending.length === 0) {
            if (complete) done();
            return !complete;
          }
          const chunks = pending;
          pending = [];
          // The socket stays paused (false) until the sink has taken every view of the buffer.
          deliver(chunks).then(() => {
            if (complete) done();
            else if (!settled) socket.resume();
          }, fail);
          return false;
        },
      },
    });
    socket.on('connect', () => socket.write(head));
    socket.on('error', fail);
    socket.on('end', () => {
      if (complete || settled) return;
      // A body delimited by the end of the connection completes here.
      const finished = parser.finish();
      if (finished instanceof Error || !complete) {
        fail(Object.assign(new Error('the server ended the response early'), { code: 'ECONNRESET' }));
      } else if (pending.length === 0) done();
    });
  });
}
