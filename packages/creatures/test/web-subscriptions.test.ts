/**
 * GraphQL subscriptions over SSE (src/subscriptions.ts) with a real graphql-js schema, a real HTTP server on an
 * ephemeral port and the real graphql-sse client.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'graphql-sse';
import { schema as creatureSchema } from '../src/schema.ts';
import { SqliteStore } from '../src/store-sqlite.ts';
import {
  createSubscriptionHandler,
  type EventStreamHandler,
  isEventStreamRequest,
  withSubscriptions,
} from '../src/subscriptions.ts';

const schema = withSubscriptions(creatureSchema);
let server: Server;
let store: SqliteStore;
let url: string;
let handle: EventStreamHandler;
const unexpected: unknown[] = [];

before(async () => {
  store = new SqliteStore({ path: ':memory:' });
  handle = createSubscriptionHandler({
    schema,
    events: store.events,
    context: () => ({ store }),
    maxBodyBytes: 4096,
  });
  // A store whose reads fail unexpectedly, as a broken disk would.
  const broken = {
    getMessage() {
      throw new Error('disk on fire at /var/lib/secret');
    },
  };
  const handleBroken = createSubscriptionHandler({
    schema,
    events: store.events,
    context: () => ({ store: broken }),
    onUnexpectedError: (err) => unexpected.push(err),
  });
  server = createServer((req, res) => {
    if (isEventStreamRequest(req)) {
      (req.url?.startsWith('/broken') ? handleBroken : handle)(req, res).catch(() => res.destroy());
    } else {
      res.writeHead(404).end();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
});

after(() => {
  server.closeAllConnections();
  server.close();
  store.close();
});

/** Waits until `n` subscribers listen to `event`, i.e. the subscriptions are established server-side. */
async function listeners(n: number): Promise<void> {
  while (store.events.listenerCount('change') !== n) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('GraphQL subscriptions over SSE', () => {
  test('a subscriber receives message changes, and unsubscribing removes its listener', async () => {
    const client = createClient({ url });
    const iterator = client.iterate<{
      messageChanged: { kind: string; message: { id: string; content: string } };
    }>({
      query: 'subscription { messageChanged { kind message { id content } } }',
    });
    const first = iterator.next();
    await listeners(1);
    const created = store.createMessage({ content: 'hello', author: 'ash' });
    const { value } = await first;
    assert.deepEqual(value?.data, {
      messageChanged: { kind: 'CREATED', message: { id: created.id, content: 'hello' } },
    });
    await iterator.return?.();
    await listeners(0);
    client.dispose();
  });

  test('a mutation made over SSE reaches another subscriber', async () => {
    const client = createClient({ url });
    const changes = client.iterate<{ messageChanged: { message: { content: string; author: string } } }>({
      query: 'subscription { messageChanged { message { content author } } }',
    });
    const next = changes.next();
    await listeners(1);
    const result = await client
      .iterate<{ createMessage: { id: string } }>({
        query: 'mutation($c: String) { createMessage(input: { content: $c, author: "misty" }) { id } }',
        variables: { c: 'over sse' },
      })
      .next();
    assert.ok(result.value?.data?.createMessage.id);
    assert.deepEqual((await next).value?.data, {
      messageChanged: { message: { content: 'over sse', author: 'misty' } },
    });
    await changes.return?.();
    await listeners(0);
    client.dispose();
  });

  test('creatureChanged(id:) only delivers changes of that creature, with evolutions resolved', async () => {
    const client = createClient({ url });
    const iterator = client.iterate<{ creatureChanged: unknown }>({
      query:
        'subscription { creatureChanged(id: "025") { kind id name creature { name maxHP evolutions { name } } } }',
    });
    const first = iterator.next();
    await listeners(1);
    store.updateCreature('001', { maxHP: 1 });
    store.updateCreature('025', { name: 'Sparky', maxHP: 120 });
    assert.deepEqual((await first).value?.data, {
      creatureChanged: {
        kind: 'UPDATED',
        id: '025',
        name: 'Sparky',
        creature: { name: 'Sparky', maxHP: 120, evolutions: [{ name: 'Raichu' }] },
      },
    });
    const second = iterator.next();
    store.deleteCreature('025');
    assert.deepEqual((await second).value?.data, {
      creatureChanged: { kind: 'DELETED', id: '025', name: 'Sparky', creature: null },
    });
    await iterator.return?.();
    await listeners(0);
    client.dispose();
  });

  test('an invalid subscription is answered with a GraphQL error, not a dropped stream', async () => {
    const client = createClient({ url, retryAttempts: 0 });
    const { value } = await client.iterate({ query: 'subscription { noSuchField }' }).next();
    assert.match(String(value?.errors?.[0]?.message), /noSuchField/);
    client.dispose();
  });

  test('client mistakes get 4xx statuses: mutation over GET, oversized body, non-JSON body', async () => {
    const headers = { accept: 'text/event-stream' };
    const get = await fetch(`${url}?query=${encodeURIComponent('mutation { createMessage { id } }')}`, {
      headers,
    });
    assert.equal(get.status, 405);
    await get.body?.cancel();

    const big = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ query: `subscription { messageChanged { kind } } #${'x'.repeat(5000)}` }),
    });
    assert.equal(big.status, 413);
    const bigBody = (await big.json()) as { errors: { message: string; extensions?: { code?: string } }[] };
    assert.match(bigBody.errors[0]!.message, /larger than the limit of 4096 bytes/);
    assert.equal(bigBody.errors[0]!.extensions?.code, 'PAYLOAD_TOO_LARGE');

    const notJson = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{ nope',
    });
    assert.equal(notJson.status, 400);
    assert.deepEqual(await notJson.json(), {
      errors: [{ message: 'Request body is not valid JSON', extensions: { code: 'BAD_REQUEST' } }],
    });

    const text = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'text/plain' },
      body: 'x',
    });
    assert.equal(text.status, 415);
    await text.body?.cancel();
  });

  test('unexpected resolver errors are masked and reported, client errors are not', async () => {
    const broken = createClient({ url: url.replace('/graphql', '/broken'), retryAttempts: 0 });
    const { value } = await broken.iterate({ query: '{ getMessage(id: "1") { id } }' }).next();
    assert.deepEqual(value?.errors?.[0], {
      message: 'Internal server error',
      locations: [{ line: 1, column: 3 }],
      path: ['getMessage'],
      extensions: { code: 'INTERNAL_SERVER_ERROR' },
    });
    assert.doesNotMatch(JSON.stringify(value), /disk on fire|secret/);
    assert.match(String(unexpected[0]), /disk on fire/);
    broken.dispose();

    const client = createClient({ url, retryAttempts: 0 });
    const result = await client
      .iterate({ query: 'mutation { updateMessage(id: "nope", input: { content: "x" }) { id } }' })
      .next();
    assert.match(String(result.value?.errors?.[0]?.message), /No message exists with id "nope"/);
    client.dispose();
  });

  // Last: the handler refuses new streams once closed.
  test('close() ends open event streams, so a server can shut down gracefully', async () => {
    const client = createClient({ url, retryAttempts: 0 });
    const iterator = client.iterate({ query: 'subscription { creatureChanged { id } }' });
    const next = iterator.next();
    await listeners(1);
    while (handle.open === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    handle.close();
    assert.deepEqual(await next, { done: true, value: undefined });
    await listeners(0);
    assert.equal(handle.open, 0);
    const later = await fetch(url, { headers: { accept: 'text/event-stream' } });
    assert.equal(later.status, 503);
    assert.deepEqual(await later.json(), {
      errors: [{ message: 'The server is shutting down', extensions: { code: 'SERVICE_UNAVAILABLE' } }],
    });
    client.dispose();
  });
});
