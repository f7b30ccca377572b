import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Creature, loadSeedCreatures } from '../src/index.ts';
import { freshDatabase, type Running, STORE_KINDS, start, stopPostgres } from './helpers.ts';

const data: Creature[] = loadSeedCreatures();
const pikachuData = data.find((c) => c.name === 'Pikachu')!;

after(stopPostgres);

for (const kind of STORE_KINDS) {
  describe(`creature queries (spec 000 Query.creatures / Query.creature), ${kind} store`, () => {
    let s: Running;
    before(async () => {
      s = await start(await freshDatabase(kind));
    });
    after(() => s.server.close());

    test('the data file has the 151 creatures with ids 001..151', () => {
      assert.equal(data.length, 151);
      assert.deepEqual(
        data.map((c) => c.id),
        Array.from({ length: 151 }, (_, i) => String(i + 1).padStart(3, '0')),
      );
    });

    test('Pikachu full shape returns the real values of the data file', async () => {
      const { status, body } = await s.gql(`{
      creature(name: "Pikachu") {
        id name classification types resistant weaknesses
        weight { minimum maximum } height { minimum maximum }
        fleeRate maxCP maxHP
        attacks { fast { name type damage } special { name type damage } }
        evolutions { id name } evolutionRequirements { amount name } previousEvolutions { id name }
      }
    }`);
      assert.equal(status, 200);
      assert.equal(body.errors, undefined);
      const p = body.data.creature;
      assert.equal(p.id, '025');
      assert.equal(p.classification, 'Mouse Pokémon');
      assert.deepEqual(p.types, ['Electric']);
      assert.deepEqual(p.weight, { minimum: '5.25kg', maximum: '6.75kg' });
      assert.deepEqual(p.height, { minimum: '0.35m', maximum: '0.45m' });
      assert.deepEqual(p.weaknesses, ['Ground']);
      assert.deepEqual(p.attacks.fast, [
        { name: 'Thunder Shock', type: 'Electric', damage: 5 },
        { name: 'Quick Attack', type: 'Normal', damage: 8 },
      ]);
      assert.deepEqual(p.attacks, pikachuData.attacks);
      assert.equal(p.maxCP, pikachuData.maxCP);
      assert.equal(p.maxHP, pikachuData.maxHP);
      assert.equal(p.fleeRate, pikachuData.fleeRate);
      assert.deepEqual(p.evolutions, [{ id: '026', name: 'Raichu' }]);
      assert.deepEqual(p.evolutionRequirements, { amount: 50, name: 'Pikachu candies' });
      assert.deepEqual(p.previousEvolutions, []);
    });

    test('only the selected fields come back', async () => {
      const { body } = await s.gql('{ creature(name: "Pikachu") { name } }');
      assert.deepEqual(body, { data: { creature: { name: 'Pikachu' } } });
    });

    test('creature(name:) is case-insensitive', async () => {
      for (const name of ['pikachu', 'PIKACHU', 'PiKaChU']) {
        const { body } = await s.gql('query ($n: String) { creature(name: $n) { id name } }', { n: name });
        assert.deepEqual(body.data.creature, { id: '025', name: 'Pikachu' }, name);
      }
    });

    test('creature(name:) answers null for an unknown name', async () => {
      const { status, body } = await s.gql('{ creature(name: "Agumon") { id } }');
      assert.equal(status, 200);
      assert.deepEqual(body, { data: { creature: null } });
    });

    test('creature(id:) finds by id; without arguments it is a clear error', async () => {
      const byId = await s.gql('{ creature(id: "150") { name } }');
      assert.equal(byId.body.data.creature.name, 'Mewtwo');
      const none = await s.gql('{ creature { name } }');
      assert.match(none.body.errors![0]!.message, /needs a name or an id/);
      assert.equal(none.body.errors![0]!.extensions?.code, 'BAD_USER_INPUT');
    });

    test('evolution chains resolve to creatures in both directions', async () => {
      const { body } = await s.gql(
        '{ creature(name: "Ivysaur") { evolutions { name maxCP } previousEvolutions { name evolutions { name } } } }',
      );
      assert.deepEqual(body.data.creature.evolutions, [
        { name: 'Venusaur', maxCP: data.find((c) => c.name === 'Venusaur')!.maxCP },
      ]);
      assert.deepEqual(body.data.creature.previousEvolutions, [
        { name: 'Bulbasaur', evolutions: [{ name: 'Ivysaur' }, { name: 'Venusaur' }] },
      ]);
    });

    test('plain creatures lists all 151 in id order', async () => {
      const { body } = await s.gql('{ creatures { id name } }');
      assert.equal(body.data.creatures.length, 151);
      assert.deepEqual(body.data.creatures[0], { id: '001', name: 'Bulbasaur' });
      assert.deepEqual(body.data.creatures[150], { id: '151', name: 'Mew' });
    });

    test('the full creatures list is byte for byte the data file (serializer keeps every value and escape)', async () => {
      const res = await fetch(s.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          query: `{ creatures { id name classification types resistant weaknesses weight { minimum maximum }
          height { minimum maximum } fleeRate maxCP maxHP
          attacks { fast { name type damage } special { name type damage } }
          evolutions { id name } evolutionRequirements { amount name } previousEvolutions { id name } } }`,
        }),
      });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), JSON.stringify({ data: { creatures: data } }));
    });

    test('creatures pages with first/offset and first/after', async () => {
      const a = await s.gql('{ creatures(first: 3, offset: 3) { id } }');
      assert.deepEqual(
        a.body.data.creatures.map((c: { id: string }) => c.id),
        ['004', '005', '006'],
      );
      const b = await s.gql('{ creatures(first: 2, after: "149") { id } }');
      assert.deepEqual(
        b.body.data.creatures.map((c: { id: string }) => c.id),
        ['150', '151'],
      );
      const c = await s.gql('{ creatures(first: 0) { id } }');
      assert.deepEqual(c.body.data.creatures, []);
    });

    test('creatures filters by type, case-insensitively, and pages within the filter', async () => {
      const expected = data.filter((c) => c.types.includes('Dragon')).map((c) => c.name);
      assert.deepEqual(expected, ['Dratini', 'Dragonair', 'Dragonite']);
      const { body } = await s.gql('{ creatures(type: "dRAGON") { name } }');
      assert.deepEqual(
        body.data.creatures.map((c: { name: string }) => c.name),
        expected,
      );
      const paged = await s.gql('{ creatures(type: "dragon", after: "147", first: 1) { name } }');
      assert.deepEqual(paged.body.data.creatures, [{ name: 'Dragonair' }]);
    });

    test('bad paging arguments are errors naming the argument and rule', async () => {
      const cases: [string, RegExp][] = [
        ['{ creatures(first: -1) { id } }', /first:\) must be between 0 and 500/],
        ['{ creatures(first: 501) { id } }', /first:\) must be between 0 and 500/],
        ['{ creatures(offset: -2) { id } }', /offset:\) must be 0 or more/],
        ['{ creatures(after: "001", offset: 1) { id } }', /either after or offset/],
        ['{ creatures(after: "999") { id } }', /after:\) names no creature/],
      ];
      for (const [query, message] of cases) {
        const { status, body } = await s.gql(query);
        assert.equal(status, 200, query);
        assert.equal(body.data, null, query);
        assert.match(body.errors![0]!.message, message, query);
        assert.equal(body.errors![0]!.extensions?.code, 'BAD_USER_INPUT');
      }
    });

    test('GET queries work and a repeated query gets the same (cached) answer', async () => {
      const url = `${s.endpoint}?query=${encodeURIComponent('{ creature(name: "Mew") { id classification } }')}`;
      const first = await fetch(url, { headers: { accept: 'application/json' } });
      const second = await fetch(url, { headers: { accept: 'application/json' } });
      assert.equal(first.status, 200);
      assert.match(first.headers.get('content-type')!, /application\/json/);
      const expected = { data: { creature: { id: '151', classification: 'New Species Pokémon' } } };
      assert.deepEqual(await first.json(), expected);
      assert.deepEqual(await second.json(), expected);
    });
  });
}
