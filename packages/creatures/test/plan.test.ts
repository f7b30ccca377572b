/**
 * Query plans (`src/plan.ts`) write the same JSON text graphql-js does, and bail out (for the full
 * executor to report) exactly when the answer would carry an error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildSchema, execute, getOperationAST, parse } from 'graphql';
import { compilePlan, PlanBailout, SqliteStore, schema } from '../src/index.ts';

const store = new SqliteStore({ path: ':memory:' });
const context = { store };

function both(query: string, variables: Record<string, unknown> = {}) {
  const document = parse(query);
  const plan = compilePlan(schema, document, getOperationAST(document)!);
  assert.ok(plan, `a plan for ${query}`);
  const expected = JSON.stringify(
    execute({ schema, document, contextValue: context, variableValues: variables }),
  );
  return { text: plan(undefined, context, variables).toString('utf8'), expected };
}

test('plans write what graphql-js answers: fields, aliases, fragments, __typename, nulls, lists, arguments', () => {
  for (const [query, variables] of [
    [
      '{ creature(name: "Pikachu") { id number name image classification types weight { minimum maximum } fleeRate maxCP attacks { fast { name damage } special { name type damage } } evolutions { id name } evolutionRequirements { amount name } previousEvolutions { name } } }',
      {},
    ],
    [
      '{ a: creature(name: "Mew") { n: name ...F } b: creature(name: "Agumon") { id } __typename } fragment F on Creature { __typename id evolutionRequirements { name } }',
      {},
    ],
    [
      'query ($n: String, $f: Int) { creature(name: $n) { name } creatures(first: $f, type: "fire") { name } }',
      { n: 'Eevee', f: 3 },
    ],
    [
      '{ creature(name: "Bulbasaur") { ... on Creature { name } name @include(if: true) types @skip(if: true) } }',
      {},
    ],
    [
      '{ creaturesConnection(first: 2, search: "char") { totalCount edges { cursor node { name } } pageInfo { hasNextPage endCursor } } }',
      {},
    ],
    ['{ creatures { id name weight { maximum } attacks { fast { name } } } }', {}],
  ] as const) {
    const { text, expected } = both(query, variables);
    assert.equal(text, expected, query);
  }
});

test('plans write the bytes of JSON.stringify for escapes, non-ASCII, lone surrogates, enums, floats, booleans and answers larger than the scratch buffer', () => {
  const odd = buildSchema(
    'enum Color { RED GREEN } type Item { s: String b: Boolean! f: Float c: Color } type Query { items: [Item!]! t: String }',
  );
  const strings = [
    'plain',
    'quote " and \\ backslash',
    'tab\tnewline\ncontrol\u0001',
    'Pokémon ♀♂ 𝔊',
    'lone \ud800 surrogate',
    '\u007f del',
    '',
  ];
  const items = Array.from({ length: 3000 }, (_, i) => ({
    s: `${strings[i % strings.length]} #${i}`,
    b: i % 2 === 0,
    f: i % 3 === 0 ? null : i / 7,
    c: i % 2 === 0 ? 'RED' : 'GREEN',
  }));
  const rootValue = { items, t: 'ü'.repeat(70_000) };
  const document = parse('{ items { s b f c __typename } t }');
  const plan = compilePlan(odd, document, getOperationAST(document)!)!;
  const bytes = plan(rootValue, {}, {});
  const expected = JSON.stringify(execute({ schema: odd, document, rootValue }));
  assert.ok(bytes.length > 64 * 1024, 'the answer outgrows the initial scratch buffer');
  assert.ok(Buffer.from(expected, 'utf8').equals(bytes), 'same bytes as graphql-js + JSON.stringify');
  // The next (small) answer starts from a clean position.
  const small = parse('{ t }');
  const again = compilePlan(odd, small, getOperationAST(small)!)!({ t: 'x' }, {}, {});
  assert.equal(again.toString('utf8'), '{"data":{"t":"x"}}');
});

test('answers a plan handed out earlier are never written over by later plans, bailouts or slab changes', () => {
  const list = parse('{ creatures { id name weight { maximum } attacks { fast { name } } } }');
  const pikachu = parse(
    '{ creature(name: "Pikachu") { id name types attacks { special { name damage } } } }',
  );
  const failing = parse('{ creatures(first: -1) { id } }');
  const plans = [list, pikachu, failing].map((d) => compilePlan(schema, d, getOperationAST(d)!)!);
  const expected = [list, pikachu].map((document) =>
    JSON.stringify(execute({ schema, document, contextValue: context })),
  );
  const kept: { bytes: Buffer; expected: string }[] = [];
  // Forty large and small answers (about 400 KB in all) with a bailout between them: several slabs.
  for (let i = 0; i < 40; i++) {
    const which = i % 2;
    kept.push({ bytes: plans[which]!(undefined, context, {}), expected: expected[which]! });
    assert.throws(() => plans[2]!(undefined, context, {}), PlanBailout);
  }
  assert.ok(kept[0]!.bytes.length > 8 * 1024, 'the list answer is large');
  for (const [i, { bytes, expected: text }] of kept.entries())
    assert.equal(bytes.toString('utf8'), text, `answer ${i} unchanged`);
});

test('plan.text gives the same bytes as latin1 text up to 16 KiB, a copy of the bytes above, and views handed out before stay intact', () => {
  const small = parse(
    '{ a: creature(name: "Nidoran♀") { name classification } b: creature(name: "Pikachu") { name } }',
  );
  const large = parse('{ creatures { id name weight { maximum } attacks { fast { name } } } }');
  const [smallPlan, largePlan] = [small, large].map((d) => compilePlan(schema, d, getOperationAST(d)!)!);
  const [smallText, largeText] = [small, large].map((document) =>
    JSON.stringify(execute({ schema, document, contextValue: context })),
  );
  const view = smallPlan!(undefined, context, {});
  for (let i = 0; i < 200; i++) {
    const text = smallPlan!.text(undefined, context, {});
    assert.equal(typeof text, 'string');
    assert.deepEqual(
      Buffer.from(text as string, 'latin1'),
      Buffer.from(smallText!),
      'the bytes, one character each',
    );
    const bytes = largePlan!.text(undefined, context, {});
    assert.ok(Buffer.isBuffer(bytes), 'an answer over 16 KiB is bytes');
    assert.equal(bytes.toString('utf8'), largeText);
  }
  assert.equal(view.toString('utf8'), smallText, 'a view handed out before is not written over');
});

test('a plan bails out where the answer would hold an error; mutations and variable directives get no plan', () => {
  const document = parse('{ creatures(first: -1) { id } }');
  const plan = compilePlan(schema, document, getOperationAST(document)!)!;
  assert.throws(() => plan(undefined, context, {}), PlanBailout);
  const odd = buildSchema('type Query { n: Int! s: String }');
  const nullInNonNull = parse('{ n }');
  assert.throws(
    () => compilePlan(odd, nullInNonNull, getOperationAST(nullInNonNull)!)!({ n: null }, {}, {}),
    PlanBailout,
  );
  assert.throws(
    () => compilePlan(odd, nullInNonNull, getOperationAST(nullInNonNull)!)!({ n: 2 ** 40 }, {}, {}),
    PlanBailout,
  );
  const lazy = parse('{ s }');
  assert.throws(
    () => compilePlan(odd, lazy, getOperationAST(lazy)!)!({ s: Promise.resolve('x') }, {}, {}),
    PlanBailout,
  );
  const mutation = parse('mutation { createMessage(input: {}) { id } }');
  assert.equal(compilePlan(schema, mutation, getOperationAST(mutation)!), undefined);
  const directive = parse('query ($x: Boolean!) { creature(name: "Mew") { name @include(if: $x) } }');
  assert.equal(compilePlan(schema, directive, getOperationAST(directive)!), undefined);
});
