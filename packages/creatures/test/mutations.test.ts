import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { ChangeEvent } from '../src/index.ts';
import { freshDatabase, type Running, STORE_KINDS, start, stopPostgres } from './helpers.ts';

after(stopPostgres);

for (const kind of STORE_KINDS) {
  describe(`message mutations (spec 000 extension example), ${kind} store`, () => {
    let s: Running;
    before(async () => {
      s = await start(await freshDatabase(kind));
    });
    after(() => s.server.close());

    test('createMessage stores a message that getMessage returns; updateMessage changes given fields', async () => {
      const created = await s.gql(
        'mutation ($input: MessageInput) { createMessage(input: $input) { id content author } }',
        { input: { content: 'hello', author: 'ash' } },
      );
      assert.equal(created.status, 200);
      const m = created.body.data.createMessage;
      assert.match(m.id, /^[0-9a-f-]{36}$/);
      assert.deepEqual({ content: m.content, author: m.author }, { content: 'hello', author: 'ash' });

      const got = await s.gql('query ($id: ID!) { getMessage(id: $id) { id content author } }', { id: m.id });
      assert.deepEqual(got.body.data.getMessage, m);

      const updated = await s.gql(
        'mutation ($id: ID!) { updateMessage(id: $id, input: { content: "bye" }) { id content author } }',
        { id: m.id },
      );
      assert.deepEqual(updated.body.data.updateMessage, { id: m.id, content: 'bye', author: 'ash' });
      const again = await s.gql('query ($id: ID!) { getMessage(id: $id) { content author } }', { id: m.id });
      assert.deepEqual(again.body.data.getMessage, { content: 'bye', author: 'ash' });
    });

    test('getMessage of an unknown id is null; updateMessage of one is NOT_FOUND', async () => {
      const got = await s.gql('{ getMessage(id: "nope") { id } }');
      assert.deepEqual(got.body, { data: { getMessage: null } });
      const upd = await s.gql('mutation { updateMessage(id: "nope", input: { content: "x" }) { id } }');
      assert.deepEqual(upd.body.data, { updateMessage: null });
      assert.equal(upd.body.errors![0]!.extensions?.code, 'NOT_FOUND');
      assert.match(upd.body.errors![0]!.message, /No message exists with id "nope"/);
    });

    test('store.changes() yields each committed change until its signal aborts', async () => {
      const abort = new AbortController();
      const iterator = s.server.store.changes(abort.signal);
      const next = iterator.next();
      const created = await s.gql('mutation { createMessage(input: { content: "event" }) { id } }');
      const { value } = await next;
      assert.deepEqual(value, {
        entity: 'message',
        kind: 'created',
        id: created.body.data.createMessage.id,
        value: { id: created.body.data.createMessage.id, content: 'event', author: null },
      });
      const after = iterator.next();
      abort.abort();
      assert.deepEqual(await after, { value: undefined, done: true });
    });

    test('a too long author is rejected naming the field', async () => {
      const res = await s.gql('mutation ($a: String) { createMessage(input: { author: $a }) { id } }', {
        a: 'x'.repeat(101),
      });
      assert.match(res.body.errors![0]!.message, /input\.author must be at most 100 characters/);
    });
  });

  describe(`creature mutations, ${kind} store`, () => {
    let s: Running;
    const events: ChangeEvent[] = [];
    before(async () => {
      s = await start(await freshDatabase(kind));
      s.server.store.events.on('change', (e) => events.push(e));
    });
    after(() => s.server.close());

    test('createCreature adds creature 152, findable by name, with evolutions resolved', async () => {
      const res = await s.gql(
        `mutation ($input: CreatureInput!) {
        createCreature(input: $input) { id name types weight { minimum maximum } attacks { fast { name } }
          previousEvolutions { name } evolutionRequirements { amount name } }
      }`,
        {
          input: {
            name: 'Sparkmouse',
            types: ['Electric'],
            weight: { minimum: '1kg', maximum: '2kg' },
            attacks: { fast: [{ name: 'Zap', type: 'Electric', damage: 4 }] },
            previousEvolutionIds: ['025'],
            evolutionRequirements: { amount: 12, name: 'Spark candies' },
          },
        },
      );
      assert.equal(res.body.errors, undefined);
      assert.deepEqual(res.body.data.createCreature, {
        id: '152',
        name: 'Sparkmouse',
        types: ['Electric'],
        weight: { minimum: '1kg', maximum: '2kg' },
        attacks: { fast: [{ name: 'Zap' }] },
        previousEvolutions: [{ name: 'Pikachu' }],
        evolutionRequirements: { amount: 12, name: 'Spark candies' },
      });
      const found = await s.gql('{ creature(name: "SPARKMOUSE") { id } creatures { id } }');
      assert.equal(found.body.data.creature.id, '152');
      assert.equal(found.body.data.creatures.length, 152);
      assert.deepEqual(events.at(-1)?.kind, 'created');
      assert.equal(events.at(-1)?.id, '152');
    });

    test('createCreature rejects a taken name and an unknown evolution id, writing nothing', async () => {
      const before = events.length;
      const taken = await s.gql('mutation { createCreature(input: { name: "pikachu" }) { id } }');
      assert.match(
        taken.body.errors![0]!.message,
        /input\.name must be unique: "pikachu" is taken by creature 025/,
      );
      const unknown = await s.gql(
        'mutation { createCreature(input: { name: "Newt", evolutionIds: ["999"] }) { id } }',
      );
      assert.match(unknown.body.errors![0]!.message, /input\.evolutionIds\[0\] names no creature: "999"/);
      const empty = await s.gql('mutation { createCreature(input: { name: "  " }) { id } }');
      assert.match(empty.body.errors![0]!.message, /input\.name must not be empty/);
      const flee = await s.gql('mutation { createCreature(input: { name: "Runner", fleeRate: 2 }) { id } }');
      assert.match(flee.body.errors![0]!.message, /input\.fleeRate must be between 0 and 1/);
      const list = await s.gql('{ creature(name: "Newt") { id } r: creature(name: "Runner") { id } }');
      assert.deepEqual(list.body.data, { creature: null, r: null });
      assert.equal(events.length, before);
    });

    test('updateCreature changes only the given fields; the response cache does not serve stale data', async () => {
      const q = '{ creature(id: "025") { name maxCP types } }';
      const beforeUpdate = await s.gql(q);
      assert.equal(beforeUpdate.body.data.creature.name, 'Pikachu');
      const upd = await s.gql(
        'mutation { updateCreature(id: "025", input: { name: "Pika", maxCP: 999 }) { name maxCP } }',
      );
      assert.deepEqual(upd.body.data.updateCreature, { name: 'Pika', maxCP: 999 });
      const afterUpdate = await s.gql(q);
      assert.deepEqual(afterUpdate.body.data.creature, { name: 'Pika', maxCP: 999, types: ['Electric'] });
      const oldName = await s.gql('{ creature(name: "Pikachu") { id } }');
      assert.equal(oldName.body.data.creature, null);
      const evo = await s.gql('{ creature(name: "Raichu") { previousEvolutions { name } } }');
      assert.deepEqual(evo.body.data.creature.previousEvolutions, [{ name: 'Pika' }]);
      assert.equal(events.at(-1)?.kind, 'updated');
    });

    test('updateCreature and deleteCreature of an unknown id are NOT_FOUND', async () => {
      const upd = await s.gql('mutation { updateCreature(id: "777", input: { maxCP: 1 }) { id } }');
      assert.equal(upd.body.errors![0]!.extensions?.code, 'NOT_FOUND');
      const del = await s.gql('mutation { deleteCreature(id: "777") { id } }');
      assert.equal(del.body.errors![0]!.extensions?.code, 'NOT_FOUND');
    });

    test('deleteCreature removes the creature and returns it', async () => {
      const del = await s.gql('mutation { deleteCreature(id: "026") { id name } }');
      assert.deepEqual(del.body.data.deleteCreature, { id: '026', name: 'Raichu' });
      const gone = await s.gql(
        '{ creature(name: "Raichu") { id } pika: creature(id: "025") { evolutions { id } } }',
      );
      assert.deepEqual(gone.body.data, { creature: null, pika: { evolutions: [] } });
      assert.equal(events.at(-1)?.kind, 'deleted');
    });

    test('mutations over GET are refused with 405', async () => {
      const url = `${s.endpoint}?query=${encodeURIComponent('mutation { deleteCreature(id: "001") { id } }')}`;
      const res = await fetch(url, { headers: { accept: 'application/json' } });
      assert.equal(res.status, 405);
      const still = await s.gql('{ creature(id: "001") { name } }');
      assert.equal(still.body.data.creature.name, 'Bulbasaur');
    });
  });

  describe(`persistence, ${kind} store`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'creatures-db-'));
    after(() => rmSync(dir, { recursive: true, force: true }));

    test('messages and creature edits survive a restart; the seed is not applied again', async () => {
      const database =
        kind === 'sqlite' ? { databasePath: join(dir, 'nested', 'creatures.db') } : await freshDatabase(kind);
      const first = await start(database);
      const msg = await first.gql(
        'mutation { createMessage(input: { content: "kept", author: "misty" }) { id } }',
      );
      const id = msg.body.data.createMessage.id as string;
      await first.gql(
        'mutation { updateCreature(id: "001", input: { classification: "Seed Creature" }) { id } }',
      );
      await first.gql('mutation { deleteCreature(id: "151") { id } }');
      await first.gql('mutation { createCreature(input: { name: "Missingno" }) { id } }');
      await first.server.close();

      const second = await start(database);
      try {
        const got = await second.gql(
          'query ($id: ID!) { getMessage(id: $id) { content author } b: creature(id: "001") { classification } mew: creature(name: "Mew") { id } m: creature(name: "missingno") { id } creatures { id } }',
          { id },
        );
        assert.deepEqual(got.body.data.getMessage, { content: 'kept', author: 'misty' });
        assert.deepEqual(got.body.data.b, { classification: 'Seed Creature' });
        assert.equal(got.body.data.mew, null);
        assert.deepEqual(got.body.data.m, { id: '152' });
        assert.equal(got.body.data.creatures.length, 151);
        const next = await second.gql('mutation { createCreature(input: { name: "Newer" }) { id } }');
        assert.equal(next.body.data.createCreature.id, '153');
      } finally {
        await second.server.close();
      }
    });
  });
}
