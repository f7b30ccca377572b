/**
 * The administration API inside the real auth server (issue 6 with issues 4 and 5): tokens issued by the
 * server's own token endpoint (password grant of the bootstrap client `demo-service`) call the API, and the
 * account changes the API makes take effect on sign-in and on tokens already issued — a password set or a
 * disable refuses earlier access tokens (`SubjectDisabled`) and their refresh tokens; a disabled account
 * cannot sign in; an unlock lets a locked-out account in again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type AuthServer, buildAuthServer } from '../src/server.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';

const ADMIN_PASSWORD = 'admin-password-srv';
const SERVICE_SECRET = 'demo-service-secret-srv';

let server: AuthServer;
let base: string;
let admin: string;

interface TokenResponse {
  access_token?: string;
  refresh_token?: string;
  error?: string;
}

async function token(params: Record<string, string>): Promise<{ status: number; body: TokenResponse }> {
  const res = await fetch(`${base}/connect/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`demo-service:${SERVICE_SECRET}`).toString('base64')}`,
    },
    body: new URLSearchParams(params),
  });
  return { status: res.status, body: (await res.json()) as TokenResponse };
}

const signIn = (username: string, password: string) =>
  token({ grant_type: 'password', username, password, scope: 'offline_access' });

async function call(bearer: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}/auth-admin/api/${path}`, {
    method,
    headers: {
      authorization: `Bearer ${bearer}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

before(async () => {
  server = await buildAuthServer({
    store: new SqliteAuthStore(),
    hashParams: { ln: 10, r: 8, p: 1 },
    maxAccessFailedCount: 3,
    bootstrap: { adminPassword: ADMIN_PASSWORD, demoClientSecret: SERVICE_SECRET },
  });
  base = await server.listen(0, '127.0.0.1');
  const signedIn = await signIn('admin', ADMIN_PASSWORD);
  assert.equal(signedIn.status, 200, JSON.stringify(signedIn.body));
  admin = signedIn.body.access_token!;
});
after(() => server?.app.close());

describe('administration API in the auth server', () => {
  test('the bootstrap administrator’s token from the token endpoint manages users', async () => {
    const created = await call(admin, 'POST', 'users', {
      userName: 'bob',
      password: 'bob-password-1',
      directPermissions: ['auth.admin.read'],
    });
    assert.equal(created.status, 201);
    const event = (await server.store.listAudit({ category: 'Admin', limit: 1 })).items[0]!;
    assert.equal(event.subjectName, 'admin');
    assert.equal(event.clientId, 'demo-service');
  });

  test('a password set through the API refuses the earlier access and refresh tokens', async () => {
    const bob = await signIn('bob', 'bob-password-1');
    assert.equal(bob.status, 200);
    assert.equal((await call(bob.body.access_token!, 'GET', 'users')).status, 200);
    const id = (await server.store.findUserByName('bob'))!.id;
    assert.equal(
      (await call(admin, 'PUT', `users/${id}/password`, { password: 'bob-password-2' })).status,
      204,
    );
    const refused = await call(bob.body.access_token!, 'GET', 'users');
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error_description, 'SubjectDisabled');
    assert.equal(
      (await token({ grant_type: 'refresh_token', refresh_token: bob.body.refresh_token! })).body.error,
      'invalid_grant',
    );
    assert.equal(
      (await signIn('bob', 'bob-password-1')).body.error,
      'invalid_grant',
      'the old password is gone',
    );
    assert.equal((await signIn('bob', 'bob-password-2')).status, 200, 'the new password works');
  });

  test('disable refuses sign-in and earlier tokens; enable lets the account sign in again', async () => {
    const bob = await signIn('bob', 'bob-password-2');
    const id = (await server.store.findUserByName('bob'))!.id;
    assert.equal((await call(admin, 'POST', `users/${id}/disable`)).status, 200);
    assert.equal(
      (await call(bob.body.access_token!, 'GET', 'users')).body.error_description,
      'SubjectDisabled',
    );
    assert.equal((await signIn('bob', 'bob-password-2')).body.error, 'invalid_grant');
    assert.equal((await call(admin, 'POST', `users/${id}/enable`)).status, 200);
    assert.equal((await signIn('bob', 'bob-password-2')).status, 200);
  });

  test('unlock lets a locked-out account sign in again before the lockout ends', async () => {
    for (let i = 0; i < 3; i++)
      assert.equal((await signIn('bob', 'wrong-password')).body.error, 'invalid_grant');
    assert.equal((await signIn('bob', 'bob-password-2')).body.error, 'invalid_grant', 'locked out');
    const id = (await server.store.findUserByName('bob'))!.id;
    const locked = await call(admin, 'GET', `users/${id}`);
    assert.equal(locked.body.isLockedOut, true);
    const unlocked = await call(admin, 'POST', `users/${id}/unlock`);
    assert.equal(unlocked.body.isLockedOut, false);
    assert.equal((await signIn('bob', 'bob-password-2')).status, 200);
    const audit = await call(admin, 'GET', `audit?outcome=Denied&subject=${id}`);
    assert.ok(audit.body.items.some((e: { failureCode: string }) => e.failureCode === 'locked_out'));
  });

  test('a client disabled through the API can no longer get tokens', async () => {
    const created = await call(admin, 'POST', 'clients', {
      clientId: 'nightly',
      clientType: 'confidential',
      allowedGrantTypes: ['client_credentials'],
    });
    const secret = created.body.clientSecret as string;
    const ask = () =>
      fetch(`${base}/connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: 'nightly',
          client_secret: secret,
        }),
      });
    assert.equal((await ask()).status, 200, 'the generated secret authenticates the client');
    assert.equal((await call(admin, 'PATCH', 'clients/nightly', { isEnabled: false })).status, 200);
    const refused = await ask();
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as TokenResponse).error, 'invalid_client');
  });
});
