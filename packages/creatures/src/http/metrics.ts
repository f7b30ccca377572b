/**
 * `GET /metrics`: the server's metrics in the Prometheus text exposition format (version 0.0.4), by
 * prom-client, in a registry of this server's own (several servers in one process keep their counts
 * apart). Besides Node's process metrics (`creatures_process_*`, `creatures_nodejs_*`):
 *
 * - `creatures_http_requests_total{route,method,status}` and `creatures_http_request_duration_seconds{route}`
 *   (route: `graphql`, `images`, `explorer`, `web`, `health`, `metrics`, `other`);
 * - `creatures_response_cache_total{result="hit"|"miss"}`: read-only query answers from the response cache;
 * - `creatures_persisted_queries_total{result="hit"|"miss"|"registered"}`: APQ lookups and registrations;
 * - `creatures_event_streams_open`: subscription event streams open now.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { EventStreamHandler } from '../subscriptions.ts';
import type { PersistedQueries } from './persisted.ts';

/** The route label of a request path. */
export type RouteLabel = 'graphql' | 'images' | 'explorer' | 'web' | 'health' | 'metrics' | 'other';

/** The metrics of one server. */
export interface ServerMetrics {
  /** Counts and times a request once its response has finished. */
  track(req: IncomingMessage, res: ServerResponse, route: RouteLabel): void;
  /** Counts one response-cache lookup. */
  cacheLookup(hit: boolean): void;
  /** Answers `GET /metrics`. */
  serve(req: IncomingMessage, res: ServerResponse): void;
}

const ROUTE = Symbol('route');
const STARTED = Symbol('started');
/** A response being tracked: its route label and start time (`performance.now()`, ms). */
type TrackedResponse = ServerResponse & { [ROUTE]: RouteLabel; [STARTED]: number };

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
  const duration = new Histogram({
    name: 'creatures_http_request_duration_seconds',
    help: 'Time from request to the end of the response, in seconds',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [register],
  });
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
    help: 'Automatic persisted query lookups (hit, miss) and registrations',
    labelNames: ['result'] as const,
    registers: [register],
    collect() {
      this.reset();
      this.inc({ result: 'hit' }, persisted.stats.hits);
      this.inc({ result: 'miss' }, persisted.stats.misses);
      this.inc({ result: 'registered' }, persisted.stats.registered);
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
  const timers = new Map<string, { observe(value: number): void }>();
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
  const timerOf = (route: string) => {
    let timer = timers.get(route);
    if (!timer) {
      timer = duration.labels(route);
      timers.set(route, timer);
    }
    return timer;
  };
  /** The `finish` listener of every tracked response (one shared function: no closure per request). */
  function finished(this: TrackedResponse) {
    countOf(this[ROUTE], this.req.method ?? '', this.statusCode).n++;
    timerOf(this[ROUTE]).observe((performance.now() - this[STARTED]) / 1000);
  }

  return {
    track(_req, res, route) {
      const tracked = res as TrackedResponse;
      tracked[ROUTE] = route;
      tracked[STARTED] = performance.now();
      res.on('finish', finished);
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
