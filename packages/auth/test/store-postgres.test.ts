/**
 * The PostgreSQL store on a real, throwaway PostgreSQL cluster (`scripts/postgres.ts`): the store contract
 * shared with SQLite (`store-contract.ts`, each test on a fresh database), plus what only PostgreSQL has —
 * migrations applied once when several instances start together (advisory lock), signing-key changes
 * announced to every instance (LISTEN/NOTIFY), URL checks, and that both migration lists build the same
 * tables and columns (the repository statements of `src/store/sql/` are written once for both).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, test } from 'node:test';
import postgres from 'postgres';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { checkPostgresUrl, PostgresAuthStore } from '../src/store/postgres.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import { type StoreOpener, storeContract } from './store-contract.ts';

/** Longer than any test runs, ms: a cache entry of this age is only ever dropped by a notification. */
const HOUR_MS = 3_600_000;

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

  test("a client changed on one instance leaves the other's client cache through NOTIFY, not by expiry", async () => {
    const url = await cluster.createDatabase();
    // Entries live an hour, far beyond this test: a change seen on A can only have come by notification.
    const a = await PostgresAuthStore.open({ url, clientCacheTtlMs: HOUR_MS });
    const b = await PostgresAuthStore.open({ url, clientCacheTtlMs: HOUR_MS });
    try {
      await a.createClient({ clientId: 'svc', clientType: 'confidential', secretHash: 'h1' });
      assert.equal((await a.getClient('svc'))?.secretHash, 'h1');
      assert.equal((await a.getClient('svc'))?.secretHash, 'h1', 'served from the cache');
      assert.ok(Object.isFrozen(await a.getClient('svc')));
      await b.updateClient('svc', { isEnabled: false, secretHash: 'h2' });
      let seen = await a.getClient('svc');
      // Up to 30 s each: a loaded machine may deliver the notification late.
      for (const end = Date.now() + 30_000; seen?.secretHash !== 'h2' && Date.now() < end; ) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        seen = await a.getClient('svc');
      }
      assert.equal(seen?.secretHash, 'h2', 'the change reached the other instance');
      assert.equal(seen?.isEnabled, false);
      await b.setClientMetadata('svc', { dpopBoundAccessTokens: true });
      await b.deleteClient('svc');
      for (const end = Date.now() + 30_000; (await a.getClient('svc')) !== undefined && Date.now() < end; )
        await new Promise((resolve) => setTimeout(resolve, 5));
      assert.equal(await a.getClient('svc'), undefined, 'a deleted client is gone on the other instance');
      await a.createClient({ clientId: 'own', clientType: 'public' });
      assert.equal((await a.getClient('own'))?.isEnabled, true);
      await a.updateClient('own', { isEnabled: false });
      assert.equal((await a.getClient('own'))?.isEnabled, false, 'own writes are read back at once');
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('the SQLite and the PostgreSQL migrations build the same tables with the same columns', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'auth-schema-'));
    const path = join(dir, 'auth.db');
    const url = await cluster.createDatabase();
    const pg = await PostgresAuthStore.open({ url, maxConnections: 1 });
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await new SqliteAuthStore({ path }).close();
      const lite = new DatabaseSync(path, { readOnly: true });
      const sqliteColumns = lite
        .prepare(
          `SELECT m.name || '.' || c.name AS col FROM sqlite_schema m, pragma_table_info(m.name) c
            WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'`,
        )
        .all()
        .map((row) => String(row.col))
        .sort();
      lite.close();
      const pgColumns =
        // rate_limits is PostgreSQL's alone: the brute-force counters every instance shares (SQLite
        // keeps them in the process, see src/ratelimit.ts).
        (
          await sql`SELECT table_name || '.' || column_name AS col FROM information_schema.columns
          WHERE table_schema = 'public' AND table_name <> 'rate_limits'`
        )
          .map((row) => String(row.col))
          .sort();
      assert.ok(sqliteColumns.length > 50, 'the tables of every migration are read');
      assert.deepEqual(pgColumns, sqliteColumns);
    } finally {
      await sql.end();
      await pg.close();
      rmSync(dir, { recursive: true, force: true });
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
