/**
 * `@seed/creatures`: the creature GraphQL-over-HTTP server of spec 000 as a library.
 *
 * ```ts
 * import { createServer } from '@seed/creatures';
 * const server = createServer({ databasePath: ':memory:' }); // or { databaseUrl: 'postgres://…' }
 * await server.listen(4000);
 * server.store.events.on('change', (event) => console.log(event));
 * await server.close();
 * ```
 */
export { creatureNumber, creatureSvg, IMAGE_PREFIX, imagePath, TYPE_COLOURS } from './art.ts';
export { serverOptionsFromEnv } from './config.ts';
export { createEngine, type Engine, type EngineOptions, type RequestState } from './engine.ts';
export { CREATURE_ERRORS, type CreatureErrorCode, type CreatureErrorInfo } from './errors.ts';
export { EXPLORER_ASSET_PREFIX } from './explorer.ts';
export {
  loadAllowList,
  PersistedQueries,
  type PersistedQueryOptions,
  sha256Hex,
} from './http/persisted.ts';
export { costLimit, DEFAULT_LIMITS, depthLimit, type QueryLimits } from './limits.ts';
export {
  type CreatureOrder,
  CreatureOrderField,
  cursorOf,
  DEFAULT_CONNECTION_PAGE,
  type ListFilter,
  selectCreatures,
} from './listing.ts';
export { compilePlan, type Plan, PlanBailout } from './plan.ts';
export {
  buildCreatureSchema,
  MAX_PAGE_SIZE,
  type ResolverContext,
  resolvers,
  schema,
  typeDefs,
} from './schema.ts';
export {
  type CreatureServer,
  type CreatureServerOptions,
  createServer,
  DEFAULT_BODY_LIMIT,
  DEFAULT_DATABASE_PATH,
  DEFAULT_WEB_ROOT,
  openStore,
  WEB_CSP,
} from './server.ts';
export {
  type Attack,
  type Awaitable,
  type ChangeEvent,
  type Creature,
  type CreatureDraft,
  type CreaturePatch,
  type CreatureRef,
  DATA_FILE,
  type Dimension,
  loadSeedCreatures,
  type Message,
  type MessageDraft,
  nameKey,
  normalizeCreatureId,
  type Store,
} from './store.ts';
export { CreatureStoreError, type CreatureStoreErrorCode } from './store-error.ts';
export { MirroredStore } from './store-mirror.ts';
export {
  isPostgresUrl,
  PostgresStore,
  type PostgresStoreOptions,
  redactUrl,
} from './store-postgres.ts';
export { SqliteStore, type SqliteStoreOptions } from './store-sqlite.ts';
export {
  ChangeKind,
  type ChangeSource,
  createSubscriptionHandler,
  type EventStreamHandler,
  isEventStreamRequest,
  type SubscriptionHandlerOptions,
  subscriptionRoot,
  subscriptionTypeDefs,
  withSubscriptions,
} from './subscriptions.ts';
