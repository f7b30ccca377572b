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

/** Creates the registry and metrics of one server; `persisted` and `streams` are read at scrape time. */
export function createMetrics(
  persisted: PersistedQueries,
  streams: EventStreamHandler | undefined,
): ServerMetrics {
  const register = new Registry();
  collectDefaultMetrics({ register, prefix: 'creatures_' });
  const requests = new Counter({
    name: 'creatures_http_requests_total',
    help: 'HTTP requests answered, by route, method and status code',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [register],
  });
  const duration = new Histogram({
    name: 'creatures_http_request_duration_seconds',
    help: 'Time from request to the end of the response, in seconds',
    labelNames: ['route'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [register],
  });
  const cache = new Counter({
    name: 'creatures_response_cache_total',
    help: 'Response cache lookups of read-only queries, by result',
    labelNames: ['result'] as const,
    registers: [register],
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

  const cacheHits = cache.labels('hit');
  const cacheMisses = cache.labels('miss');
  // Label sets resolved once: prom-client hashes a label object on every call otherwise.
  const counters = new Map<string, { inc(): void }>();
  const timers = new Map<string, { observe(value: number): void }>();
  const finished = (route: RouteLabel, method: string, status: number, started: bigint) => {
    const key = `${route} ${method} ${status}`;
    let counter = counters.get(key);
    if (!counter) {
      counter = requests.labels(route, method, String(status));
      if (counters.size < 1000) counters.set(key, counter);
    }
    counter.inc();
    let timer = timers.get(route);
    if (!timer) {
      timer = duration.labels(route);
      timers.set(route, timer);
    }
    timer.observe(Number(process.hrtime.bigint() - started) / 1e9);
  };

  return {
    track(req, res, route) {
      const started = process.hrtime.bigint();
      res.once('finish', () => finished(route, req.method ?? '', res.statusCode, started));
    },
    cacheLookup(hit) {
      (hit ? cacheHits : cacheMisses).inc();
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
