/**
 * Administration API additions: the read rule (managing a resource includes reading it; a deny rule on
 * `auth.admin.read` wins), `GET /me` (the caller's abilities), user profile fields, and the role hierarchy
 * (`parentRoles`: inherited grants and denies, cycles refused with 400, the compiled permission cache
 * following a change of a parent).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthorizationService } from '../src/authorization.ts';
import { AuthorizationReason } from '../src/reasons.ts';
import { type AdminFixture, adminFixture, snapshot } from './admin-fixture.ts';
import { fixture } from './helpers.ts';

let f: AdminFixture;
before(async () => {
  f = await adminFixture();
});
after(() => f.close());

describe('read rule: managing includes reading', () => {
  const cases = [
    ['auth.admin.users', 'users', ['roles', 'clients', 'permissions']],
    ['auth.admin.roles', 'roles', ['users', 'clients']],
    ['auth.admin.clients', 'clients', ['users', 'roles']],
    ['auth.admin.permissions', 'permissions', ['users', 'clients']],
  ] as const;
  for (const [permission, readable, others] of cases) {
    test(`${permission} alone lists and gets ${readable}, not ${others.join(', ')}`, async () => {
      const { user, token } = await f.caller(`only-${readable}`, [permission]);
      const list = await f.call(token, 'GET', readable);
      assert.equal(list.statusCode, 200, list.body);
      if (readable === 'users') {
        assert.equal((await f.call(token, 'GET', `users/${user.id}`)).statusCode, 200);
      }
      for (const other of others) {
        const res = await f.call(token, 'GET', other);
        assert.equal(res.statusCode, 403, other);
        assert.deepEqual(JSON.parse(res.body), {
          error: 'forbidden',
          error_description: 'NoMatchingGrant',
          permission: 'auth.admin.read',
        });
      }
      assert.equal(
        (await f.call(token, 'GET', 'audit')).statusCode,
        403,
        'the audit log needs auth.admin.audit',
      );
    });
  }

  test('a deny rule on auth.admin.read wins over the manage permission', async () => {
    const { token } = await f.caller('no-read', ['auth.admin.users'], ['auth.admin.read']);
    const res = await f.call(token, 'GET', 'users');
    assert.equal(res.statusCode, 403);
    assert.equal(JSON.parse(res.body).error_description, 'DeniedByRule');
  });
});

describe('GET /me', () => {
  test('tells an admin UI what the caller may do', async () => {
    const { user, token } = await f.caller('me-user', ['auth.admin.users', 'auth.admin.audit']);
    const res = await f.call(token, 'GET', 'me');
    assert.equal(res.statusCode, 200, res.body);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.deepEqual(JSON.parse(res.body), {
      subject: { kind: 'user', id: user.id, name: 'me-user', roles: [], clientId: 'demo-spa' },
      abilities: {
        'auth.admin.read': false,
        'auth.admin.users': true,
        'auth.admin.roles': false,
        'auth.admin.permissions': false,
        'auth.admin.clients': false,
        'auth.admin.audit': true,
      },
      can: {
        readUsers: true,
        manageUsers: true,
        readRoles: false,
        manageRoles: false,
        readPermissions: false,
        managePermissions: false,
        readClients: false,
        manageClients: false,
        readAudit: true,
      },
    });
  });

  test('deny rules and wildcards are applied; a caller without any admin permission still gets 200', async () => {
    const { token } = await f.caller('me-root', ['auth.admin.**'], ['auth.admin.clients', 'auth.admin.read']);
    const me = JSON.parse((await f.call(token, 'GET', 'me')).body);
    assert.equal(me.abilities['auth.admin.clients'], false);
    assert.equal(me.abilities['auth.admin.users'], true);
    assert.equal(me.can.readUsers, false, 'read denied: managing does not help');
    const plain = await f.caller('me-plain', []);
    const res = await f.call(plain.token, 'GET', 'me');
    assert.equal(res.statusCode, 200);
    assert.equal(Object.values(JSON.parse(res.body).abilities).includes(true), false);
  });

  test('guests and invalid tokens get the middleware 401; a disabled user 403', async () => {
    const guest = await f.call(undefined, 'GET', 'me');
    assert.equal(guest.statusCode, 401);
    assert.equal(JSON.parse(guest.body).error_description, 'GuestNotAllowed');
    assert.equal((await f.call('bad.token.x', 'GET', 'me')).statusCode, 401);
    const { user, token } = await f.caller('me-disabled', []);
    await f.store.updateUser(user.id, { isEnabled: false });
    assert.equal((await f.call(token, 'GET', 'me')).statusCode, 403);
  });
});

describe('user profile fields', () => {
  test('are created, updated, cleared and validated', async () => {
    const { token } = await f.caller('profiler', ['auth.admin.users', 'auth.admin.read']);
    const created = await f.call(token, 'POST', 'users', {
      userName: 'pat',
      displayName: 'Pat Doe',
      givenName: 'Pat',
      familyName: 'Doe',
      email: 'pat@example.org',
      emailVerified: true,
    });
    assert.equal(created.statusCode, 201, created.body);
    const pat = JSON.parse(created.body);
    assert.deepEqual(
      [pat.displayName, pat.givenName, pat.familyName, pat.email, pat.emailVerified],
      ['Pat Doe', 'Pat', 'Doe', 'pat@example.org', true],
    );
    const patched = JSON.parse(
      (await f.call(token, 'PATCH', `users/${pat.id}`, { email: null, familyName: 'Roe' })).body,
    );
    assert.deepEqual([patched.email, patched.familyName, patched.displayName], [null, 'Roe', 'Pat Doe']);
    const before = await snapshot(f.store);
    for (const [body, message] of [
      [{ email: 'not-an-email' }, /^email: must be an e-mail address/],
      [{ displayName: 'a\nb' }, /^displayName: control characters/],
      [{ givenName: 'x'.repeat(257) }, /^givenName: must NOT have more than 256 characters/],
      [{ emailVerified: 'yes' }, /^emailVerified: must be boolean/],
    ] as const) {
      const res = await f.call(token, 'PATCH', `users/${pat.id}`, body);
      assert.equal(res.statusCode, 400, JSON.stringify(body));
      assert.match(JSON.parse(res.body).error, message);
    }
    assert.equal(await snapshot(f.store), before, 'nothing changed');
  });
});

describe('role hierarchy', () => {
  test('parentRoles through the API: created, shown, cycles and unknown parents refused with 400', async () => {
    const { token } = await f.caller('role-admin', [
      'auth.admin.roles',
      'auth.admin.permissions',
      'auth.admin.read',
    ]);
    const post = (body: unknown) => f.call(token, 'POST', 'roles', body);
    const base = JSON.parse((await post({ name: 'h-base', permissions: ['shop.read'] })).body);
    const mid = JSON.parse((await post({ name: 'h-mid', parentRoles: ['H-Base'] })).body);
    assert.deepEqual(mid.parentRoles, ['h-base']);
    const top = JSON.parse((await post({ name: 'h-top', parentRoles: ['h-mid'] })).body);
    const before = await snapshot(f.store);
    for (const [id, parents, message] of [
      [base.id, ['h-top'], /^parentRoles\[0\]: role 'h-top' is this role or inherits from it/],
      [base.id, ['h-base'], /^parentRoles\[0\]: role 'h-base' is this role/],
      [mid.id, ['h-base', 'h-top'], /^parentRoles\[1\]:/],
      [top.id, ['nope'], /^parentRoles\[0\]: role 'nope' does not exist/],
    ] as const) {
      const res = await f.call(token, 'PATCH', `roles/${id}`, { parentRoles: parents });
      assert.equal(res.statusCode, 400, res.body);
      assert.match(JSON.parse(res.body).error, message);
    }
    const unknownOnCreate = await post({ name: 'h-x', parentRoles: ['missing'] });
    assert.equal(unknownOnCreate.statusCode, 400);
    assert.equal(await snapshot(f.store), before, 'nothing changed');
    const admin = (await f.store.findRoleByName('administrator'))!;
    const system = await f.call(token, 'PATCH', `roles/${admin.id}`, { parentRoles: ['h-base'] });
    assert.equal(system.statusCode, 400, 'the system role keeps its rules');
  });

  test('inherited grants and denies apply transitively; changing a parent reaches holders at once', async () => {
    const c = await fixture();
    const service = new AuthorizationService({
      store: c.store,
      tokenVerifier: c.tokenVerifier,
      now: c.clock.now,
    });
    const base = await c.store.createRole({ name: 'base', permissions: ['shop.orders.read'] });
    const mid = await c.store.createRole({
      name: 'mid',
      parentRoles: ['base'],
      permissions: ['shop.orders.write'],
    });
    await c.store.createRole({ name: 'top', parentRoles: ['mid'] });
    const user = await c.store.createUser({ userName: 'heir', roles: ['top'] });
    const token = `Bearer ${await c.userToken(user)}`;
    const check = async (permission: string) =>
      (
        await service.authorize({
          authorization: token,
          requirement: { permission },
          request: { method: 'GET', url: '/', headers: {} },
        })
      ).decision.reason;
    assert.equal(await check('shop.orders.read'), AuthorizationReason.Granted, 'from the grandparent');
    assert.equal(await check('shop.orders.write'), AuthorizationReason.Granted, 'from the parent');
    await c.store.updateRole(base.id, { deniedPermissions: ['shop.orders.write'] });
    assert.equal(await check('shop.orders.write'), AuthorizationReason.DeniedByRule, 'a parent deny wins');
    await c.store.updateRole(mid.id, { parentRoles: [] });
    assert.equal(await check('shop.orders.read'), AuthorizationReason.NoMatchingGrant, 'unlinked');
    assert.equal(await check('shop.orders.write'), AuthorizationReason.Granted);
    await c.store.updateRole(mid.id, { parentRoles: ['base'] });
    await c.store.deleteRole(base.id);
    assert.equal(
      await check('shop.orders.write'),
      AuthorizationReason.Granted,
      'deleted parent: its deny is gone',
    );
    const subject = await c.store.getUserSubject(user.id);
    assert.deepEqual(
      subject?.roles.map((r) => r.name),
      ['mid', 'top'],
    );
  });
});
