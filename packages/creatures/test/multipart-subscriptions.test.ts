/**
 * Apollo Client's multipart HTTP subscriptions (`multipart/mixed; subscriptionSpec=1.0`): with Apollo
 * Client itself and on the wire, and an event whose field fails unexpectedly masked and logged.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { pino } from 'pino';
import { SqliteStore } from '../src/store-sqlite.ts';
import { type Json, multipartParts as parts, type Running, start } from './helpers.ts';

const MULTIPART_SUBSCRIPTION = 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json';

/** POSTs `query` to `endpoint` asking for a multipart subscription answer. */
function postMultipart(endpoint: string, query: string, signal?: AbortSignal): Promise<Response> {
  return fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: MULTIPART_SUBSCRIPTION },
    body: JSON.stringify({ query }),
    signal,
  });
}

/**
 * Sends `mutation(n)` to `s` every 50 ms while `until` is pending (a subscription is set up
 * asynchronously, so the change is repeated until the subscriber has seen one), then waits for the
 * mutations sent; resolves with `until`'s value.
 */
async function changingUntil<T>(s: Running, mutation: (n: number) => string, until: Promise<T>): Promise<T> {
  const sent: Promise<unknown>[] = [];
  const timer = setInterval(() => sent.push(s.gql(mutation(sent.length))), 50);
  try {
    return await until;
  } finally {
    clearInterval(timer);
    await Promise.allSettled(sent);
  }
}

/** Reads a multipart body until it holds a `"payload"` part (or ends); resolves with the text read. */
async function readUntilPayload(res: Response): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('"payload"')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

describe('Apollo multipart HTTP subscriptions', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  test('Apollo Client subscribes over multipart/mixed and receives a change event', async () => {
    const client = new ApolloClient({ cache: new InMemoryCache(), link: new HttpLink({ uri: s.endpoint }) });
    const received = new Promise<Json>((resolve, reject) => {
      const subscription = client
        .subscribe<Json>({ query: gql`subscription { creatureChanged(id: "133") { kind name } }` })
        .subscribe({
          next: (result) => {
            subscription.unsubscribe();
            resolve(result.data);
          },
          error: reject,
        });
    });
    const seen = await changingUntil(
      s,
      (n) => `mutation { updateCreature(id: "133", input: { maxCP: ${1000 + n} }) { id } }`,
      received,
    );
    assert.deepEqual(seen, {
      creatureChanged: { __typename: 'CreatureChange', kind: 'UPDATED', name: 'Eevee' },
    });
  });

  test('on the wire: a heartbeat, then {"payload": result} parts; a query with that Accept is answered as JSON', async () => {
    const controller = new AbortController();
    const subscription = 'subscription { messageChanged { kind message { content } } }';
    const res = await postMultipart(s.endpoint, subscription, controller.signal);
    assert.match(
      res.headers.get('content-type')!,
      /^multipart\/mixed; boundary="graphql"; subscriptionSpec="1.0"/,
    );
    let text: string;
    try {
      const message = () => 'mutation { createMessage(input: { content: "hi" }) { id } }';
      text = await changingUntil(s, message, readUntilPayload(res));
    } finally {
      controller.abort();
    }
    const [heartbeat, event] = parts(text, 'graphql');
    assert.deepEqual(heartbeat, {});
    assert.deepEqual(event.payload.data.messageChanged, { kind: 'CREATED', message: { content: 'hi' } });
    const query = await postMultipart(s.endpoint, '{ creature(name: "Mew") { name } }');
    assert.deepEqual(await query.json(), { data: { creature: { name: 'Mew' } } });
  });
});

describe('multipart subscriptions: unexpected errors', () => {
  test('an event whose field fails unexpectedly is masked and logged, as over SSE and WebSocket', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const logged: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(line) });
    const s = await start({ store, logger });
    const query = 'subscription { creatureChanged(id: "133") { name creature { evolutions { name } } } }';
    const controller = new AbortController();
    try {
      // From here on, reading a creature's evolutions fails as a broken disk would.
      store.resolveRefs = () => {
        throw new Error('disk on fire');
      };
      const res = await postMultipart(s.endpoint, query, controller.signal);
      assert.equal(res.status, 200);
      const text = await changingUntil(
        s,
        (n) => `mutation { updateCreature(id: "133", input: { maxCP: ${2000 + n} }) { id } }`,
        readUntilPayload(res),
      );
      const event = parts(text, 'graphql').find((part) => part.payload);
      assert.deepEqual(event?.payload.errors, [
        {
          message: 'Internal server error',
          locations: [{ line: 1, column: query.indexOf('evolutions') + 1 }],
          path: ['creatureChanged', 'creature', 'evolutions'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ]);
      assert.doesNotMatch(text, /disk on fire/);
      assert.match(logged.join(''), /disk on fire/);
    } finally {
      controller.abort();
      await s.server.close();
      store.close();
    }
  });
});
