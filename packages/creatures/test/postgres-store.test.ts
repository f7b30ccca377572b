/**
 * PostgresStore instances sharing one database in a throwaway cluster (`scripts/postgres.ts`): startup
 * races, change delivery by LISTEN/NOTIFY alone (the backup poll is off), catching up after the
 * connections were cut, reloading after changes trimmed from the log, and the cross-instance write
 * rules (ids, unique names).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, describe, test } from 'node:test';
import postgres from 'postgres';
import { type ChangeEvent, PostgresStore, type PostgresStoreOptions } from '../src/index.ts';
import { postgresDatabase, stopPostgres } from './helpers.ts';

after(stopPostgres);

/** Stores opened by a test, closed after it. */
function opener() {
  const opened: PostgresStore[] = [];
  return {
    open(url: string, options: Partial<PostgresStoreOptions> = {}): PostgresStore {
      // Polling once an hour: changes must arrive by notification.
      const store = new PostgresStore({ url, pollIntervalMs: 3_600_000, ...options });
      opened.push(store);
      return store;
    },
    async closeAll(): Promise<void> {
      await Promise.all(opened.map((s) => s.close()));
    },
  };
}

/** The next change event of `store`, or a rejection after `ms`. */
function nextChange(store: PostgresStore, ms = 30_000): Promise<ChangeEvent> {
  return once(store.events, 'change', { signal: AbortSignal.timeout(ms) }).then(([e]) => e as ChangeEvent);
}

describe('PostgresStore on a shared database', () => {
  test('four stores opening an empty database at once migrate and seed it once', async () => {
    const url = await postgresDatabase();
    const stores = opener();
    try {
      const all = Array.from({ length: 4 }, () => stores.open(url));
      await Promise.all(all.map((s) => s.ready()));
      for (const s of all) assert.equal(s.listCreatures().length, 151);
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const [row] = await sql`SELECT (SELECT count(*) FROM creatures)::int AS creatures,
          (SELECT count(*) FROM creature_migrations)::int AS migrations,
          (SELECT count(*) FROM creature_state)::int AS states`;
        assert.deepEqual({ ...row }, { creatures: 151, migrations: 2, states: 1 });
      } finally {
        await sql.end();
      }
    } finally {
      await stores.closeAll();
    }
  });

  test("a write on one store reaches the other's memory and events by notification", async () => {
    const url = await postgresDatabase();
    const stores = opener();
    try {
      const [one, two] = [stores.open(url), stores.open(url)];
      await Promise.all([one.ready(), two.ready()]);
      const arrived = nextChange(two);
      const created = await one.createCreature({ name: 'Notifly', types: ['Flying'] });
      assert.deepEqual(await arrived, { entity: 'creature', kind: 'created', id: '152', value: created });
      assert.deepEqual(two.getCreatureByName('notifly'), created);
      assert.equal(two.appliedChange, one.appliedChange);

      const message = nextChange(one);
      const sent = await two.createMessage({ content: 'hello from two' });
      assert.deepEqual((await message).value, sent);
      assert.deepEqual(await one.getMessage(sent.id), sent);
    } finally {
      await stores.closeAll();
    }
  });

  test('a store whose connections were cut catches up once it reconnects', async () => {
    const url = await postgresDatabase();
    const stores = opener();
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const writer = stores.open(url);
      const reader = stores.open(url, { maxConnections: 1 });
      await Promise.all([writer.ready(), reader.ready()]);
      const seen: ChangeEvent[] = [];
      reader.events.on('change', (e) => seen.push(e));
      const cut = await admin`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'listen%'`;
      assert.ok(cut.length >= 2, 'both stores were listening');
      await writer.updateCreature('004', { maxHP: 1 });
      await writer.updateCreature('005', { maxHP: 2 });
      // Up to 30 s: reconnecting and catching up is slow on a loaded machine.
      const deadline = Date.now() + 30_000;
      while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(
        seen.map((e) => [e.id, (e.value as { maxHP: number }).maxHP]),
        [
          ['004', 1],
          ['005', 2],
        ],
      );
      assert.equal(reader.getCreature('005')?.maxHP, 2);
    } finally {
      await admin.end();
      await stores.closeAll();
    }
  });

  test('a store whose missed changes were trimmed from the log reloads and emits the net differences', async () => {
    const url = await postgresDatabase();
    const stores = opener();
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const reader = stores.open(url);
      await reader.ready();
      const seen: ChangeEvent[] = [];
      reader.events.on('change', (e) => seen.push(e));
      const from = reader.appliedChange;
      // Change from+1 (007's maxHP) is gone from the log; change from+2 (008's maxHP) is still there.
      await admin.begin(async (tx) => {
        const [squirtle] = await tx`SELECT doc FROM creatures WHERE id = '007'`;
        const [wartortle] = await tx`SELECT doc FROM creatures WHERE id = '008'`;
        const seven = { ...squirtle!.doc, maxHP: 7 };
        const eight = { ...wartortle!.doc, maxHP: 8 };
        await tx`UPDATE creatures SET doc = ${tx.json(seven)} WHERE id = '007'`;
        await tx`UPDATE creatures SET doc = ${tx.json(eight)} WHERE id = '008'`;
        await tx`UPDATE creature_state SET change_seq = change_seq + 2`;
        await tx`INSERT INTO creature_changes (seq, entity, kind, id, value)
          VALUES (${from + 2}, 'creature', 'updated', '008', ${tx.json(eight)})`;
        await tx`SELECT pg_notify('creature_changes', ${String(from + 2)})`;
      });
      // Up to 30 s: reconnecting and catching up is slow on a loaded machine.
      const deadline = Date.now() + 30_000;
      while (seen.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.deepEqual(seen.map((e) => [e.kind, e.id, (e.value as { maxHP: number }).maxHP]).sort(), [
        ['updated', '007', 7],
        ['updated', '008', 8],
      ]);
      assert.equal(reader.appliedChange, from + 2);
      assert.equal(reader.getCreature('007')?.maxHP, 7);
      assert.equal(reader.listCreatures().length, 151);
    } finally {
      await admin.end();
      await stores.closeAll();
    }
  });

  for (const guardedTries of [3, 0]) {
    test(`concurrent writes on two stores: distinct ids, one winner per name (guardedTries ${guardedTries})`, async () => {
      const url = await postgresDatabase();
      const stores = opener();
      try {
        const [one, two] = [stores.open(url, { guardedTries }), stores.open(url, { guardedTries })];
        await Promise.all([one.ready(), two.ready()]);
        const results = await Promise.allSettled([
          one.createCreature({ name: 'Twin' }),
          two.createCreature({ name: 'twin' }),
          ...Array.from({ length: 10 }, (_, i) => (i % 2 ? one : two).createCreature({ name: `Solo ${i}` })),
        ]);
        const twins = results.slice(0, 2);
        assert.equal(twins.filter((r) => r.status === 'fulfilled').length, 1);
        const loser = twins.find((r) => r.status === 'rejected') as PromiseRejectedResult;
        assert.match(
          loser.reason.message,
          /input\.name must be unique: "[Tt]win" is taken by creature 1\d\d/,
        );
        assert.equal(loser.reason.extensions.code, 'BAD_USER_INPUT');
        const ids = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.id] : []));
        assert.equal(new Set(ids).size, 11);
        // The other store learns of the last changes by notification, a moment later.
        const deadline = Date.now() + 30_000;
        while (one.appliedChange !== two.appliedChange && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        assert.equal(one.listCreatures().length, 162);
        assert.equal(two.listCreatures().length, 162);
        assert.deepEqual(one.listCreatures(), two.listCreatures());
      } finally {
        await stores.closeAll();
      }
    });
  }
});
