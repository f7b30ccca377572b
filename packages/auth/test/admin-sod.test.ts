/**
 * Separation of duties (spec 001 "Authentication", rules 1–3), answered with 403 by the administration API:
 * 1. creating or updating a user that involves `Roles` needs `auth.admin.roles`; involving
 *    `DirectPermissions` or `DeniedPermissions` needs `auth.admin.permissions`;
 * 2. creating or updating a role that involves `Permissions` or `DeniedPermissions` needs
 *    `auth.admin.permissions`;
 * 3. creating or updating a client that involves `Permissions` needs `auth.admin.permissions`.
 * A refusal changes nothing but writes an `Admin`/`Denied` audit event (`separation_of_duties`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type AdminFixture, adminFixture } from './admin-fixture.ts';

let f: AdminFixture;
/** holds auth.admin.users only */
let usersAdmin: string;
/** holds auth.admin.users and auth.admin.roles */
let usersAndRoles: string;
/** holds auth.admin.users and auth.admin.permissions */
let usersAndPermissions: string;
/** holds auth.admin.roles only */
let rolesAdmin: string;
/** holds auth.admin.roles and auth.admin.permissions */
let rolesAndPermissions: string;
/** holds auth.admin.clients only */
let clientsAdmin: string;
/** holds auth.admin.clients and auth.admin.permissions */
let clientsAndPermissions: string;
/** holds auth.admin.** but a deny rule on auth.admin.permissions */
let allButPermissions: string;

before(async () => {
  f = await adminFixture();
  await f.store.createRole({ name: 'staff', permissions: ['shop.read'] });
  await f.store.createRole({ name: 'managers', permissions: ['shop.**'] });
  usersAdmin = (await f.caller('users-admin', ['auth.admin.users'])).token;
  usersAndRoles = (await f.caller('users-roles', ['auth.admin.users', 'auth.admin.roles'])).token;
  usersAndPermissions = (await f.caller('users-perms', ['auth.admin.users', 'auth.admin.permissions'])).token;
  rolesAdmin = (await f.caller('roles-admin', ['auth.admin.roles'])).token;
  rolesAndPermissions = (await f.caller('roles-perms', ['auth.admin.roles', 'auth.admin.permissions'])).token;
  clientsAdmin = (await f.caller('clients-admin', ['auth.admin.clients'])).token;
  clientsAndPermissions = (await f.caller('clients-perms', ['auth.admin.clients', 'auth.admin.permissions']))
    .token;
  allButPermissions = (await f.caller('all-but-perms', ['auth.admin.**'], ['auth.admin.permissions'])).token;
});
after(() => f.close());

type Method = 'POST' | 'PATCH';

async function records() {
  const all = { limit: 1000 };
  const [users, roles, clients] = await Promise.all([
    f.store.listUsers(all),
    f.store.listRoles(all),
    f.store.listClients(all),
  ]);
  return JSON.stringify({ users, roles, clients });
}

/** The request is refused with 403 naming field and permission; nothing changes; one Denied audit event. */
async function refused(
  token: string,
  method: Method,
  path: string,
  body: object,
  field: string,
  permission: string,
) {
  const before = await records();
  const auditBefore = (await f.store.listAudit({ limit: 1 })).total;
  const r = await f.call(token, method, path, body);
  assert.equal(r.statusCode, 403, r.body);
  assert.deepEqual(JSON.parse(r.body), {
    error: `changing '${field}' requires the permission '${permission}' (separation of duties)`,
  });
  assert.equal(await records(), before, 'nothing changed');
  const audit = await f.store.listAudit({ limit: 1 });
  assert.equal(audit.total, auditBefore + 1);
  const event = audit.items[0]!;
  assert.equal(event.category, 'Admin');
  assert.equal(event.outcome, 'Denied');
  assert.equal(event.failureCode, 'separation_of_duties');
  assert.equal(event.details?.field, field);
  assert.equal(event.details?.permission, permission);
}

async function allowed(
  token: string,
  method: Method,
  path: string,
  body: object,
  status = method === 'POST' ? 201 : 200,
) {
  const r = await f.call(token, method, path, body);
  assert.equal(r.statusCode, status, r.body);
  return JSON.parse(r.body);
}

describe('rule 1 — users: Roles need auth.admin.roles, Direct/DeniedPermissions need auth.admin.permissions', () => {
  test('create with roles', async () => {
    await refused(
      usersAdmin,
      'POST',
      'users',
      { userName: 'u1', roles: ['staff'] },
      'roles',
      'auth.admin.roles',
    );
    await refused(
      usersAndPermissions,
      'POST',
      'users',
      { userName: 'u1', roles: ['staff'] },
      'roles',
      'auth.admin.roles',
    );
    const user = await allowed(usersAndRoles, 'POST', 'users', { userName: 'u1', roles: ['staff'] });
    assert.deepEqual(user.roles, ['staff']);
  });

  test('create with direct or denied permissions', async () => {
    for (const field of ['directPermissions', 'deniedPermissions']) {
      const body = { userName: 'u2', [field]: ['shop.read'] };
      await refused(usersAdmin, 'POST', 'users', body, field, 'auth.admin.permissions');
      await refused(usersAndRoles, 'POST', 'users', body, field, 'auth.admin.permissions');
      await refused(allButPermissions, 'POST', 'users', body, field, 'auth.admin.permissions');
    }
    const user = await allowed(usersAndPermissions, 'POST', 'users', {
      userName: 'u2',
      directPermissions: ['shop.read'],
      deniedPermissions: ['shop.write'],
    });
    assert.deepEqual(user.directPermissions, ['shop.read']);
  });

  test('create without grants (or with empty lists) needs only auth.admin.users', async () => {
    const user = await allowed(usersAdmin, 'POST', 'users', {
      userName: 'u3',
      roles: [],
      directPermissions: [],
      deniedPermissions: [],
    });
    assert.deepEqual(user.roles, []);
  });

  test('update changing roles', async () => {
    const id = (await f.store.findUserByName('u3'))!.id;
    await refused(usersAdmin, 'PATCH', `users/${id}`, { roles: ['managers'] }, 'roles', 'auth.admin.roles');
    await refused(
      allButPermissions,
      'PATCH',
      `users/${id}`,
      { directPermissions: ['x.y'] },
      'directPermissions',
      'auth.admin.permissions',
    );
    assert.deepEqual((await allowed(usersAndRoles, 'PATCH', `users/${id}`, { roles: ['managers'] })).roles, [
      'managers',
    ]);
    await refused(usersAdmin, 'PATCH', `users/${id}`, { roles: [] }, 'roles', 'auth.admin.roles');
  });

  test('update changing direct or denied permissions', async () => {
    const id = (await f.store.findUserByName('u2'))!.id;
    await refused(
      usersAdmin,
      'PATCH',
      `users/${id}`,
      { directPermissions: ['shop.**'] },
      'directPermissions',
      'auth.admin.permissions',
    );
    await refused(
      usersAndRoles,
      'PATCH',
      `users/${id}`,
      { deniedPermissions: [] },
      'deniedPermissions',
      'auth.admin.permissions',
    );
    const user = await allowed(usersAndPermissions, 'PATCH', `users/${id}`, {
      directPermissions: ['shop.**'],
      deniedPermissions: [],
    });
    assert.deepEqual(user.directPermissions, ['shop.**']);
    assert.deepEqual(user.deniedPermissions, []);
  });

  test('an update that repeats the current roles and permissions does not change them and needs nothing more', async () => {
    const id = (await f.store.findUserByName('u1'))!.id;
    const user = await allowed(usersAdmin, 'PATCH', `users/${id}`, {
      userName: 'u1-renamed',
      roles: ['STAFF'],
      directPermissions: [],
      deniedPermissions: [],
    });
    assert.equal(user.userName, 'u1-renamed');
    assert.deepEqual(user.roles, ['staff']);
  });

  test('auth.admin.** covers all three', async () => {
    const root = (await f.caller('root', ['auth.admin.**'])).token;
    await allowed(root, 'POST', 'users', {
      userName: 'u4',
      roles: ['staff'],
      directPermissions: ['a.b'],
      deniedPermissions: ['c.d'],
    });
  });
});

describe('rule 2 — roles: Permissions and DeniedPermissions need auth.admin.permissions', () => {
  test('create', async () => {
    for (const field of ['permissions', 'deniedPermissions']) {
      await refused(
        rolesAdmin,
        'POST',
        'roles',
        { name: 'r1', [field]: ['shop.read'] },
        field,
        'auth.admin.permissions',
      );
      await refused(
        allButPermissions,
        'POST',
        'roles',
        { name: 'r1', [field]: ['shop.read'] },
        field,
        'auth.admin.permissions',
      );
    }
    const empty = await allowed(rolesAdmin, 'POST', 'roles', {
      name: 'r-empty',
      description: 'no rules',
      permissions: [],
    });
    assert.deepEqual(empty.permissions, []);
    const role = await allowed(rolesAndPermissions, 'POST', 'roles', {
      name: 'r1',
      permissions: ['shop.read'],
      deniedPermissions: ['shop.write'],
    });
    assert.deepEqual(role.deniedPermissions, ['shop.write']);
  });

  test('update', async () => {
    const role = (await f.store.findRoleByName('r1'))!;
    await refused(
      rolesAdmin,
      'PATCH',
      `roles/${role.id}`,
      { permissions: ['shop.**'] },
      'permissions',
      'auth.admin.permissions',
    );
    await refused(
      rolesAdmin,
      'PATCH',
      `roles/${role.id}`,
      { deniedPermissions: [] },
      'deniedPermissions',
      'auth.admin.permissions',
    );
    const renamed = await allowed(rolesAdmin, 'PATCH', `roles/${role.id}`, {
      name: 'r1-renamed',
      permissions: ['Shop.Read'],
    });
    assert.equal(renamed.name, 'r1-renamed');
    const changed = await allowed(rolesAndPermissions, 'PATCH', `roles/${role.id}`, {
      permissions: ['shop.**'],
    });
    assert.deepEqual(changed.permissions, ['shop.**']);
  });
});

describe('rule 3 — clients: Permissions need auth.admin.permissions', () => {
  test('create', async () => {
    const body = { clientId: 'svc', clientType: 'confidential', permissions: ['shop.read'] };
    await refused(clientsAdmin, 'POST', 'clients', body, 'permissions', 'auth.admin.permissions');
    await refused(allButPermissions, 'POST', 'clients', body, 'permissions', 'auth.admin.permissions');
    await allowed(clientsAdmin, 'POST', 'clients', {
      clientId: 'plain',
      clientType: 'public',
      permissions: [],
    });
    const client = await allowed(clientsAndPermissions, 'POST', 'clients', body);
    assert.deepEqual(client.permissions, ['shop.read']);
  });

  test('update', async () => {
    await refused(
      clientsAdmin,
      'PATCH',
      'clients/svc',
      { permissions: ['shop.**'] },
      'permissions',
      'auth.admin.permissions',
    );
    await refused(
      clientsAdmin,
      'PATCH',
      'clients/svc',
      { permissions: [] },
      'permissions',
      'auth.admin.permissions',
    );
    const same = await allowed(clientsAdmin, 'PATCH', 'clients/svc', {
      displayName: 'Service',
      permissions: ['shop.read'],
    });
    assert.equal(same.displayName, 'Service');
    const changed = await allowed(clientsAndPermissions, 'PATCH', 'clients/svc', {
      permissions: ['shop.**'],
    });
    assert.deepEqual(changed.permissions, ['shop.**']);
  });
});
