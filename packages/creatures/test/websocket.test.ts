/**
 * GraphQL over WebSocket (`graphql-transport-ws`) on `/graphql` with real clients: graphql-ws's own
 * client, Apollo Client's `GraphQLWsLink` and urql's `subscriptionExchange` over a graphql-ws client.
 * A subscription receives a mutation made by another client, on one server and across two servers on
 * one PostgreSQL database; the HTTP limits (parse limits, depth, cost, persisted queries) and the
 * per-connection limits (operations in flight, message size, `connection_init` timeout, origin) hold.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { GraphQLWsLink } from '@apollo/client/link/subscriptions';
import { fetchExchange, subscriptionExchange, Client as UrqlClient } from '@urql/core';
import { type Client, createClient, type FormattedExecutionResult as ExecutionResult } from 'graphql-ws';
import { WebSocket } from 'ws';
import { sha256Hex } from '../src/http/persisted.ts';
import { postgresDatabase, type Running, start, stopPostgres } from './helpers.ts';

after(stopPostgres);

// biome-ignore lint/suspicious/noExplicitAny: results are inspected field by field
type Json = any;

const wsUrl = (endpoint: string) => endpoint.replace(/^http/, 'ws');

function wsClient(endpoint: string, extra: Partial<Parameters<typeof createClient>[0]> = {}): Client {
  return createClient({
    url: wsUrl(endpoint),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: true,
    ...extra,
  });
}

/** Runs one operation over `client` and resolves with its single result. */
function once1(
  client: Client,
  query: string,
  variables?: Record<string, unknown>,
): Promise<ExecutionResult<Json, unknown>> {
  return new Promise((resolve, reject) => {
    let result: ExecutionResult<Json, unknown> | undefined;
    client.subscribe<Json>(
      { query, variables },
      {
        next: (value) => {
          result = value;
        },
        error: (err) => (Array.isArray(err) ? resolve({ errors: err }) : reject(err)),
        complete: () => resolve(result!),
      },
    );
  });
}

/** Subscribes and resolves with the first `n` events, then unsubscribes. */
function firstEvents(client: Client, query: string, n: number, onReady: () => void): Promise<Json[]> {
  return new Promise((resolve, reject) => {
    const events: Json[] = [];
    const stop = client.subscribe<Json>(
      { query },
      {
        next: (value) => {
          events.push(value);
          if (events.length === n) {
            stop();
            resolve(events);
          }
        },
        error: reject,
        complete: () => {},
      },
    );
    onReady();
  });
}

/**
 * Waits until the store of `s` has exactly `listeners` change listeners (the server's own plus one per
 * subscription running now).
 */
async function subscribed(s: Running, listeners: number): Promise<void> {
  // Up to 20 s: a loaded machine is slow.
  for (const end = Date.now() + 20_000; s.server.store.events.listenerCount('change') !== listeners; ) {
    if (Date.now() > end) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(s.server.store.events.listenerCount('change'), listeners, 'the subscriptions did not settle');
}

describe('GraphQL over WebSocket', { timeout: 120_000 }, () => {
  let s: Running;
  let baseListeners = 0;
  before(async () => {
    s = await start();
    baseListeners = s.server.store.events.listenerCount('change');
  });
  after(() => s.server.close());

  test("graphql-ws's client: query, mutation, and a subscription that receives another client's mutation", async () => {
    const client = wsClient(s.endpoint);
    try {
      const query = await once1(client, '{ creature(name: "Pikachu") { number name } }');
      assert.deepEqual(query.data, { creature: { number: 25, name: 'Pikachu' } });
      const events = firstEvents(
        client,
        'subscription { messageChanged { kind message { content author } } }',
        1,
        () => {},
      );
      await subscribed(s, baseListeners + 1);
      const other = wsClient(s.endpoint);
      const created = await once1(
        other,
        'mutation { createMessage(input: { content: "over ws", author: "ash" }) { id } }',
      );
      assert.ok(created.data.createMessage.id);
      await other.dispose();
      assert.deepEqual((await events)[0].data, {
        messageChanged: { kind: 'CREATED', message: { content: 'over ws', author: 'ash' } },
      });
    } finally {
      await client.dispose();
    }
  });

  test("Apollo Client's GraphQLWsLink receives a mutation made through Apollo's HttpLink", async () => {
    await subscribed(s, baseListeners);
    const wsLink = new GraphQLWsLink(wsClient(s.endpoint));
    const ws = new ApolloClient({ link: wsLink, cache: new InMemoryCache() });
    const http = new ApolloClient({ link: new HttpLink({ uri: s.endpoint }), cache: new InMemoryCache() });
    try {
      const { data } = await ws.query({ query: gql`{ creature(name: "Mew") { id name } }` });
      assert.equal((data as Json).creature.name, 'Mew');
      const event = new Promise<Json>((resolve, reject) => {
        const sub = ws
          .subscribe({
            query: gql`subscription { creatureChanged(id: "151") { kind id creature { maxCP } } }`,
          })
          .subscribe({
            next: (value) => {
              sub.unsubscribe();
              resolve(value.data);
            },
            error: reject,
          });
      });
      await subscribed(s, baseListeners + 1);
      await http.mutate({
        mutation: gql`mutation { updateCreature(id: "151", input: { maxCP: 4000 }) { id maxCP } }`,
      });
      assert.deepEqual(await event, {
        creatureChanged: {
          __typename: 'CreatureChange',
          kind: 'UPDATED',
          id: '151',
          creature: { __typename: 'Creature', maxCP: 4000 },
        },
      });
    } finally {
      ws.stop();
      http.stop();
      await (wsLink.client as Client).dispose();
    }
  });

  test('urql subscriptionExchange over a graphql-ws client receives a mutation made by another urql client', async () => {
    await subscribed(s, baseListeners);
    const transport = wsClient(s.endpoint);
    const client = new UrqlClient({
      url: s.endpoint,
      exchanges: [
        subscriptionExchange({
          forwardSubscription: (request) => ({
            subscribe: (sink) => ({
              unsubscribe: transport.subscribe({ ...request, query: request.query ?? '' }, sink),
            }),
          }),
        }),
        fetchExchange,
      ],
    });
    const other = new UrqlClient({ url: s.endpoint, exchanges: [fetchExchange] });
    try {
      const event = new Promise<Json>((resolve) => {
        const { unsubscribe } = client
          .subscription('subscription { messageChanged { kind message { content } } }', {})
          .subscribe((result) => {
            if (!result.data) return;
            unsubscribe();
            resolve(result.data);
          });
      });
      await subscribed(s, baseListeners + 1);
      const created = await other
        .mutation('mutation { createMessage(input: { content: "from urql", author: "misty" }) { id } }', {})
        .toPromise();
      assert.equal(created.error, undefined);
      assert.deepEqual(await event, {
        messageChanged: { kind: 'CREATED', message: { content: 'from urql' } },
      });
    } finally {
      await transport.dispose();
    }
  });

  test('the HTTP limits hold: parse limits, depth, cost, bad variables, persisted queries', async () => {
    const client = wsClient(s.endpoint);
    try {
      const code = async (query: string, variables?: Record<string, unknown>) =>
        (await once1(client, query, variables)).errors?.[0]?.extensions?.code;
      assert.equal(await code(`{ ${'a{'.repeat(5000)}b${'}'.repeat(5000)} }`), 'QUERY_TOO_NESTED');
      let nested = 'name';
      for (let i = 0; i < 13; i++) nested = `evolutions { ${nested} }`;
      assert.equal(await code(`{ creature(name: "Bulbasaur") { ${nested} } }`), 'QUERY_TOO_DEEP');
      assert.equal(
        await code(
          'query ($n: Int) { creatures(first: $n) { evolutions { evolutions { attacks { fast { name } } } } } a: creatures { evolutions { name } } b: creatures { types } c: creatures { attacks { fast { name type damage } special { name type damage } } } d: creatures { weaknesses resistant types } }',
          { n: 151 },
        ),
        undefined,
      );
      const costly = Array.from(
        { length: 12 },
        (_, i) => `c${i}: creatures { attacks { fast { name type damage } special { name type damage } } }`,
      );
      assert.equal(await code(`{ ${costly.join(' ')} }`), 'QUERY_TOO_COSTLY');
      assert.equal(await code('query ($id: ID!) { getMessage(id: $id) { id } }', {}), 'BAD_USER_INPUT');
      // APQ: a hash alone is not found until the text was registered (over HTTP here).
      const text = '{ creature(name: "Eevee") { name } }';
      const persisted = { persistedQuery: { version: 1, sha256Hash: sha256Hex(text) } };
      const lookup = () =>
        new Promise<ExecutionResult<Json, unknown>>((resolve) => {
          let result: ExecutionResult<Json, unknown> | undefined;
          client.subscribe<Json>(
            { query: '', extensions: persisted },
            {
              next: (v) => (result = v),
              error: (e) => resolve({ errors: e as Json }),
              complete: () => resolve(result!),
            },
          );
        });
      assert.equal((await lookup()).errors?.[0]?.extensions?.code, 'PERSISTED_QUERY_NOT_FOUND');
      await s.gql(text, undefined, {}).then(() =>
        fetch(s.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query: text, extensions: persisted }),
        }),
      );
      assert.deepEqual((await lookup()).data, { creature: { name: 'Eevee' } });
    } finally {
      await client.dispose();
    }
  });
});

describe('GraphQL over WebSocket: per-connection limits', { timeout: 120_000 }, () => {
  let s: Running;
  before(async () => {
    s = await start({
      bodyLimit: 4096,
      webSocketMaxOperations: 3,
      // The clients of these tests run in this process: an init deadline a stalled event loop can pass
      // before it reads their connection_init would close them with 4408 (that case has its own server).
      webSocketInitTimeoutMs: 30_000,
      corsOrigins: ['https://app.example'],
    });
  });
  after(() => s.server.close());

  test('more operations in flight than the limit get TOO_MANY_OPERATIONS; the others keep running', async () => {
    const client = wsClient(s.endpoint);
    const errors: Json[] = [];
    const stops: (() => void)[] = [];
    for (let i = 0; i < 4; i++) {
      stops.push(
        client.subscribe(
          { query: 'subscription { messageChanged { kind } }' },
          { next: () => {}, error: (e) => errors.push(e), complete: () => {} },
        ),
      );
    }
    for (const end = Date.now() + 20_000; errors.length === 0 && Date.now() < end; )
      await new Promise((r) => setTimeout(r, 10));
    assert.equal(errors.length, 1);
    assert.equal(errors[0][0].extensions.code, 'TOO_MANY_OPERATIONS');
    for (const stop of stops) stop();
    await client.dispose();
  });

  test('a message over the size limit closes the connection with 1009', async () => {
    const socket = new WebSocket(wsUrl(s.endpoint), 'graphql-transport-ws');
    await once(socket, 'open');
    socket.send(JSON.stringify({ type: 'connection_init' }));
    await once(socket, 'message');
    socket.send(
      JSON.stringify({
        id: '1',
        type: 'subscribe',
        payload: { query: `{ __typename } # ${'x'.repeat(8192)}` },
      }),
    );
    const [code] = (await once(socket, 'close')) as [number];
    assert.equal(code, 1009);
  });

  test('a connection without connection_init in time is closed with 4408', async () => {
    const short = await start({ webSocketInitTimeoutMs: 300 });
    try {
      const socket = new WebSocket(wsUrl(short.endpoint), 'graphql-transport-ws');
      await once(socket, 'open');
      const [code] = (await once(socket, 'close')) as [number];
      assert.equal(code, 4408);
    } finally {
      await short.server.close();
    }
  });

  test('an upgrade from a foreign origin is refused with 403; a CORS origin and the own origin are let in', async () => {
    const refused = new WebSocket(wsUrl(s.endpoint), 'graphql-transport-ws', {
      origin: 'https://evil.example',
    });
    refused.on('error', () => {});
    const [, res] = (await once(refused, 'unexpected-response')) as [unknown, { statusCode: number }];
    assert.equal(res.statusCode, 403);
    refused.terminate();
    for (const origin of ['https://app.example', s.server.url]) {
      const socket = new WebSocket(wsUrl(s.endpoint), 'graphql-transport-ws', { origin });
      await once(socket, 'open');
      socket.close();
    }
    const elsewhere = new WebSocket(`${wsUrl(s.server.url)}/other`, 'graphql-transport-ws');
    elsewhere.on('error', () => {});
    const [, notFound] = (await once(elsewhere, 'unexpected-response')) as [unknown, { statusCode: number }];
    assert.equal(notFound.statusCode, 404);
    elsewhere.terminate();
  });
});

describe('GraphQL over WebSocket across two servers on one PostgreSQL database', { timeout: 120_000 }, () => {
  test('a subscriber on each server receives a mutation made on the other', async () => {
    const databaseUrl = await postgresDatabase();
    const a = await start({ databaseUrl, databasePath: undefined });
    const b = await start({ databaseUrl, databasePath: undefined });
    const clientA = wsClient(a.endpoint);
    const clientB = wsClient(b.endpoint);
    try {
      const baseA = a.server.store.events.listenerCount('change');
      const baseB = b.server.store.events.listenerCount('change');
      const query = 'subscription { messageChanged { kind message { content } } }';
      const onA = firstEvents(clientA, query, 2, () => {});
      const onB = firstEvents(clientB, query, 2, () => {});
      await subscribed(a, baseA + 1);
      await subscribed(b, baseB + 1);
      assert.equal(
        (await a.gql('mutation { createMessage(input: { content: "via a" }) { id } }')).status,
        200,
      );
      assert.equal(
        (await b.gql('mutation { createMessage(input: { content: "via b" }) { id } }')).status,
        200,
      );
      const contents = (events: Json[]) => events.map((e) => e.data.messageChanged.message.content).sort();
      assert.deepEqual(contents(await onA), ['via a', 'via b']);
      assert.deepEqual(contents(await onB), ['via a', 'via b']);
    } finally {
      await clientA.dispose();
      await clientB.dispose();
      await a.server.close();
      await b.server.close();
    }
  });
});
