/**
 * The link store of identity brokering on both stores (SQLite in memory and a real PostgreSQL): one link
 * per upstream account and per provider and user, sign-ins recorded, removal, links going with their
 * user, and the case-insensitive e-mail lookup used to link a first sign-in.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { PostgresAuthStore } from '../src/store/postgres.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { AuthStore } from '../src/store/types.ts';

function contract(name: string, open: () => Promise<AuthStore>) {
  describe(name, () => {
    let store: AuthStore;
    before(async () => {
      store = await open();
    });
    after(() => store.close());

    test('links: create, one per account and per provider and user, touch, list, delete, cascade', async () => {
      const ann = await store.createUser({ userName: 'ann', email: 'Ann@Example.org', emailVerified: true });
      const bob = await store.createUser({ userName: 'bob', email: 'bob@example.org' });
      const link = {
        providerId: 'corp',
        subject: 's-1',
        userId: ann.id,
        email: 'ann@corp.example',
        createdAt: 1000,
      };
      assert.equal(await store.links.createLink(link), true);
      assert.equal(
        await store.links.createLink({ ...link, userId: bob.id }),
        false,
        'upstream account taken',
      );
      assert.equal(await store.links.createLink({ ...link, subject: 's-2' }), false, 'ann has a corp link');
      assert.equal(await store.links.createLink({ ...link, providerId: 'other', subject: 's-1' }), true);
      assert.deepEqual(await store.links.findLink('corp', 's-1'), { ...link, lastUsedAt: 1000 });
      assert.equal(await store.links.findLink('corp', 'S-1'), undefined, 'subjects are exact');
      await store.links.touchLink('corp', 's-1', 'new@corp.example', 2000);
      const listed = await store.links.listLinks(ann.id);
      assert.deepEqual(
        listed.map((l) => [l.providerId, l.email, l.lastUsedAt]),
        [
          ['corp', 'new@corp.example', 2000],
          ['other', 'ann@corp.example', 1000],
        ],
      );
      assert.equal(await store.links.deleteLink(ann.id, 'other'), true);
      assert.equal(await store.links.deleteLink(ann.id, 'other'), false);
      await store.deleteUser(ann.id);
      assert.equal(await store.links.findLink('corp', 's-1'), undefined, 'the link went with its user');
    });

    test('users by e-mail: case-insensitive, with the verified flag, at most two', async () => {
      await store.createUser({ userName: 'cat', email: 'cat@example.org', emailVerified: true });
      assert.deepEqual(
        (await store.links.findUsersByEmail('CAT@example.ORG')).map((u) => u.emailVerified),
        [true],
      );
      assert.deepEqual(
        (await store.links.findUsersByEmail('bob@example.org')).map((u) => u.emailVerified),
        [false],
      );
      for (const n of [1, 2, 3]) await store.createUser({ userName: `dup${n}`, email: 'dup@example.org' });
      assert.equal((await store.links.findUsersByEmail('dup@example.org')).length, 2);
      assert.deepEqual(await store.links.findUsersByEmail('nobody@example.org'), []);
    });
  });
}

let cluster: PostgresCluster | undefined;
after(async () => {
  await cluster?.stop();
});

contract('SQLite', async () => new SqliteAuthStore());
contract('PostgreSQL', async () => {
  cluster = await startPostgres();
  return PostgresAuthStore.open({ url: await cluster.createDatabase('links'), maxConnections: 2 });
});
