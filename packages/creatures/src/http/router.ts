/**
 * The creature server's request listener: for every request it sets the CORS headers (`cors.ts`), starts
 * the debug request log (`request-log.ts`), labels the request for the metrics (`metrics.ts`), and hands
 * it by path to the `/graphql` route (`graphql.ts`) or to the other routes (`site.ts`). A route that
 * throws is answered by the {@link FailHandler} (`fail.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { CorsHeaders } from './cors.ts';
import type { FailHandler } from './fail.ts';
import type { GraphQLRoute } from './graphql.ts';
import type { ServerMetrics } from './metrics.ts';
import { logRequest } from './request-log.ts';
import type { SiteRoutes } from './site.ts';

/** Options of {@link createRouter}. */
export interface RouterOptions {
  /** The `/graphql` route. */
  graphql: GraphQLRoute;
  /** Every other path. */
  site: SiteRoutes;
  /** The CORS step (none: no CORS header is set). */
  cors?: CorsHeaders;
  /** Metrics that time each response by its route label (none: nothing is counted). */
  metrics?: ServerMetrics;
  /** The logger of the request log. */
  logger: Logger;
  /** Answers a request whose route threw. */
  fail: FailHandler;
}

/** The `request` listener of the `node:http` server. */
export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** Creates the request listener (see the module comment). */
export function createRouter(options: RouterOptions): RequestListener {
  const { graphql, site, cors, metrics, logger, fail } = options;

  function route(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    cors?.(req, res);
    if (path === '/graphql') {
      metrics?.track(res, 'graphql');
      graphql(req, res, url);
      return;
    }
    metrics?.track(res, site.routeOf(path));
    site.handle(req, res, path);
  }

  return (req, res) => {
    logRequest(logger, req, res);
    try {
      route(req, res);
    } catch (err) {
      fail(req, res, err);
    }
  };
}
