/**
 * The creature server's HTTP layer (`node:http`): GraphQL over HTTP at `/graphql` (spec 000
 * "Endpoints"), the explorer on a browser GET of `/graphql`, `/healthz`, the web front end's static
 * build at `/` when present, with a body limit, a CSRF guard, CORS, a response cache of read-only
 * queries, structured JSON logs and graceful shutdown.
 */
import { existsSync } from 'node:fs';
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { GraphQLSchema } from 'graphql';
import { LRUCache } from 'lru-cache';
import { type Logger, pino } from 'pino';
import sirv from 'sirv';
import { IMAGE_PREFIX } from './art.ts';
import { createEngine, type Engine, type RequestState } from './engine.ts';
import {
  EXPLORER_ASSET_PREFIX,
  EXPLORER_CSP,
  EXPLORER_HTML,
  type ExplorerAsset,
  loadExplorerAssets,
} from './explorer.ts';
import { serveCreatureImage } from './http/images.ts';
import { DEFAULT_LIMITS, type QueryLimits, validationRules } from './limits.ts';
import { PACKAGE_ROOT } from './package-root.ts';
import { schema as creatureSchema } from './schema.ts';
import { Store } from './store.ts';
import { createSubscriptionHandler, isEventStreamRequest, withSubscriptions } from './subscriptions.ts';

/**
 * Default SQLite file: `.data/creatures.db` under the working directory at start (for
 * `npm run start:creatures` in this repository, `packages/creatures/.data/creatures.db`).
 */
export const DEFAULT_DATABASE_PATH = resolve('.data', 'creatures.db');
/** Default directory of the web front end's production build, served at `/` when it exists. */
export const DEFAULT_WEB_ROOT = join(PACKAGE_ROOT, 'web', 'dist');
/**
 * Content-Security-Policy of the web front end served at `/`: its own scripts, styles and `/graphql`
 * (fetch and event streams) only; no inline script, no framing.
 */
export const WEB_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/** Default request body limit: 100 KiB. */
export const DEFAULT_BODY_LIMIT = 100 * 1024;

/** Options of {@link createServer}. Every field is optional. */
export interface CreatureServerOptions {
  /** SQLite path or `':memory:'` (default {@link DEFAULT_DATABASE_PATH}); ignored when `store` is given. */
  databasePath?: string;
  /** A store to use instead of opening `databasePath`; the server then does not close it. */
  store?: Store;
  /** Largest accepted request body in bytes; larger bodies get 413 (default {@link DEFAULT_BODY_LIMIT}). */
  bodyLimit?: number;
  /** Query depth/cost limits. */
  limits?: Partial<QueryLimits>;
  /** Mask unexpected errors as "Internal server error" (default: unless `NODE_ENV` is "development"). */
  maskErrors?: boolean;
  /** Origins allowed by CORS: a list of exact origins, or `'*'` (default: none, same-origin only). */
  corsOrigins?: readonly string[] | '*';
  /** A pino logger (default: JSON to stdout at `logLevel`). */
  logger?: Logger;
  /** Level of the default logger (default "info"; "silent" disables). */
  logLevel?: string;
  /** Directory served at `/` when it exists (default {@link DEFAULT_WEB_ROOT}). */
  webRoot?: string;
  /** Most responses kept in the read-only query response cache (default 1000; 0 disables). */
  responseCacheSize?: number;
  /**
   * Offer GraphQL subscriptions over Server-Sent Events on `/graphql` (requests with
   * `Accept: text/event-stream`, `src/subscriptions.ts`), fed by the store's change events (default true).
   */
  subscriptions?: boolean;
  /** How long `close()` waits for in-flight requests before cutting connections, in ms (default 10000). */
  shutdownTimeoutMs?: number;
}

/** A running (or ready to run) creature server. */
export interface CreatureServer {
  /** The underlying `node:http` server. */
  readonly httpServer: Server;
  /** The executable schema (with the `Subscription` type unless `subscriptions: false`). */
  readonly schema: GraphQLSchema;
  /** The store; its `events` emit a `'change'` event for every committed write. */
  readonly store: Store;
  /** The logger. */
  readonly logger: Logger;
  /** Starts listening (port 0 picks a free port); resolves with the bound address. */
  listen(port?: number, host?: string): Promise<AddressInfo>;
  /** Base URL once listening, e.g. `http://127.0.0.1:4000`. */
  readonly url: string;
  /**
   * Graceful shutdown: stops accepting connections, lets in-flight requests finish (up to
   * `shutdownTimeoutMs`), then closes the database (unless the store was passed in).
   */
  close(): Promise<void>;
}

interface CachedResponse {
  /** The body as a string: node writes status line, headers and a string body in one write. */
  body: string;
  /** Flat name/value list for `writeHead`. */
  headers: string[];
}

const JSON_TYPE = 'application/json; charset=utf-8';
const PREFLIGHT_HEADERS = [
  'graphql-require-preflight',
  'apollo-require-preflight',
  'x-apollo-operation-name',
];
const SIMPLE_CONTENT_TYPES = new Set([
  '',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data',
]);

function sendError(
  res: ServerResponse,
  status: number,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify({ errors: [{ message }] });
  res.writeHead(status, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/**
 * Reads a request body of at most `limit` bytes as UTF-8 and calls `done` with it, or with `undefined`
 * as soon as the body is over the limit (the rest is drained and dropped).
 */
function readBody(req: IncomingMessage, limit: number, done: (body: string | undefined) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  req.on('data', (chunk: Buffer) => {
    if (over) return;
    size += chunk.length;
    if (size > limit) {
      over = true;
      chunks.length = 0;
      done(undefined);
      return;
    }
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (!over)
      done(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'));
  });
  // An aborted upload: the client is gone, nothing to answer.
  req.on('error', () => {});
}

/**
 * Creates the creature server (not yet listening). Opens the store (seeding a new database from
 * `data/creatures.json`) and loads the explorer's assets; throws if the database cannot be opened.
 */
export function createServer(options: CreatureServerOptions = {}): CreatureServer {
  const logger =
    options.logger ?? pino({ level: options.logLevel ?? 'info', base: { service: 'creatures' } });
  const ownsStore = !options.store;
  const store = options.store ?? new Store({ path: options.databasePath ?? DEFAULT_DATABASE_PATH });
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const cors = options.corsOrigins ?? [];
  const assets: Map<string, ExplorerAsset> = loadExplorerAssets();
  const webRoot = options.webRoot ?? DEFAULT_WEB_ROOT;
  const serveWeb = existsSync(webRoot)
    ? sirv(webRoot, {
        single: true,
        dev: false,
        etag: true,
        setHeaders: (res) => {
          res.setHeader('content-security-policy', WEB_CSP);
          res.setHeader('x-content-type-options', 'nosniff');
        },
      })
    : undefined;
  const maskErrors = options.maskErrors ?? process.env.NODE_ENV !== 'development';
  const onUnexpectedError = (err: unknown) =>
    logger.error({ err }, 'unexpected error while executing an operation');
  const withStreams = options.subscriptions ?? true;
  const schema = withStreams ? withSubscriptions(creatureSchema) : creatureSchema;
  const engine: Engine = createEngine({
    schema,
    store,
    limits: options.limits,
    maskErrors,
    onUnexpectedError,
  });
  const resolverContext = { store };
  const streams = withStreams
    ? createSubscriptionHandler({
        schema,
        events: store.events,
        validationRules: validationRules({ ...DEFAULT_LIMITS, ...options.limits }),
        context: () => resolverContext,
        maxBodyBytes: bodyLimit,
        maskErrors,
        onUnexpectedError,
      })
    : undefined;

  const cacheSize = options.responseCacheSize ?? 1000;
  const responses =
    cacheSize > 0
      ? new LRUCache<string, CachedResponse>({
          max: cacheSize,
          maxSize: 64 * 1024 * 1024,
          sizeCalculation: (v) => v.body.length * 2 + 1,
        })
      : undefined;
  let generation = 0;
  const onChange = () => {
    generation++;
    responses?.clear();
  };
  store.events.on('change', onChange);

  function corsHeaders(req: IncomingMessage, res: ServerResponse): void {
    const origin = req.headers.origin;
    if (!origin) return;
    if (cors === '*') res.setHeader('access-control-allow-origin', '*');
    else if (cors.includes(origin)) {
      res.setHeader('access-control-allow-origin', origin);
      res.setHeader('vary', 'Origin');
    }
  }

  function handleGraphQL(req: IncomingMessage, res: ServerResponse, url: string): void {
    if (streams && isEventStreamRequest(req)) {
      streams(req, res).catch((err: unknown) => fail(req, res, err));
      return;
    }
    const method = req.method ?? '';
    const accept = req.headers.accept ?? '';
    if (method === 'GET' && accept.includes('text/html')) {
      res.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'content-length': EXPLORER_HTML.length,
        'content-security-policy': EXPLORER_CSP,
        'x-content-type-options': 'nosniff',
      });
      res.end(EXPLORER_HTML);
      return;
    }
    if (method === 'OPTIONS') {
      const headers: Record<string, string> = { allow: 'GET, POST, OPTIONS' };
      if (res.hasHeader('access-control-allow-origin')) {
        headers['access-control-allow-methods'] = 'GET, POST, OPTIONS';
        headers['access-control-allow-headers'] =
          req.headers['access-control-request-headers'] ?? 'content-type, graphql-require-preflight';
        headers['access-control-max-age'] = '600';
      }
      res.writeHead(204, headers);
      res.end();
      return;
    }
    const contentType = req.headers['content-type'] ?? '';
    if (method !== 'POST') {
      respond(req, res, method, url, accept, contentType, '');
      return;
    }
    const mediaType = (contentType.split(';')[0] ?? '').trim().toLowerCase();
    if (SIMPLE_CONTENT_TYPES.has(mediaType) && !PREFLIGHT_HEADERS.some((h) => req.headers[h])) {
      sendError(
        res,
        400,
        `CSRF guard: a POST with content-type "${mediaType || '(none)'}" needs a non-empty GraphQL-Require-Preflight header; send content-type application/json`,
      );
      return;
    }
    const declared = Number(req.headers['content-length']);
    if (declared > bodyLimit) {
      sendError(res, 413, `Request body of ${declared} bytes exceeds the limit of ${bodyLimit} bytes`, {
        connection: 'close',
      });
      req.resume();
      return;
    }
    readBody(req, bodyLimit, (body) => {
      if (body === undefined) {
        sendError(res, 413, `Request body exceeds the limit of ${bodyLimit} bytes`, { connection: 'close' });
        return;
      }
      respond(req, res, method, url, accept, contentType, body);
    });
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
        ? `${method}\n${accept}\n${contentType}\n${method === 'GET' ? url : body}`
        : undefined;
    if (key !== undefined) {
      const hit = responses!.get(key);
      if (hit) {
        res.writeHead(200, hit.headers);
        res.end(hit.body);
        return;
      }
    }
    execute(req, res, method, url, body, key).catch((err: unknown) => fail(req, res, err));
  }

  async function execute(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    url: string,
    body: string,
    key: string | undefined,
  ): Promise<void> {
    const state: RequestState = { cacheable: false };
    const startGeneration = generation;
    const [resBody, init] = await engine({
      method,
      url,
      headers: { get: (name: string) => (req.headers[name.toLowerCase()] as string | undefined) ?? null },
      body,
      raw: req,
      context: state,
    });
    const text = resBody ?? undefined;
    const headers: string[] = [];
    for (const [name, value] of Object.entries(init.headers ?? {}))
      if (value !== undefined) headers.push(name, value);
    if (text !== undefined) headers.push('content-length', String(Buffer.byteLength(text)));
    if (
      key !== undefined &&
      text !== undefined &&
      state.cacheable &&
      init.status === 200 &&
      generation === startGeneration
    ) {
      responses!.set(key, { body: text, headers });
    }
    res.writeHead(init.status, init.statusText, headers);
    res.end(text);
  }

  function fail(req: IncomingMessage, res: ServerResponse, err: unknown): void {
    logger.error({ err, method: req.method, url: req.url }, 'request failed');
    if (!res.headersSent) sendError(res, 500, 'Internal server error');
    else res.destroy();
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (cors === '*' || cors.length > 0) corsHeaders(req, res);
    if (path === '/graphql') {
      handleGraphQL(req, res, url);
      return;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      if (path === '/healthz') {
        const ok = store.healthy();
        const body = JSON.stringify({
          status: ok ? 'ok' : 'unavailable',
          creatures: store.listCreatures().length,
        });
        res.writeHead(ok ? 200 : 503, { 'content-type': JSON_TYPE, 'cache-control': 'no-store' });
        res.end(req.method === 'HEAD' ? undefined : body);
        return;
      }
      if (path.startsWith(IMAGE_PREFIX)) {
        serveCreatureImage(req, res, path, store);
        return;
      }
      if (path.startsWith(EXPLORER_ASSET_PREFIX)) {
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

  const httpServer = createHttpServer({ requestTimeout: 30_000, headersTimeout: 10_000 }, (req, res) => {
    if (logger.isLevelEnabled('debug')) {
      const started = performance.now();
      res.once('finish', () =>
        logger.debug(
          {
            method: req.method,
            url: req.url,
            status: res.statusCode,
            ms: +(performance.now() - started).toFixed(3),
          },
          'request',
        ),
      );
    }
    try {
      handle(req, res);
    } catch (err) {
      fail(req, res, err);
    }
  });

  let url = '';
  let closing: Promise<void> | undefined;
  return {
    httpServer,
    schema,
    store,
    logger,
    get url() {
      return url;
    },
    listen(port = 4000, host?: string) {
      return new Promise<AddressInfo>((resolve, reject) => {
        httpServer.once('error', reject);
        httpServer.listen(port, host, () => {
          httpServer.off('error', reject);
          const address = httpServer.address() as AddressInfo;
          const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
          url = `http://${shownHost === '0.0.0.0' || shownHost === '[::]' ? 'localhost' : shownHost}:${address.port}`;
          logger.info({ address: address.address, port: address.port, url: `${url}/graphql` }, 'listening');
          resolve(address);
        });
      });
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        logger.info('shutting down');
        const timer = setTimeout(() => httpServer.closeAllConnections(), options.shutdownTimeoutMs ?? 10_000);
        timer.unref();
        // Keep-alive connections become idle once their in-flight response is sent: close them then.
        const sweeper = setInterval(() => httpServer.closeIdleConnections(), 50);
        sweeper.unref();
        const finish = () => {
          clearTimeout(timer);
          clearInterval(sweeper);
          store.events.off('change', onChange);
          if (ownsStore) store.close();
          logger.info('shutdown complete');
          resolve();
        };
        streams?.close();
        if (!httpServer.listening) return finish();
        httpServer.close(() => finish());
        httpServer.closeIdleConnections();
      });
      return closing;
    },
  };
}
