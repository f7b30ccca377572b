/**
 * `@defer`/`@stream` over multipart/mixed and Server-Sent Events (graphql-js 17 incremental delivery),
 * with Apollo Client itself and on the wire.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ApolloClient, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { Defer20220824Handler, GraphQL17Alpha9Handler } from '@apollo/client/incremental';
import { type Json, multipartParts as parts, type Running, start } from './helpers.ts';

describe('@defer and @stream', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  const post = (query: string, accept: string) =>
    fetch(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: JSON.stringify({ query }),
    });

  test('Apollo Client (GraphQL17Alpha9Handler) receives a deferred fragment over multipart/mixed', async () => {
    const seen: { contentType: string | null }[] = [];
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      incrementalHandler: new GraphQL17Alpha9Handler(),
      link: new HttpLink({
        uri: s.endpoint,
        fetch: async (input, init) => {
          const res = await fetch(input, init);
          seen.push({ contentType: res.headers.get('content-type') });
          return res;
        },
      }),
    });
    const { data } = await client.query<Json>({
      query: gql`
        query {
          creature(name: "Pikachu") {
            id
            name
            ... @defer {
              attacks {
                fast {
                  name
                }
              }
            }
          }
        }
      `,
      fetchPolicy: 'network-only',
    });
    assert.equal(seen.length, 1);
    assert.match(seen[0]!.contentType!, /^multipart\/mixed; boundary="-"; incrementalSpec=v0.2/);
    assert.equal(data.creature.name, 'Pikachu');
    assert.deepEqual(
      data.creature.attacks.fast.map((a: { name: string }) => a.name),
      ['Thunder Shock', 'Quick Attack'],
    );
  });

  test('on the wire: the initial part, then the deferred data and the streamed items, then hasNext false', async () => {
    const res = await post(
      '{ creature(name: "Mew") { name ... @defer(label: "more") { maxCP } } creatures(first: 4) @stream(initialCount: 1) { name } }',
      'multipart/mixed;incrementalSpec=v0.2, application/json',
    );
    assert.equal(res.status, 200);
    const payloads = parts(await res.text(), '-');
    assert.ok(payloads.length >= 2, JSON.stringify(payloads));
    const [initial] = payloads;
    assert.deepEqual(initial.data, { creature: { name: 'Mew' }, creatures: [{ name: 'Bulbasaur' }] });
    assert.equal(initial.hasNext, true);
    assert.ok(initial.pending.some((p: Json) => p.label === 'more'));
    const incremental = payloads.slice(1).flatMap((p) => p.incremental ?? []);
    assert.ok(incremental.some((r: Json) => r.data?.maxCP > 0));
    assert.deepEqual(
      incremental.flatMap((r: Json) => r.items ?? []).map((c: Json) => c.name),
      ['Ivysaur', 'Venusaur', 'Charmander'],
    );
    assert.equal(payloads.at(-1).hasNext, false);
  });

  test('over Server-Sent Events: next events, then complete', async () => {
    const res = await post(
      '{ creature(name: "Eevee") { name ... @defer { evolutions { name } } } }',
      'text/event-stream',
    );
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
    const text = await res.text();
    const events = [...text.matchAll(/event: (\w+)\ndata: ?(.*)\n\n/g)].map((m) => [m[1], m[2]]);
    assert.equal(events.at(-1)![0], 'complete');
    const next = events.filter(([e]) => e === 'next').map(([, d]) => JSON.parse(d!));
    assert.deepEqual(next[0].data, { creature: { name: 'Eevee' } });
    assert.equal(next.at(-1).hasNext, false);
    assert.equal(next.flatMap((p) => p.incremental ?? [])[0].data.evolutions.length, 3);
  });

  test('a malformed URL escape on an event-stream or plain GET is a client error, not a 500', async () => {
    for (const accept of ['text/event-stream', 'application/graphql-response+json']) {
      const res = await fetch(`${s.endpoint}?query=%E0%A4%A`, { headers: { accept } });
      assert.ok(res.status >= 400 && res.status < 500, `${accept}: ${res.status}`);
      await res.arrayBuffer();
    }
  });

  test('a client that accepts only JSON gets 406; invalid and costly operations are request errors', async () => {
    const json = await post('{ creature(name: "Mew") { ... @defer { name } } }', 'application/json');
    assert.equal(json.status, 406);
    assert.equal(
      ((await json.json()) as Json).errors[0].extensions.code,
      'INCREMENTAL_DELIVERY_NOT_ACCEPTED',
    );
    const invalid = await post('{ creature(name: "Mew") { ... @defer { nope } } }', 'multipart/mixed');
    assert.equal(invalid.status, 400);
    assert.equal(((await invalid.json()) as Json).errors[0].extensions.code, 'GRAPHQL_VALIDATION_FAILED');
    const small = await start({ limits: { maxCost: 100 } });
    try {
      const costly = await fetch(small.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
        body: JSON.stringify({ query: '{ creatures @stream { name ... @defer { types } } }' }),
      });
      assert.equal(costly.status, 400);
      assert.equal(((await costly.json()) as Json).errors[0].extensions.code, 'QUERY_TOO_COSTLY');
    } finally {
      await small.server.close();
    }
  });
});

describe('@defer and @stream in the older deferSpec=20220824 format', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  test('Apollo Client (Defer20220824Handler) receives deferred fragments and streamed items', async () => {
    const seen: { accept: string | null; contentType: string | null }[] = [];
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      incrementalHandler: new Defer20220824Handler(),
      link: new HttpLink({
        uri: s.endpoint,
        fetch: async (input, init) => {
          const res = await fetch(input, init);
          seen.push({
            accept: new Headers(init?.headers).get('accept'),
            contentType: res.headers.get('content-type'),
          });
          return res;
        },
      }),
    });
    const { data } = await client.query<Json>({
      query: gql`
        query {
          creature(name: "Eevee") {
            id
            name
            ... @defer {
              evolutions {
                id
                name
              }
            }
          }
          creatures(first: 5) @stream(initialCount: 2) {
            id
            name
          }
        }
      `,
      fetchPolicy: 'network-only',
    });
    assert.equal(seen.length, 1);
    assert.match(seen[0]!.accept!, /multipart\/mixed;deferSpec=20220824/);
    assert.match(seen[0]!.contentType!, /^multipart\/mixed; boundary="-"; deferSpec=20220824/);
    assert.deepEqual(
      data.creature.evolutions.map((c: Json) => c.name),
      ['Vaporeon', 'Jolteon', 'Flareon'],
    );
    assert.deepEqual(
      data.creatures.map((c: Json) => c.name),
      ['Bulbasaur', 'Ivysaur', 'Venusaur', 'Charmander', 'Charmeleon'],
    );
  });

  test('on the wire: data and hasNext first, then incremental entries with paths, labels and item indexes', async () => {
    const res = await fetch(s.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'multipart/mixed;deferSpec=20220824,application/json',
      },
      body: JSON.stringify({
        query:
          '{ creature(name: "Mew") { name ... @defer(label: "more") { maxCP } } creatures(first: 4) @stream(initialCount: 1, label: "list") { name ... @defer(label: "inner") { types } } }',
      }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^multipart\/mixed; boundary="-"; deferSpec=20220824$/);
    const payloads = parts(await res.text(), '-');
    const [initial, ...rest] = payloads;
    assert.deepEqual(initial, {
      data: { creature: { name: 'Mew' }, creatures: [{ name: 'Bulbasaur' }] },
      hasNext: true,
    });
    for (const p of rest) {
      assert.equal('pending' in p || 'completed' in p, false, JSON.stringify(p));
      for (const entry of p.incremental ?? []) assert.equal('id' in entry || 'subPath' in entry, false);
    }
    const entries = rest.flatMap((p) => p.incremental ?? []);
    const more = entries.find((e: Json) => e.label === 'more');
    assert.deepEqual(more.path, ['creature']);
    assert.ok(more.data.maxCP > 0);
    const items = entries.filter((e: Json) => e.label === 'list');
    assert.deepEqual(
      items.flatMap((e: Json) => e.items.map((c: Json, i: number) => [e.path.at(-1) + i, c.name])),
      [
        [1, 'Ivysaur'],
        [2, 'Venusaur'],
        [3, 'Charmander'],
      ],
    );
    for (const e of items) assert.equal(e.path[0], 'creatures');
    const inner = entries.filter((e: Json) => e.label === 'inner');
    assert.deepEqual(
      inner.map((e: Json) => [e.path, e.data.types]).sort((a: Json, b: Json) => a[0][1] - b[0][1]),
      [
        [
          ['creatures', 0],
          ['Grass', 'Poison'],
        ],
        [
          ['creatures', 1],
          ['Grass', 'Poison'],
        ],
        [
          ['creatures', 2],
          ['Grass', 'Poison'],
        ],
        [['creatures', 3], ['Fire']],
      ],
    );
    assert.equal(payloads.at(-1).hasNext, false);
  });

  test('a deferred fragment that fails arrives as data: null with its errors', async () => {
    const res = await fetch(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed;deferSpec=20220824' },
      body: JSON.stringify({
        query:
          '{ creature(name: "Mew") { name } ... @defer(label: "bad") { creatures(first: -1) { name } } }',
      }),
    });
    const payloads = parts(await res.text(), '-');
    assert.deepEqual(payloads[0], { data: { creature: { name: 'Mew' } }, hasNext: true });
    const failed = payloads.flatMap((p) => p.incremental ?? []).find((e: Json) => e.label === 'bad');
    assert.equal(failed.data, null);
    assert.deepEqual(failed.path, []);
    assert.equal(failed.errors[0].extensions.code, 'BAD_USER_INPUT');
    assert.match(failed.errors[0].message, /first/);
    assert.equal(payloads.at(-1).hasNext, false);
  });
});
