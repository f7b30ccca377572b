/**
 * The `/graphql` route: GraphQL over HTTP (GET and POST, by the engine's graphql-http handler) with the
 * server's additions in front of it — event streams handed to the subscription handler, the explorer
 * for a browser GET, CORS preflight answers, the CSRF guard (`csrf.ts`), the body limit, opt-in batching (a JSON array
 * of operations answered by a JSON array of results, in order, bounded) and the response cache of
 * read-only queries.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Engine, RequestState } from '../engine.ts';
import type { FastAnswer } from '../engine-fast.ts';
import { type IncrementalExecutor, usesIncrementalDelivery } from '../incremental.ts';
import type { ChangeSource, EventStreamHandler } from '../subscriptions.ts';
import { isEventStreamRequest } from '../subscriptions.ts';
import { refusedAsCrossSite } from './csrf.ts';
import { etagOf } from './images.ts';
import type { ServerMetrics } from './metrics.ts';
import { answerBatch, answerIncremental } from './multi-part-answers.ts';
import { type MultipartSubscriptions, wantsMultipartSubscription } from './multipart.ts';
import { mediaTypeOf } from './params.ts';
import { endWith, readBodyWithin } from './respond.ts';
import { ResponseCache, writeCached } from './response-cache.ts';
import {
  answerExplorer,
  answerOptions,
  checkParamsOrUndefined,
  decodeURIComponentSafe,
  isJson,
  isSubscription,
  notModified,
  paramsOf,
  varyWith,
} from './route-helpers.ts';

/** Options of {@link createGraphQLRoute}. */
export interface GraphQLRouteOptions {
  engine: Engine;
  /** The subscription handler for `Accept: text/event-stream` requests, if subscriptions are on. */
  streams?: EventStreamHandler;
  /** Largest request body in bytes (larger: 413). */
  bodyLimit: number;
  /** Most responses kept in the response cache, for GET URLs and for POST bodies each (0: none). */
  responseCacheSize: number;
  /** Change events; every event empties the response cache. */
  changes: ChangeSource;
  /** Most operations in one batch; 0 turns batching off (a JSON array body then gets 400). */
  maxBatch: number;
  /** Serve the GraphiQL explorer to a browser GET. */
  explorer: boolean;
  /** `max-age` (seconds) of the `Cache-Control` of successful GET query answers. */
  getCacheMaxAge: number;
  /** Metrics to count response-cache lookups in. */
  metrics?: ServerMetrics;
  /** Runs `@defer`/`@stream` operations (graphql-js 17); without it they fail validation as unknown directives. */
  incremental?: IncrementalExecutor;
  /** Apollo multipart HTTP subscriptions, if subscriptions are on. */
  multipartSubscriptions?: MultipartSubscriptions;
  /** Called when answering failed unexpectedly (answers 500 if nothing was sent yet). */
  fail: (req: IncomingMessage, res: ServerResponse, err: unknown) => void;
}

/** The route handler, and a way to stop listening to change events. */
export interface GraphQLRoute {
  (req: IncomingMessage, res: ServerResponse, url: string): void;
  /** Detaches from the change events. */
  close(): void;
}

/** Creates the `/graphql` route handler. */
export function createGraphQLRoute(options: GraphQLRouteOptions): GraphQLRoute {
  const { engine, streams, bodyLimit, maxBatch, fail } = options;
  const getCacheControl =
    options.getCacheMaxAge > 0
      ? `public, max-age=${options.getCacheMaxAge}`
      : 'public, max-age=0, must-revalidate';
  const responses =
    options.responseCacheSize > 0 ? new ResponseCache(options.responseCacheSize, options.metrics) : undefined;
  let generation = 0;
  const onChange = () => {
    generation++;
    responses?.clear();
  };
  options.changes.on('change', onChange);

  const engineRequest = (
    req: IncomingMessage,
    method: string,
    url: string,
    body: unknown,
    state: RequestState,
  ) =>
    engine({
      method,
      url,
      headers: { get: (name: string) => (req.headers[name.toLowerCase()] as string | undefined) ?? null },
      body: body as string,
      raw: req,
      context: state,
    });

  const withBody = (req: IncomingMessage, res: ServerResponse, next: (body: Buffer) => void) =>
    readBodyWithin(req, res, bodyLimit, next);

  const isIncremental = (text: string) => options.incremental !== undefined && usesIncrementalDelivery(text);

  function handle(req: IncomingMessage, res: ServerResponse, url: string): void {
    const method = req.method ?? '';
    const contentType = req.headers['content-type'] ?? '';
    // The common request first: a JSON POST (no CSRF concern) that asks for no event stream.
    if (
      method === 'POST' &&
      contentType === 'application/json' &&
      req.headers.accept !== 'text/event-stream'
    ) {
      const accept = req.headers.accept ?? '';
      readBodyWithin(req, res, bodyLimit, (bytes) =>
        answerPost(req, res, url, accept, contentType, contentType, true, bytes),
      );
      return;
    }
    if (streams && isEventStreamRequest(req)) {
      const run = (body: string | undefined) => {
        const params = isIncremental(body ?? decodeURIComponentSafe(url))
          ? paramsOf(method, url, body ?? '')
          : undefined;
        const done = params
          ? answerIncremental(options.incremental!, req, res, method, params, true)
          : streams(req, res, body);
        done.catch((err: unknown) => fail(req, res, err));
      };
      if (method === 'POST') withBody(req, res, (bytes) => run(bytes.toString('utf8')));
      else run(undefined);
      return;
    }
    const accept = req.headers.accept ?? '';
    if (method === 'GET' && isIncremental(decodeURIComponentSafe(url))) {
      const params = paramsOf(method, url, '');
      if (params) {
        answerIncremental(options.incremental!, req, res, method, params, false).catch((err: unknown) =>
          fail(req, res, err),
        );
        return;
      }
    }
    if (method === 'GET' && options.explorer && accept.includes('text/html')) {
      answerExplorer(res);
      return;
    }
    if (method === 'OPTIONS') {
      answerOptions(req, res);
      return;
    }
    if (method !== 'POST') {
      respond(req, res, method, url, accept, contentType, '');
      return;
    }
    const mediaType = contentType === 'application/json' ? contentType : mediaTypeOf(contentType)[0];
    if (refusedAsCrossSite(req, res, mediaType)) return;
    const json = isJson(contentType);
    withBody(req, res, (bytes) => answerPost(req, res, url, accept, contentType, mediaType, json, bytes));
  }

  /**
   * Answers a POST whose body has been read: by {@link answerFast} for JSON, else as a batch, an
   * incremental delivery, a multipart subscription, or through the engine's full handler.
   */
  function answerPost(
    req: IncomingMessage,
    res: ServerResponse,
    url: string,
    accept: string,
    contentType: string,
    mediaType: string,
    json: boolean,
    bytes: Buffer,
  ): void {
    const method = 'POST';
    if (json && answerFast(req, res, url, accept, contentType, bytes)) return;
    const body = bytes.toString('utf8');
    if (mediaType === 'application/json' && body.trimStart().startsWith('[')) {
      answerBatch(
        (item, state) => engineRequest(req, 'POST', url, item, state),
        maxBatch,
        res,
        accept,
        body,
      ).catch((err: unknown) => fail(req, res, err));
      return;
    }
    if (
      mediaType === 'application/json' &&
      (isIncremental(body) || (options.multipartSubscriptions && wantsMultipartSubscription(accept)))
    ) {
      const params = paramsOf(method, url, body);
      if (params && isIncremental(String(params.query ?? ''))) {
        answerIncremental(options.incremental!, req, res, method, params, false).catch((err: unknown) =>
          fail(req, res, err),
        );
        return;
      }
      if (params && options.multipartSubscriptions && wantsMultipartSubscription(accept)) {
        const { query, variables, operationName } = checkParamsOrUndefined(params) ?? {};
        if (query !== undefined && isSubscription(query, operationName ?? undefined)) {
          options
            .multipartSubscriptions(req, res, {
              query,
              variables: variables ?? undefined,
              operationName: operationName ?? undefined,
            })
            .catch((err: unknown) => fail(req, res, err));
          return;
        }
      }
    }
    if (json) {
      execute(req, res, method, url, body, responses && bytes, variantOf(accept, contentType)).catch(
        (err: unknown) => fail(req, res, err),
      );
    } else respond(req, res, method, url, accept, contentType, body);
  }

  const variantOf = (accept: string, contentType: string) =>
    responses ? responses.variantOf(accept, contentType) : -1;

  /**
   * Answers a JSON POST from the response cache or by the engine's fast path (which keeps what the body
   * asks for by its bytes); returns false, having answered nothing, when the body needs the full route
   * (batches, `@defer`/`@stream`, subscriptions, mutations, errors). An answer the fast path cut short
   * (a graphql-jit result with errors) goes to the full handler from here.
   */
  function answerFast(
    req: IncomingMessage,
    res: ServerResponse,
    url: string,
    accept: string,
    contentType: string,
    bytes: Buffer,
  ): boolean {
    const variant = variantOf(accept, contentType);
    if (responses && variant >= 0) {
      const hit = responses.getBytes(bytes, variant);
      if (hit) {
        writeCached(res, hit);
        return true;
      }
    }
    let answer: ReturnType<Engine['fast']>;
    try {
      answer = engine.fast('POST', url, bytes, req.headers.accept, true);
    } catch (err) {
      fail(req, res, err);
      return true;
    }
    if (answer === undefined) return false;
    const key = responses && bytes;
    if (answer instanceof Promise) {
      const startGeneration = generation;
      answer
        .then((done) => {
          if (done) sendAnswer(res, done, key, variant, startGeneration);
          else return execute(req, res, 'POST', url, bytes.toString('utf8'), key, variant);
        })
        .catch((err: unknown) => fail(req, res, err));
    } else sendAnswer(res, answer, key, variant, generation);
    return true;
  }

  /**
   * Writes a fast-path answer to a POST (status 200), keeping it in the response cache when there is one:
   * latin1 text of a plan's bytes in one write with the head, other answers through `endWith`.
   */
  function sendAnswer(
    res: ServerResponse,
    answer: FastAnswer,
    key: Uint8Array | undefined,
    variant: number,
    startGeneration: number,
  ): void {
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
  }

  /** Answers from the response cache, or runs the request through the engine (caching a cacheable answer). */
  function respond(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    url: string,
    accept: string,
    contentType: string,
    body: string,
  ): void {
    const key =
      responses && (method === 'GET' || method === 'POST')
        ? ResponseCache.textKey(method, accept, contentType, method === 'GET' ? url : body)
        : undefined;
    if (key !== undefined) {
      const hit = responses!.getText(key);
      if (hit) {
        if (method === 'GET' && notModified(req, res, hit.headers)) return;
        writeCached(res, hit);
        return;
      }
    }
    // JSON POST bodies took the fast path in answerFast already.
    let answer: ReturnType<Engine['fast']>;
    try {
      answer = method === 'GET' ? engine.fast(method, url, body, req.headers.accept) : undefined;
    } catch (err) {
      fail(req, res, err);
      return;
    }
    const ok = (done: FastAnswer, startGeneration: number) =>
      send(
        req,
        res,
        method,
        key,
        -1,
        startGeneration,
        200,
        'OK',
        { 'content-type': done.contentType },
        done.body,
        true,
      );
    if (answer === undefined) {
      execute(req, res, method, url, body, key, -1).catch((err: unknown) => fail(req, res, err));
    } else if (answer instanceof Promise) {
      const startGeneration = generation;
      answer
        .then((done) => (done ? ok(done, startGeneration) : execute(req, res, method, url, body, key, -1)))
        .catch((err: unknown) => fail(req, res, err));
    } else ok(answer, generation);
  }

  async function execute(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    url: string,
    body: string,
    key: string | Uint8Array | undefined,
    variant: number,
  ): Promise<void> {
    const state: RequestState = { cacheable: false };
    const startGeneration = generation;
    const [resBody, init] = await engineRequest(req, method, url, body, state);
    send(
      req,
      res,
      method,
      key,
      variant,
      startGeneration,
      init.status,
      init.statusText,
      init.headers,
      resBody ?? undefined,
      state.cacheable,
    );
  }

  /**
   * Writes an answer: `content-length`, for GET the caching headers (`Cache-Control`, `ETag`, `Vary` when
   * cacheable, else `no-store`) or `304` for a matching `If-None-Match`; keeps a cacheable answer in the
   * response cache (under a text `key`, or under body bytes and `variant`) unless the data changed since
   * `startGeneration`.
   */
  function send(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    key: string | Uint8Array | undefined,
    variant: number,
    startGeneration: number,
    status: number,
    statusText: string | undefined,
    initHeaders: Record<string, string | undefined> | undefined,
    text: string | Buffer | undefined,
    queryCacheable: boolean,
  ): void {
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
  }

  return Object.assign(handle, {
    close() {
      options.changes.off('change', onChange);
    },
  });
}
