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
    // Change Eevee until the subscription (set up asynchronously) has seen it.
    let n = 0;
    const timer = setInterval(() => {
      void s.gql(`mutation { updateCreature(id: "133", input: { maxCP: ${1000 + n++} }) { id } }`);
    }, 50);
    try {
      assert.deepEqual(await received, {
        creatureChanged: { __typename: 'CreatureChange', kind: 'UPDATED', name: 'Eevee' },
      });
    } finally {
      clearInterval(timer);
    }
  });

  test('on the wire: a heartbeat, then {"payload": result} parts; a query with that Accept is answered as JSON', async () => {
    const controller = new AbortController();
    const res = await fetch(s.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json',
      },
      body: JSON.stringify({ query: 'subscription { messageChanged { kind message { content } } }' }),
      signal: controller.signal,
    });
    assert.match(
      res.headers.get('content-type')!,
      /^multipart\/mixed; boundary="graphql"; subscriptionSpec="1.0"/,
    );
    const reader = res.body!.getReader();
    let text = '';
    const timer = setInterval(
      () => void s.gql('mutation { createMessage(input: { content: "hi" }) { id } }'),
      50,
    );
    try {
      while (!text.includes('"payload"')) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
    } finally {
      clearInterval(timer);
      controller.abort();
    }
    const [heartbeat, event] = parts(text, 'graphql');
    assert.deepEqual(heartbeat, {});
    assert.deepEqual(event.payload.data.messageChanged, { kind: 'CREATED', message: { content: 'hi' } });
    const query = await fetch(s.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json',
      },
      body: JSON.stringify({ query: '{ creature(name: "Mew") { name } }' }),
    });
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
      const res = await fetch(s.endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/json',
        },
        body: JSON.stringify({ query }),
        signal: controller.signal,
      });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      let text = '';
      // Change Eevee until the subscription (set up asynchronously) has seen it.
      const changes: Promise<unknown>[] = [];
      const timer = setInterval(() => {
        const maxCP = 2000 + changes.length;
        changes.push(s.gql(`mutation { updateCreature(id: "133", input: { maxCP: ${maxCP} }) { id } }`));
      }, 50);
      try {
        while (!text.includes('"payload"')) {
          const { value, done } = await reader.read();
          if (done) break;
          text += new TextDecoder().decode(value);
        }
      } finally {
        clearInterval(timer);
        await Promise.all(changes);
      }
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
