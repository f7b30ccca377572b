/**
 * Wire format of the REST runtime: JSON bodies in snake_case, the error body
 * `{ "error": { "message", "type", "code", "field"? } }`, and the exec WebSocket framing.
 *
 * WebSocket framing of `GET /v1/boxes/{box}/executions/{execution}/attach`:
 * - binary frames carry bytes with a one-byte channel prefix: 0 stdin (client → server), 1 stdout and
 *   2 stderr (server → client);
 * - text frames carry JSON control messages: client → server `{"type":"resize","cols","rows"}`,
 *   `{"type":"signal","signal":"SIGTERM"}`, `{"type":"stdin_eof"}`; server → client
 *   `{"type":"exit","exit_code","offset"}` (then the server closes with 1000) and
 *   `{"type":"backlog_truncated","dropped_bytes"}`.
 * - `GET /v1/boxes/{box}/executions/attach` starts and attaches in one round trip: the client's first text
 *   frame is `{"type":"start", cmd, args?, env?, tty?, cwd?, user?}`, answered by `{"type":"started","id"}`
 *   or `{"type":"error","status","error"}` (what the SDK client uses; `POST …/executions` does the same
 *   for clients that attach separately);
 * - `?offset=N` resumes the output after the first N bytes (stdout and stderr bytes counted together, in
 *   the order the server received them); the server keeps a bounded backlog of recent output.
 *
 * Multiplexed exec stream `GET /v1/executions/stream` (WebSocket; what the SDK client uses): many
 * executions, in any boxes, over one authenticated connection. Every frame names its stream, a number
 * from 1 to 2^32-1 chosen by the client for each execution it starts:
 * - binary frames: the one-byte channel prefix as above, then the stream number (uint32 big-endian), then
 *   the bytes;
 * - text frames: the control messages above plus `"stream": n`; the client starts an execution with
 *   `{"type":"start","stream","box", cmd, args?, env?, tty?, cwd?, user?}`, answered by
 *   `{"type":"started","stream","id","box_id"}` or `{"type":"error","stream","status","error"}`; the
 *   execution ends with `{"type":"exit","stream",…}` (the connection stays open for the others);
 * - an execution attached through the stream counts as attached (a second client gets 409); when the
 *   connection drops, its executions may be reattached one by one with `…/{execution}/attach?offset=N`.
 */
import type { IncomingMessage } from 'node:http';
import {
  BoxError,
  type BoxErrorCode,
  ERROR_CODES,
  type ErrorCode,
  type ErrorType,
  isBoxErrorCode,
  isErrorCode,
  OptionTypeError,
} from '../errors.ts';

/** Channel byte of a binary exec frame. */
export const Channel = { stdin: 0, stdout: 1, stderr: 2 } as const;
/** Channel byte of a binary exec frame (0 stdin, 1 stdout, 2 stderr). */
export type Channel = (typeof Channel)[keyof typeof Channel];

/** Bytes before the payload of a multiplexed binary frame: channel byte, uint32 stream number. */
export const MUX_HEADER_BYTES = 5;

/** A binary frame of the multiplexed exec stream: channel byte, stream number (uint32 BE), bytes. */
export function muxFrame(channel: Channel, stream: number, data: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(data.length + MUX_HEADER_BYTES);
  out[0] = channel;
  out.writeUInt32BE(stream, 1);
  out.set(data, MUX_HEADER_BYTES);
  return out;
}

/** True for a valid stream number of the multiplexed exec stream (1 to 2^32-1). */
export function isStreamNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 0xffffffff;
}

/**
 * Permission codes of the auth service accepted in access tokens and managed keys. `sandbox.operator`
 * holds every other one and sees every tenant.
 */
export const Permission = {
  boxesRead: 'sandbox.boxes.read',
  boxesWrite: 'sandbox.boxes.write',
  exec: 'sandbox.exec',
  operator: 'sandbox.operator',
} as const;
/** One of the sandbox permission codes. */
export type Permission = (typeof Permission)[keyof typeof Permission];

/** The JSON error body of every failed request: `type` is a category, `code` a stable machine code (`ERROR_CODES`). */
export interface ErrorBody {
  error: { message: string; type: ErrorType; code: ErrorCode; field?: string };
}

/** `fooBarMs` → `foo_bar_ms`. */
export function snakeKey(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** `foo_bar_ms` → `fooBarMs`. */
export function camelKey(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Members whose value is a user-keyed map: copied without rewriting its keys. */
const USER_KEYED = new Set(['labels']);

function convert(value: unknown, key: (k: string) => string): unknown {
  if (Array.isArray(value)) return value.map((item) => convert(item, key));
  if (value !== null && typeof value === 'object' && !Buffer.isBuffer(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined) continue;
      out[key(k)] = USER_KEYED.has(k) && isObject(v) ? { ...v } : convert(v, key);
    }
    return out;
  }
  return value;
}

/**
 * Deep copy with object keys in snake_case (undefined members dropped). Only for SDK shapes: user-keyed
 * maps (environment variables) travel as `{ key, value }` lists so that their names are never rewritten;
 * the one exception is a member named `labels` (box labels), copied with its keys as they are.
 */
export function toSnake<T>(value: T): unknown {
  return convert(value, snakeKey);
}

/** Deep copy with object keys in camelCase (inverse of {@link toSnake}). */
export function toCamel<T = unknown>(value: unknown): T {
  return convert(value, camelKey) as T;
}

/** True for a plain JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The JSON object a WebSocket text frame carries (`data` as UTF-8), or undefined when the frame is not
 * JSON or not an object (such frames are ignored by every socket of the REST protocol).
 */
export function controlMessageOf(data: Buffer): Record<string, unknown> | undefined {
  let message: unknown;
  try {
    message = JSON.parse(data.toString('utf8'));
  } catch {
    return undefined;
  }
  return isObject(message) ? message : undefined;
}

/** Characters (UTF-16 units) of a refused upgrade's answer read at most (an error body is far smaller). */
export const REFUSAL_BODY_CHARS = 64 * 1024;

/**
 * Reads the answer to a refused WebSocket upgrade (`ws`'s `unexpected-response`) and calls `done` with
 * its status (0 when absent) and its body parsed as JSON (null when it is not JSON or is longer than
 * {@link REFUSAL_BODY_CHARS}).
 */
export function readRefusal(response: IncomingMessage, done: (status: number, body: unknown) => void): void {
  let body = '';
  let tooLong = false;
  response.setEncoding('utf8');
  response.on('data', (chunk: string) => {
    if (body.length + chunk.length > REFUSAL_BODY_CHARS) tooLong = true;
    else body += chunk;
  });
  response.on('end', () => {
    let parsed: unknown = null;
    if (!tooLong) {
      try {
        parsed = JSON.parse(body);
      } catch {}
    }
    done(response.statusCode ?? 0, parsed);
  });
}

/** @throws HttpError 400 `unknown_field` naming the first key of `body` not in `known`. */
export function unknownFields(body: Record<string, unknown>, known: ReadonlySet<string>): void {
  for (const key of Object.keys(body)) {
    if (!known.has(key)) {
      throw new HttpError('unknown_field', `unknown field '${key}'`, key);
    }
  }
}

/**
 * An error answered with the error body; thrown by the server's handlers. Its status and `type` come
 * from its code's row of `ERROR_CODES` (`src/errors.ts`), never from the message.
 */
export class HttpError extends Error {
  readonly code: ErrorCode;
  readonly field?: string;
  /** Seconds for the `Retry-After` header (429, 503); absent: no header. */
  retryAfterS?: number;
  /**
   * @param code a code of `ERROR_CODES` (the type checker refuses any other string).
   * @param message what failed, naming the field, box or route.
   * @param field the request field at fault, when there is one.
   */
  constructor(code: ErrorCode, message: string, field?: string) {
    super(message);
    this.code = code;
    if (field !== undefined) this.field = field;
  }

  /** HTTP status of the answer (its code's). */
  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  /** `error.type` of the body (its code's). */
  get type(): ErrorType {
    return ERROR_CODES[this.code].type;
  }

  /** The JSON body of this error. */
  body(): ErrorBody {
    return {
      error: {
        message: this.message,
        type: this.type,
        code: this.code,
        ...(this.field !== undefined ? { field: this.field } : {}),
      },
    };
  }
}

/**
 * Maps an SDK error to its HTTP form: the body's `code` is the `BoxError.code` (its status from
 * `ERROR_CODES`); a non-`BoxError` is 500 `internal` with a generic message (never leaked).
 */
export function httpErrorOf(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof BoxError || error instanceof OptionTypeError) {
    const code = isBoxErrorCode(error.code) ? error.code : 'internal';
    const http = new HttpError(code, error.message, error.field);
    const retry = error instanceof BoxError ? error.retryAfterMs : undefined;
    if (retry !== undefined) http.retryAfterS = Math.max(1, Math.ceil(retry / 1000));
    return http;
  }
  return new HttpError('internal', 'internal server error');
}

/** The `BoxError.code` for an HTTP status when the body carries none of the stable codes. */
export function codeOfStatus(status: number): BoxErrorCode {
  if (status === 400 || status === 413 || status === 415 || status === 426) return 'invalid_option';
  if (status === 401) return 'unauthenticated';
  if (status === 403) return 'permission_denied';
  if (status === 404) return 'not_found';
  if (status === 409) return 'conflict';
  if (status === 422) return 'exec';
  if (status === 429) return 'quota_exceeded';
  if (status === 501) return 'unsupported';
  if (status === 503 || status === 502) return 'unavailable';
  if (status === 504) return 'timeout';
  return 'internal';
}

/** The `Retry-After` header value (delay seconds or an HTTP date, RFC 9110 §10.2.3) in ms from now, or undefined. */
export function retryAfterMsOf(header: string | null | undefined, now = Date.now()): number | undefined {
  if (!header) return undefined;
  if (/^\d+$/.test(header.trim())) return Number(header.trim()) * 1000;
  const at = Date.parse(header);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * Turns an error body received by the client back into a `BoxError`: its `code` is the `sdk` code of the
 * body's code in `ERROR_CODES` (a `BoxErrorCode` as it is), else derived from the status; `field` when given; `retryAfterMs` from
 * the answer's `Retry-After` header (`retryAfter`, when the caller passes it).
 */
export function boxErrorOf(
  status: number,
  body: unknown,
  what: string,
  retryAfter?: string | null,
): BoxError {
  const error = (body as Partial<ErrorBody> | null)?.error;
  const retryAfterMs = retryAfterMsOf(retryAfter);
  const retry = retryAfterMs === undefined ? {} : { retryAfterMs };
  if (error && typeof error.message === 'string') {
    const code = isErrorCode(error.code) ? ERROR_CODES[error.code].sdk : codeOfStatus(status);
    const result = new BoxError(error.message, {
      code,
      ...(error.field ? { field: error.field } : {}),
      ...retry,
    });
    // The server's own code (e.g. `invalid_token`, `not_restartable`) stays readable beside the stable one.
    Object.assign(result, { status, type: error.type, serverCode: error.code });
    return result;
  }
  return Object.assign(new BoxError(`${what}: HTTP ${status}`, { code: codeOfStatus(status), ...retry }), {
    status,
  });
}
