/**
 * Test helpers: start a real creature server on an ephemeral port with an in-memory (or given) database
 * and send GraphQL requests to it; fresh databases of either store (SQLite, or PostgreSQL in a
 * throwaway cluster of `scripts/postgres.ts`) for suites that run against both.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { type CreatureServer, type CreatureServerOptions, createServer } from '../src/index.ts';

/** The two store implementations a suite can run against. */
export type StoreKind = 'sqlite' | 'postgres';
/** Both stores, for `for (const kind of STORE_KINDS) describe(...)`. */
export const STORE_KINDS: readonly StoreKind[] = ['sqlite', 'postgres'];

let cluster: Promise<PostgresCluster> | undefined;

/**
 * The URL of a new, empty database in this test process's PostgreSQL cluster, started on first use
 * (initdb into a temp dir). A file that uses it calls `after(stopPostgres)` at its top level.
 */
export async function postgresDatabase(): Promise<string> {
  cluster ??= startPostgres();
  return (await cluster).createDatabase();
}

/** Stops this process's PostgreSQL cluster, if one was started, and removes its directory. */
export async function stopPostgres(): Promise<void> {
  const started = cluster;
  cluster = undefined;
  await (await started)?.stop();
}

/**
 * Server options selecting a fresh database of `kind`: `:memory:` SQLite, or a new PostgreSQL database.
 */
export async function freshDatabase(kind: StoreKind): Promise<CreatureServerOptions> {
  return kind === 'sqlite' ? { databasePath: ':memory:' } : { databaseUrl: await postgresDatabase() };
}

/** A started server plus a GraphQL client for it. */
export interface Running {
  server: CreatureServer;
  /** Base URL of `/graphql`. */
  endpoint: string;
  /** POSTs a GraphQL request as JSON; resolves with status and parsed body. */
  gql(
    query: string,
    variables?: Record<string, unknown>,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: GraphQLBody }>;
}

/** The JSON body of a GraphQL response. */
export interface GraphQLBody {
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected field by field
  data?: any;
  errors?: { message: string; extensions?: Record<string, unknown>; path?: unknown[] }[];
}

/**
 * Starts a server on 127.0.0.1 port 0: in-memory database, silent logs and no web front end build
 * (whatever `web/dist` holds in the working tree) unless overridden.
 */
export async function start(options: CreatureServerOptions = {}): Promise<Running> {
  const server = createServer({
    databasePath: ':memory:',
    logLevel: 'silent',
    webRoot: join(tmpdir(), `no-web-build-${process.pid}`),
    ...options,
  });
  await server.listen(0, '127.0.0.1');
  const endpoint = `${server.url}/graphql`;
  return {
    server,
    endpoint,
    async gql(query, variables, headers = {}) {
      const res = await fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json',
          ...headers,
        },
        body: JSON.stringify({ query, variables }),
      });
      return { status: res.status, body: (await res.json()) as GraphQLBody };
    },
  };
}

/** A JSON value of a test's answer, inspected field by field. */
// biome-ignore lint/suspicious/noExplicitAny: payloads are inspected field by field
export type Json = any;

/** The JSON parts of a `multipart/mixed` body with the given boundary (parts that are not JSON left out). */
export function multipartParts(body: string, boundary: string): Json[] {
  return body
    .split(`\r\n--${boundary}`)
    .map((part) => part.slice(part.indexOf('\r\n\r\n') + 4))
    .filter((part) => part.startsWith('{'))
    .map((part) => JSON.parse(part));
}
