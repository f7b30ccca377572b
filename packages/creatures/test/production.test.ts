/**
 * Production defaults (NODE_ENV=production: no introspection, explorer or suggestions, each overridable),
 * error codes of validation errors, HTTP caching of GET queries and the Prometheus metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { getIntrospectionQuery } from 'graphql';
import { serverOptionsFromEnv } from '../src/index.ts';
import { type Running, start } from './helpers.ts';

async function inProduction<T>(work: () => Promise<T>): Promise<T> {
  const before = process.env.NODE_ENV;
  process.env.NODE_ENV = 'production';
  try {
    return await work();
  } finally {
    if (before === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = before;
  }
}

describe('NODE_ENV=production defaults', () => {
  let prod: Running;
  let overridden: Running;
  before(async () => {
    prod = await inProduction(() => start());
    overridden = await inProduction(() => start({ introspection: true, explorer: true, suggestions: true }));
  });
  after(async () => {
    await prod.server.close();
    await overridden.server.close();
  });

  test('introspection is refused with INTROSPECTION_DISABLED; __typename still works', async () => {
    const { status, body } = await prod.gql(getIntrospectionQuery());
    assert.equal(status, 400);
    assert.equal(body.errors![0]!.extensions?.code, 'INTROSPECTION_DISABLED');
    assert.match(body.errors![0]!.message, /Introspection is disabled/);
    assert.deepEqual((await prod.gql('{ __typename }')).body, { data: { __typename: 'Query' } });
    const on = await overridden.gql(getIntrospectionQuery());
    assert.equal(on.status, 200);
    assert.equal(on.body.data.__schema.queryType.name, 'Query');
  });

  test('the explorer and its assets are not served', async () => {
    const page = await fetch(prod.endpoint, { headers: { accept: 'text/html' } });
    assert.notEqual(page.headers.get('content-type'), 'text/html; charset=utf-8');
    await page.arrayBuffer();
    const asset = await fetch(`${prod.server.url}/graphql/explorer/graphiql.min.js`);
    assert.equal(asset.status, 404);
    await asset.arrayBuffer();
    const served = await fetch(`${overridden.server.url}/graphql/explorer/graphiql.min.js`);
    assert.equal(served.status, 200);
    await served.arrayBuffer();
    const on = await fetch(overridden.endpoint, { headers: { accept: 'text/html' } });
    assert.equal(on.headers.get('content-type'), 'text/html; charset=utf-8');
    await on.arrayBuffer();
  });

  test('"Did you mean" suggestions are left out of errors; codes stay', async () => {
    const off = await prod.gql('{ creature(name: "Mew") { nam } }');
    assert.equal(off.body.errors![0]!.message, 'Cannot query field "nam" on type "Creature".');
    assert.equal(off.body.errors![0]!.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
    const enumValue = await prod.gql('query ($o: CreatureOrder) { creatures(orderBy: $o) { id } }', {
      o: { field: 'NAM' },
    });
    assert.doesNotMatch(enumValue.body.errors![0]!.message, /Did you mean/);
    assert.equal(enumValue.body.errors![0]!.extensions?.code, 'BAD_USER_INPUT');
    const on = await overridden.gql('{ creature(name: "Mew") { nam } }');
    assert.match(on.body.errors![0]!.message, /Did you mean "name"\?/);
  });

  test('the environment turns each default back on', () => {
    assert.deepEqual(serverOptionsFromEnv({ INTROSPECTION: 'on', EXPLORER: 'off', SUGGESTIONS: 'true' }), {
      introspection: true,
      explorer: false,
      suggestions: true,
    });
    assert.throws(() => serverOptionsFromEnv({ INTROSPECTION: 'maybe' }), /INTROSPECTION must be on or off/);
  });
});

describe('error codes, GET caching and metrics', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  test('parse, validation and variable errors carry extensions.code', async () => {
    const syntax = await s.gql('{ creature(name: ) }');
    assert.equal(syntax.body.errors![0]!.extensions?.code, 'GRAPHQL_PARSE_FAILED');
    const unknown = await s.gql('{ nope }');
    assert.equal(unknown.body.errors![0]!.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
    const variable = await s.gql('query ($n: Int!) { creatures(first: $n) { id } }', {});
    assert.equal(variable.body.errors![0]!.extensions?.code, 'BAD_USER_INPUT');
  });

  test('validation errors of a subscription over SSE carry extensions.code too', async () => {
    const res = await fetch(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'subscription { creatureChanged { nope } }' }),
    });
    const text = await res.text();
    assert.match(text, /Cannot query field \\"nope\\"|Cannot query field "nope"/);
    assert.match(text, /GRAPHQL_VALIDATION_FAILED/);
  });

  test('a GET query has Cache-Control, an ETag and Vary; If-None-Match gives 304; errors are no-store', async () => {
    const url = `${s.endpoint}?query=${encodeURIComponent('{ creature(name: "Pikachu") { name } }')}`;
    const first = await fetch(url);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('cache-control'), 'public, max-age=0, must-revalidate');
    assert.equal(first.headers.get('vary'), 'Accept');
    const etag = first.headers.get('etag')!;
    assert.match(etag, /^"[\w-]{27}"$/);
    await first.text();
    for (let i = 0; i < 2; i++) {
      // The second time it comes from the response cache.
      const again = await fetch(url, { headers: { 'if-none-match': etag } });
      assert.equal(again.status, 304);
      assert.equal(again.headers.get('etag'), etag);
      assert.equal(await again.text(), '');
    }
    // A change of the data changes the answer and its ETag.
    await s.gql('mutation { updateCreature(id: "025", input: { name: "Pika" }) { id } }');
    const changed = await fetch(
      `${s.endpoint}?query=${encodeURIComponent('{ creature(id: "025") { name } }')}`,
      {
        headers: { 'if-none-match': etag },
      },
    );
    assert.equal(changed.status, 200);
    const failed = await fetch(`${s.endpoint}?query=${encodeURIComponent('{ nope }')}`);
    assert.equal(failed.headers.get('cache-control'), 'no-store');
    assert.equal(failed.headers.get('etag'), null);
    await failed.text();
    await s.gql('mutation { updateCreature(id: "025", input: { name: "Pikachu" }) { id } }');
  });

  test('GET max-age is configurable', async () => {
    const other = await start({ getCacheMaxAge: 30 });
    try {
      const res = await fetch(`${other.endpoint}?query=${encodeURIComponent('{ __typename }')}`);
      assert.equal(res.headers.get('cache-control'), 'public, max-age=30');
      await res.text();
    } finally {
      await other.server.close();
    }
  });

  test('/metrics answers Prometheus text with request, cache and process metrics', async () => {
    const answered = async () => {
      const text = await (await fetch(`${s.server.url}/metrics`)).text();
      const match = /creatures_http_requests_total\{route="graphql",method="POST",status="200"\} (\d+)/.exec(
        text,
      );
      return Number(match?.[1] ?? 0);
    };
    const timed = async () => {
      const text = await (await fetch(`${s.server.url}/metrics`)).text();
      const series = (name: string) =>
        Number(
          new RegExp(`creatures_http_request_duration_seconds_${name}\\{[^}]*route="graphql"\\} (\\S+)`).exec(
            text,
          )?.[1] ?? 0,
        );
      const inf = /creatures_http_request_duration_seconds_bucket\{le="\+Inf",route="graphql"\} (\d+)/.exec(
        text,
      );
      const buckets = [
        ...text.matchAll(
          /creatures_http_request_duration_seconds_bucket\{le="[^"]+",route="graphql"\} (\d+)/g,
        ),
      ].map((m) => Number(m[1]));
      return { count: series('count'), sum: series('sum'), inf: Number(inf?.[1]), buckets };
    };
    const before = await answered();
    const timedBefore = await timed();
    await s.gql('{ creature(name: "Mew") { id } }');
    await s.gql('{ creature(name: "Mew") { id } }');
    assert.equal(await answered(), before + 2, 'each answered request is counted once');
    const timedAfter = await timed();
    // The two queries and the /metrics scrape before them (route metrics, not graphql) are not mixed up.
    assert.equal(timedAfter.count, timedBefore.count + 2, 'each answered request is timed once');
    assert.ok(timedAfter.sum > timedBefore.sum, 'the durations add up');
    assert.equal(timedAfter.inf, timedAfter.count, 'the +Inf bucket holds every request');
    assert.equal(timedAfter.buckets.length, 13);
    for (let i = 1; i < timedAfter.buckets.length; i++)
      assert.ok(timedAfter.buckets[i]! >= timedAfter.buckets[i - 1]!, 'buckets are cumulative');
    const res = await fetch(`${s.server.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^text\/plain; version=0.0.4/);
    const text = await res.text();
    assert.match(text, /creatures_http_requests_total\{route="graphql",method="POST",status="200"\} \d+/);
    assert.match(text, /creatures_response_cache_total\{result="hit"\} [1-9]/);
    assert.match(text, /creatures_http_request_duration_seconds_bucket\{le="0.001",route="graphql"\}/);
    assert.match(text, /creatures_event_streams_open 0/);
    assert.match(text, /creatures_persisted_queries_total\{result="miss"\} 0/);
    assert.match(text, /creatures_process_cpu_user_seconds_total/);
    const off = await start({ metrics: false });
    try {
      const none = await fetch(`${off.server.url}/metrics`);
      assert.equal(none.status, 404);
      await none.text();
    } finally {
      await off.server.close();
    }
  });
});
