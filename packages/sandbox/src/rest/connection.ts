/**
 * HTTP plumbing of the REST runtime client (`client.ts`): where the server is and how to authenticate
 * (`restOptionsFrom`), JSON calls with the server's errors mapped back to `BoxError`s (`wire.ts`), and the
 * streamed raw bodies of file contents (`download`, `upload`: bounded memory, one chunk in flight).
 *
 * Every request goes through `node:http` (keep-alive, the global agent) rather than `fetch`: undici's
 * fetch cost a REST client process about 15 MiB more RSS over a few dozen calls, and `node:http` is
 * loaded for the streamed bodies anyway. A kept-alive connection the server closes while a request is
 * being sent on it fails that request before any answer (`ECONNRESET`): a read (`GET`, `HEAD`, safe and
 * idempotent, RFC 9110 §9.2.1–9.2.2) is then sent once more on a new connection (`send`); a write never
 * is, since the server may have carried it out.
 */
import { type ClientRequest, request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import { type ChunkSink, streamSink } from '../runtime/files/pump.ts';
import { downloadInto, MAX_ERROR_BODY } from './download-client.ts';
import { ExecMux } from './mux.ts';
import { boxErrorOf, toCamel, toSnake } from './wire.ts';

/** The whole body of a response as text. */
async function bodyText(response: IncomingMessage): Promise<string> {
  let text = '';
  response.setEncoding('utf8');
  for await (const chunk of response) text += chunk;
  return text;
}

/** The `Retry-After` header of an answer (429, 503), or undefined. */
function retryAfterOf(response: IncomingMessage): string | undefined {
  const value = response.headers['retry-after'];
  return typeof value === 'string' ? value : undefined;
}

/** Methods sent once more when a reused kept-alive connection was closed under them (see `send`). */
const RETRIED_ON_CLOSED_CONNECTION: ReadonlySet<string> = new Set(['GET', 'HEAD']);

/**
 * Whether `error`, raised by `request` before any response arrived, means the server had closed the
 * kept-alive connection the agent reused for it: the socket was reused and was reset or closed under
 * the request (Node reports a close before the answer as `ECONNRESET`, "socket hang up").
 */
function closedKeptAliveConnection(request: ClientRequest, error: NodeJS.ErrnoException): boolean {
  return request.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE');
}

/** Parses a JSON body; null when it is empty or not JSON. */
function parseJson(text: string): unknown {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}
/** Where the REST runtime is and how to authenticate (fields of `JsOptions` for a remote runtime). */
export interface RestRuntimeOptions {
  /** Base URL of the server, e.g. `http://127.0.0.1:8100`. */
  url: string;
  /** API key of the server (`SANDBOX_API_KEY`). */
  apiKey?: string;
  /** Access token (JWT) of the auth service with sandbox permissions (`SANDBOX_ACCESS_TOKEN`). */
  accessToken?: string;
}

/**
 * Decides whether runtime options select the REST runtime: `url` given, or `SANDBOX_URL` set while no
 * `homeDir` was given (an explicit `homeDir` always means local). Credentials: `apiKey`, `accessToken`,
 * then `SANDBOX_API_KEY`, `SANDBOX_ACCESS_TOKEN`. Returns null for a local runtime.
 * @throws BoxError naming `url` when it is not an http(s) URL, or `homeDir` when both are given.
 */
export function restOptionsFrom(
  options: { homeDir?: unknown; url?: unknown; apiKey?: unknown; accessToken?: unknown },
  env: NodeJS.ProcessEnv = process.env,
): RestRuntimeOptions | null {
  let url = options.url;
  if (url === undefined || url === null) {
    if (options.homeDir !== undefined || !env.SANDBOX_URL) return null;
    url = env.SANDBOX_URL;
  } else if (options.homeDir !== undefined) {
    throw new BoxError('invalid runtime option homeDir: a REST runtime (url) has no local homeDir', {
      field: 'homeDir',
    });
  }
  if (typeof url !== 'string' || !/^https?:\/\/[^\s/]+/.test(url)) {
    throw new BoxError(`invalid runtime option url: must be an http(s) URL such as http://127.0.0.1:8100`, {
      field: 'url',
    });
  }
  for (const field of ['apiKey', 'accessToken'] as const) {
    const value = options[field];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new BoxError(`invalid runtime option ${field}: must be a non-empty string`, { field });
    }
  }
  const apiKey = (options.apiKey as string | undefined) ?? env.SANDBOX_API_KEY;
  const accessToken = (options.accessToken as string | undefined) ?? env.SANDBOX_ACCESS_TOKEN;
  return {
    url: url.replace(/\/+$/, ''),
    ...(apiKey ? { apiKey } : {}),
    ...(accessToken ? { accessToken } : {}),
  };
}

/** HTTP plumbing shared by the runtime, its boxes and executions. */
export class Connection {
  readonly url: string;
  readonly headers: Record<string, string>;
  /** The multiplexed exec stream every execution of this runtime starts on (opened on first use). */
  readonly mux: ExecMux;

  constructor(options: RestRuntimeOptions) {
    this.url = options.url;
    const credential = options.apiKey ?? options.accessToken;
    this.headers = credential ? { authorization: `Bearer ${credential}` } : {};
    this.mux = new ExecMux(this.url.replace(/^http/, 'ws'), this.headers);
  }

  /** A JSON request; resolves with the camelCase body (undefined for 204), null for 404 when `nullOn404`. */
  async call<T>(method: string, path: string, body?: unknown, nullOn404 = false): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(toSnake(body));
    const response = await this.send(method, path, payload);
    let text: string;
    try {
      text = await bodyText(response);
    } catch (error) {
      throw this.#unreachable(error as Error);
    }
    const status = response.statusCode ?? 500;
    if (status === 204) return undefined as T;
    if (status === 404 && nullOn404) return null as T;
    if (status < 200 || status >= 300) {
      throw boxErrorOf(status, parseJson(text), `${method} ${path}`, retryAfterOf(response));
    }
    return toCamel<T>(parseJson(text));
  }

  /**
   * Sends one request with the credential's headers and resolves with the response once its head has
   * arrived (its body not read yet). `payload`, when given, is sent as `application/json`. A `GET` or
   * `HEAD` whose reused kept-alive connection the server closed before answering is sent once more, on a
   * new connection of its own; any other method is never sent twice.
   * @throws BoxError code `unavailable` when the server cannot be reached, drops the connection before
   *   answering, or `signal` aborts the request first.
   */
  send(method: string, path: string, payload?: string, signal?: AbortSignal): Promise<IncomingMessage> {
    const target = new URL(this.url + path);
    const headers =
      payload === undefined
        ? this.headers
        : {
            ...this.headers,
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(payload)),
          };
    const attempt = (retry: boolean): Promise<IncomingMessage> =>
      new Promise<IncomingMessage>((resolve, reject) => {
        const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
          method,
          headers,
          // The second attempt takes a connection of its own, not another idle one of the pool.
          ...(retry ? {} : { agent: false }),
          ...(signal ? { signal } : {}),
        });
        let answered = false;
        request.on('response', (response) => {
          answered = true;
          resolve(response);
        });
        request.on('error', (error: NodeJS.ErrnoException) => {
          if (answered) return;
          if (
            retry &&
            RETRIED_ON_CLOSED_CONNECTION.has(method) &&
            closedKeptAliveConnection(request, error)
          ) {
            resolve(attempt(false));
          } else reject(this.#unreachable(error));
        });
        request.end(payload);
      });
    return attempt(true);
  }

  /** The error of a server that cannot be reached (or dropped the connection). */
  #unreachable(error: Error): BoxError {
    return new BoxError(`cannot reach the REST runtime at ${this.url}: ${error.message}`, {
      cause: error,
      code: 'unavailable',
    });
  }

  /**
   * A GET whose response is raw (file contents, event streams): resolves with the response once its
   * status is 2xx; the body is read as it arrives (`response.destroy()` ends it early).
   * @throws BoxError mapped from the error body (`boxErrorOf`), or `unavailable` when unreachable.
   */
  raw(path: string): Promise<IncomingMessage> {
    return this.answer('GET', path);
  }

  /**
   * `send`, resolving with a 2xx response whose body is to be read as it arrives; any other status is
   * read as the server's error body (the first `MAX_ERROR_BODY` bytes or so of it are kept).
   * @throws BoxError mapped from the error body (`boxErrorOf`), or as `send`.
   */
  async answer(
    method: string,
    path: string,
    payload?: string,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const response = await this.send(method, path, payload, signal);
    const status = response.statusCode ?? 500;
    if (status >= 200 && status < 300) return response;
    let text = '';
    try {
      response.setEncoding('utf8');
      for await (const chunk of response) {
        if (text.length < MAX_ERROR_BODY) text += chunk;
      }
    } catch (error) {
      throw this.#unreachable(error as Error);
    }
    throw boxErrorOf(status, parseJson(text), `${method} ${path}`, retryAfterOf(response));
  }

  /**
   * GETs a raw body and hands it to `sink` chunk by chunk as it arrives, waiting for each: over HTTP read
   * into one reused buffer (`download-client.ts`; the chunk is valid until `sink` settles), over HTTPS
   * with `node:https`.
   * @throws BoxError mapped from the error body, `unavailable` when unreachable, or what `sink` throws.
   */
  async download(path: string, sink: ChunkSink): Promise<void> {
    const target = new URL(this.url + path);
    if (target.protocol === 'https:') return this.#downloadTls(path, sink);
    let sinkError: unknown = null;
    const guarded: ChunkSink = (chunk) =>
      sink(chunk).catch((error: unknown) => {
        sinkError = error;
        throw error;
      });
    let result: Awaited<ReturnType<typeof downloadInto>>;
    try {
      result = await downloadInto(target, this.headers, guarded);
    } catch (error) {
      if (sinkError !== null) throw sinkError;
      throw this.#unreachable(error as Error);
    }
    if (result.status < 200 || result.status >= 300) {
      throw boxErrorOf(result.status, parseJson(result.errorBody), `GET ${path}`);
    }
  }

  /** `download` over HTTPS: `node:https`, each chunk a new buffer. */
  async #downloadTls(path: string, sink: ChunkSink): Promise<void> {
    const response = await this.answer('GET', path);
    try {
      for await (const chunk of response) await sink(chunk as Buffer);
      if (!response.complete) {
        throw new BoxError(`the REST runtime ended the body of GET ${path} early`, { code: 'unavailable' });
      }
    } catch (error) {
      response.destroy();
      throw error;
    }
  }

  /**
   * Sends `source` as a raw request body (`application/octet-stream`, chunked) with `node:http`, whose
   * pipe waits for the socket to drain (bounded memory, unlike a fetch body), or lets the producer
   * `source(sink)` write it chunk by chunk (each write resolves once sent; with a known `length` in
   * bytes the body is sent with a `content-length`, not chunked, so no chunk is copied); resolves with the
   * camelCase JSON answer. An early error answer (the server refused the path) ends the upload.
   * `headers` are sent besides the credential's.
   * @throws BoxError mapped from the error body, `unavailable` when unreachable.
   */
  upload<T>(
    method: string,
    path: string,
    source: Readable | ((sink: ChunkSink) => Promise<unknown>),
    length?: number,
    headers: Record<string, string> = {},
  ): Promise<T> {
    const target = new URL(this.url + path);
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
      method,
      headers: {
        ...this.headers,
        ...headers,
        'content-type': 'application/octet-stream',
        ...(length !== undefined ? { 'content-length': String(length) } : {}),
      },
    });
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        fn();
      };
      request.on('response', async (response) => {
        let text = '';
        response.setEncoding('utf8');
        try {
          for await (const chunk of response) text += chunk;
        } catch {}
        let parsed: unknown = null;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {}
        const status = response.statusCode ?? 500;
        if (status >= 200 && status < 300) settle(() => resolve(toCamel<T>(parsed)));
        else {
          if (typeof source !== 'function') source.unpipe(request);
          request.destroy();
          settle(() => reject(boxErrorOf(status, parsed, `${method} ${path}`, retryAfterOf(response))));
        }
      });
      request.on('error', (error) => settle(() => reject(this.#unreachable(error))));
      const failed = (error: Error) => {
        request.destroy(error);
        settle(() =>
          reject(
            error instanceof BoxError
              ? error
              : new BoxError(`reading the upload failed: ${error.message}`, {
                  cause: error,
                  code: 'internal',
                }),
          ),
        );
      };
      if (typeof source === 'function') {
        // A refused upload destroys the request, which fails the pending write; the answer has settled.
        source(streamSink(request)).then(() => request.end(), failed);
      } else {
        source.on('error', failed);
        source.pipe(request);
      }
    });
  }
}
