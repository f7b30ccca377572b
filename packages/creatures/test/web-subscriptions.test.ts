/**
 * GraphQL subscriptions over SSE (src/subscriptions.ts) with a real graphql-js schema, a real HTTP server on an
 * ephemeral port and the real graphql-sse client.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { buildSchema } from 'graphql';
import { createClient } from 'graphql-sse';
import {
  type ChangeEmitter,
  createChangeEmitter,
  createSubscriptionHandler,
  isEventStreamRequest,
  subscriptionTypeDefs,
} from '../src/subscriptions.ts';

const schema = buildSchema(`
  type Creature { id: ID! name: String! types: [String!]! }
  type Message { id: ID! content: String author: String }
  input MessageInput { content: String author: String }
  type Query { getMessage(id: ID!): Message }
  type Mutation { createMessage(input: MessageInput): Message }
  ${subscriptionTypeDefs}
`);

let server: Server;
let events: ChangeEmitter;
let url: string;
const messages = new Map<string, { id: string; content?: string; author?: string }>();

before(async () => {
  events = createChangeEmitter();
  const rootValue = {
    getMessage: ({ id }: { id: string }) => messages.get(id) ?? null,
    createMessage: ({ input }: { input: { content?: string; author?: string } }) => {
      const message = { id: String(messages.size + 1), ...input };
      messages.set(message.id, message);
      events.emit('message', { kind: 'CREATED', message });
      return message;
    },
  };
  const handle = createSubscriptionHandler({ schema, events, rootValue, maxBodyBytes: 4096 });
  server = createServer((req, res) => {
    if (isEventStreamRequest(req)) {
      handle(req, res).catch(() => res.destroy());
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
});

/** Waits until `n` subscribers listen to `event`, i.e. the subscriptions are established server-side. */
async function listeners(event: 'creature' | 'message', n: number): Promise<void> {
  while (events.listenerCount(event) !== n) await new Promise((resolve) => setTimeout(resolve, 5));
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
    await listeners('message', 1);
    events.emit('message', { kind: 'UPDATED', message: { id: '7', content: 'hello', author: 'ash' } });
    const { value } = await first;
    assert.deepEqual(value?.data, {
      messageChanged: { kind: 'UPDATED', message: { id: '7', content: 'hello' } },
    });
    await iterator.return?.();
    await listeners('message', 0);
    client.dispose();
  });

  test('a mutation made over SSE reaches another subscriber', async () => {
    const client = createClient({ url });
    const changes = client.iterate<{ messageChanged: { message: { content: string; author: string } } }>({
      query: 'subscription { messageChanged { message { content author } } }',
    });
    const next = changes.next();
    await listeners('message', 1);
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
    client.dispose();
  });

  test('creatureChanged(name:) only delivers changes of that creature, matching old or new name', async () => {
    const client = createClient({ url });
    const iterator = client.iterate<{ creatureChanged: { kind: string; name: string; creature: unknown } }>({
      query: 'subscription { creatureChanged(name: "pikachu") { kind name creature { id name types } } }',
    });
    const first = iterator.next();
    await listeners('creature', 1);
    events.emit('creature', {
      kind: 'UPDATED',
      id: '001',
      name: 'Bulbasaur',
      previousName: 'Bulbasaur',
      creature: { id: '001', name: 'Bulbasaur', types: ['Grass'] },
    });
    events.emit('creature', {
      kind: 'UPDATED',
      id: '025',
      name: 'Sparky',
      previousName: 'Pikachu',
      creature: { id: '025', name: 'Sparky', types: ['Electric'] },
    });
    assert.deepEqual((await first).value?.data, {
      creatureChanged: {
        kind: 'UPDATED',
        name: 'Sparky',
        creature: { id: '025', name: 'Sparky', types: ['Electric'] },
      },
    });
    const second = iterator.next();
    events.emit('creature', {
      kind: 'DELETED',
      id: '025',
      name: 'Pikachu',
      previousName: 'Pikachu',
      creature: null,
    });
    assert.deepEqual((await second).value?.data, {
      creatureChanged: { kind: 'DELETED', name: 'Pikachu', creature: null },
    });
    await iterator.return?.();
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
    assert.match(JSON.stringify(await big.json()), /larger than 4096 bytes/);

    const notJson = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: '{ nope',
    });
    assert.equal(notJson.status, 400);
    await notJson.body?.cancel();

    const text = await fetch(url, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'text/plain' },
      body: 'x',
    });
    assert.equal(text.status, 415);
    await text.body?.cancel();
  });
});
