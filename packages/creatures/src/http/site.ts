/**
 * The creature server's routes besides `/graphql`: `/metrics` (Prometheus), `/healthz`, the creature
 * images, the explorer's assets, the web front end's static build at `/` (with SPA fallback) and the
 * 404 answer for anything else. GET and HEAD only; other methods get 404.
 */
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import sirv from 'sirv';
import { IMAGE_PREFIX } from '../art.ts';
import { EXPLORER_ASSET_PREFIX, type ExplorerAsset, loadExplorerAssets } from '../explorer.ts';
import type { Store } from '../store.ts';
import { serveCreatureImage } from './images.ts';
import type { RouteLabel, ServerMetrics } from './metrics.ts';
import { JSON_TYPE, sendError } from './respond.ts';

/**
 * Content-Security-Policy of the web front end served at `/`: its own scripts, styles and `/graphql`
 * (fetch and event streams) only; no inline script, no framing.
 */
export const WEB_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** Options of {@link createSiteRoutes}. */
export interface SiteRoutesOptions {
  store: Store;
  /** The metrics served at `/metrics` (none: `/metrics` is a 404). */
  metrics?: ServerMetrics;
  /** Serve the explorer's assets under {@link EXPLORER_ASSET_PREFIX}. */
  explorer: boolean;
  /** Directory of the web front end's build, served at `/` when it exists. */
  webRoot: string;
}

/** The routes: their metrics label by path, and the handler. */
export interface SiteRoutes {
  /** The metrics route label of a path other than `/graphql`. */
  routeOf(path: string): RouteLabel;
  /** Answers a request for `path` (its URL without the query). */
  handle(req: IncomingMessage, res: ServerResponse, path: string): void;
}

/** Creates the routes; loads the explorer's assets and checks once whether `webRoot` exists. */
export function createSiteRoutes(options: SiteRoutesOptions): SiteRoutes {
  const { store, metrics, explorer } = options;
  const assets: Map<string, ExplorerAsset> = loadExplorerAssets();
  const serveWeb = existsSync(options.webRoot)
    ? sirv(options.webRoot, {
        single: true,
        dev: false,
        etag: true,
        setHeaders: (res) => {
          res.setHeader('content-security-policy', WEB_CSP);
          res.setHeader('x-content-type-options', 'nosniff');
        },
      })
    : undefined;

  function routeOf(path: string): RouteLabel {
    if (path === '/metrics') return 'metrics';
    if (path === '/healthz') return 'health';
    if (path.startsWith(IMAGE_PREFIX)) return 'images';
    if (path.startsWith(EXPLORER_ASSET_PREFIX)) return 'explorer';
    return serveWeb ? 'web' : 'other';
  }

  function handle(req: IncomingMessage, res: ServerResponse, path: string): void {
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (path === '/metrics' && metrics) {
        metrics.serve(req, res);
        return;
      }
      if (path === '/healthz') {
        void Promise.resolve(store.healthy()).then((ok) => {
          const body = JSON.stringify({
            status: ok ? 'ok' : 'unavailable',
            creatures: store.listCreatures().length,
          });
          res.writeHead(ok ? 200 : 503, { 'content-type': JSON_TYPE, 'cache-control': 'no-store' });
          res.end(req.method === 'HEAD' ? undefined : body);
        });
        return;
      }
      if (path.startsWith(IMAGE_PREFIX)) {
        serveCreatureImage(req, res, path, store);
        return;
      }
      if (path.startsWith(EXPLORER_ASSET_PREFIX) && explorer) {
        const asset = assets.get(path.slice(EXPLORER_ASSET_PREFIX.length));
        if (asset) {
          res.writeHead(200, {
            'content-type': asset.contentType,
            'content-length': asset.body.length,
            'cache-control': 'public, max-age=3600',
            'x-content-type-options': 'nosniff',
          });
          res.end(req.method === 'HEAD' ? undefined : asset.body);
          return;
        }
        sendError(res, 404, `No explorer asset at ${path}`);
        return;
      }
      if (serveWeb) {
        serveWeb(req, res, () => sendError(res, 404, `Nothing at ${path}`));
        return;
      }
      if (path === '/') {
        res.writeHead(302, { location: '/graphql' });
        res.end();
        return;
      }
    }
    sendError(res, 404, `Nothing at ${req.method} ${path}; the GraphQL endpoint is /graphql`);
  }

  return { routeOf, handle };
}
