/**
 * The creature server (`node:http`), the package's composition root: it only wires. It opens the store,
 * builds the schema and the GraphQL engine, and wires the HTTP parts — the request listener
 * (`http/router.ts`: CORS, the debug request log, metrics labels, dispatch by path, the 500 answer of
 * `http/fail.ts`), GraphQL over HTTP at `/graphql` (spec 000 "Endpoints"; `http/graphql.ts`: explorer,
 * CSRF guard, body limit, batching, response cache), the other routes (`http/site.ts`: `/metrics`,
 * `/healthz`, images, explorer assets, the web front end at `/`), SSE, multipart and WebSocket
 * subscriptions — with structured JSON logs; `listen` and the graceful shutdown are `http/lifecycle.ts`.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { GraphQLSchema } from 'graphql';
import { type Logger, pino } from 'pino';
import { listSizesOf } from './cost.ts';
import { createEngine, type Engine } from './engine.ts';
import { buildFederatedSchema } from './federation.ts';
import { createCors } from './http/cors.ts';
import { createFailHandler } from './http/fail.ts';
import { createGraphQLRoute } from './http/graphql.ts';
import { serverLifecycle } from './http/lifecycle.ts';
import { answerClientError } from './http/linger.ts';
import { createMetrics } from './http/metrics.ts';
import { createMultipartSubscriptions } from './http/multipart.ts';
import { PersistedQueries } from './http/persisted.ts';
import { createRouter } from './http/router.ts';
import { createSiteRoutes } from './http/site.ts';
import { createIncrementalExecutor } from './incremental.ts';
import { DEFAULT_LIMITS, type QueryLimits, validationRules } from './limits.ts';
import { PACKAGE_ROOT } from './package-root.ts';
import { schema as creatureSchema, resolvers, typeDefs } from './schema.ts';
import type { Store } from './store.ts';
import { PostgresStore } from './store-postgres.ts';
import { SqliteStore } from './store-sqlite.ts';
import { createSubscriptionHandler, withSubscriptions } from './subscriptions.ts';
import { attachGraphQLWs, type WebSocketTransport } from './websocket.ts';

/**
 * Default SQLite file: `.data/creatures.db` under the working directory at start (for
 * `npm run start:creatures` in this repository, `packages/creatures/.data/creatures.db`).
 */
export const DEFAULT_DATABASE_PATH = resolve('.data', 'creatures.db');
/** Default directory of the web front end's production build, served at `/` when it exists. */
export const DEFAULT_WEB_ROOT = join(PACKAGE_ROOT, 'web', 'dist');
export { WEB_CSP } from './http/site.ts';
/** Default request body limit: 100 KiB. */
export const DEFAULT_BODY_LIMIT = 100 * 1024;

/** Options of {@link createServer}. Every field is optional. */
export interface CreatureServerOptions {
  /** SQLite path or `':memory:'` (default {@link DEFAULT_DATABASE_PATH}); ignored when `store` is given. */
  databasePath?: string;
  /**
   * A PostgreSQL URL (`postgres://user:password@host:5432/db`): use {@link PostgresStore}, which several
   * server instances can share (their subscriptions see each other's changes). Takes precedence over
   * `databasePath`; ignored when `store` is given.
   */
  databaseUrl?: string;
  /** A store to use instead of opening a database; the server then does not close it. */
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
  /**
   * Most responses kept in the read-only query response cache, for GET URLs and for POST bodies each
   * (default 1000; 0 disables).
   */
  responseCacheSize?: number;
  /**
   * Offer GraphQL subscriptions over Server-Sent Events on `/graphql` (requests with
   * `Accept: text/event-stream`, `src/subscriptions.ts`), fed by the store's change events (default true).
   */
  subscriptions?: boolean;
  /**
   * Serve GraphQL over WebSocket (`graphql-transport-ws`, `src/websocket.ts`) on `/graphql` for
   * subscriptions, queries and mutations (default: on when `subscriptions` is on).
   */
  webSocket?: boolean;
  /** Most operations in flight on one WebSocket connection (default 100). */
  webSocketMaxOperations?: number;
  /** How long a WebSocket may wait before its `connection_init`, in ms (default 3000). */
  webSocketInitTimeoutMs?: number;
  /** How long `close()` waits for in-flight requests before cutting connections, in ms (default 10000). */
  shutdownTimeoutMs?: number;
  /**
   * Most operations in one batched request (a JSON array body; Apollo BatchHttpLink, graphql-request
   * `batchRequests`); default 0: batching off, an array body gets 400 `BATCHING_NOT_ENABLED`.
   */
  maxBatch?: number;
  /**
   * Automatic persisted queries (Apollo APQ): `true` (default) keeps up to 1000 verified query texts by
   * their SHA-256; `false` answers `PERSISTED_QUERY_NOT_SUPPORTED`.
   */
  automaticPersistedQueries?: boolean;
  /** Answer introspection (`__schema`, `__type`); default: on unless `NODE_ENV` is "production". */
  introspection?: boolean;
  /** Serve the GraphiQL explorer on a browser GET of `/graphql`; default: on unless `NODE_ENV` is "production". */
  explorer?: boolean;
  /** Keep "Did you mean …?" hints in error messages; default: on unless `NODE_ENV` is "production". */
  suggestions?: boolean;
  /**
   * Serve the schema as an Apollo Federation v2 subgraph (`Query._service`, `Query._entities`, `@key` on
   * `Creature` and `Message`; `src/federation.ts`), for a gateway to compose (default true).
   */
  federation?: boolean;
  /** Serve Prometheus metrics at `GET /metrics` (default true). */
  metrics?: boolean;
  /**
   * `max-age` in seconds of the `Cache-Control` of successful GET query answers (default 0: caches
   * revalidate every time, cheaply, through the `ETag`).
   */
  getCacheMaxAge?: number;
  /**
   * Allow-list mode: only these operations run (document id or SHA-256 → query text; see
   * `loadAllowList` for the manifest file formats). APQ registration is then off.
   */
  allowList?: ReadonlyMap<string, string>;
}

/** A running (or ready to run) creature server. */
export interface CreatureServer {
  /** The underlying `node:http` server. */
  readonly httpServer: Server;
  /** The executable schema (with the `Subscription` type unless `subscriptions: false`). */
  readonly schema: GraphQLSchema;
  /** The store; its `events` emit a `'change'` event for every committed write (of every instance). */
  readonly store: Store;
  /** The logger. */
  readonly logger: Logger;
  /**
   * Waits for the store to be ready (for PostgreSQL: connected, migrated, loaded), then starts listening
   * (port 0 picks a free port); resolves with the bound address. Rejects with the store's error.
   */
  listen(port?: number, host?: string): Promise<AddressInfo>;
  /** Base URL once listening, e.g. `http://127.0.0.1:4000`. */
  readonly url: string;
  /**
   * Graceful shutdown: stops accepting connections, lets in-flight requests finish (up to
   * `shutdownTimeoutMs`), then closes the database (unless the store was passed in).
   */
  close(): Promise<void>;
}

/**
 * The store the options select: `store` itself, a {@link PostgresStore} for `databaseUrl`, else a
 * {@link SqliteStore} at `databasePath` (default {@link DEFAULT_DATABASE_PATH}). Throws `TypeError` for a
 * `databaseUrl` that is not a `postgres://` URL, or the SQLite error when the file cannot be opened.
 */
export function openStore(
  options: Pick<CreatureServerOptions, 'store' | 'databaseUrl' | 'databasePath'>,
  logger?: Logger,
): Store {
  if (options.store) return options.store;
  if (options.databaseUrl !== undefined) {
    return new PostgresStore({
      url: options.databaseUrl,
      onError: (err, context) => logger?.warn({ err, context }, 'store background work failed'),
    });
  }
  return new SqliteStore({ path: options.databasePath ?? DEFAULT_DATABASE_PATH });
}

let federated: GraphQLSchema | undefined;
/** The subgraph schema ({@link buildFederatedSchema}), built once per process. */
function federatedSchema(): GraphQLSchema {
  federated ??= buildFederatedSchema();
  return federated;
}

/**
 * Creates the creature server (not yet listening). Opens the store ({@link openStore}: a SQLite file is
 * opened and seeded at once; PostgreSQL connects when `listen` is called) and loads the explorer's
 * assets; throws if the SQLite database cannot be opened.
 */
export function createServer(options: CreatureServerOptions = {}): CreatureServer {
  const logger =
    options.logger ?? pino({ level: options.logLevel ?? 'info', base: { service: 'creatures' } });
  const ownsStore = !options.store;
  const store = openStore(options, logger);
  const bodyLimit = options.bodyLimit ?? DEFAULT_BODY_LIMIT;
  const cors = options.corsOrigins ?? [];
  const corsHeaders = createCors(cors);
  const maskErrors = options.maskErrors ?? process.env.NODE_ENV !== 'development';
  const production = process.env.NODE_ENV === 'production';
  const introspection = options.introspection ?? !production;
  const explorer = options.explorer ?? !production;
  const onUnexpectedError = (err: unknown) =>
    logger.error({ err }, 'unexpected error while executing an operation');
  const suggestions = options.suggestions ?? !production;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const known = () => listSizesOf(store.listCreatures());
  const withStreams = options.subscriptions ?? true;
  const baseSchema = options.federation === false ? creatureSchema : federatedSchema();
  const schema = withStreams ? withSubscriptions(baseSchema) : baseSchema;
  const persisted = new PersistedQueries({
    automatic: options.automaticPersistedQueries ?? true,
    allowList: options.allowList,
  });
  const engine: Engine = createEngine({
    schema,
    store,
    limits,
    maskErrors,
    onUnexpectedError,
    persisted,
    introspection,
    suggestions,
  });
  const resolverContext = { store };
  /** The rules of the transports that validate without variables: with the cost rule on the current data. */
  const rulesWithCost = validationRules(limits, { introspection, known });
  const streams = withStreams
    ? createSubscriptionHandler({
        schema,
        events: store.events,
        validationRules: rulesWithCost,
        context: () => resolverContext,
        maxBodyBytes: bodyLimit,
        maskErrors,
        onUnexpectedError,
        suggestions,
      })
    : undefined;

  const metrics = options.metrics === false ? undefined : createMetrics(persisted, streams);
  const incremental = createIncrementalExecutor({
    typeDefs,
    resolvers,
    schema16: creatureSchema,
    store,
    limits,
    maskErrors,
    onUnexpectedError,
  });
  const multipartSubscriptions = withStreams
    ? createMultipartSubscriptions({
        schema,
        events: store.events,
        rules: rulesWithCost,
        context: resolverContext,
        maskErrors,
        onUnexpectedError,
      })
    : undefined;
  const fail = createFailHandler(logger);
  const graphqlRoute = createGraphQLRoute({
    engine,
    streams,
    bodyLimit,
    responseCacheSize: options.responseCacheSize ?? 1000,
    changes: store.events,
    maxBatch: options.maxBatch ?? 0,
    explorer,
    getCacheMaxAge: options.getCacheMaxAge ?? 0,
    metrics,
    incremental,
    multipartSubscriptions,
    fail,
  });
  const site = createSiteRoutes({
    store,
    metrics,
    explorer,
    webRoot: options.webRoot ?? DEFAULT_WEB_ROOT,
  });

  const httpOptions = { requestTimeout: 30_000, headersTimeout: 10_000 };
  const httpServer = createHttpServer(
    metrics ? { ...httpOptions, ServerResponse: metrics.Response } : httpOptions,
    createRouter({ graphql: graphqlRoute, site, cors: corsHeaders, metrics, logger, fail }),
  );
  httpServer.on('clientError', answerClientError);
  const webSockets: WebSocketTransport | undefined =
    withStreams && (options.webSocket ?? true)
      ? attachGraphQLWs({
          httpServer,
          schema,
          events: store.events,
          context: resolverContext,
          persisted,
          limits,
          rules: validationRules(limits, { cost: false, introspection }),
          known,
          suggestions,
          maskErrors,
          onUnexpectedError,
          maxMessageBytes: bodyLimit,
          maxOperations: options.webSocketMaxOperations,
          connectionInitTimeoutMs: options.webSocketInitTimeoutMs,
          corsOrigins: cors,
        })
      : undefined;

  const life = serverLifecycle({
    httpServer,
    store,
    logger,
    ownsStore,
    shutdownTimeoutMs: options.shutdownTimeoutMs,
    stopTransports: () => {
      streams?.close();
      multipartSubscriptions?.close();
      return webSockets?.close() ?? Promise.resolve();
    },
    detach: () => graphqlRoute.close(),
  });
  return {
    httpServer,
    schema,
    store,
    logger,
    get url() {
      return life.url;
    },
    listen: (port, host) => life.listen(port, host),
    close: () => life.close(),
  };
}
