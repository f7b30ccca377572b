/**
 * Two auth server processes on one real PostgreSQL (issue 21), started together on an empty database,
 * behind a round-robin proxy that is their issuer. Every guarantee holds across the instances because the
 * database enforces it: the authorization-code flow (oauth4webapi) with the login on one instance and
 * the code exchange on the other, single-use codes, refresh rotation with reuse detection, client
 * credentials, the administration API (a role change on A changes B's permission decision), the lockout
 * race (50 concurrent wrong passwords over both: exactly 5 counted), and key rotation (a rotation on A is
 * in B's JWKS at once; tokens of the old and the new key verify on both).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oauth from 'oauth4webapi';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { PostgresAuthStore } from '../src/store/postgres.ts';
import {
  type Instance,
  type RoundRobinProxy,
  startInstance,
  startRoundRobinProxy,
} from './multi-instance-fixture.ts';
import { basic, CookieJar, pkcePair, postForm } from './oauth-fixtures.ts';

const ADMIN_PASSWORD = 'admin-password-1';
const SECRET = 'demo-service-secret-1';
const REDIRECT = 'http://127.0.0.1:3000/callback';
const insecure = { [oauth.allowInsecureRequests]: true } as const;
const spa: oauth.Client = { client_id: 'demo-spa' };
const service: oauth.Client = { client_id: 'demo-service' };

let cluster: PostgresCluster;
let store: PostgresAuthStore;
let proxy: RoundRobinProxy;
let a: Instance;
let b: Instance;
let as: oauth.AuthorizationServer;
/** The issuer's metadata with the token endpoint of one instance. */
const at = (instance: Instance): oauth.AuthorizationServer => ({
  ...as,
  token_endpoint: `${instance.base}/connect/token`,
  introspection_endpoint: `${instance.base}/connect/introspect`,
});

before(async () => {
  cluster = await startPostgres();
  const url = await cluster.createDatabase('auth');
  proxy = await startRoundRobinProxy();
  const env = {
    AUTH_DATABASE_URL: url,
    AUTH_ISSUER: proxy.base,
    AUTH_ADMIN_PASSWORD: ADMIN_PASSWORD,
    AUTH_DEMO_CLIENT_SECRET: SECRET,
    // The lockout race sends 50 wrong passwords for one account: the brute-force limits (tested in
    // ratelimit-postgres.test.ts) would refuse some before the lockout counts them.
    AUTH_RATE_LIMIT_PASSWORD_ACCOUNT: 'off',
  };
  // Both start at once on the empty database: migrations, the first signing key and the bootstrap race.
  [a, b] = await Promise.all([startInstance(env), startInstance(env)]);
  proxy.targets = [a.base, b.base];
  store = await PostgresAuthStore.open({ url, maxConnections: 4 });
  const issuer = new URL(proxy.base);
  as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
});

after(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await proxy?.stop();
  await store?.close();
  await cluster?.stop();
});

/** A password grant of `demo-service` at `base`. */
async function passwordGrant(base: string, username: string, password: string) {
  const res = await postForm(
    base,
    '/connect/token',
    { grant_type: 'password', username, password, scope: 'offline_access' },
    { authorization: basic('demo-service', SECRET) },
  );
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

describe('two instances on one PostgreSQL', () => {
  test('started together on an empty database: one bootstrap, one schema, both ready', async () => {
    for (const instance of [a, b]) assert.equal((await fetch(`${instance.base}/readyz`)).status, 200);
    assert.equal((await store.listUsers()).total, 1, 'one administrator');
    assert.deepEqual(
      (await store.listClients()).items.map((c) => c.clientId),
      ['demo-service', 'demo-spa'],
    );
    assert.deepEqual(await store.appliedMigrations(), PostgresAuthStore.migrations);
  });

  test('authorization code + PKCE and refresh: sign in on A and B, code from B, exchange and rotation on A, replays on B refused', async () => {
    await store.createUser({ userName: 'alice', passwordHash: await hash('alice-password-1') });
    const jar = new CookieJar();
    // GET /login on one instance, POST on the other: CSRF and the session cookie hold on both.
    const page = await fetch(`${a.base}/login`);
    jar.take(page);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1];
    const login = await postForm(
      b.base,
      '/login',
      { _csrf: csrf!, username: 'alice', password: 'alice-password-1' },
      { cookie: jar.header() },
    );
    jar.take(login);
    assert.equal(login.status, 302);
    assert.doesNotMatch(login.headers.get('location') ?? '', /err=1/);
    const { verifier, challenge } = pkcePair();
    const state = oauth.generateRandomState();
    const authorized = await fetch(
      `${b.base}/connect/authorize?${new URLSearchParams({
        response_type: 'code',
        client_id: 'demo-spa',
        redirect_uri: REDIRECT,
        scope: 'openid offline_access',
        code_challenge: challenge,
        code_challenge_method: 'S256',
        state,
      })}`,
      { headers: { cookie: jar.header() }, redirect: 'manual' },
    );
    assert.equal(authorized.status, 302);
    const callback = new URL(authorized.headers.get('location')!);
    const params = oauth.validateAuthResponse(as, spa, callback, state);
    const exchange = () =>
      oauth.authorizationCodeGrantRequest(at(a), spa, oauth.None(), params, REDIRECT, verifier, insecure);
    const tokens = await oauth.processAuthorizationCodeResponse(at(a), spa, await exchange(), {
      requireIdToken: true,
    });
    assert.equal(oauth.getValidatedIdTokenClaims(tokens)?.iss, proxy.base);
    // Refresh rotation on A; the replay of the used token on B revokes the family.
    const rotated = await oauth.processRefreshTokenResponse(
      at(a),
      spa,
      await oauth.refreshTokenGrantRequest(at(a), spa, oauth.None(), tokens.refresh_token!, insecure),
    );
    const reuse = await oauth.refreshTokenGrantRequest(
      at(b),
      spa,
      oauth.None(),
      tokens.refresh_token!,
      insecure,
    );
    assert.equal(((await reuse.json()) as { error: string }).error, 'invalid_grant');
    const successor = await oauth.refreshTokenGrantRequest(
      at(a),
      spa,
      oauth.None(),
      rotated.refresh_token!,
      insecure,
    );
    assert.equal(
      ((await successor.json()) as { error: string }).error,
      'invalid_grant',
      'the successor issued by A was revoked with its family by B',
    );
    const replay = await oauth.authorizationCodeGrantRequest(
      at(b),
      spa,
      oauth.None(),
      params,
      REDIRECT,
      verifier,
      insecure,
    );
    assert.equal(replay.status, 400);
    assert.equal(
      ((await replay.json()) as { error: string }).error,
      'invalid_grant',
      'a code is used once, on any instance',
    );

    const reuses = await store.listAudit({ category: 'Token', outcome: 'Denied' });
    assert.ok(reuses.items.some((e) => e.failureCode === 'refresh_token_reuse'));
  });

  test('client credentials through the proxy: tokens from either instance introspect active on both', async () => {
    const issued = [];
    for (let i = 0; i < 4; i++) {
      issued.push(
        await oauth.processClientCredentialsResponse(
          as,
          service,
          await oauth.clientCredentialsGrantRequest(
            as,
            service,
            oauth.ClientSecretBasic(SECRET),
            {},
            insecure,
          ),
        ),
      );
    }
    assert.ok((proxy.counts.get(a.base) ?? 0) > 0 && (proxy.counts.get(b.base) ?? 0) > 0);
    for (const tokens of issued) {
      for (const instance of [a, b]) {
        const info = await oauth.processIntrospectionResponse(
          at(instance),
          service,
          await oauth.introspectionRequest(
            at(instance),
            service,
            oauth.ClientSecretBasic(SECRET),
            tokens.access_token,
            insecure,
          ),
        );
        assert.equal(info.active, true);
      }
    }
  });

  test('a client disabled through the database is refused by both instances before its cache entry expires (dropped by NOTIFY)', async () => {
    await store.createClient({
      clientId: 'svc2',
      clientType: 'confidential',
      secretHash: await hash('svc2-secret-1'),
      allowedGrantTypes: ['client_credentials'],
      allowedScopes: ['api'],
    });
    const grant = (instance: Instance) =>
      postForm(
        instance.base,
        '/connect/token',
        { grant_type: 'client_credentials', scope: 'api' },
        {
          authorization: basic('svc2', 'svc2-secret-1'),
        },
      );
    // Cached from here on: the instances keep a client for 5 s (clientCacheTtlMs).
    const cachedAt = Date.now();
    for (const instance of [a, b]) assert.equal((await grant(instance)).status, 200, 'cached as enabled');
    await store.updateClient('svc2', { isEnabled: false });
    // Polling ends 4 s after the entries were cached, before they expire, so a refusal within it can only
    // come from the change notification (however slowly a loaded machine delivers it within that time).
    for (const instance of [a, b]) {
      let status = (await grant(instance)).status;
      while (status === 200 && Date.now() < cachedAt + 4000) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        status = (await grant(instance)).status;
      }
      assert.equal(status, 401, `${instance.base} refuses the disabled client`);
    }
  });

  test('admin API: a role change on A changes the permission decision on B for a token already issued', async () => {
    const admin = (await passwordGrant(a.base, 'admin', ADMIN_PASSWORD)).body.access_token!;
    const call = (base: string, token: string, method: string, path: string, body?: unknown) =>
      fetch(`${base}/auth-admin/api/${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
    const created = await call(a.base, admin, 'POST', 'roles', {
      name: 'viewers',
      permissions: ['auth.admin.read'],
    });
    assert.equal(created.status, 201);
    const role = (await created.json()) as { id: string };
    assert.equal(
      (
        await call(b.base, admin, 'POST', 'users', {
          userName: 'vera',
          password: 'vera-password-1',
          roles: ['viewers'],
        })
      ).status,
      201,
    );
    const vera = (await passwordGrant(b.base, 'vera', 'vera-password-1')).body.access_token!;
    assert.equal((await call(b.base, vera, 'GET', 'users')).status, 200, 'B grants the read');
    assert.equal((await call(a.base, admin, 'PATCH', `roles/${role.id}`, { permissions: [] })).status, 200);
    assert.equal(
      (await call(b.base, vera, 'GET', 'users')).status,
      403,
      'B denies it after A changed the role',
    );
    assert.equal(
      (await call(a.base, admin, 'PATCH', `roles/${role.id}`, { permissions: ['auth.admin.read'] })).status,
      200,
    );
    assert.equal((await call(b.base, vera, 'GET', 'users')).status, 200, 'and grants it again');
  });

  test('lockout race: 50 concurrent wrong passwords over both instances count exactly 5, then the account is locked', async () => {
    const victim = await store.createUser({
      userName: 'victim',
      passwordHash: await hash('victim-password-1'),
    });
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => passwordGrant(i % 2 ? a.base : b.base, 'victim', `wrong-${i}`)),
    );
    assert.ok(results.every((r) => r.status === 400 && r.body.error === 'invalid_grant'));
    const events = (await store.listAudit({ subjectId: victim.id, limit: 100 })).items;
    const byCode = (code: string) => events.filter((e) => e.failureCode === code).length;
    assert.equal(byCode('invalid_credentials'), 5, 'exactly five passwords were checked');
    assert.equal(byCode('locked_out'), 45, 'the other 45 were refused by the lockout');
    const locked = (await store.getUser(victim.id))!;
    assert.ok(locked.lockoutEnd !== null && locked.lockoutEnd > Date.now());
    const right = await passwordGrant(a.base, 'victim', 'victim-password-1');
    assert.equal(right.body.error, 'invalid_grant', 'the right password is refused while locked');
  });

  test('key rotation on A: B serves the new key at once, tokens of the old and new key verify on both', async () => {
    const before = (await passwordGrant(a.base, 'admin', ADMIN_PASSWORD)).body.access_token!;
    const kid = await a.rotate();
    const listsNewKey = async () => {
      const jwks = (await (await fetch(`${b.base}/.well-known/jwks.json`)).json()) as {
        keys: { kid: string }[];
      };
      return jwks.keys.some((k) => k.kid === kid);
    };
    let listed = await listsNewKey();
    // Up to 30 s: a loaded machine may deliver the change late.
    for (const end = Date.now() + 30_000; !listed && Date.now() < end; ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      listed = await listsNewKey();
    }
    assert.ok(listed, `B's JWKS lists the new key ${kid}`);
    const afterRotation = (await passwordGrant(a.base, 'admin', ADMIN_PASSWORD)).body.access_token!;
    const header = JSON.parse(Buffer.from(afterRotation.split('.')[0]!, 'base64url').toString()) as {
      kid: string;
    };
    assert.equal(header.kid, kid, 'A signs with the new key');
    for (const token of [before, afterRotation]) {
      for (const instance of [a, b]) {
        const res = await fetch(`${instance.base}/auth-admin/api/users`, {
          headers: { authorization: `Bearer ${token}` },
        });
        assert.equal(
          res.status,
          200,
          `a token of ${token === before ? 'the old' : 'the new'} key on ${instance.base}`,
        );
      }
    }
  });
});

/** A password hash the instances accept (the same cheap scrypt parameters as theirs). */
async function hash(password: string): Promise<string> {
  const { PasswordHasher } = await import('../src/passwords.ts');
  return new PasswordHasher({ params: { ln: 10, r: 8, p: 1 } }).hash(password);
}
