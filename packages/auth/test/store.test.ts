/**
 * The SQLite store: migrations and WAL on a file, unique constraints → ConflictError, typed errors the admin API
 * maps (404/409/400), built-in system roles, one transaction per change (nothing half-written), security-stamp
 * rotation, and the token-lifecycle tables of issue 5.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, test } from 'node:test';
import { ConflictError, ConstraintError, NotFoundError, ValidationError } from '../src/errors.ts';
import { ADMINISTRATOR_ROLE_ID, MIGRATIONS } from '../src/store/migrations.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import { ManualClock } from './helpers.ts';

const isError =
  (type: new (...args: never[]) => Error, props: Record<string, unknown> = {}) =>
  (error: unknown) => {
    assert.ok(error instanceof type, `expected ${type.name}, got ${String(error)}`);
    for (const [k, v] of Object.entries(props))
      assert.equal((error as unknown as Record<string, unknown>)[k], v, k);
    return true;
  };

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

  test('users: case-insensitive unique user name → ConflictError; bad fields → ValidationError; nothing written', async () => {
    const store = new SqliteAuthStore();
    await store.createUser({ userName: 'Alice' });
    await assert.rejects(
      store.createUser(
        { userName: 'alice', directPermissions: ['a.b'] },
        { audit: { category: 'Admin', outcome: 'Success' } },
      ),
      isError(ConflictError, { entity: 'user', field: 'userName' }),
    );
    await assert.rejects(
      store.createUser({ userName: '  ' }),
      isError(ValidationError, { field: 'userName', rule: 'required' }),
    );
    await assert.rejects(
      store.createUser({ userName: 'bob', roles: ['administrator', 'ghost'] }),
      isError(ValidationError, { field: 'roles[1]', rule: 'unknown_role' }),
    );
    await assert.rejects(
      store.createUser({ userName: 'bob', deniedPermissions: ['ok.code', 'bad..code'] }),
      isError(ValidationError, { field: 'deniedPermissions[1]', rule: 'permission_code' }),
    );
    assert.equal((await store.listUsers()).total, 1);
    assert.equal((await store.listAudit()).total, 0, 'the audit event of a failed change is not written');
  });

  test('users: update, roles by name, stamp rotation on disable / password / lock only', async () => {
    const clock = new ManualClock();
    const store = new SqliteAuthStore({ now: clock.now });
    const u = await store.createUser({
      userName: 'u1',
      roles: ['Administrator'],
      directPermissions: ['B.x', 'a.x', 'a.x'],
    });
    assert.deepEqual(u.roles, ['administrator']);
    assert.deepEqual(u.directPermissions, ['a.x', 'b.x']);
    assert.equal(u.isEnabled, true);
    const renamed = await store.updateUser(
      u.id,
      { userName: 'u2', roles: [] },
      { audit: { category: 'Admin', outcome: 'Success', subjectId: u.id } },
    );
    assert.equal(renamed.securityStamp, u.securityStamp, 'role changes keep the stamp');
    assert.equal(renamed.version, u.version + 1);
    assert.deepEqual(renamed.roles, []);
    assert.equal((await store.listAudit()).total, 1, 'audit written with the change');
    const disabled = await store.updateUser(u.id, { isEnabled: false });
    assert.notEqual(disabled.securityStamp, renamed.securityStamp);
    const withPassword = await store.setPasswordHash(u.id, '$scrypt$whatever');
    assert.notEqual(withPassword.securityStamp, disabled.securityStamp);
    const locked = await store.lockUser(u.id, clock.now() + 1000);
    assert.notEqual(locked.securityStamp, withPassword.securityStamp);
    assert.equal(locked.lockoutEnd, clock.now() + 1000);
    const unlocked = await store.unlockUser(u.id);
    assert.equal(unlocked.lockoutEnd, null);
    await store.createUser({ userName: 'taken' });
    await assert.rejects(
      store.updateUser(u.id, { userName: 'TAKEN' }),
      isError(ConflictError, { field: 'userName' }),
    );
    await assert.rejects(
      store.updateUser('missing', { isEnabled: true }),
      isError(NotFoundError, { entity: 'user' }),
    );
    await assert.rejects(store.deleteUser('missing'), isError(NotFoundError));
    await store.deleteUser(u.id);
    assert.equal(await store.getUser(u.id), undefined);
  });

  test('roles: the built-in administrator role holds auth.admin.** and cannot be deleted, renamed or re-ruled', async () => {
    const store = new SqliteAuthStore();
    const admin = (await store.findRoleByName('ADMINISTRATOR'))!;
    assert.equal(admin.id, ADMINISTRATOR_ROLE_ID);
    assert.equal(admin.isSystem, true);
    assert.deepEqual(admin.permissions, ['auth.admin.**']);
    await assert.rejects(store.deleteRole(admin.id), isError(ConstraintError, { constraint: 'system_role' }));
    await assert.rejects(store.updateRole(admin.id, { name: 'root' }), isError(ConstraintError));
    await assert.rejects(store.updateRole(admin.id, { permissions: ['**'] }), isError(ConstraintError));
    const described = await store.updateRole(admin.id, { description: 'Admins' });
    assert.equal(described.description, 'Admins');
    assert.ok(await store.getRole(admin.id));

    const role = await store.createRole({ name: 'Clerk', permissions: ['shop.*'] });
    await assert.rejects(
      store.createRole({ name: 'clerk' }),
      isError(ConflictError, { entity: 'role', field: 'name' }),
    );
    await assert.rejects(store.createRole({ name: 'bad/name' }), isError(ValidationError, { field: 'name' }));
    const user = await store.createUser({ userName: 'x', roles: ['clerk'] });
    await store.deleteRole(role.id);
    const after = (await store.getUser(user.id))!;
    assert.deepEqual(after.roles, []);
    assert.ok(after.version > user.version, 'holders get a new version so cached matchers are rebuilt');
    await assert.rejects(store.deleteRole(role.id), isError(NotFoundError, { entity: 'role' }));
  });

  test('permission catalog: concrete codes only, conflict and not found', async () => {
    const store = new SqliteAuthStore();
    const p = await store.createPermission({ code: ' Shop.Orders.Read ', description: 'read orders' });
    assert.equal(p.code, 'shop.orders.read');
    await assert.rejects(
      store.createPermission({ code: 'shop.orders.read' }),
      isError(ConflictError, { field: 'code' }),
    );
    await assert.rejects(
      store.createPermission({ code: 'shop.*' }),
      isError(ValidationError, { field: 'code' }),
    );
    assert.equal((await store.updatePermission('shop.orders.read', { description: 'r' })).description, 'r');
    await assert.rejects(store.deletePermission('nope'), isError(NotFoundError, { entity: 'permission' }));
    assert.deepEqual(
      (await store.listPermissions({ search: 'ORDERS' })).items.map((x) => x.code),
      ['shop.orders.read'],
    );
  });

  test('clients: public vs confidential, grant types, scopes, redirect URIs validated; conflicts', async () => {
    const store = new SqliteAuthStore();
    const spa = await store.createClient({
      clientId: 'spa',
      clientType: 'public',
      redirectUris: ['http://localhost:5173/callback'],
      allowedGrantTypes: ['authorization_code', 'refresh_token'],
      allowedScopes: ['openid', 'orders:read'],
    });
    assert.equal(spa.secretHash, null);
    await assert.rejects(
      store.createClient({ clientId: 'spa', clientType: 'public' }),
      isError(ConflictError, { field: 'clientId' }),
    );
    await assert.rejects(
      store.createClient({ clientId: 'p2', clientType: 'public', secretHash: 'x' }),
      isError(ValidationError, { field: 'secretHash' }),
    );
    await assert.rejects(
      store.createClient({ clientId: 'c2', clientType: 'confidential' }),
      isError(ValidationError, { field: 'secretHash', rule: 'required' }),
    );
    await assert.rejects(
      store.createClient({ clientId: 'c3', clientType: 'public', allowedGrantTypes: ['implicit'] }),
      isError(ValidationError, { field: 'allowedGrantTypes[0]', rule: 'grant_type' }),
    );
    await assert.rejects(
      store.createClient({ clientId: 'c4', clientType: 'public', redirectUris: ['https://x.test/cb#frag'] }),
      isError(ValidationError, { field: 'redirectUris[0]', rule: 'no_fragment' }),
    );
    await assert.rejects(
      store.createClient({ clientId: 'c5', clientType: 'public', allowedScopes: ['a b'] }),
      isError(ValidationError, { field: 'allowedScopes[0]' }),
    );
    await assert.rejects(
      store.createClient({ clientId: 'bad id', clientType: 'public' }),
      isError(ValidationError, { field: 'clientId' }),
    );
    const updated = await store.updateClient('spa', { isEnabled: false, permissions: ['shop.orders.read'] });
    assert.equal(updated.isEnabled, false);
    assert.equal(updated.version, spa.version + 1);
    await assert.rejects(
      store.updateClient('spa', { secretHash: 'x' }),
      isError(ValidationError, { field: 'secretHash' }),
    );
    await assert.rejects(store.updateClient('ghost', {}), isError(NotFoundError, { entity: 'client' }));
    assert.equal((await store.listClients()).total, 1);
  });

  test('audit: filters by category, outcome, subject and time range; newest first; paging', async () => {
    const store = new SqliteAuthStore();
    for (let i = 0; i < 6; i++) {
      await store.appendAudit({
        time: 1000 + i,
        category: i % 2 ? 'Login' : 'Admin',
        outcome: i < 3 ? 'Denied' : 'Success',
        subjectId: `s${i % 3}`,
      });
    }
    const logins = await store.listAudit({ category: 'Login' });
    assert.deepEqual(
      logins.items.map((e) => e.time),
      [1005, 1003, 1001],
    );
    assert.equal((await store.listAudit({ category: 'Login', outcome: 'Denied' })).total, 1);
    assert.equal((await store.listAudit({ subjectId: 's0' })).total, 2);
    assert.deepEqual(
      (await store.listAudit({ from: 1002, to: 1004 })).items.map((e) => e.time),
      [1003, 1002],
    );
    const page = await store.listAudit({ limit: 2, offset: 2 });
    assert.equal(page.total, 6);
    assert.deepEqual(
      page.items.map((e) => e.time),
      [1003, 1002],
    );
    await assert.rejects(store.listAudit({ limit: 0 }), isError(ValidationError, { field: 'limit' }));
    await assert.rejects(
      store.appendAudit({ category: '', outcome: 'x' }),
      isError(ValidationError, { field: 'category' }),
    );
  });

  test('refresh tokens (rotation, replay, family revocation), single-use codes, signing keys, sessions, purge', async () => {
    const store = new SqliteAuthStore();
    const user = await store.createUser({ userName: 'u' });
    await store.createClient({ clientId: 'c', clientType: 'public' });
    const base = {
      familyId: 'f1',
      clientId: 'c',
      userId: user.id,
      scope: 'openid',
      createdAt: 0,
      expiresAt: 1000,
    };
    await store.insertRefreshToken({ ...base, tokenHash: 'h1' });
    await assert.rejects(store.insertRefreshToken({ ...base, tokenHash: 'h1' }), isError(ConflictError));
    assert.equal(await store.markRefreshTokenUsed('h1', 10, 'h2'), true);
    await store.insertRefreshToken({ ...base, tokenHash: 'h2' });
    assert.equal(await store.markRefreshTokenUsed('h1', 11, 'h3'), false, 'replay detected');
    assert.equal(await store.revokeRefreshTokenFamily('f1', 12), 2);
    assert.equal(await store.markRefreshTokenUsed('h2', 13, null), false, 'revoked');
    assert.equal((await store.findRefreshToken('h1'))?.replacedBy, 'h2');

    await store.insertAuthorizationCode({
      codeHash: 'k',
      clientId: 'c',
      userId: user.id,
      redirectUri: 'http://localhost/cb',
      codeChallenge: 'abc',
      codeChallengeMethod: 'S256',
      createdAt: 0,
      expiresAt: 60,
    });
    assert.equal((await store.consumeAuthorizationCode('k', 5))?.codeChallenge, 'abc');
    assert.equal(await store.consumeAuthorizationCode('k', 6), undefined, 'single use');

    await store.insertSigningKey({
      kid: 'old',
      alg: 'ES256',
      privateJwk: { d: 'x' },
      publicJwk: { x: 'y' },
      createdAt: 1,
    });
    await store.insertSigningKey({
      kid: 'new',
      alg: 'ES256',
      privateJwk: { d: 'x' },
      publicJwk: { x: 'z' },
      createdAt: 2,
    });
    await store.retireSigningKey('old', 3, 100);
    assert.deepEqual(
      (await store.listSigningKeys({ now: 50 })).map((k) => k.kid),
      ['new'],
    );
    assert.deepEqual(
      (await store.listSigningKeys({ includeRetired: true, now: 50 })).map((k) => k.kid),
      ['new', 'old'],
    );
    await assert.rejects(store.retireSigningKey('ghost', 1, null), isError(NotFoundError));

    await store.createLoginSession({ sessionHash: 's', userId: user.id, createdAt: 0, expiresAt: 500 });
    assert.equal(await store.revokeLoginSession('s', 1), true);
    assert.equal(await store.revokeLoginSession('s', 2), false);
    assert.equal(await store.purgeExpired(2000), 5, '2 refresh tokens, 1 code, 1 session, 1 signing key');

    await store.insertRefreshToken({ ...base, tokenHash: 'h9', expiresAt: 9999 });
    await store.deleteClient('c');
    assert.equal(await store.findRefreshToken('h9'), undefined, 'deleting a client removes its tokens');
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

describe('SqliteAuthStore refresh-token rotation (group commit)', () => {
  const token = (tokenHash: string, clientId = 'svc') => ({
    tokenHash,
    familyId: 'family-1',
    clientId,
    userId: null,
    scope: 'api',
    createdAt: 1,
    expiresAt: 10_000,
  });

  test('rotations in one turn: a replay loses, a failing one is refused alone, the rest is committed', async () => {
    const store = new SqliteAuthStore();
    try {
      await store.createClient({ clientId: 'svc', clientType: 'public' });
      await store.insertRefreshToken(token('a'));
      await store.insertRefreshToken(token('b'));
      const results = await Promise.allSettled([
        store.rotateRefreshToken('a', token('a2'), 5),
        store.rotateRefreshToken('a', token('a3'), 5), // the same token again: a replay
        store.rotateRefreshToken('b', token('b2', 'no-such-client'), 5), // foreign key fails
        store.rotateRefreshToken('missing', token('m2'), 5),
      ]);
      assert.deepEqual(
        results.map((r) => (r.status === 'fulfilled' ? r.value : 'rejected')),
        [true, false, 'rejected', false],
      );
      const refused = results[2] as PromiseRejectedResult;
      assert.ok(refused.reason instanceof ConstraintError);
      assert.equal((await store.findRefreshToken('a'))?.replacedBy, 'a2');
      assert.equal((await store.findRefreshToken('a'))?.usedAt, 5);
      assert.ok(await store.findRefreshToken('a2'));
      assert.equal(await store.findRefreshToken('a3'), undefined);
      // The failed rotation changed nothing: 'b' is still unused and has no successor.
      assert.equal((await store.findRefreshToken('b'))?.usedAt, null);
      assert.equal(await store.findRefreshToken('b2'), undefined);
      assert.equal(await store.rotateRefreshToken('b', token('b3'), 6), true);
    } finally {
      await store.close();
    }
  });
});
