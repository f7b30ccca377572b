/**
 * The store contract: the same tests run against every {@link AuthStore} implementation (SQLite in
 * `store.test.ts`, PostgreSQL in `store-postgres.test.ts`). Besides the single-connection behaviour
 * (validation, typed errors, one transaction per change, security-stamp rotation, the token lifecycle), it
 * runs the races that must hold across instances on two stores opened on the same database: lockout
 * counting, refresh-token rotation, single-use codes and the replay cache.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { ConflictError, ConstraintError, NotFoundError, ValidationError } from '../src/errors.ts';
import { ADMINISTRATOR_ROLE_ID } from '../src/store/migrations.ts';
import type { AuthStore } from '../src/store/types.ts';
import { ManualClock } from './helpers.ts';

/** Opens a fresh, empty store; `open.again` opens a second store on the same database as the last one. */
export interface StoreOpener {
  (options?: { now?: () => number }): Promise<AuthStore>;
  /** A second store (own connections) on the database the previous `open()` created. */
  again(): Promise<AuthStore>;
}

const isError =
  (type: new (...args: never[]) => Error, props: Record<string, unknown> = {}) =>
  (error: unknown) => {
    assert.ok(error instanceof type, `expected ${type.name}, got ${String(error)}`);
    for (const [k, v] of Object.entries(props))
      assert.equal((error as unknown as Record<string, unknown>)[k], v, k);
    return true;
  };

/** Registers the contract tests of one store implementation under `describe(name)`. */
export function storeContract(name: string, opener: StoreOpener): void {
  const opened: AuthStore[] = [];
  const open = async (options?: { now?: () => number }) => {
    const store = await opener(options);
    opened.push(store);
    return store;
  };
  const again = async () => {
    const store = await opener.again();
    opened.push(store);
    return store;
  };

  describe(`${name} contract`, () => {
    afterEach(async () => {
      for (const store of opened.splice(0)) await store.close();
    });

    test('users: case-insensitive unique user name → ConflictError; bad fields → ValidationError; nothing written', async () => {
      const store = await open();
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
      const store = await open({ now: clock.now });
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
      const store = await open();
      const admin = (await store.findRoleByName('ADMINISTRATOR'))!;
      assert.equal(admin.id, ADMINISTRATOR_ROLE_ID);
      assert.equal(admin.isSystem, true);
      assert.deepEqual(admin.permissions, ['auth.admin.**']);
      await assert.rejects(
        store.deleteRole(admin.id),
        isError(ConstraintError, { constraint: 'system_role' }),
      );
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
      await assert.rejects(
        store.createRole({ name: 'bad/name' }),
        isError(ValidationError, { field: 'name' }),
      );
      const user = await store.createUser({ userName: 'x', roles: ['clerk'] });
      await store.deleteRole(role.id);
      const after = (await store.getUser(user.id))!;
      assert.deepEqual(after.roles, []);
      assert.ok(after.version > user.version, 'holders get a new version so cached matchers are rebuilt');
      await assert.rejects(store.deleteRole(role.id), isError(NotFoundError, { entity: 'role' }));
    });

    test('permission catalog: concrete codes only, conflict and not found', async () => {
      const store = await open();
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
      const store = await open();
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
        store.createClient({
          clientId: 'c4',
          clientType: 'public',
          redirectUris: ['https://x.test/cb#frag'],
        }),
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
      const updated = await store.updateClient('spa', {
        isEnabled: false,
        permissions: ['shop.orders.read'],
      });
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
      const store = await open();
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
      const store = await open();
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
      assert.equal(await store.revokeRefreshTokenFamily('f1', 12), 1, 'the usable token h2 (h1 is used)');
      assert.equal(await store.markRefreshTokenUsed('h2', 13, null), false, 'revoked');
      assert.equal((await store.findRefreshToken('h2'))?.revokedAt, 12);
      assert.equal((await store.findRefreshToken('h1'))?.revokedAt, null, 'a used token stays used');
      assert.equal(await store.revokeRefreshTokenFamily('f1', 14), 0, 'nothing left to revoke');
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
      assert.equal((await store.getLoginSession('s'))?.revokedAt, 1, 'the first revocation time stays');
      assert.equal(await store.purgeExpired(2000), 5, '2 refresh tokens, 1 code, 1 session, 1 signing key');

      await store.insertRefreshToken({ ...base, tokenHash: 'h4', expiresAt: 9999 });
      await store.insertRefreshToken({ ...base, familyId: 'f2', tokenHash: 'h5', expiresAt: 9999 });
      assert.equal(await store.revokeRefreshToken('h4', 20), true);
      assert.equal(await store.revokeRefreshToken('h4', 21), false, 'revoked once');
      assert.equal((await store.findRefreshToken('h4'))?.revokedAt, 20, 'the first revocation time stays');
      assert.equal(await store.revokeUserRefreshTokens(user.id, 22), 1, 'the one unrevoked token, h5');
      assert.equal((await store.findRefreshToken('h5'))?.revokedAt, 22);

      await store.insertRefreshToken({ ...base, tokenHash: 'h9', expiresAt: 9999 });
      await store.deleteClient('c');
      assert.equal(await store.findRefreshToken('h9'), undefined, 'deleting a client removes its tokens');
    });
    const token = (tokenHash: string, clientId = 'svc') => ({
      tokenHash,
      familyId: 'family-1',
      clientId,
      userId: null,
      scope: 'api',
      createdAt: 1,
      expiresAt: 10_000,
    });

    test('users: telephone number and postal address (OIDC phone and address claims) are stored, patched, cleared and validated', async () => {
      const store = await open();
      const address = { streetAddress: 'Main St 1\nFlat 2', locality: 'Springfield', country: 'US' };
      const user = await store.createUser({
        userName: 'phoebe',
        phoneNumber: '+14155550100',
        phoneNumberVerified: true,
        address,
      });
      assert.deepEqual(
        [user.phoneNumber, user.phoneNumberVerified, user.address],
        ['+14155550100', true, address],
      );
      const read = (await store.findUserByName('PHOEBE'))!;
      assert.deepEqual(
        [read.phoneNumber, read.phoneNumberVerified, read.address],
        ['+14155550100', true, address],
      );
      const renamed = await store.updateUser(user.id, { displayName: 'Phoebe' });
      assert.deepEqual(
        [renamed.phoneNumber, renamed.address],
        ['+14155550100', address],
        'kept when omitted',
      );
      const moved = await store.updateUser(user.id, { address: { locality: 'Shelbyville', region: ' ' } });
      assert.deepEqual(moved.address, { locality: 'Shelbyville' }, 'replaced whole; blank members dropped');
      await assert.rejects(store.updateUser(user.id, { phoneNumber: '555-0100' }), isError(ValidationError));
      await assert.rejects(
        store.updateUser(user.id, { address: { locality: 'a\tb' } }),
        (e: unknown) => e instanceof ValidationError && /address\.locality/.test(e.message),
      );
      await assert.rejects(
        store.updateUser(user.id, { address: { city: 'x' } as never }),
        (e: unknown) => e instanceof ValidationError && /unknown member 'city'/.test(e.message),
      );
      const cleared = await store.updateUser(user.id, { phoneNumber: null, address: { country: '' } });
      assert.deepEqual(
        [cleared.phoneNumber, cleared.phoneNumberVerified, cleared.address],
        [null, true, null],
      );
      const plain = await store.createUser({ userName: 'plain' });
      assert.deepEqual([plain.phoneNumber, plain.phoneNumberVerified, plain.address], [null, false, null]);
    });

    test('refresh tokens keep the auth_time and amr of their sign-in through a rotation', async () => {
      const store = await open();
      const user = await store.createUser({ userName: 'u' });
      await store.createClient({ clientId: 'c', clientType: 'public' });
      const base = {
        familyId: 'f',
        clientId: 'c',
        userId: user.id,
        scope: 'openid',
        createdAt: 0,
        expiresAt: 1000,
      };
      const first = await store.insertRefreshToken({
        ...base,
        tokenHash: 'a1',
        authTime: 1_700_000_000,
        amr: ['pwd', 'otp', 'mfa'],
      });
      assert.deepEqual(first.amr, ['pwd', 'otp', 'mfa']);
      const stored = (await store.findRefreshTokenWithOwner('a1'))!.token;
      assert.deepEqual([stored.authTime, stored.amr], [1_700_000_000, ['pwd', 'otp', 'mfa']]);
      assert.equal(
        await store.rotateRefreshToken(
          'a1',
          { ...base, tokenHash: 'a2', authTime: stored.authTime, amr: stored.amr },
          5,
        ),
        true,
      );
      const next = (await store.findRefreshToken('a2'))!;
      assert.deepEqual([next.authTime, next.amr], [1_700_000_000, ['pwd', 'otp', 'mfa']]);
      await store.insertRefreshToken({ ...base, tokenHash: 'b1' });
      assert.deepEqual((await store.findRefreshToken('b1'))!.amr, [], 'no sign-in methods recorded');
    });

    test('concurrent rotations: a replay loses, a failing one is refused alone, the rest is committed', async () => {
      const store = await open();
      {
        await store.createClient({ clientId: 'svc', clientType: 'public' });
        await store.insertRefreshToken(token('a'));
        await store.insertRefreshToken(token('b'));
        const results = await Promise.allSettled([
          store.rotateRefreshToken('a', token('a2'), 5),
          store.rotateRefreshToken('a', token('a3'), 5), // the same token again: a replay
          store.rotateRefreshToken('b', token('b2', 'no-such-client'), 5), // foreign key fails
          store.rotateRefreshToken('missing', token('m2'), 5),
        ]);
        const outcomes = results.map((r) => (r.status === 'fulfilled' ? r.value : 'rejected'));
        assert.deepEqual(outcomes.slice(2), ['rejected', false]);
        assert.deepEqual(
          [...outcomes.slice(0, 2)].sort(),
          [false, true],
          'one of the two rotations of a wins',
        );
        const refused = results[2] as PromiseRejectedResult;
        assert.ok(refused.reason instanceof ConstraintError);
        const [winner, loser] = outcomes[0] === true ? ['a2', 'a3'] : ['a3', 'a2'];
        assert.equal((await store.findRefreshToken('a'))?.replacedBy, winner);
        assert.equal((await store.findRefreshToken('a'))?.usedAt, 5);
        assert.ok(await store.findRefreshToken(winner));
        assert.equal(await store.findRefreshToken(loser), undefined);
        // The failed rotation changed nothing: 'b' is still unused and has no successor.
        assert.equal((await store.findRefreshToken('b'))?.usedAt, null);
        assert.equal(await store.findRefreshToken('b2'), undefined);
        assert.equal(await store.rotateRefreshToken('b', token('b3'), 6), true);
      }
    });

    test('concurrent changes on one store: each commits or rolls back alone, with its audit event', async () => {
      const store = await open();
      const audit = { audit: { category: 'Concurrent', outcome: 'Success' } };
      const results = await Promise.allSettled([
        ...Array.from({ length: 8 }, (_, i) => store.createUser({ userName: `user${i}` }, audit)),
        ...Array.from({ length: 4 }, () => store.createUser({ userName: 'twin' }, audit)),
        store.createUser({ userName: 'nobody', roles: ['no-such-role'] }, audit),
        store.listUsers({ limit: 100 }),
        store.appendAudit({ category: 'Concurrent', outcome: 'Denied' }),
      ]);
      const failed = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
      assert.equal(
        failed.filter((e) => e instanceof ConflictError).length,
        3,
        'three of the four twins conflict',
      );
      assert.equal(
        failed.filter((e) => e instanceof ValidationError).length,
        1,
        'the unknown role is refused',
      );
      assert.equal(failed.length, 4);
      const users = await store.listUsers({ limit: 100 });
      const names = users.items.map((u) => u.userName).filter((n) => /^(user\d|twin|nobody)$/.test(n));
      assert.deepEqual(names.sort(), [...Array.from({ length: 8 }, (_, i) => `user${i}`), 'twin'].sort());
      const events = await store.listAudit({ category: 'Concurrent', limit: 100 });
      assert.equal(
        events.items.filter((e) => e.outcome === 'Success').length,
        9,
        'only committed changes are audited',
      );
      assert.equal(events.items.filter((e) => e.outcome === 'Denied').length, 1);
    });

    test('across two stores on one database: 50 concurrent wrong-password attempts count exactly 5, then locked', async () => {
      const clock = new ManualClock();
      const a = await open({ now: clock.now });
      const b = await again();
      const user = await a.createUser({ userName: 'target' });
      const now = clock.now();
      const attempts = await Promise.all(
        Array.from({ length: 50 }, (_, i) => (i % 2 ? a : b).beginAccessAttempt(user.id, now, 5)),
      );
      const allowed = attempts.filter((x) => x.allowed);
      assert.equal(allowed.length, 5, 'exactly maxFailures attempts are let through');
      assert.deepEqual(allowed.map((x) => x.attempt).sort(), [1, 2, 3, 4, 5]);
      const locks = await Promise.all(
        allowed.map((x, i) => (i % 2 ? a : b).failAccessAttempt(user.id, x.attempt, now, 5, 60_000)),
      );
      assert.equal(locks.filter(Boolean).length, 1, 'the fifth failure locks the account');
      const locked = (await b.getUser(user.id))!;
      assert.equal(locked.lockoutEnd, now + 60_000);
      assert.notEqual(locked.securityStamp, user.securityStamp);
      const refused = await a.beginAccessAttempt(user.id, now + 1, 5);
      assert.deepEqual(refused, { allowed: false, attempt: 0, lockoutEnd: now + 60_000 });
      assert.equal(
        (await a.beginAccessAttempt(user.id, now + 60_000, 5)).allowed,
        true,
        'expired lockout cleared',
      );
    });

    test('across two stores: a refresh token rotates once, single-use codes and replay keys are claimed once', async () => {
      const a = await open();
      const b = await again();
      const user = await a.createUser({ userName: 'u' });
      await a.createClient({ clientId: 'c', clientType: 'public' });
      const token = (tokenHash: string) => ({
        tokenHash,
        familyId: 'fam',
        clientId: 'c',
        userId: user.id,
        scope: 'openid',
        createdAt: 0,
        expiresAt: 10_000,
      });
      await a.insertRefreshToken(token('r0'));
      const rotations = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).rotateRefreshToken('r0', token(`r1-${i}`), 5)),
      );
      assert.equal(rotations.filter(Boolean).length, 1, 'one rotation wins; the others are replays');
      const used = (await b.findRefreshToken('r0'))!;
      assert.equal(used.usedAt, 5);
      assert.equal(rotations.indexOf(true), Number(used.replacedBy?.slice(3)));
      // Reuse detection: the replaying instance revokes the whole family, seen by the other one.
      assert.equal(await b.revokeRefreshTokenFamily('fam', 6), 1, 'the successor, the one usable token');
      assert.equal(await a.rotateRefreshToken(used.replacedBy!, token('r2'), 7), false, 'successor revoked');
      const owner = await a.findRefreshTokenWithOwner(used.replacedBy!);
      assert.equal(owner?.token.revokedAt, 6);
      assert.equal(owner?.owner?.userName, 'u');

      await a.insertAuthorizationCode({
        codeHash: 'code',
        clientId: 'c',
        userId: user.id,
        redirectUri: 'http://localhost/cb',
        createdAt: 0,
        expiresAt: 60,
        amr: ['pwd'],
      });
      const consumed = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).consumeAuthorizationCode('code', 1)),
      );
      assert.equal(consumed.filter((x) => x !== undefined).length, 1, 'an authorization code is used once');
      assert.deepEqual(consumed.find((x) => x !== undefined)?.amr, ['pwd']);

      const claims = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 ? a : b).claimReplayKey('dpop', 'jti-1', 100, 1)),
      );
      assert.equal(claims.filter(Boolean).length, 1, 'a jti is accepted once');
      assert.equal(await a.claimReplayKey('dpop', 'jti-1', 300, 100), true, 'an expired entry is taken over');
      assert.equal(await b.claimReplayKey('dpop', 'jti-1', 300, 150), false);
      assert.equal(await b.claimReplayKey('assertion', 'jti-1', 300, 150), true, 'kinds are separate');
    });

    test('login sessions, session clients, consent, device codes and pushed requests', async () => {
      const a = await open();
      const b = await again();
      const user = await a.createUser({ userName: 'u' });
      await a.createClient({ clientId: 'rp2', clientType: 'public' });
      await a.createClient({ clientId: 'rp1', clientType: 'public', requireConsent: true });
      const session = await a.createLoginSession({
        sessionHash: 'sh',
        userId: user.id,
        createdAt: 0,
        expiresAt: 1000,
        sid: 'sid-0123456789abcdefghij',
        amr: ['pwd', 'otp'],
      });
      assert.deepEqual(
        (await b.getLoginSession('sh'))?.amr,
        ['pwd', 'otp'],
        'a session is valid on any instance',
      );
      assert.equal((await b.findLoginSessionBySid(session.sid!))?.sessionHash, 'sh');
      await b.addSessionClient(session.sid!, 'rp2', 1);
      await a.addSessionClient(session.sid!, 'rp1', 1);
      await a.addSessionClient(session.sid!, 'rp1', 2);
      assert.deepEqual(
        (await b.listSessionClients(session.sid!)).map((c) => c.clientId),
        ['rp1', 'rp2'],
      );
      await a.insertRefreshToken({
        tokenHash: 'st',
        familyId: 'f',
        clientId: 'rp1',
        userId: user.id,
        createdAt: 0,
        expiresAt: 1000,
        sessionId: session.sid,
      });
      assert.equal(await b.endLoginSession('sh', 5), 1, 'logout revokes the refresh tokens of the session');
      assert.equal((await a.getLoginSession('sh'))?.revokedAt, 5);

      await a.grantConsent(user.id, 'rp1', ['openid', 'profile']);
      const widened = await b.grantConsent(user.id, 'rp1', ['email', 'openid']);
      assert.deepEqual(widened.scopes, ['email', 'openid', 'profile']);
      assert.equal((await a.listConsents({ userId: user.id })).total, 1);
      await assert.rejects(a.grantConsent('ghost', 'rp1', ['openid']), isError(ConstraintError));
      await b.revokeConsent(user.id, 'rp1');
      await assert.rejects(a.revokeConsent(user.id, 'rp1'), isError(NotFoundError));

      await a.insertDeviceCode({
        deviceCodeHash: 'dc',
        userCode: 'BDWPHQKN',
        clientId: 'rp2',
        scope: 'openid',
        intervalSeconds: 5,
        createdAt: 0,
        expiresAt: 600_000,
      });
      assert.equal((await b.pollDeviceCode('dc', 1000))?.slowDown, false);
      const fast = await a.pollDeviceCode('dc', 2000);
      assert.equal(fast?.slowDown, true, 'polling faster than the interval slows down');
      assert.equal((await b.findDeviceCodeByUserCode('BDWPHQKN'))?.intervalSeconds, 10);
      assert.equal(await b.decideDeviceCode('BDWPHQKN', true, user.id, 3000), true);
      assert.equal(await a.decideDeviceCode('BDWPHQKN', false, user.id, 3000), false, 'decided once');
      const consumes = await Promise.all([a.consumeDeviceCode('dc'), b.consumeDeviceCode('dc')]);
      assert.equal(consumes.filter(Boolean).length, 1, 'device tokens are issued once');

      await a.insertPushedRequest({
        requestHash: 'par',
        clientId: 'rp2',
        params: { response_type: 'code', scope: 'openid' },
        createdAt: 0,
        expiresAt: 60_000,
      });
      assert.deepEqual((await b.findPushedRequest('par'))?.params, {
        response_type: 'code',
        scope: 'openid',
      });
      const pars = await Promise.all([a.consumePushedRequest('par', 10), b.consumePushedRequest('par', 10)]);
      assert.equal(pars.filter(Boolean).length, 1, 'a request_uri is used once');

      const metadata = await a.setClientMetadata('rp2', {
        dpopBoundAccessTokens: true,
        allowedResources: ['https://api.test'],
      });
      assert.deepEqual((await b.getClient('rp2'))?.metadata, metadata.metadata);
      await a.setRegistrationAccessToken('rp2', 'rat', 1);
      assert.equal(await b.findRegistrationAccessToken('rp2'), 'rat');
      await assert.rejects(b.setRegistrationAccessToken('ghost', 'x', 1), isError(NotFoundError));
    });

    test('a role change on one store reaches the permission inputs read by the other (versions in the subject)', async () => {
      const a = await open();
      const b = await again();
      const parent = await a.createRole({ name: 'reader', permissions: ['docs.read'] });
      const child = await a.createRole({
        name: 'editor',
        permissions: ['docs.write'],
        parentRoles: ['reader'],
      });
      const user = await a.createUser({ userName: 'ed', roles: ['editor'] });
      const before = (await b.getUserSubject(user.id))!;
      assert.deepEqual(
        before.roles.map((r) => r.name),
        ['editor', 'reader'],
      );
      await a.updateRole(parent.id, { permissions: ['docs.read', 'docs.list'] });
      const after = (await b.getUserSubject(user.id))!;
      const reader = after.roles.find((r) => r.name === 'reader')!;
      assert.deepEqual(reader.permissions, ['docs.list', 'docs.read']);
      assert.ok(reader.version > parent.version, 'the version in the cache key changed');
      await assert.rejects(
        b.updateRole(parent.id, { parentRoles: ['editor'] }),
        isError(ValidationError, { field: 'parentRoles[0]', rule: 'cycle' }),
      );
      assert.equal((await a.getRole(child.id))?.parentRoles[0], 'reader');
    });
  });
}
