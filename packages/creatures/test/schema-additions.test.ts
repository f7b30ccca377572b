import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { creatureSvg, loadSeedCreatures } from '../src/index.ts';
import { type Running, start } from './helpers.ts';

const data = loadSeedCreatures();

describe('schema additions of the original tutorial: number, image, aliases, string ids, connection', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  test('number is the id as an Int and image the path of the picture', async () => {
    const { body } = await s.gql(
      '{ creature(name: "Pikachu") { id number image } creatures(first: 2) { number } }',
    );
    assert.deepEqual(body.data.creature, { id: '025', number: 25, image: '/images/creatures/25.svg' });
    assert.deepEqual(body.data.creatures, [{ number: 1 }, { number: 2 }]);
  });

  test('the picture is an SVG drawn from the data, with a long Cache-Control and an ETag that gives 304', async () => {
    const res = await fetch(`${s.server.url}/images/creatures/25.svg`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /^image\/svg\+xml/);
    assert.equal(res.headers.get('cache-control'), 'public, max-age=86400');
    const svg = await res.text();
    assert.match(svg, /^<svg xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    assert.match(svg, /<title>Pikachu \(Electric\)<\/title>/);
    assert.match(svg, /fill="#f7d02c"/, 'Electric colour');
    assert.match(svg, />PI<\/text>/);
    assert.equal(svg, creatureSvg(data[24]!), 'deterministic');
    const etag = res.headers.get('etag')!;
    const again = await fetch(`${s.server.url}/images/creatures/25.svg`, {
      headers: { 'if-none-match': etag },
    });
    assert.equal(again.status, 304);
    assert.equal(await again.text(), '');
    // A dual-typed creature has both colours; different names give different pictures.
    const bulbasaur = creatureSvg(data[0]!);
    assert.match(bulbasaur, /#7ac74c/);
    assert.match(bulbasaur, /#a33ea1/);
    assert.notEqual(creatureSvg(data[1]!), bulbasaur);
    assert.match(creatureSvg({ id: '999', name: 'A<b>&"c', types: [] }), /A&#60;b&#62;&#38;&#34;c/);
  });

  test('an edit of the types changes the picture and its ETag; an unknown number is 404', async () => {
    const before = await fetch(`${s.server.url}/images/creatures/1.svg`);
    await before.text();
    await s.gql('mutation { updateCreature(id: "001", input: { types: ["Fire"] }) { id } }');
    const after = await fetch(`${s.server.url}/images/creatures/1.svg`, {
      headers: { 'if-none-match': before.headers.get('etag')! },
    });
    assert.equal(after.status, 200);
    assert.match(await after.text(), /#ee8130/);
    const missing = await fetch(`${s.server.url}/images/creatures/999.svg`);
    assert.equal(missing.status, 404);
    assert.match(
      ((await missing.json()) as { errors: { message: string }[] }).errors[0]!.message,
      /No creature picture/,
    );
    assert.equal((await fetch(`${s.server.url}/images/creatures/abc.svg`)).status, 404);
  });

  test('names of the original tutorial find their creatures through aliases', async () => {
    const { body } = await s.gql(`{
      f: creature(name: "Nidoran-F") { name } m: creature(name: "Nidoran-M") { name }
      mime: creature(name: "Mr Mime") { name } duck: creature(name: "Farfetch’d") { name }
      exact: creature(name: "nidoran♀") { name } none: creature(name: "Nidoran") { name }
    }`);
    assert.deepEqual(body.data, {
      f: { name: 'Nidoran♀' },
      m: { name: 'Nidoran♂' },
      mime: { name: 'Mr. Mime' },
      duck: { name: "Farfetch'd" },
      exact: { name: 'Nidoran♀' },
      none: null,
    });
  });

  test('creature(id:) takes a String variable, the number and the global id of the original tutorial', async () => {
    const q = 'query ($id: String) { creature(id: $id) { name } }';
    for (const id of ['025', '25', Buffer.from('Pokemon:025').toString('base64')]) {
      const { status, body } = await s.gql(q, { id });
      assert.equal(status, 200, id);
      assert.deepEqual(body, { data: { creature: { name: 'Pikachu' } } }, id);
    }
    const literal = await s.gql('{ creature(id: 25) { name } }');
    assert.equal(literal.body.data.creature.name, 'Pikachu');
    // ID variables still work; an Int variable does not fit an ID position.
    assert.equal(
      (await s.gql('query ($id: ID!) { creature(id: $id) { name } }', { id: '150' })).body.data.creature.name,
      'Mewtwo',
    );
    const wrong = await s.gql('query ($id: Int) { creature(id: $id) { name } }', { id: 25 });
    assert.equal(wrong.status, 400);
    assert.match(
      wrong.body.errors![0]!.message,
      /Variable "\$id" of type "Int" used in position expecting type "ID"/,
    );
    assert.equal(wrong.body.errors![0]!.extensions?.code, 'GRAPHQL_VALIDATION_FAILED');
  });

  test('creaturesConnection pages with cursors and counts the whole filtered list', async () => {
    const q = `query ($after: String) { creaturesConnection(first: 2, type: "water", after: $after) {
      totalCount edges { cursor node { name } } pageInfo { hasNextPage hasPreviousPage endCursor } } }`;
    const water = data.filter((c) => c.types.includes('Water'));
    const first = (await s.gql(q)).body.data.creaturesConnection;
    assert.equal(first.totalCount, water.length);
    assert.deepEqual(
      first.edges.map((e: { node: { name: string } }) => e.node.name),
      water.slice(0, 2).map((c) => c.name),
    );
    assert.equal(first.pageInfo.hasNextPage, true);
    assert.equal(first.pageInfo.hasPreviousPage, false);
    assert.equal(first.pageInfo.endCursor, first.edges[1].cursor);
    const second = (await s.gql(q, { after: first.pageInfo.endCursor })).body.data.creaturesConnection;
    assert.deepEqual(
      second.edges.map((e: { node: { name: string } }) => e.node.name),
      water.slice(2, 4).map((c) => c.name),
    );
    assert.equal(second.pageInfo.hasPreviousPage, true);
    const bad = await s.gql('{ creaturesConnection(after: "nope") { totalCount } }');
    assert.equal(bad.body.errors![0]!.extensions?.code, 'BAD_USER_INPUT');
    assert.match(bad.body.errors![0]!.message, /creaturesConnection\(after:\) is not a cursor/);
  });

  test('search and orderBy on both list fields', async () => {
    const { body } = await s.gql(`{
      a: creaturesConnection(search: "saur") { totalCount nodes { name } }
      b: creaturesConnection(search: "nidoran-f") { nodes { name } }
      c: creatures(orderBy: { field: MAX_CP, direction: DESC }, first: 3) { name maxCP }
      d: creatures(orderBy: { field: NAME }, first: 2) { name }
      e: creaturesConnection(first: 0) { totalCount pageInfo { hasNextPage endCursor } }
    }`);
    assert.deepEqual(body.data.a, {
      totalCount: 3,
      nodes: [{ name: 'Bulbasaur' }, { name: 'Ivysaur' }, { name: 'Venusaur' }],
    });
    assert.deepEqual(body.data.b.nodes, [{ name: 'Nidoran♀' }]);
    const byCp = [...data].sort((x, y) => (y.maxCP ?? 0) - (x.maxCP ?? 0) || Number(x.id) - Number(y.id));
    assert.deepEqual(
      body.data.c,
      byCp.slice(0, 3).map((c) => ({ name: c.name, maxCP: c.maxCP })),
    );
    const byName = [...data].sort((x, y) => x.name.toLowerCase().localeCompare(y.name.toLowerCase()));
    assert.deepEqual(
      body.data.d.map((c: { name: string }) => c.name),
      byName.slice(0, 2).map((c) => c.name),
    );
    assert.deepEqual(body.data.e, { totalCount: 151, pageInfo: { hasNextPage: true, endCursor: null } });
  });
});
