/**
 * The SQLite store: the store contract (`store-contract.ts`, shared with PostgreSQL) on a database file,
 * plus what only SQLite has — migrations and WAL on a file, the client cache keyed by `PRAGMA
 * data_version`, background WAL checkpoints.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, describe, test } from 'node:test';
import { MIGRATIONS } from '../src/store/migrations.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import { type StoreOpener, storeContract } from './store-contract.ts';

const contractDir = mkdtempSync(join(tmpdir(), 'auth-store-contract-'));
after(() => rmSync(contractDir, { recursive: true, force: true }));
let files = 0;
let lastPath = '';
const opener: StoreOpener = Object.assign(
  async (options?: { now?: () => number }) => {
    lastPath = join(contractDir, `db-${++files}.sqlite`);
    return new SqliteAuthStore({ path: lastPath, now: options?.now });
  },
  { again: async () => new SqliteAuthStore({ path: lastPath }) },
);
storeContract('SqliteAuthStore', opener);

describe('SqliteAuthStore', () => {
  test('file database: WAL, migrations recorded once, data survives reopening', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'auth-store-'));
    try {
      const path = join(dir, 'auth.sqlite');
      const first = new SqliteAuthStore({ path });
      assert.equal(first.journalMode(), 'wal');
      assert.deepEqual(
        first.appliedMigrations(),
        MIGRATIONS.map((m) => m.version),
      );
      await first.createUser({ userName: 'kept' });
      await first.close();
      const second = new SqliteAuthStore({ path });
      assert.deepEqual(
        second.appliedMigrations(),
        MIGRATIONS.map((m) => m.version),
      );
      assert.equal((await second.findUserByName('KEPT'))?.userName, 'kept');
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SqliteAuthStore client lookups (cached for the token endpoint)', () => {
  test("another connection's change to a client is seen at once (PRAGMA data_version); own changes too", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'auth-client-cache-'));
    const path = join(dir, 'auth.sqlite');
    const a = new SqliteAuthStore({ path });
    const b = new SqliteAuthStore({ path });
    try {
      await a.createClient({ clientId: 'svc', clientType: 'confidential', secretHash: 'h1' });
      assert.equal((await a.getClient('svc'))?.isEnabled, true);
      assert.equal(await a.getClient('later'), undefined);
      await b.updateClient('svc', { isEnabled: false, secretHash: 'h2' });
      await b.createClient({ clientId: 'later', clientType: 'public' });
      const seen = await a.getClient('svc');
      assert.equal(seen?.isEnabled, false);
      assert.equal(seen?.secretHash, 'h2');
      assert.equal((await a.getClient('later'))?.clientType, 'public');
      await a.updateClient('svc', { isEnabled: true });
      assert.equal((await a.getClient('svc'))?.isEnabled, true);
      await a.deleteClient('svc');
      assert.equal(await a.getClient('svc'), undefined);
      assert.ok(Object.isFrozen((await a.getClient('later'))?.redirectUris));
    } finally {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('SqliteAuthStore background WAL checkpoints', () => {
  test('committed rows reach the database file without a checkpoint on the main connection', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'auth-checkpoint-'));
    const path = join(dir, 'auth.sqlite');
    // The main connection's automatic checkpoint would only run at 100 000 WAL pages: never here.
    const store = new SqliteAuthStore({ path, walAutocheckpointPages: 100_000, backgroundCheckpointMs: 20 });
    const fileOnly = () => {
      // The database file alone, without its WAL: what a checkpoint has copied into it.
      const copy = join(dir, `copy-${Math.random()}.sqlite`);
      copyFileSync(path, copy);
      const db = new DatabaseSync(copy, { readOnly: true });
      try {
        return Number(db.prepare("SELECT count(*) AS n FROM clients WHERE client_id LIKE 'bg-%'").get()?.n);
      } catch {
        return 0; // not even the schema has been checkpointed yet
      } finally {
        db.close();
      }
    };
    try {
      for (let i = 0; i < 20; i++) await store.createClient({ clientId: `bg-${i}`, clientType: 'public' });
      let copied = fileOnly();
      for (let waited = 0; copied < 20 && waited < 10_000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        copied = fileOnly();
      }
      assert.equal(copied, 20);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('backgroundCheckpointMs must be a positive integer', () => {
    const dir = mkdtempSync(join(tmpdir(), 'auth-checkpoint-'));
    try {
      assert.throws(
        () => new SqliteAuthStore({ path: join(dir, 'a.sqlite'), backgroundCheckpointMs: 0 }),
        /backgroundCheckpointMs/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
