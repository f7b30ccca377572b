/**
 * Every error row of spec 001 "Errors › Administration API" (400, 403, 404, 409 with body `{ "error" }`)
 * and the permission middleware's 401/403 on the administration routes. Each refused change leaves the
 * store exactly as it was (users, roles, permissions, clients and the audit log).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import { ADMINISTRATOR_ROLE_ID } from '../src/store/migrations.ts';
import { type AdminFixture, adminFixture, snapshot } from './admin-fixture.ts';

let f: AdminFixture;
let root: string;
let userId: string;
let roleId: string;

before(async () => {
  f = await adminFixture();
  root = (await f.caller('root', ['auth.admin.**'])).token;
  userId = (await f.store.createUser({ userName: 'existing' })).id;
  roleId = (await f.store.createRole({ name: 'existing-role' })).id;
  await f.store.createPermission({ code: 'existing.code' });
  await f.store.createClient({ clientId: 'existing-client', clientType: 'public' });
});
after(() => f.close());

/** Asserts the spec's error body: JSON object with exactly one string field `error`. */
function assertError(r: LightMyRequestResponse, status: number, message?: RegExp) {
  assert.equal(r.statusCode, status, `${status} expected, got ${r.statusCode}: ${r.body}`);
  assert.match(String(r.headers['content-type']), /^application\/json/);
  const body = JSON.parse(r.body);
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(typeof body.error, 'string');
  assert.ok(body.error.length > 0);
  if (message) assert.match(body.error, message);
}

/** Runs a request that must fail with `status` and change nothing. */
async function refused(
  status: number,
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
  path: string,
  body?: unknown,
  message?: RegExp,
  headers?: Record<string, string>,
) {
  const before = await snapshot(f.store);
  const r = await f.call(root, method, path, body, headers);
  assertError(r, status, message);
  assert.equal(await snapshot(f.store), before, `${method} ${path} changed nothing`);
}

describe('400 — required field missing', () => {
  test('user name', () =>
    refused(400, 'POST', 'users', { password: 'long enough pw' }, /^userName: required/));
  test('blank user name', () => refused(400, 'POST', 'users', { userName: '   ' }, /^userName: required/));
  test('password (set password)', () =>
    refused(400, 'PUT', `users/${userId}/password`, {}, /^password: required/));
  test('client id', () => refused(400, 'POST', 'clients', { clientType: 'public' }, /^clientId: required/));
  test('client type', () => refused(400, 'POST', 'clients', { clientId: 'c-new' }, /^clientType: required/));
  test('role name', () => refused(400, 'POST', 'roles', { description: 'x' }, /^name: required/));
  test('permission code', () => refused(400, 'POST', 'permissions', { description: 'x' }, /^code: required/));
  test('no body at all', () => refused(400, 'POST', 'users', undefined, /^body: must be object/));
  test('empty update', () => refused(400, 'PATCH', `users/${userId}`, {}, /at least 1 field/));
});

describe('400 — body not JSON', () => {
  test('malformed JSON', () =>
    refused(400, 'POST', 'users', '{"userName": "x"', /not valid JSON/, {
      'content-type': 'application/json',
    }));
  test('form-encoded body', () =>
    refused(400, 'POST', 'users', 'userName=formuser', /must be JSON/, {
      'content-type': 'application/x-www-form-urlencoded',
    }));
  test('text body', () =>
    refused(400, 'POST', 'roles', '{"name":"r"}', /must be JSON/, { 'content-type': 'text/plain' }));
  test('body without content type', () => refused(400, 'POST', 'roles', '{"name":"r"}', /must be JSON/));
  test('empty JSON body', () =>
    refused(400, 'POST', 'users', '', undefined, { 'content-type': 'application/json' }));
  test('JSON array instead of an object', () =>
    refused(400, 'POST', 'users', [{ userName: 'x' }], /must be object/));
  test('JSON null', () =>
    refused(400, 'POST', 'users', 'null', /must be object/, { 'content-type': 'application/json' }));
  test('prototype poisoning', () =>
    refused(400, 'POST', 'users', '{"userName":"p","__proto__":{"x":1}}', undefined, {
      'content-type': 'application/json',
    }));
});

describe('400 — permission code cannot be normalized', () => {
  test('in a user’s direct permissions', () =>
    refused(
      400,
      'POST',
      'users',
      { userName: 'n', directPermissions: ['ok.code', 'bad..code'] },
      /^directPermissions\[1\]:/,
    ));
  test('in a user’s denied permissions (update)', () =>
    refused(
      400,
      'PATCH',
      `users/${userId}`,
      { deniedPermissions: ['Spaces Not Allowed'] },
      /^deniedPermissions\[0\]:/,
    ));
  test('in a role', () =>
    refused(400, 'POST', 'roles', { name: 'r1', permissions: ['a.**.b'] }, /^permissions\[0\]:/));
  test('in a client', () =>
    refused(
      400,
      'POST',
      'clients',
      { clientId: 'c1', clientType: 'public', permissions: ['ümlaut'] },
      /^permissions\[0\]:/,
    ));
  test('a catalog code with a wildcard', () =>
    refused(400, 'POST', 'permissions', { code: 'shop.*' }, /^code:/));
  test('a catalog code in the path', () => refused(400, 'GET', 'permissions/bad..code', undefined, /^code:/));
  test('a catalog code in the path of a delete', () =>
    refused(400, 'DELETE', 'permissions/a%20b', undefined, /^code:/));
});

describe('400 — storage constraint', () => {
  test('a built-in system role cannot be deleted', () =>
    refused(400, 'DELETE', `roles/${ADMINISTRATOR_ROLE_ID}`, undefined, /system role/));
  test('a built-in system role cannot be renamed', () =>
    refused(400, 'PATCH', `roles/${ADMINISTRATOR_ROLE_ID}`, { name: 'boss' }, /system role/));
  test('a built-in system role keeps its rules', () =>
    refused(
      400,
      'PATCH',
      `roles/${ADMINISTRATOR_ROLE_ID}`,
      { permissions: ['auth.admin.read'] },
      /system role/,
    ));
  test('a user cannot get a role that does not exist', () =>
    refused(
      400,
      'POST',
      'users',
      { userName: 'ghost-holder', roles: ['no-such-role'] },
      /^roles\[0\]: role 'no-such-role' does not exist/,
    ));
  test('an invalid role name', () => refused(400, 'POST', 'roles', { name: '<script>' }, /^name:/));
  test('an invalid client id', () =>
    refused(400, 'POST', 'clients', { clientId: 'a b', clientType: 'public' }, /^clientId:/));
  test('a redirect URI with a fragment', () =>
    refused(
      400,
      'POST',
      'clients',
      { clientId: 'frag', clientType: 'public', redirectUris: ['https://x.test/cb#f'] },
      /^redirectUris\[0\]:/,
    ));
  test('an unknown grant type', () =>
    refused(
      400,
      'POST',
      'clients',
      { clientId: 'gt', clientType: 'public', allowedGrantTypes: ['implicit'] },
      /^allowedGrantTypes\[0\]: must be one of/,
    ));
  test('an unknown field', () =>
    refused(400, 'POST', 'roles', { name: 'r2', isSystem: true }, /unknown field 'isSystem'/));
  test('a wrong type', () =>
    refused(400, 'PATCH', `users/${userId}`, { isEnabled: 'false' }, /^isEnabled: must be boolean/));
  test('a wrong type inside a list', () =>
    refused(
      400,
      'POST',
      'users',
      { userName: 'typed', roles: ['staff', 7] },
      /^roles\[1\]: must be string$/,
    ));
  test('an oversized string', () =>
    refused(400, 'POST', 'roles', { name: 'r'.repeat(65) }, /^name: must NOT have more than 64 characters$/));
  test('a bad query parameter', () => refused(400, 'GET', 'users?limit=0', undefined, /^querystring\.limit/));
  test('an unknown query parameter', () =>
    refused(400, 'GET', 'audit?user=x', undefined, /unknown field 'user'/));
  test('a bad audit time', () =>
    refused(400, 'GET', 'audit?from=yesterday', undefined, /^querystring\.from/));
  test('an empty audit time range', () =>
    refused(400, 'GET', 'audit?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z', undefined, /from/));
});

describe('long identifiers and malformed URLs (server options from adminServerOptions)', () => {
  test('a 128-character client id and a 256-character permission code are addressable', async () => {
    const clientId = 'c'.repeat(128);
    assert.equal((await f.call(root, 'POST', 'clients', { clientId, clientType: 'public' })).statusCode, 201);
    assert.equal((await f.call(root, 'GET', `clients/${clientId}`)).statusCode, 200);
    const code = Array.from({ length: 4 }, (_, i) => `${i}`.repeat(63)).join('.');
    assert.equal(code.length, 255);
    assert.equal((await f.call(root, 'POST', 'permissions', { code })).statusCode, 201);
    assert.equal((await f.call(root, 'GET', `permissions/${code}`)).statusCode, 200);
    assert.equal((await f.call(root, 'DELETE', `permissions/${code}`)).statusCode, 204);
    assert.equal((await f.call(root, 'DELETE', `clients/${clientId}`)).statusCode, 204);
  });
  test('a malformed percent-encoding → 400 with the spec body', () =>
    refused(400, 'GET', `${f.base}/users/%ZZ`, undefined, /not a valid url component/));
  test('an over-long path parameter → 414 with the spec body', () =>
    refused(
      414,
      'GET',
      `${f.base}/permissions/${'a'.repeat(300)}`,
      undefined,
      /exceeding the max param length/,
    ));
  test('outside the API, Fastify keeps its own answer', async () => {
    const r = await f.call(root, 'GET', '/elsewhere/%ZZ');
    assert.equal(r.statusCode, 400);
    assert.equal(JSON.parse(r.body).code, 'FST_ERR_BAD_URL');
  });
});

describe('404 — target absent', () => {
  const missing = '00000000-0000-4000-8000-00000000dead';
  for (const [method, path, body] of [
    ['GET', `users/${missing}`],
    ['PATCH', `users/${missing}`, { userName: 'x' }],
    ['DELETE', `users/${missing}`],
    ['PUT', `users/${missing}/password`, { password: 'long enough pw' }],
    ['POST', `users/${missing}/enable`],
    ['POST', `users/${missing}/disable`],
    ['POST', `users/${missing}/unlock`],
    ['GET', `roles/${missing}`],
    ['PATCH', `roles/${missing}`, { description: 'x' }],
    ['DELETE', `roles/${missing}`],
    ['GET', 'permissions/no.such.code'],
    ['PATCH', 'permissions/no.such.code', { description: 'x' }],
    ['DELETE', 'permissions/no.such.code'],
    ['GET', 'clients/no-such-client'],
    ['PATCH', 'clients/no-such-client', { isEnabled: false }],
    ['DELETE', 'clients/no-such-client'],
    ['POST', 'clients/no-such-client/secret'],
    ['GET', 'no-such-route'],
  ] as const) {
    test(`${method} ${path.replace(missing, '{missing}')}`, () =>
      refused(404, method, path, body, /not found|no route/));
  }
});

describe('409 — uniqueness conflict', () => {
  test('user name (case-insensitive)', () =>
    refused(409, 'POST', 'users', { userName: 'EXISTING' }, /already exists/));
  test('user rename onto another user', () =>
    refused(409, 'PATCH', `users/${userId}`, { userName: 'root' }, /already exists/));
  test('role name', () => refused(409, 'POST', 'roles', { name: 'Existing-Role' }, /already exists/));
  test('role rename onto the system role', () =>
    refused(409, 'PATCH', `roles/${roleId}`, { name: 'administrator' }, /already exists/));
  test('client id', () =>
    refused(409, 'POST', 'clients', { clientId: 'existing-client', clientType: 'public' }, /already exists/));
  test('permission code', () =>
    refused(409, 'POST', 'permissions', { code: 'Existing.Code' }, /already exists/));
});

describe('409 under concurrency — the unique constraint decides, not a read-then-write check', () => {
  test('concurrent creates of one user name: one 201, the rest 409, one audit event', async () => {
    const before = (await f.store.listAudit({ category: 'Admin', limit: 1 })).total;
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        f.call(root, 'POST', 'users', { userName: i % 2 ? 'RACE' : 'race' }),
      ),
    );
    assert.deepEqual(answers.map((r) => r.statusCode).sort(), [201, 409, 409, 409, 409, 409]);
    assert.equal((await f.store.listUsers({ search: 'race' })).total, 1);
    assert.equal((await f.store.listAudit({ category: 'Admin', limit: 1 })).total, before + 1);
  });
});

describe('401/403 of the permission middleware on the administration routes', () => {
  async function denied(
    token: string | undefined,
    method: 'GET' | 'POST',
    path: string,
    status: number,
    expected: object,
    header?: string,
  ) {
    const before = await snapshot(f.store);
    const r = await f.call(token, method, path, method === 'POST' ? { userName: 'intruder' } : undefined);
    assert.equal(r.statusCode, status, r.body);
    assert.deepEqual(JSON.parse(r.body), expected);
    assert.equal(r.headers['www-authenticate'], header);
    assert.equal(await snapshot(f.store), before);
  }

  test('no token → 401 unauthorized', () =>
    denied(
      undefined,
      'POST',
      'users',
      401,
      { error: 'unauthorized', error_description: 'GuestNotAllowed', permission: 'auth.admin.users' },
      'Bearer',
    ));
  test('garbage token → 401 invalid_token', () =>
    denied(
      'not.a.jwt',
      'GET',
      'users',
      401,
      { error: 'invalid_token', error_description: 'InvalidCredential', permission: null },
      'Bearer error="invalid_token"',
    ));
  test('expired token → 401 invalid_token', async () => {
    const user = (await f.store.findUserByName('root'))!;
    const expired = await f.token(user, { expiresInSec: -60 });
    await denied(
      expired,
      'GET',
      'users',
      401,
      { error: 'invalid_token', error_description: 'InvalidCredential', permission: null },
      'Bearer error="invalid_token"',
    );
  });
  test('reader without the area permission → 403 forbidden NoMatchingGrant', async () => {
    const { token } = await f.caller('reader', ['auth.admin.read']);
    await denied(token, 'POST', 'users', 403, {
      error: 'forbidden',
      error_description: 'NoMatchingGrant',
      permission: 'auth.admin.users',
    });
  });
  test('a deny rule wins over auth.admin.** → 403 DeniedByRule', async () => {
    const { token } = await f.caller('almost-root', ['auth.admin.**'], ['auth.admin.users']);
    await denied(token, 'POST', 'users', 403, {
      error: 'forbidden',
      error_description: 'DeniedByRule',
      permission: 'auth.admin.users',
    });
    assert.equal((await f.call(token, 'GET', 'users')).statusCode, 200);
  });
  test('a token of a disabled administrator → 403 SubjectDisabled', async () => {
    const { user, token } = await f.caller('gone-admin', ['auth.admin.**']);
    await f.store.updateUser(user.id, { isEnabled: false });
    await denied(token, 'GET', 'users', 403, {
      error: 'forbidden',
      error_description: 'SubjectDisabled',
      permission: null,
    });
  });
  test('a locked-out administrator → 403 SubjectDisabled', async () => {
    const { user, token } = await f.caller('locked-admin', ['auth.admin.**']);
    await f.store.lockUser(user.id, Date.now() + 60_000);
    await denied(token, 'GET', 'users', 403, {
      error: 'forbidden',
      error_description: 'SubjectDisabled',
      permission: null,
    });
  });
  test('OnDenied replaces the default denial body; status and WWW-Authenticate stay', async () => {
    const g = await adminFixture({
      onDenied: (_request, _reply, denied) => ({
        problem: denied.body.error_description,
        code: denied.status,
      }),
    });
    try {
      const r = await g.call(undefined, 'GET', 'users');
      assert.equal(r.statusCode, 401);
      assert.equal(r.headers['www-authenticate'], 'Bearer');
      assert.deepEqual(JSON.parse(r.body), { problem: 'GuestNotAllowed', code: 401 });
    } finally {
      await g.close();
    }
  });
});
