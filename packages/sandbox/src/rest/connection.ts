/**
 * HTTP plumbing of the REST runtime client (`client.ts`): where the server is and how to authenticate
 * (`restOptionsFrom`), JSON calls with the server's errors mapped back to `BoxError`s (`wire.ts`), and the
 * streamed raw bodies of file contents (`download`, `upload`: bounded memory, one chunk in flight).
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import { type ChunkSink, streamSink } from '../runtime/files/pump.ts';
import { ExecMux } from './mux.ts';
import { boxErrorOf, toCamel, toSnake } from './wire.ts';
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
    let response: Response;
    try {
      response = await fetch(this.url + path, {
        method,
        headers: body === undefined ? this.headers : { ...this.headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(toSnake(body)) }),
      });
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause?.message ?? (error as Error).message;
      throw new BoxError(`cannot reach the REST runtime at ${this.url}: ${cause}`, {
        cause: error,
        code: 'unavailable',
      });
    }
    return this.parse<T>(response, method, path, nullOn404);
  }

  /**
   * A request whose response is raw (file contents, event streams): resolves with the `Response` once
   * its status is 2xx; the body is read as it arrives.
   * @throws BoxError mapped from the error body (`boxErrorOf`), or `unavailable` when unreachable.
   */
  async raw(method: string, path: string, signal?: AbortSignal): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(this.url + path, {
        method,
        headers: this.headers,
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause?.message ?? (error as Error).message;
      throw new BoxError(`cannot reach the REST runtime at ${this.url}: ${cause}`, {
        cause: error,
        code: 'unavailable',
      });
    }
    if (!response.ok) await this.parse(response, method, path, false);
    return response;
  }

  /**
   * GETs a raw body with `node:http` and hands it to `sink` chunk by chunk as it arrives, waiting for each
   * (fewer intermediate objects per chunk than a fetch body's web stream).
   * @throws BoxError mapped from the error body, `unavailable` when unreachable, or what `sink` throws.
   */
  download(path: string, sink: ChunkSink): Promise<void> {
    const target = new URL(this.url + path);
    return new Promise<void>((resolve, reject) => {
      const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
        method: 'GET',
        headers: this.headers,
      });
      request.on('error', (error) =>
        reject(
          new BoxError(`cannot reach the REST runtime at ${this.url}: ${error.message}`, {
            cause: error,
            code: 'unavailable',
          }),
        ),
      );
      request.on('response', async (response) => {
        const status = response.statusCode ?? 500;
        try {
          if (status < 200 || status >= 300) {
            let text = '';
            response.setEncoding('utf8');
            for await (const chunk of response) text += chunk;
            let parsed: unknown = null;
            try {
              parsed = text ? JSON.parse(text) : null;
            } catch {}
            throw boxErrorOf(status, parsed, `GET ${path}`);
          }
          for await (const chunk of response) await sink(chunk as Buffer);
          if (!response.complete) {
            throw new BoxError(`the REST runtime ended the body of GET ${path} early`, {
              code: 'unavailable',
            });
          }
          resolve();
        } catch (error) {
          response.destroy();
          reject(error);
        }
      });
      request.end();
    });
  }

  /**
   * Sends `source` as a raw request body (`application/octet-stream`, chunked) with `node:http`, whose
   * pipe waits for the socket to drain (bounded memory, unlike a fetch body), or lets the producer
   * `source(sink)` write it chunk by chunk (each write resolves once sent; with a known `length` in
   * bytes the body is sent with a `content-length`, not chunked, so no chunk is copied); resolves with the
   * camelCase JSON answer. An early error answer (the server refused the path) ends the upload.
   * @throws BoxError mapped from the error body, `unavailable` when unreachable.
   */
  upload<T>(
    method: string,
    path: string,
    source: Readable | ((sink: ChunkSink) => Promise<unknown>),
    length?: number,
  ): Promise<T> {
    const target = new URL(this.url + path);
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
      method,
      headers: {
        ...this.headers,
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
          settle(() => reject(boxErrorOf(status, parsed, `${method} ${path}`)));
        }
      });
      request.on('error', (error) =>
        settle(() =>
          reject(
            new BoxError(`cannot reach the REST runtime at ${this.url}: ${error.message}`, {
              cause: error,
              code: 'unavailable',
            }),
          ),
        ),
      );
      const failed = (error: Error) => {
        request.destroy(error);
        settle(() =>
          reject(
            error instanceof BoxError
              ? error
              : new BoxError(`reading the upload failed: ${error.message}`, { cause: error }),
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

  /** Body of a finished response: camelCase JSON, undefined for 204, null for 404 with `nullOn404`. */
  async parse<T>(response: Response, method: string, path: string, nullOn404: boolean): Promise<T> {
    if (response.status === 204) return undefined as T;
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    if (response.status === 404 && nullOn404) return null as T;
    if (!response.ok) throw boxErrorOf(response.status, parsed, `${method} ${path}`);
    return toCamel<T>(parsed);
  }
}
