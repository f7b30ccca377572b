/**
 * The `/graphql` route's response cache as a plugin: the {@link ResponseCache} (when its size is above
 * 0), the change generation that keeps an answer computed before a data change out of it, and the
 * writers that answer with a cacheable result — the fast path's answers ({@link ResponseCachePlugin.sendAnswer})
 * and the full handler's ({@link ResponseCachePlugin.send}, with the GET caching headers and `304`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastAnswer } from '../engine-fast.ts';
import type { ChangeSource } from '../subscriptions.ts';
import { etagOf } from './images.ts';
import type { ServerMetrics } from './metrics.ts';
import { endWith } from './respond.ts';
import { ResponseCache } from './response-cache.ts';
import { notModified, varyWith } from './route-helpers.ts';

/** Options of {@link responseCachePlugin}. */
export interface ResponseCacheOptions {
  /** Most responses kept, for GET URLs and for POST bodies each (0: no cache). */
  size: number;
  /** Change events; every event empties the cache and starts a new generation. */
  changes: ChangeSource;
  /** `max-age` (seconds) of the `Cache-Control` of successful GET query answers. */
  getCacheMaxAge: number;
  /** Metrics to count cache lookups in. */
  metrics?: ServerMetrics;
}

/**
 * A key into the cache: text (GET URL or non-JSON POST body, {@link ResponseCache.textKey}) or the
 * bytes of a JSON POST body (with a variant from {@link ResponseCachePlugin.variantOf}); `undefined`: keep nothing.
 */
export type CacheKey = string | Uint8Array | undefined;

/**
 * The head of an answer to write: `status`, `statusText` (none: node's default reason phrase) and
 * `headers` (lower-case names; `undefined` values are left out); graphql-http's `ResponseInit` has this shape.
 */
export interface AnswerInit {
  readonly status: number;
  readonly statusText?: string;
  readonly headers?: Record<string, string | undefined>;
}

/** The response cache plugin of the `/graphql` route. */
export interface ResponseCachePlugin {
  /** The cache, or `undefined` when its size is 0. */
  readonly responses: ResponseCache | undefined;
  /** The change generation: incremented by every change event. */
  readonly generation: number;
  /** The POST key variant of (`Accept`, `Content-Type`), or -1 (no cache or too many variants). */
  variantOf(accept: string, contentType: string): number;
  /**
   * Writes a fast-path answer to a POST (status 200), keeping it under `key`/`variant` unless the data
   * changed since `startGeneration`: latin1 text of a plan's bytes in one write with the head, other
   * answers through `endWith`.
   */
  sendAnswer(
    res: ServerResponse,
    answer: FastAnswer,
    key: Uint8Array | undefined,
    variant: number,
    startGeneration: number,
  ): void;
  /**
   * Writes an answer: `content-length`, for GET the caching headers (`Cache-Control`, `ETag`, `Vary` when
   * cacheable, else `no-store`) or `304` for a matching `If-None-Match`; keeps a cacheable answer in the
   * cache (under a text `key`, or under body bytes and `variant`) unless the data changed since
   * `startGeneration`.
   */
  send(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    key: CacheKey,
    variant: number,
    startGeneration: number,
    init: AnswerInit,
    text: string | Buffer | undefined,
    queryCacheable: boolean,
  ): void;
  /** Detaches from the change events. */
  close(): void;
}

/** Creates the response cache plugin; it listens to `options.changes` until `close()`. */
export function responseCachePlugin(options: ResponseCacheOptions): ResponseCachePlugin {
  const getCacheControl =
    options.getCacheMaxAge > 0
      ? `public, max-age=${options.getCacheMaxAge}`
      : 'public, max-age=0, must-revalidate';
  const responses = options.size > 0 ? new ResponseCache(options.size, options.metrics) : undefined;
  let generation = 0;
  const onChange = () => {
    generation++;
    responses?.clear();
  };
  options.changes.on('change', onChange);

  const sendAnswer: ResponseCachePlugin['sendAnswer'] = (res, answer, key, variant, startGeneration) => {
    const { body, contentType } = answer;
    if (answer.latin1) {
      const text = body as string;
      const headers = ['content-type', contentType, 'content-length', String(text.length)];
      if (key !== undefined && generation === startGeneration)
        responses!.set(key, variant, { body: Buffer.from(text, 'latin1'), headers, latin1: text });
      res.writeHead(200, headers);
      res.end(text, 'latin1');
      return;
    }
    const bytes = typeof body === 'string' && body.length > 2048 ? Buffer.from(body) : body;
    const length = typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length;
    const headers = ['content-type', contentType, 'content-length', String(length)];
    if (key !== undefined && generation === startGeneration)
      responses!.set(key, variant, { body: bytes, headers });
    endWith(res, 200, headers, bytes);
  };

  const send: ResponseCachePlugin['send'] = (
    req,
    res,
    method,
    key,
    variant,
    startGeneration,
    init,
    text,
    queryCacheable,
  ) => {
    const { status, statusText, headers: initHeaders } = init;
    const headers: string[] = [];
    for (const name in initHeaders) {
      const value = initHeaders[name];
      if (value !== undefined) headers.push(name, value);
    }
    // A large text answer is encoded once (its length and the bytes written come from the same buffer).
    const bytes = typeof text === 'string' ? (text.length > 2048 ? Buffer.from(text) : undefined) : text;
    if (text !== undefined)
      headers.push('content-length', String(bytes ? bytes.length : Buffer.byteLength(text as string)));
    const cacheable = queryCacheable && status === 200 && text !== undefined;
    if (method === 'GET') {
      if (cacheable) {
        headers.push(
          'cache-control',
          getCacheControl,
          'etag',
          etagOf(text!),
          'vary',
          varyWith(res, 'Accept'),
        );
      } else if (!initHeaders || !('cache-control' in initHeaders)) {
        headers.push('cache-control', 'no-store');
      }
    }
    if (key !== undefined && cacheable && generation === startGeneration) {
      responses!.set(key, variant, { body: bytes ?? text!, headers });
    }
    if (method === 'GET' && cacheable && notModified(req, res, headers)) return;
    if (statusText !== undefined) res.statusMessage = statusText;
    endWith(res, status, headers, bytes ?? text);
  };

  return {
    responses,
    get generation() {
      return generation;
    },
    variantOf: (accept, contentType) => (responses ? responses.variantOf(accept, contentType) : -1),
    sendAnswer,
    send,
    close() {
      options.changes.off('change', onChange);
    },
  };
}
