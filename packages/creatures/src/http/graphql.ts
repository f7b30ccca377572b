/**
 * The `/graphql` route: GraphQL over HTTP (GET and POST, by the engine's graphql-http handler) with the
 * server's additions in front of it — event streams handed to the subscription handler, the explorer
 * for a browser GET, CORS preflight answers, the CSRF guard (`csrf.ts`), the body limit, opt-in batching (a JSON array
 * of operations answered by a JSON array of results, in order, bounded) and the response cache of
 * read-only queries. This file dispatches a request to the plugins that answer it: `use-response-cache.ts`,
 * `use-engine.ts` (the full handler), `use-fast-path.ts` (JSON POST bodies) and `use-post-body.ts`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Engine } from '../engine.ts';
import type { IncrementalExecutor } from '../incremental.ts';
import type { ChangeSource, EventStreamHandler } from '../subscriptions.ts';
import { isEventStreamRequest } from '../subscriptions.ts';
import { refusedAsCrossSite } from './csrf.ts';
import type { FailHandler } from './fail.ts';
import type { ServerMetrics } from './metrics.ts';
import { answerIncremental } from './multi-part-answers.ts';
import type { MultipartSubscriptions } from './multipart.ts';
import { mediaTypeOf } from './params.ts';
import { readBodyWithin } from './respond.ts';
import { answerExplorer, answerOptions, decodeURIComponentSafe, isJson, paramsOf } from './route-helpers.ts';
import { enginePlugin } from './use-engine.ts';
import { fastPathPlugin } from './use-fast-path.ts';
import { incrementalTest, postBodyPlugin } from './use-post-body.ts';
import { responseCachePlugin } from './use-response-cache.ts';

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
  /** Called when answering failed unexpectedly. */
  fail: FailHandler;
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
  const cache = responseCachePlugin({
    size: options.responseCacheSize,
    changes: options.changes,
    getCacheMaxAge: options.getCacheMaxAge,
    metrics: options.metrics,
  });
  const full = enginePlugin({ engine, cache, fail });
  const answerFast = fastPathPlugin({ engine, cache, execute: full.execute, fail });
  const answerPost = postBodyPlugin({
    cache,
    full,
    answerFast,
    maxBatch,
    incremental: options.incremental,
    multipartSubscriptions: options.multipartSubscriptions,
    fail,
  });
  const { respond } = full;

  const withBody = (req: IncomingMessage, res: ServerResponse, next: (body: Buffer) => void) =>
    readBodyWithin(req, res, bodyLimit, next);

  const isIncremental = incrementalTest(options.incremental);

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

  return Object.assign(handle, {
    close() {
      cache.close();
    },
  });
}
