/**
 * `GET /metrics`: the server's metrics in the Prometheus text exposition format (version 0.0.4), by
 * prom-client, in a registry of this server's own (several servers in one process keep their counts
 * apart). Besides Node's process metrics (`creatures_process_*`, `creatures_nodejs_*`):
 *
 * - `creatures_http_requests_total{route,method,status}` and `creatures_http_request_duration_seconds{route}`
 *   (route: `graphql`, `images`, `explorer`, `web`, `health`, `metrics`, `other`), counted when a
 *   response's `end()` is called; a duration runs from the request's arrival (its response's creation,
 *   right after node parsed the head) to that call;
 * - `creatures_response_cache_total{result="hit"|"miss"}`: read-only query answers from the response cache;
 * - `creatures_persisted_queries_total{result="hit"|"miss"|"registered"|"limited"}`: APQ lookups,
 *   registrations, and texts not kept because their client was over its registration limit;
 * - `creatures_event_streams_open`: subscription event streams open now.
 */
import { type IncomingMessage, ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, type Histogram, Registry } from 'prom-client';
import type { EventStreamHandler } from '../subscriptions.ts';
import { DurationHistogram } from './duration-histogram.ts';
import type { PersistedQueries } from './persisted.ts';

/** The route label of a request path. */
export type RouteLabel = 'graphql' | 'images' | 'explorer' | 'web' | 'health' | 'metrics' | 'other';

/** The metrics of one server. */
export interface ServerMetrics {
  /**
   * The `ServerResponse` class the server creates its responses with (`http.createServer`'s
   * `ServerResponse` option): each response counts and times itself when it ends.
   */
  Response: typeof ServerResponse<IncomingMessage>;
  /** Labels a response created by {@link ServerMetrics.Response} with its route. */
  track(res: ServerResponse, route: RouteLabel): void;
  /** Counts one response-cache lookup. */
  cacheLookup(hit: boolean): void;
  /** Answers `GET /metrics`. */
  serve(req: IncomingMessage, res: ServerResponse): void;
}

/** A response of {@link ServerMetrics.Response}: its route label and when its request arrived. */
interface MeteredResponse extends ServerResponse {
  route: RouteLabel;
  /** `performance.now()` (ms) when node created the response, right after parsing the request head. */
  readonly started: number;
}

/** Creates the registry and metrics of one server; `persisted` and `streams` are read at scrape time. */
export function createMetrics(
  persisted: PersistedQueries,
  streams: EventStreamHandler | undefined,
): ServerMetrics {
  const register = new Registry();
  collectDefaultMetrics({ register, prefix: 'creatures_' });
  // Request counts are kept in a plain map (no label hashing per request) and handed over at scrape time.
  const answered = new Map<
    string,
    { labels: { route: string; method: string; status: string }; count: { n: number } }
  >();
  new Counter({
    name: 'creatures_http_requests_total',
    help: 'HTTP requests answered, by route, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [register],
    collect() {
      this.reset();
      for (const { labels, count } of answered.values()) this.inc(labels, count.n);
    },
  });
  const duration = new DurationHistogram(
    'creatures_http_request_duration_seconds',
    'Time from the request to the end of its response (its last write), in seconds',
  );
  // A metric object of prom-client's shape (name, help, type, get, reset); the registry formats it.
  register.registerMetric(duration as unknown as Histogram);
  const lookups = { hit: 0, miss: 0 };
  new Counter({
    name: 'creatures_response_cache_total',
    help: 'Response cache lookups of read-only queries, by result',
    labelNames: ['result'] as const,
    registers: [register],
    collect() {
      this.reset();
      this.inc({ result: 'hit' }, lookups.hit);
      this.inc({ result: 'miss' }, lookups.miss);
    },
  });
  new Counter({
    name: 'creatures_persisted_queries_total',
    help: 'Automatic persisted query lookups (hit, miss), registrations, and registrations over the client limit',
    labelNames: ['result'] as const,
    registers: [register],
    collect() {
      this.reset();
      this.inc({ result: 'hit' }, persisted.stats.hits);
      this.inc({ result: 'miss' }, persisted.stats.misses);
      this.inc({ result: 'registered' }, persisted.stats.registered);
      this.inc({ result: 'limited' }, persisted.stats.limited);
    },
  });
  new Gauge({
    name: 'creatures_event_streams_open',
    help: 'Subscription event streams open now',
    registers: [register],
    collect() {
      this.set(streams?.open ?? 0);
    },
  });

  // Label sets resolved once: prom-client hashes a label object on every call otherwise. Counts are
  // found by route, then method, then status (short strings the parser and this server reuse).
  const counts = new Map<string, Map<string, Map<number, { n: number }>>>();
  const countOf = (route: string, method: string, status: number) => {
    let byMethod = counts.get(route);
    if (!byMethod) {
      byMethod = new Map();
      counts.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let count = byStatus.get(status);
    if (!count) {
      // Bounded: node's HTTP parser admits only the methods it knows, and the statuses are this server's.
      count = { n: 0 };
      byStatus.set(status, count);
      answered.set(`${route} ${method} ${status}`, {
        labels: { route, method, status: String(status) },
        count,
      });
    }
    return count;
  };
  // The count of the last label set used: consecutive requests mostly share route, method and status.
  let lastRoute = '';
  let lastMethod = '';
  let lastStatus = 0;
  let lastCount: { n: number } | undefined;
  /** Counts and times a response whose `end()` has just been called. */
  const ended = (res: MeteredResponse) => {
    const route = res.route;
    const method = res.req.method ?? '';
    const status = res.statusCode;
    if (lastCount === undefined || route !== lastRoute || method !== lastMethod || status !== lastStatus) {
      lastCount = countOf(route, method, status);
      lastRoute = route;
      lastMethod = method;
      lastStatus = status;
    }
    lastCount.n++;
    duration.observe(route, (performance.now() - res.started) / 1000);
  };

  /**
   * node:http's `ServerResponse` with the route label and start time as fields (no property added and no
   * `finish` listener per request), counting itself once, when `end()` is first called.
   */
  class Response extends ServerResponse implements MeteredResponse {
    route: RouteLabel = 'other';
    readonly started = performance.now();

    override end(chunk?: unknown, encoding?: unknown, callback?: unknown): this {
      if (!this.writableEnded) ended(this);
      return super.end(chunk as never, encoding as never, callback as never);
    }
  }

  return {
    Response,
    track(res, route) {
      (res as MeteredResponse).route = route;
    },
    cacheLookup(hit) {
      if (hit) lookups.hit++;
      else lookups.miss++;
    },
    serve(req, res) {
      register.metrics().then(
        (text) => {
          res.writeHead(200, {
            'content-type': register.contentType,
            'content-length': Buffer.byteLength(text),
            'cache-control': 'no-store',
          });
          res.end(req.method === 'HEAD' ? undefined : text);
        },
        (err: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' });
          res.end(`metrics collection failed: ${(err as Error).message}\n`);
        },
      );
    },
  };
}
