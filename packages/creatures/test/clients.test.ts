/**
 * Real GraphQL client libraries against a real server: Apollo Client (automatic persisted queries over
 * POST and GET, BatchHttpLink), graphql-request (`request`, `batchRequests`) and urql's core client.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ApolloClient, ApolloLink, gql, HttpLink, InMemoryCache } from '@apollo/client';
import { BatchHttpLink } from '@apollo/client/link/batch-http';
import { PersistedQueryLink } from '@apollo/client/link/persisted-queries';
import { Client, cacheExchange, fetchExchange } from '@urql/core';
import { batchRequests, GraphQLClient, gql as gqlRequest } from 'graphql-request';
import { type Running, start } from './helpers.ts';

// biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
type Json = any;
/** The parsed JSON body of a response. */
const json = (res: Response): Promise<Json> => res.json();

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** A fetch that records each request's method, URL and body before sending it. */
function recordingFetch(log: { method: string; url: string; body: string | undefined }[]): typeof fetch {
  return async (input, init) => {
    log.push({ method: init?.method ?? 'GET', url: String(input), body: init?.body as string | undefined });
    return fetch(input, init);
  };
}

const PIKACHU = gql`
  query Pikachu {
    creature(name: "Pikachu") {
      id
      number
      name
      image
    }
  }
`;

describe('GraphQL clients', () => {
  let s: Running;
  before(async () => {
    s = await start({ maxBatch: 10 });
  });
  after(() => s.server.close());

  test('Apollo Client with PersistedQueryLink: hash-only miss, fallback with the text, then hash-only hits (POST)', async () => {
    const log: { method: string; url: string; body: string | undefined }[] = [];
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: ApolloLink.from([
        new PersistedQueryLink({ sha256 }),
        new HttpLink({ uri: s.endpoint, fetch: recordingFetch(log) }),
      ]),
    });
    const first = await client.query<Json>({ query: PIKACHU, fetchPolicy: 'network-only' });
    assert.deepEqual(first.data, {
      creature: {
        __typename: 'Creature',
        id: '025',
        number: 25,
        name: 'Pikachu',
        image: '/images/creatures/25.svg',
      },
    });
    assert.equal(log.length, 2, 'a miss, then the retry with the text');
    const [miss, retry] = log.map((r) => JSON.parse(r.body!));
    assert.equal(miss.query, undefined);
    assert.equal(miss.extensions.persistedQuery.version, 1);
    assert.equal(typeof retry.query, 'string');
    assert.equal(retry.extensions.persistedQuery.sha256Hash, miss.extensions.persistedQuery.sha256Hash);
    const second = await client.query<Json>({ query: PIKACHU, fetchPolicy: 'network-only' });
    assert.equal(second.data?.creature?.name, 'Pikachu');
    assert.equal(log.length, 3, 'the hash alone is enough now');
    assert.equal(JSON.parse(log[2]!.body!).query, undefined);
  });

  test('Apollo Client with PersistedQueryLink over GET (useGETForHashedQueries)', async () => {
    const log: { method: string; url: string; body: string | undefined }[] = [];
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: ApolloLink.from([
        new PersistedQueryLink({ sha256, useGETForHashedQueries: true }),
        new HttpLink({ uri: s.endpoint, fetch: recordingFetch(log) }),
      ]),
    });
    const query = gql`
      query Mew {
        creature(name: "Mew") {
          name
          types
        }
      }
    `;
    const result = await client.query<Json>({ query, fetchPolicy: 'network-only' });
    assert.deepEqual(result.data?.creature, { __typename: 'Creature', name: 'Mew', types: ['Psychic'] });
    assert.deepEqual(
      log.map((r) => r.method),
      ['GET', 'POST'],
    );
    await client.query<Json>({ query, fetchPolicy: 'network-only' });
    assert.equal(log.length, 3);
    assert.equal(log[2]!.method, 'GET');
    assert.doesNotMatch(log[2]!.url, /query=/);
  });

  test('Apollo Client BatchHttpLink sends one array and gets each result', async () => {
    const log: { method: string; url: string; body: string | undefined }[] = [];
    const client = new ApolloClient({
      cache: new InMemoryCache(),
      link: new BatchHttpLink({
        uri: s.endpoint,
        batchMax: 5,
        batchInterval: 20,
        fetch: recordingFetch(log),
      }),
    });
    const names = ['Bulbasaur', 'Charmander', 'Squirtle'];
    const query = gql`
      query One($name: String) {
        creature(name: $name) {
          id
          name
        }
      }
    `;
    const results = await Promise.all(
      names.map((name) => client.query<Json>({ query, variables: { name }, fetchPolicy: 'network-only' })),
    );
    assert.deepEqual(
      results.map((r) => r.data?.creature?.id),
      ['001', '004', '007'],
    );
    assert.equal(log.length, 1, 'one HTTP request for the three queries');
    assert.equal(JSON.parse(log[0]!.body!).length, 3);
  });

  test('graphql-request: request and batchRequests', async () => {
    const client = new GraphQLClient(s.endpoint);
    const one = await client.request<{ creature: { name: string } }>(
      gqlRequest`query ($id: String) { creature(id: $id) { name } }`,
      { id: '150' },
    );
    assert.equal(one.creature.name, 'Mewtwo');
    const batch = await batchRequests<
      [{ data: { creature: { name: string } } }, { data: { creaturesConnection: { totalCount: number } } }]
    >(s.endpoint, [
      { document: '{ creature(name: "Nidoran-F") { name } }' },
      {
        document: 'query ($t: String) { creaturesConnection(type: $t) { totalCount } }',
        variables: { t: 'dragon' },
      },
    ]);
    assert.equal(batch[0].data.creature.name, 'Nidoran♀');
    assert.equal(batch[1].data.creaturesConnection.totalCount, 3);
  });

  test('urql core client: query and mutation', async () => {
    const client = new Client({ url: s.endpoint, exchanges: [cacheExchange, fetchExchange] });
    const q = await client.query('{ creature(name: "Snorlax") { number types } }', {}).toPromise();
    assert.equal(q.error, undefined);
    assert.deepEqual(q.data, { creature: { __typename: 'Creature', number: 143, types: ['Normal'] } });
    const m = await client
      .mutation('mutation ($c: String) { createMessage(input: { content: $c }) { id content } }', { c: 'hi' })
      .toPromise();
    assert.equal(m.error, undefined);
    assert.equal(m.data.createMessage.content, 'hi');
  });
});

describe('persisted queries, batching and application/graphql on the wire', () => {
  let s: Running;
  before(async () => {
    s = await start({ maxBatch: 3 });
  });
  after(() => s.server.close());

  const post = (body: unknown, headers: Record<string, string> = {}) =>
    fetch(s.endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  test('APQ: unknown hash, hash mismatch, malformed extension, GET registration', async () => {
    const query = '{ creature(name: "Eevee") { name } }';
    const hash = sha256(query);
    const persistedQuery = { version: 1, sha256Hash: hash };
    const miss = await post({ extensions: { persistedQuery } });
    assert.equal(miss.status, 400);
    assert.equal(miss.headers.get('cache-control'), 'no-store');
    assert.deepEqual(await json(miss), {
      errors: [{ message: 'PersistedQueryNotFound', extensions: { code: 'PERSISTED_QUERY_NOT_FOUND' } }],
    });
    // application/json answers it with 200, as the legacy media type requires.
    assert.equal(
      (await post({ extensions: { persistedQuery } }, { accept: 'application/json' })).status,
      200,
    );
    const wrong = await post({ query: '{ __typename }', extensions: { persistedQuery } });
    assert.equal(wrong.status, 400);
    assert.equal((await json(wrong)).errors[0].extensions.code, 'PERSISTED_QUERY_HASH_MISMATCH');
    const badVersion = await post({
      query,
      extensions: { persistedQuery: { version: 2, sha256Hash: hash } },
    });
    assert.equal((await json(badVersion)).errors[0].extensions.code, 'BAD_REQUEST');
    // Registering over GET (a query is allowed over GET), then the hash alone over GET.
    const ext = encodeURIComponent(JSON.stringify({ persistedQuery }));
    const register = await fetch(`${s.endpoint}?query=${encodeURIComponent(query)}&extensions=${ext}`);
    assert.deepEqual(await json(register), { data: { creature: { name: 'Eevee' } } });
    const hit = await fetch(`${s.endpoint}?extensions=${ext}`);
    assert.equal(hit.status, 200);
    assert.deepEqual(await json(hit), { data: { creature: { name: 'Eevee' } } });
    // A persisted mutation still may not run over GET.
    const mutation = 'mutation { createMessage(input: {content: "x"}) { id } }';
    const mHash = sha256(mutation);
    await post({ query: mutation, extensions: { persistedQuery: { version: 1, sha256Hash: mHash } } });
    const mGet = await fetch(
      `${s.endpoint}?extensions=${encodeURIComponent(JSON.stringify({ persistedQuery: { version: 1, sha256Hash: mHash } }))}`,
      { headers: { accept: 'application/json' } },
    );
    assert.equal(mGet.status, 405);
  });

  test('APQ turned off answers PERSISTED_QUERY_NOT_SUPPORTED', async () => {
    const off = await start({ automaticPersistedQueries: false });
    try {
      const res = await fetch(off.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ extensions: { persistedQuery: { version: 1, sha256Hash: sha256('{ x }') } } }),
      });
      assert.equal(res.status, 200);
      assert.equal((await json(res)).errors[0].extensions.code, 'PERSISTED_QUERY_NOT_SUPPORTED');
    } finally {
      await off.server.close();
    }
  });

  test('allow-list mode runs listed operations only, by hash, by documentId or by identical text', async () => {
    const listed = '{ creature(name: "Onix") { name } }';
    const list = await start({
      allowList: new Map([
        [sha256(listed), listed],
        ['onix-v1', listed],
      ]),
    });
    try {
      const send = (body: unknown) =>
        fetch(list.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
          body: JSON.stringify(body),
        });
      for (const body of [
        { extensions: { persistedQuery: { version: 1, sha256Hash: sha256(listed) } } },
        { documentId: 'onix-v1' },
        { documentId: `sha256:${sha256(listed)}` },
        { query: listed },
      ]) {
        const res = await send(body);
        assert.equal(res.status, 200, JSON.stringify(body));
        assert.deepEqual(await json(res), { data: { creature: { name: 'Onix' } } });
      }
      const other = await send({ query: '{ creature(name: "Mew") { name } }' });
      assert.equal(other.status, 400);
      assert.equal((await json(other)).errors[0].extensions.code, 'PERSISTED_QUERY_NOT_IN_LIST');
      const apq = '{ __typename }';
      const register = await send({
        query: apq,
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256(apq) } },
      });
      assert.equal((await json(register)).errors[0].extensions.code, 'PERSISTED_QUERY_NOT_IN_LIST');
    } finally {
      await list.server.close();
    }
  });

  test('batches: bounded, in order, mutations included; an item error stays in its slot', async () => {
    const res = await post([
      { query: 'mutation { createMessage(input: {content: "a"}) { content } }' },
      { query: '{ nope }' },
      { query: 'query ($n: String) { creature(name: $n) { id } }', variables: { n: 'Ditto' } },
    ]);
    assert.equal(res.status, 200);
    const body = await json(res);
    assert.equal(body.length, 3);
    assert.deepEqual(body[0], { data: { createMessage: { content: 'a' } } });
    assert.match(body[1].errors[0].message, /Cannot query field "nope"/);
    assert.deepEqual(body[2], { data: { creature: { id: '132' } } });
    const tooMany = await post(Array.from({ length: 4 }, () => ({ query: '{ __typename }' })));
    assert.equal(tooMany.status, 400);
    assert.equal((await json(tooMany)).errors[0].extensions.code, 'BATCH_TOO_LARGE');
    const empty = await post([]);
    assert.equal(empty.status, 400);
  });

  test('batching is off by default: an array body is 400 BATCHING_NOT_ENABLED', async () => {
    const plain = await start();
    try {
      const res = await fetch(plain.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '[{"query":"{ __typename }"}]',
      });
      assert.equal(res.status, 400);
      assert.equal((await json(res)).errors[0].extensions.code, 'BATCHING_NOT_ENABLED');
    } finally {
      await plain.server.close();
    }
  });

  test('application/graphql bodies carry the query; variables and operationName may come in the URL', async () => {
    const res = await fetch(
      `${s.endpoint}?variables=${encodeURIComponent('{"n":"Lapras"}')}&operationName=B`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/graphql' },
        body: 'query A { __typename } query B($n: String) { creature(name: $n) { number } }',
      },
    );
    assert.equal(res.status, 200);
    assert.deepEqual(await json(res), { data: { creature: { number: 131 } } });
  });

  test('an unsupported content type is 415 with a JSON error that says what to send', async () => {
    const res = await post('<query/>', { 'content-type': 'application/xml' });
    assert.equal(res.status, 415);
    const body = await json(res);
    assert.equal(body.errors[0].extensions.code, 'UNSUPPORTED_MEDIA_TYPE');
    assert.match(body.errors[0].message, /application\/json .* or application\/graphql/);
  });
});
