/**
 * The security limits hold for `@defer`/`@stream` operations exactly as for plain ones: the same
 * refusals (tokens, depth, cost, alias-multiplied cost) with the same codes, messages and locations,
 * before anything runs; the incremental path parses a text once, with graphql-js 17, and never with
 * graphql-js 16; its unexpected errors are masked by `mask.ts` with the answers clients saw before.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getOperationAST as getOperation16, parse as parse16, validate as validate16 } from 'graphql';
import { Parser as Parser16 } from 'graphql/language/parser.js';
import { getOperationAST as getOperation17, parse as parse17 } from 'graphql17';
import { Parser as Parser17 } from 'graphql17/language/parser.js';
import { estimateCost, listSizesOf } from '../src/cost.ts';
import { createIncrementalExecutor } from '../src/incremental.ts';
import { checkDepth, DEFAULT_LIMITS, depthLimit, depthMeter } from '../src/limits.ts';
import { resolvers, schema, typeDefs } from '../src/schema.ts';
import { SqliteStore } from '../src/store-sqlite.ts';
import { type Json, multipartParts, type Running, start } from './helpers.ts';

/** `{ creature(name: "Eevee") { evolutions { … { name } } } }` with `levels` nested `evolutions`. */
const nested = (levels: number) =>
  `creature(name: "Eevee") { ${'evolutions { '.repeat(levels)}name${' }'.repeat(levels)} }`;

/** `count` aliases of the whole list (with `args`), each with its nested lists: cheap to write, costly to answer. */
const aliased = (count: number, args = '') =>
  Array.from(
    { length: count },
    (_, i) =>
      `a${i}: creatures${args} { name types resistant weaknesses attacks { fast { name damage } special { name damage } } evolutions { name } }`,
  ).join(' ');

/** A hostile operation: its root selections, the fragments they spread, and the refusal's code. */
interface Hostile {
  name: string;
  code: string;
  selection: string;
  fragments?: string;
}

const HOSTILE: Hostile[] = [
  { name: 'too deep (13 levels)', code: 'QUERY_TOO_DEEP', selection: nested(11) },
  {
    name: 'too deep through fragments',
    code: 'QUERY_TOO_DEEP',
    selection: 'creature(name: "Eevee") { ...A }',
    fragments:
      'fragment A on Creature { evolutions { ...B } } fragment B on Creature { evolutions { ...C } } fragment C on Creature { evolutions { ...D } } fragment D on Creature { evolutions { evolutions { evolutions { evolutions { evolutions { evolutions { evolutions { evolutions { evolutions { name } } } } } } } } } }',
  },
  { name: 'too costly by aliases', code: 'QUERY_TOO_COSTLY', selection: aliased(16) },
  {
    name: 'too costly by aliases of a fragment',
    code: 'QUERY_TOO_COSTLY',
    selection: Array.from({ length: 16 }, (_, i) => `a${i}: creatures { ...F }`).join(' '),
    fragments:
      'fragment F on Creature { name types resistant weaknesses attacks { fast { name damage } special { name damage } } evolutions { name } }',
  },
  {
    name: 'too many tokens',
    code: 'QUERY_TOO_LARGE',
    selection: Array.from({ length: 600 }, (_, i) => `f${i}: __typename`).join(' '),
  },
];

/**
 * The plain text of an operation and its incremental forms of the same depth and cost: the whole
 * selection deferred, and (where it selects `creatures`) the lists streamed.
 */
function forms({ selection, fragments }: { selection: string; fragments?: string }): {
  plain: string;
  incremental: string[];
} {
  const tail = fragments ? ` ${fragments}` : '';
  const plain = `{ ${selection} }${tail}`;
  const deferred = `{ ... @defer { ${selection} } }${tail}`;
  const streamed = plain.replace(/\bcreatures \{/g, 'creatures @stream(initialCount: 1) {');
  return { plain, incremental: streamed === plain ? [deferred] : [deferred, streamed] };
}

describe('limits of @defer/@stream operations', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  const post = async (query: string, accept: string) => {
    const res = await fetch(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept },
      body: JSON.stringify({ query }),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  for (const hostile of HOSTILE) {
    test(`${hostile.name}: the same refusal as the plain operation`, async () => {
      const { code } = hostile;
      const { plain, incremental } = forms(hostile);
      const expected = await post(plain, 'application/graphql-response+json');
      assert.equal(expected.status, 400);
      assert.equal(expected.body.errors.length, 1, JSON.stringify(expected.body));
      assert.equal(expected.body.errors[0].extensions.code, code);
      for (const text of incremental) {
        assert.ok(text.includes('@defer') || text.includes('@stream'));
        for (const accept of ['multipart/mixed', 'text/event-stream']) {
          const got = await post(text, accept);
          assert.equal(got.status, 400, text);
          assert.deepEqual(got.body, expected.body, text);
        }
      }
    });
  }

  test('within the limits, the same operations run incrementally', async () => {
    const res = await fetch(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
      body: JSON.stringify({ query: forms({ selection: nested(10) }).incremental[0] }),
    });
    assert.equal(res.status, 200);
    const payloads = multipartParts(await res.text(), '-');
    const deferred = payloads.flatMap((p) => p.incremental ?? [])[0];
    assert.equal(deferred.data.creature.evolutions[0].evolutions.length, 0);
  });

  test('a negative @stream(initialCount:) is BAD_USER_INPUT at the root and inside fragments', async () => {
    const cases = [
      ['{ creatures(first: 3) @stream(initialCount: -1) { name } }', 31],
      [
        '{ ...F } fragment F on Query { ...G } fragment G on Query { creatures(first: 3) @stream(initialCount: -1) { name } }',
        89,
      ],
      ['{ ... on Query { creatures(first: 3) @stream(initialCount: -2) { name } } }', 46],
    ] as const;
    for (const [query, column] of cases) {
      const got = await post(query, 'multipart/mixed');
      assert.equal(got.status, 400, query);
      assert.deepEqual(got.body.errors, [
        {
          message: `@stream(initialCount:) must be 0 or more, got ${query.includes('-2') ? -2 : -1}`,
          locations: [{ line: 1, column }],
          extensions: { code: 'BAD_USER_INPUT', argument: 'initialCount' },
        },
      ]);
    }
  });

  test('an operation is parsed once, by graphql-js 17, and graphql-js 16 parses nothing on that path', async () => {
    const counts = { v16: 0, v17: 0 };
    const parse16 = Parser16.prototype.parseDocument;
    const parse17 = Parser17.prototype.parseDocument;
    Parser16.prototype.parseDocument = function (this: Parser16) {
      counts.v16++;
      return parse16.call(this);
    };
    Parser17.prototype.parseDocument = function (this: Parser17) {
      counts.v17++;
      return parse17.call(this);
    };
    try {
      const deferred = await fetch(s.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ query: '{ creature(name: "Mew") { name ... @defer { maxCP } } }' }),
      });
      assert.equal(deferred.status, 200);
      assert.match(await deferred.text(), /"maxCP":\d+/);
      assert.deepEqual(counts, { v16: 0, v17: 1 });
      const refused = await post(`{ ... @defer { ${aliased(16)} } }`, 'multipart/mixed');
      assert.equal(refused.body.errors[0].extensions.code, 'QUERY_TOO_COSTLY');
      assert.deepEqual(counts, { v16: 0, v17: 2 });
      // The counters see the engine's parses: a new plain text is parsed by graphql-js 16.
      const plain = await post('{ creature(name: "Mew") { name weight { minimum } } }', 'application/json');
      assert.equal(plain.body.data.creature.name, 'Mew');
      assert.equal(counts.v17, 2);
      assert.ok(counts.v16 > 0);
    } finally {
      Parser16.prototype.parseDocument = parse16;
      Parser17.prototype.parseDocument = parse17;
    }
  });
});

describe('the incremental executor', () => {
  const store = new SqliteStore({ path: ':memory:' });
  after(() => store.close());

  /** The real resolvers, each counting its calls. */
  function countingResolvers() {
    const calls = { count: 0 };
    const wrapped: Record<string, Record<string, unknown>> = {};
    for (const [type, fields] of Object.entries(resolvers as Record<string, Record<string, unknown>>)) {
      wrapped[type] = {};
      for (const [field, resolver] of Object.entries(fields)) {
        wrapped[type][field] =
          typeof resolver === 'function'
            ? (...args: unknown[]) => {
                calls.count++;
                return (resolver as (...a: unknown[]) => unknown)(...args);
              }
            : resolver;
      }
    }
    return { calls, wrapped };
  }

  test('refuses a hostile operation before any resolver runs', async () => {
    const { calls, wrapped } = countingResolvers();
    const run = createIncrementalExecutor({
      typeDefs,
      resolvers: wrapped,
      schema16: schema,
      store,
      limits: DEFAULT_LIMITS,
      maskErrors: true,
    });
    for (const hostile of HOSTILE) {
      const { code } = hostile;
      for (const text of forms(hostile).incremental) {
        const outcome = await run(text, undefined, undefined, 'POST');
        assert.ok(outcome.kind === 'error', text);
        assert.equal(outcome.status, 400);
        assert.equal(outcome.body.errors?.[0]?.extensions?.code, code, text);
      }
    }
    assert.equal(calls.count, 0);
    // A variable page size counts with its value: refused before running too.
    const outcome = await run(
      `query ($n: Int) { ... @defer { ${aliased(16, '(first: $n)')} } }`,
      { n: 151 },
      undefined,
      'POST',
    );
    assert.equal(outcome.kind, 'error');
    assert.equal(calls.count, 0);
    // The counter sees the resolvers: an operation within the limits runs them.
    const ok = await run(
      '{ creature(name: "Mew") { name ... @defer { maxCP } } }',
      undefined,
      undefined,
      'POST',
    );
    assert.equal(ok.kind, 'stream');
    if (ok.kind === 'stream') for await (const _ of ok.payloads);
    assert.ok(calls.count > 0);
  });
});

describe('masking of unexpected errors in incremental delivery', () => {
  /** A store whose message reads fail as a broken database would. */
  function failingStore() {
    const store = new SqliteStore({ path: ':memory:' });
    store.getMessage = () => {
      throw new Error('disk on fire');
    };
    return store;
  }

  const deferredMessage = '{ creature(name: "Mew") { name } ... @defer { getMessage(id: "m1") { id } } }';

  test('masked: the wire answers of the plain and the incremental path', async () => {
    const s = await start({ store: failingStore() });
    try {
      const res = await fetch(s.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
        body: JSON.stringify({ query: deferredMessage }),
      });
      const payloads = multipartParts(await res.text(), '-');
      const entry = payloads.flatMap((p) => p.incremental ?? [])[0];
      assert.deepEqual(entry.errors, [
        {
          message: 'Internal server error',
          path: ['getMessage'],
          extensions: { code: 'INTERNAL_SERVER_ERROR' },
        },
      ]);
      assert.deepEqual(entry.data, { getMessage: null });
      const plain = await s.gql('{ getMessage(id: "m1") { id } }');
      assert.deepEqual(plain.body.errors, entry.errors);
      // A deliberate error (a GraphQLError thrown by a resolver) is not masked.
      const deliberate = await fetch(s.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'multipart/mixed' },
        body: JSON.stringify({
          query: '{ creature(name: "Mew") { name } ... @defer { creatures(first: -1) { name } } }',
        }),
      });
      const failed = multipartParts(await deliberate.text(), '-').flatMap((p) => p.completed ?? [])[0];
      assert.deepEqual(failed.errors, [
        {
          message: 'creatures(first:) must be between 0 and 500, got -1',
          locations: [{ line: 1, column: 47 }],
          path: ['creatures'],
          extensions: { code: 'BAD_USER_INPUT' },
        },
      ]);
    } finally {
      await s.server.close();
    }
  });

  test('mask.ts is the one module that decides on unexpected errors', () => {
    const src = join(import.meta.dirname, '..', 'src');
    const readers = readdirSync(src, { recursive: true })
      .map(String)
      .filter((rel) => rel.endsWith('.ts'))
      .filter((rel) =>
        // Copying an error field by field (`withCode`) passes `originalError` on without judging it.
        /\boriginalError\b/.test(
          readFileSync(join(src, rel), 'utf8').replace(/originalError: \w+\.originalError/g, ''),
        ),
      );
    assert.deepEqual(readers, ['mask.ts']);
  });

  test('reported to onUnexpectedError; unmasked when masking is off', async () => {
    const store = failingStore();
    try {
      const reported: unknown[] = [];
      for (const maskErrors of [true, false]) {
        const run = createIncrementalExecutor({
          typeDefs,
          resolvers,
          schema16: schema,
          store,
          limits: DEFAULT_LIMITS,
          maskErrors,
          onUnexpectedError: (err) => reported.push(err),
        });
        const outcome = await run(deferredMessage, undefined, undefined, 'POST');
        assert.equal(outcome.kind, 'stream');
        const payloads: Json[] = [];
        if (outcome.kind === 'stream') for await (const p of outcome.payloads) payloads.push(p);
        const errors = payloads.flatMap((p) => p.incremental ?? []).flatMap((e: Json) => e.errors ?? []);
        assert.equal(errors.length, 1);
        assert.equal(errors[0].message, maskErrors ? 'Internal server error' : 'disk on fire');
        if (!maskErrors) assert.deepEqual(errors[0].locations, [{ line: 1, column: 47 }]);
      }
      assert.deepEqual(
        reported.map((err) => (err as Error).message),
        ['disk on fire', 'disk on fire'],
      );
    } finally {
      store.close();
    }
  });
});

describe('the cost model and the depth limit read a document of either graphql-js major', () => {
  const store = new SqliteStore({ path: ':memory:' });
  after(() => store.close());

  const DOCUMENTS: { query: string; variables?: Record<string, unknown> }[] = [
    { query: '{ creature(name: "Pikachu") { name evolutions { name evolutions { name } } } }' },
    {
      query: 'query ($n: Int) { creatures(first: $n) { name types attacks { fast { name } } } }',
      variables: { n: 7 },
    },
    { query: '{ nodes(ids: ["1", "2", "3"]) { id ... on Creature { types } } }' },
    { query: 'query ($ids: [ID!]!) { nodes(ids: $ids) { id } }', variables: { ids: ['001', '002'] } },
    {
      query:
        '{ creaturesConnection(first: 20) { edges { node { name weaknesses } } pageInfo { hasNextPage } } }',
    },
    {
      query:
        '{ __schema { types { name fields { name } } } creatures { ...F } } fragment F on Creature { name }',
    },
    // A fragment cycle (invalid, but the limits run beside validation): bounded, counted once.
    { query: '{ creature(name: "Eevee") { ...A } } fragment A on Creature { evolutions { ...A name } }' },
    { query: aliased(3, '(first: 2)').replace(/^/, '{ ').concat(' }') },
    { query: `{ ${nested(11)} }` },
  ];

  test('the same estimates and depths from a graphql-js 16 and a graphql-js 17 parse', () => {
    const model = { defaultListSize: 10, defaultPageSize: 50, known: listSizesOf(store.listCreatures()) };
    for (const { query, variables } of DOCUMENTS) {
      const doc16 = parse16(query);
      const doc17 = parse17(query);
      const op16 = getOperation16(doc16);
      const op17 = getOperation17(doc17);
      assert.ok(op16 && op17, query);
      const estimate = estimateCost(schema, doc16, op16, variables, model);
      assert.ok(estimate.cost > 0, query);
      assert.deepEqual(estimateCost(schema, doc17, op17, variables, model), estimate, query);
      assert.equal(depthMeter(doc17)(op17), depthMeter(doc16)(op16), query);
      // The whole-document check of incremental delivery and the validation rule of the engine agree.
      const byRule = validate16(schema, doc16, [depthLimit(DEFAULT_LIMITS.maxDepth)]).map((e) => e.toJSON());
      assert.deepEqual(
        checkDepth(doc17, DEFAULT_LIMITS.maxDepth).map((e) => e.toJSON()),
        byRule,
        query,
      );
    }
    // graphql-js 17 leaves a field's arguments and directives undefined where graphql-js 16 gives [].
    const field17 = getOperation17(parse17('{ creatures { name } }'))?.selectionSet.selections[0];
    assert.ok(field17?.kind === 'Field' && field17.arguments === undefined);
  });

  test('the depth limit counts 13 levels as too deep, 12 as within, and ignores introspection', () => {
    for (const parse of [parse16, parse17]) {
      assert.equal(checkDepth(parse(`{ ${nested(10)} }`), 12).length, 0);
      const [error] = checkDepth(parse(`{ ${nested(11)} }`), 12);
      assert.deepEqual(error?.toJSON(), {
        message: 'Query depth 13 exceeds the maximum depth of 12',
        locations: [{ line: 1, column: 1 }],
        extensions: { code: 'QUERY_TOO_DEEP' },
      });
      const introspection = `{ __schema { types { fields { type { ${'ofType { '.repeat(9)}name${' }'.repeat(9)} } } } } }`;
      assert.equal(checkDepth(parse(introspection), 12).length, 0);
    }
  });
});
