/**
 * The PostgreSQL store on a real, throwaway PostgreSQL cluster (`scripts/postgres.ts`): the store contract
 * shared with SQLite (`store-contract.ts`, each test on a fresh database), plus what only PostgreSQL has —
 * migrations applied once when several instances start together (advisory lock), signing-key changes
 * announced to every instance (LISTEN/NOTIFY), and URL checks.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { checkPostgresUrl, PostgresAuthStore } from '../src/store/postgres.ts';
import { type StoreOpener, storeContract } from './store-contract.ts';

let cluster: PostgresCluster;
before(async () => {
  cluster = await startPostgres();
});
after(async () => {
  await cluster?.stop();
});

let lastUrl = '';
const opener: StoreOpener = Object.assign(
  async (options?: { now?: () => number }) => {
    lastUrl = await cluster.createDatabase();
    return PostgresAuthStore.open({ url: lastUrl, now: options?.now, maxConnections: 8 });
  },
  { again: () => PostgresAuthStore.open({ url: lastUrl, maxConnections: 8 }) },
);
storeContract('PostgresAuthStore', opener);

describe('PostgresAuthStore', () => {
  test('four instances starting at once apply each migration exactly once', async () => {
    const url = await cluster.createDatabase();
    const stores = await Promise.all(
      Array.from({ length: 4 }, () => PostgresAuthStore.open({ url, maxConnections: 2 })),
    );
    try {
      for (const store of stores)
        assert.deepEqual(await store.appliedMigrations(), PostgresAuthStore.migrations);
      const admins = await Promise.all(stores.map((s) => s.findRoleByName('administrator')));
      assert.ok(
        admins.every((role) => role?.isSystem),
        'the seed row exists once, seen by all',
      );
      assert.equal((await stores[0]!.listRoles()).total, 1);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  test('a signing key inserted or retired on one instance is announced to every instance', async () => {
    const url = await cluster.createDatabase();
    const a = await PostgresAuthStore.open({ url });
    const b = await PostgresAuthStore.open({ url });
    try {
      const seen: string[] = [];
      let signal: () => void = () => {};
      const stop = await b.watchSigningKeys(() => {
        seen.push('change');
        signal();
      });
      const next = () => new Promise<void>((resolve) => (signal = resolve));
      let arrived = next();
      await a.insertSigningKey({
        kid: 'k1',
        alg: 'ES256',
        privateJwk: { d: 'x' },
        publicJwk: { x: 'y' },
        createdAt: 1,
      });
      await arrived;
      assert.deepEqual(
        (await b.listSigningKeys({ now: 2 })).map((k) => k.kid),
        ['k1'],
      );
      arrived = next();
      await a.retireSigningKey('k1', 3, 100);
      await arrived;
      assert.deepEqual(await b.listSigningKeys({ now: 4 }), []);
      assert.equal(seen.length, 2);
      await stop();
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('bad URLs are refused naming the setting, without echoing a password', async () => {
    assert.throws(
      () => checkPostgresUrl('mysql://u:secret@h/db'),
      (error: Error) => {
        assert.ok(error instanceof RangeError);
        assert.match(error.message, /^AUTH_DATABASE_URL: scheme must be postgres/);
        assert.doesNotMatch(error.message, /secret/);
        return true;
      },
    );
    assert.throws(() => checkPostgresUrl('not a url'), /AUTH_DATABASE_URL: not a URL/);
    await assert.rejects(PostgresAuthStore.open({ url: 'http://x' }), RangeError);
  });
});
