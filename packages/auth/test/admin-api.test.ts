/**
 * Administration REST API (spec 001 "Administration REST API", issue 6): CRUD of users, roles, permissions
 * and clients, password/enable/disable/unlock, audit log filters and paging, the audit event of every change,
 * the OpenAPI document and the configurable base path.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import { normalizeBasePath } from '../src/admin/index.ts';
import { type AdminFixture, adminFixture } from './admin-fixture.ts';

let f: AdminFixture;
let root: string;
let rootId: string;

before(async () => {
  f = await adminFixture();
  const caller = await f.caller('root', ['auth.admin.**']);
  root = caller.token;
  rootId = caller.user.id;
});
after(() => f.close());

const json = (r: { body: string }) => JSON.parse(r.body);

async function lastAudit() {
  const page = await f.store.listAudit({ limit: 1 });
  return page.items[0]!;
}

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
    const stored = await f.store.getUser(alice.id);
    assert.ok(stored?.passwordHash && (await f.hasher.verify('correct horse battery', stored.passwordHash)));

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
    assert.equal(deleted.body, '');
    assert.equal((await f.call(root, 'GET', `users/${alice.id}`)).statusCode, 404);
  });

  test('list pages with offset and limit, ordered by user name', async () => {
    for (const name of ['page-c', 'page-a', 'page-b']) {
      assert.equal((await f.call(root, 'POST', 'users', { userName: name })).statusCode, 201);
    }
    const first = json(await f.call(root, 'GET', 'users?search=page-&limit=2'));
    const second = json(await f.call(root, 'GET', 'users?search=page-&limit=2&offset=2'));
    assert.equal(first.total, 3);
    assert.deepEqual(
      first.items.map((u: { userName: string }) => u.userName),
      ['page-a', 'page-b'],
    );
    assert.deepEqual(
      second.items.map((u: { userName: string }) => u.userName),
      ['page-c'],
    );
    assert.equal(second.offset, 2);
  });

  test('setting a password changes the security stamp: tokens issued before are refused (SubjectDisabled)', async () => {
    const { user, token } = await f.caller('pw-user', ['auth.admin.read']);
    assert.equal((await f.call(token, 'GET', 'users')).statusCode, 200);
    const r = await f.call(root, 'PUT', `users/${user.id}/password`, { password: 'a brand new password' });
    assert.equal(r.statusCode, 204);
    const after = (await f.store.getUser(user.id))!;
    assert.notEqual(after.securityStamp, user.securityStamp);
    assert.ok(after.passwordHash && (await f.hasher.verify('a brand new password', after.passwordHash)));
    const refused = await f.call(token, 'GET', 'users');
    assert.equal(refused.statusCode, 403);
    assert.equal(json(refused).error_description, 'SubjectDisabled');
    assert.equal((await f.call(await f.token(after), 'GET', 'users')).statusCode, 200, 'a new token works');
    const event = await lastAudit();
    assert.equal(event.category, 'Admin');
    assert.deepEqual(event.details, {
      action: 'user.password',
      target: { type: 'user', id: user.id, name: 'pw-user' },
      changed: ['password'],
    });
    assert.ok(!JSON.stringify(event).includes('a brand new password'), 'no secret in the audit log');
  });

  test('a too short password is a 400 naming the field, and nothing changes', async () => {
    const { user } = await f.caller('short-pw', []);
    const r = await f.call(root, 'PUT', `users/${user.id}/password`, { password: 'short' });
    assert.equal(r.statusCode, 400);
    assert.match(json(r).error, /^password: at least 8 characters/);
    assert.equal((await f.store.getUser(user.id))!.securityStamp, user.securityStamp);
  });

  test('disable refuses the user’s tokens at once; enable lets new tokens in', async () => {
    const { user, token } = await f.caller('dis-user', ['auth.admin.read']);
    const disabled = await f.call(root, 'POST', `users/${user.id}/disable`);
    assert.equal(disabled.statusCode, 200);
    assert.equal(json(disabled).isEnabled, false);
    assert.equal(json(await f.call(token, 'GET', 'users')).error_description, 'SubjectDisabled');
    const enabled = await f.call(root, 'POST', `users/${user.id}/enable`, {});
    assert.equal(enabled.statusCode, 200);
    assert.equal(json(enabled).isEnabled, true);
    const fresh = await f.token((await f.store.getUser(user.id))!);
    assert.equal((await f.call(fresh, 'GET', 'users')).statusCode, 200);
    const patchDisable = await f.call(root, 'PATCH', `users/${user.id}`, { isEnabled: false });
    assert.equal(json(patchDisable).isEnabled, false);
    assert.equal((await f.call(fresh, 'GET', 'users')).statusCode, 403);
  });

  test('unlock ends a lockout and resets the failure count', async () => {
    const { user } = await f.caller('locked-user', []);
    await f.store.lockUser(user.id, Date.now() + 60_000);
    const locked = json(await f.call(root, 'GET', `users/${user.id}`));
    assert.equal(locked.isLockedOut, true);
    assert.ok(Date.parse(locked.lockoutEnd) > Date.now());
    const r = await f.call(root, 'POST', `users/${user.id}/unlock`);
    assert.equal(r.statusCode, 200);
    assert.equal(json(r).isLockedOut, false);
    assert.equal(json(r).lockoutEnd, null);
    assert.equal(json(r).accessFailedCount, 0);
    assert.equal((await lastAudit()).details?.action, 'user.unlock');
  });
});

describe('roles', () => {
  test('create, get, list, update, delete; holders lose a deleted role', async () => {
    const created = await f.call(root, 'POST', 'roles', {
      name: 'Auditors',
      description: 'read the log',
      permissions: ['auth.admin.audit', 'auth.admin.read'],
      deniedPermissions: ['auth.admin.users'],
    });
    assert.equal(created.statusCode, 201);
    const role = json(created);
    assert.equal(created.headers.location, `${f.base}/roles/${role.id}`);
    assert.deepEqual(role.permissions, ['auth.admin.audit', 'auth.admin.read']);
    assert.equal(role.isSystem, false);
    assert.deepEqual(json(await f.call(root, 'GET', `roles/${role.id}`)), role);
    const list = json(await f.call(root, 'GET', 'roles'));
    assert.ok(list.items.some((r: { name: string }) => r.name === 'administrator'));

    const holder = await f.call(root, 'POST', 'users', { userName: 'auditor', roles: ['auditors'] });
    assert.deepEqual(json(holder).roles, ['Auditors']);
    const holderToken = await f.token((await f.store.getUser(json(holder).id))!);
    assert.equal((await f.call(holderToken, 'GET', 'audit')).statusCode, 200, 'role grants apply');

    const updated = await f.call(root, 'PATCH', `roles/${role.id}`, {
      description: 'changed',
      permissions: ['auth.admin.read'],
    });
    assert.equal(updated.statusCode, 200);
    assert.equal(json(updated).description, 'changed');
    assert.deepEqual(json(updated).deniedPermissions, ['auth.admin.users']);
    assert.equal((await f.call(holderToken, 'GET', 'audit')).statusCode, 403, 'rule change applies at once');

    assert.equal((await f.call(root, 'DELETE', `roles/${role.id}`)).statusCode, 204);
    assert.deepEqual(json(await f.call(root, 'GET', `users/${json(holder).id}`)).roles, []);
  });

  test('a built-in system role keeps its name and rules but its description may change', async () => {
    const admin = json(await f.call(root, 'GET', 'roles?search=administrator')).items[0];
    const described = await f.call(root, 'PATCH', `roles/${admin.id}`, { description: 'All of it' });
    assert.equal(described.statusCode, 200);
    assert.equal(json(described).description, 'All of it');
  });
});

describe('permissions', () => {
  test('create (normalized), get case-insensitively, list, update description, delete', async () => {
    const created = await f.call(root, 'POST', 'permissions', {
      code: '  Shop.Orders.Ship ',
      description: 'ship',
    });
    assert.equal(created.statusCode, 201);
    assert.equal(json(created).code, 'shop.orders.ship');
    assert.equal(created.headers.location, `${f.base}/permissions/shop.orders.ship`);
    assert.equal(json(await f.call(root, 'GET', 'permissions/SHOP.ORDERS.SHIP')).description, 'ship');
    assert.equal(json(await f.call(root, 'GET', 'permissions?search=shop.')).total, 1);
    const updated = await f.call(root, 'PATCH', 'permissions/shop.orders.ship', { description: 'send out' });
    assert.equal(json(updated).description, 'send out');
    assert.equal((await f.call(root, 'DELETE', 'permissions/shop.orders.ship')).statusCode, 204);
    assert.equal((await f.call(root, 'GET', 'permissions/shop.orders.ship')).statusCode, 404);
  });
});

describe('clients', () => {
  test('a confidential client gets a generated secret once; the stored hash verifies it', async () => {
    const created = await f.call(root, 'POST', 'clients', {
      clientId: 'billing',
      displayName: 'Billing service',
      clientType: 'confidential',
      allowedGrantTypes: ['client_credentials'],
      allowedScopes: ['api'],
      permissions: ['billing.**'],
    });
    assert.equal(created.statusCode, 201);
    const client = json(created);
    assert.equal(created.headers.location, `${f.base}/clients/billing`);
    assert.equal(created.headers['cache-control'], 'no-store', 'a secret is never cached');
    assert.equal(typeof client.clientSecret, 'string');
    assert.ok(client.clientSecret.length >= 32);
    assert.equal(client.hasSecret, true);
    assert.ok(!('secretHash' in client));
    const stored = (await f.store.getClient('billing'))!;
    assert.ok(await f.hasher.verify(client.clientSecret, stored.secretHash!));

    const got = json(await f.call(root, 'GET', 'clients/billing'));
    assert.ok(!('clientSecret' in got), 'the secret is shown only once');
    assert.deepEqual(got.permissions, ['billing.**']);

    const rotated = await f.call(root, 'POST', 'clients/billing/secret');
    assert.equal(rotated.statusCode, 200);
    const newSecret = json(rotated).clientSecret;
    assert.notEqual(newSecret, client.clientSecret);
    const after = (await f.store.getClient('billing'))!;
    assert.ok(await f.hasher.verify(newSecret, after.secretHash!));
    assert.equal(await f.hasher.verify(client.clientSecret, after.secretHash!), false);

    const given = await f.call(root, 'POST', 'clients/billing/secret', {
      clientSecret: 'a-chosen-secret-of-24ch',
    });
    assert.ok(!('clientSecret' in json(given)), 'a chosen secret is not echoed');
    assert.ok(
      await f.hasher.verify('a-chosen-secret-of-24ch', (await f.store.getClient('billing'))!.secretHash!),
    );

    const updated = await f.call(root, 'PATCH', 'clients/billing', {
      isEnabled: false,
      allowedScopes: ['api', 'read'],
    });
    assert.equal(json(updated).isEnabled, false);
    assert.deepEqual(json(updated).allowedScopes, ['api', 'read']);
    assert.equal((await f.call(root, 'DELETE', 'clients/billing')).statusCode, 204);
    assert.equal((await f.call(root, 'GET', 'clients/billing')).statusCode, 404);
  });

  test('a public client has no secret; giving or rotating one is a 400', async () => {
    const created = await f.call(root, 'POST', 'clients', {
      clientId: 'spa',
      clientType: 'public',
      redirectUris: ['http://localhost:5173/callback'],
      allowedGrantTypes: ['authorization_code', 'refresh_token'],
    });
    assert.equal(created.statusCode, 201);
    assert.equal(json(created).hasSecret, false);
    assert.ok(!('clientSecret' in json(created)));
    const withSecret = await f.call(root, 'POST', 'clients', {
      clientId: 'spa2',
      clientType: 'public',
      clientSecret: 'x'.repeat(20),
    });
    assert.equal(withSecret.statusCode, 400);
    assert.match(json(withSecret).error, /^clientSecret:/);
    const rotate = await f.call(root, 'POST', 'clients/spa/secret');
    assert.equal(rotate.statusCode, 400);
    assert.equal(await f.store.getClient('spa2'), undefined);
  });

  test('a client-credentials token of a client holding auth.admin.read may read', async () => {
    await f.call(root, 'POST', 'clients', {
      clientId: 'reader',
      clientType: 'confidential',
      allowedGrantTypes: ['client_credentials'],
      permissions: ['auth.admin.read'],
    });
    const token = await f.clientToken('reader');
    assert.equal((await f.call(token, 'GET', 'clients')).statusCode, 200);
    assert.equal((await f.call(token, 'GET', 'audit')).statusCode, 403);
  });
});

describe('audit', () => {
  test('every change writes one Admin/Success event naming the caller and the target', async () => {
    const before = (await f.store.listAudit({ limit: 1 })).total;
    const r = await f.call(root, 'POST', 'roles', { name: 'audited', description: 'x' });
    const role = json(r);
    assert.equal((await f.store.listAudit({ limit: 1 })).total, before + 1);
    const event = await lastAudit();
    assert.equal(event.category, 'Admin');
    assert.equal(event.outcome, 'Success');
    assert.equal(event.subjectId, rootId);
    assert.equal(event.subjectName, 'root');
    assert.equal(event.clientId, 'demo-spa');
    assert.equal(event.remoteAddress, '127.0.0.1');
    assert.deepEqual(event.details, {
      action: 'role.create',
      target: { type: 'role', name: 'audited' },
      changed: ['name', 'description'],
      values: { name: 'audited', description: 'x' },
    });
    const holder = json(
      await f.call(root, 'POST', 'users', { userName: 'holder', password: 'holder-password' }),
    );
    await f.call(root, 'PATCH', `users/${holder.id}`, {
      roles: ['audited'],
      directPermissions: ['Shop.Read'],
    });
    assert.deepEqual((await lastAudit()).details, {
      action: 'user.update',
      target: { type: 'user', id: holder.id, name: 'holder' },
      changed: ['roles', 'directPermissions'],
      values: { roles: ['audited'], directPermissions: ['shop.read'] },
    });
    const audit = await f.store.listAudit({ limit: 10 });
    assert.ok(!JSON.stringify(audit).includes('holder-password'), 'no password in the audit log');
    await f.call(root, 'DELETE', `users/${holder.id}`);
    await f.call(root, 'DELETE', `roles/${role.id}`);
    assert.deepEqual((await lastAudit()).details, {
      action: 'role.delete',
      target: { type: 'role', id: role.id, name: 'audited' },
      changed: [],
    });
  });

  test('filters by category, outcome, subject and time range; pages newest first', async () => {
    const t0 = Date.now() - 10 * 60_000;
    await f.store.appendAudit({
      time: t0,
      category: 'Login',
      outcome: 'Denied',
      subjectId: 'u-1',
      failureCode: 'locked_out',
    });
    await f.store.appendAudit({ time: t0 + 1000, category: 'Login', outcome: 'Success', subjectId: 'u-1' });
    await f.store.appendAudit({
      time: t0 + 2000,
      category: 'Login',
      outcome: 'Denied',
      subjectId: 'u-2',
      failureCode: 'invalid_credentials',
    });
    await f.store.appendAudit({
      time: t0 + 3000,
      category: 'Token',
      outcome: 'Success',
      subjectId: 'u-1',
      clientId: 'demo-spa',
    });

    const denied = json(await f.call(root, 'GET', 'audit?category=Login&outcome=Denied'));
    assert.equal(denied.total, 2);
    assert.deepEqual(
      denied.items.map((e: { subjectId: string }) => e.subjectId),
      ['u-2', 'u-1'],
      'newest first',
    );
    assert.equal(denied.items[1].failureCode, 'locked_out');
    assert.equal(denied.items[1].time, new Date(t0).toISOString());

    const u1 = json(await f.call(root, 'GET', 'audit?subject=u-1'));
    assert.equal(u1.total, 3);
    const range = (from: number, to: number) =>
      `audit?from=${encodeURIComponent(new Date(from).toISOString())}&to=${encodeURIComponent(new Date(to).toISOString())}`;
    const window = json(await f.call(root, 'GET', range(t0 + 1000, t0 + 3000)));
    assert.deepEqual(
      window.items.map((e: { outcome: string; subjectId: string }) => `${e.outcome}:${e.subjectId}`),
      ['Denied:u-2', 'Success:u-1'],
      'from inclusive, to exclusive',
    );
    const paged = json(await f.call(root, 'GET', `${range(t0, t0 + 4000)}&limit=1&offset=1`));
    assert.equal(paged.total, 4);
    assert.equal(paged.items.length, 1);
    assert.equal(paged.items[0].time, new Date(t0 + 2000).toISOString());
    assert.equal(json(await f.call(root, 'GET', 'audit?clientId=demo-spa&category=Token')).total, 1);
  });

  test('reading the audit log needs auth.admin.audit, not auth.admin.read', async () => {
    const reader = await f.caller('reader-only', ['auth.admin.read']);
    const auditor = await f.caller('auditor-only', ['auth.admin.audit']);
    const r = await f.call(reader.token, 'GET', 'audit');
    assert.equal(r.statusCode, 403);
    assert.deepEqual(json(r), {
      error: 'forbidden',
      error_description: 'NoMatchingGrant',
      permission: 'auth.admin.audit',
    });
    assert.equal((await f.call(auditor.token, 'GET', 'audit')).statusCode, 200);
    assert.equal((await f.call(auditor.token, 'GET', 'users')).statusCode, 403);
  });
});

describe('OpenAPI document', () => {
  test('served at {BasePath}/api/openapi.json, describing every route with its schemas and errors', async () => {
    const r = await f.call(undefined, 'GET', 'openapi.json');
    assert.equal(r.statusCode, 200);
    const doc = json(r);
    assert.equal(doc.openapi, '3.1.0');
    const paths = doc.paths as Record<
      string,
      Record<string, { responses: Record<string, unknown>; requestBody?: unknown }>
    >;
    for (const [path, methods] of [
      ['/users', ['get', 'post']],
      ['/users/{id}', ['get', 'patch', 'delete']],
      ['/users/{id}/password', ['put']],
      ['/users/{id}/enable', ['post']],
      ['/users/{id}/disable', ['post']],
      ['/users/{id}/unlock', ['post']],
      ['/roles', ['get', 'post']],
      ['/roles/{id}', ['get', 'patch', 'delete']],
      ['/permissions', ['get', 'post']],
      ['/permissions/{code}', ['get', 'patch', 'delete']],
      ['/clients', ['get', 'post']],
      ['/clients/{clientId}', ['get', 'patch', 'delete']],
      ['/clients/{clientId}/secret', ['post']],
      ['/audit', ['get']],
    ] as const) {
      for (const method of methods) {
        const op = paths[`${f.base}${path}`]?.[method];
        assert.ok(op, `${method} ${path} documented`);
        assert.ok(
          op.responses['400'] && op.responses['401'] && op.responses['403'],
          `${method} ${path} errors`,
        );
      }
    }
    const createUser = paths[`${f.base}/users`]!.post!;
    assert.ok(JSON.stringify(createUser.requestBody).includes('userName'));
    assert.ok(paths[`${f.base}/users`]!.post!.responses['409']);
    assert.ok(doc.components.securitySchemes.bearerAuth);
    const unlock = paths[`${f.base}/users/{id}/unlock`]!.post!.requestBody as { required: boolean };
    assert.equal(unlock.required, false, 'routes without a body document it as optional');
  });

  test('is a valid OpenAPI 3.1 document for an independent validator (@apidevtools/swagger-parser)', async () => {
    const doc = JSON.parse((await f.call(undefined, 'GET', 'openapi.json')).body);
    const api = await SwaggerParser.validate(doc);
    // Every route of the served document survives validation (the route set itself is checked above).
    assert.deepEqual(Object.keys(api.paths ?? {}), Object.keys(doc.paths));
    assert.ok(Object.keys(doc.paths).length >= 18);
  });
});

describe('base path', () => {
  test('must be a plain absolute path', () => {
    assert.equal(normalizeBasePath(undefined), '/auth-admin');
    assert.equal(normalizeBasePath('ops/admin/'), '/ops/admin');
    for (const bad of ['/', '', '/a b', '/a?b', '/../x', '/a//b']) {
      assert.throws(() => normalizeBasePath(bad), TypeError, bad);
    }
  });

  test('is configurable', async () => {
    const g = await adminFixture({ basePath: '/ops/admin/' });
    try {
      const { token } = await g.caller('root', ['auth.admin.**']);
      assert.equal(g.base, '/ops/admin/api');
      assert.equal((await g.call(token, 'GET', '/ops/admin/api/users')).statusCode, 200);
      assert.equal((await g.call(token, 'GET', '/auth-admin/api/users')).statusCode, 404);
    } finally {
      await g.close();
    }
  });
});
