/**
 * What browser and server relying parties need from the OAuth endpoints, over a real server and `fetch`:
 * CORS per client web origin with preflights (Fetch Standard §3.2), scope claims in the ID token with the
 * per-client `claimsInIdToken` switch (OIDC Core §5.4), the `permissions` scope (roles and effective codes),
 * and UserInfo with DPoP-bound tokens (RFC 9449 §7.1).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { ath, liveClock, makeProof, proofKey } from './oauth-dpop-helpers.ts';
import {
  basic,
  obtainCode,
  postForm,
  SPA_REDIRECT,
  startTestServer,
  type TestServer,
} from './oauth-fixtures.ts';

const SPA_ORIGIN = new URL(SPA_REDIRECT).origin;
const OTHER_ORIGIN = 'http://127.0.0.1:9';
const WEB_ORIGIN = 'https://app.example.org';

let t: TestServer;

before(async () => {
  t = await startTestServer();
  liveClock(t.clock);
  await t.server.store.createPermission({ code: 'shop.orders.read' });
  await t.server.store.createPermission({ code: 'shop.orders.write' });
  await t.server.store.createPermission({ code: 'shop.orders.delete' });
  await t.server.store.createPermission({ code: 'shop.admin' });
  await t.server.store.createRole({ name: 'reader', permissions: ['shop.orders.read'] });
  await t.server.store.createRole({
    name: 'clerk',
    parentRoles: ['reader'],
    permissions: ['shop.orders.*'],
    deniedPermissions: ['shop.orders.delete'],
  });
  const user = await t.createUser('rita', 'rita-password-1', { roles: ['clerk'] });
  await t.server.store.updateUser(user.id, {
    displayName: 'Rita Roe',
    givenName: 'Rita',
    familyName: 'Roe',
    email: 'rita@example.org',
    emailVerified: true,
  });
  await t.server.store.updateClient('demo-spa', {
    allowedScopes: ['openid', 'profile', 'email', 'roles', 'permissions', 'offline_access'],
  });
  await t.createClient({
    clientId: 'web-origins',
    clientType: 'public',
    redirectUris: ['https://callback.example.org/cb'],
    allowedGrantTypes: ['authorization_code'],
  });
  await t.server.store.setClientMetadata('web-origins', { webOrigins: [WEB_ORIGIN] });
});
after(() => t.close());

function preflight(path: string, origin: string, method = 'POST'): Promise<Response> {
  return fetch(`${t.base}${path}`, {
    method: 'OPTIONS',
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': 'content-type, dpop',
    },
  });
}

async function codeTokens(scope: string): Promise<Record<string, unknown>> {
  const { code, verifier } = await obtainCode(t.base, 'rita', 'rita-password-1', { scope });
  const res = await postForm(t.base, '/connect/token', {
    grant_type: 'authorization_code',
    client_id: 'demo-spa',
    code,
    code_verifier: verifier,
    redirect_uri: SPA_REDIRECT,
  });
  assert.equal(res.status, 200);
  return (await res.json()) as Record<string, unknown>;
}

describe('CORS', () => {
  for (const path of [
    '/.well-known/openid-configuration',
    '/.well-known/oauth-authorization-server',
    '/.well-known/jwks.json',
    '/connect/token',
    '/connect/userinfo',
    '/connect/revocation',
    '/connect/endsession',
  ]) {
    test(`preflight ${path}: a redirect-URI origin is allowed, an unknown one gets no CORS header`, async () => {
      const method = path.startsWith('/.well-known')
        ? 'GET'
        : path === '/connect/endsession'
          ? 'GET'
          : 'POST';
      const ok = await preflight(path, SPA_ORIGIN, method);
      assert.equal(ok.status, 204);
      assert.equal(ok.headers.get('access-control-allow-origin'), SPA_ORIGIN);
      assert.match(ok.headers.get('access-control-allow-methods') ?? '', new RegExp(method));
      assert.match(ok.headers.get('access-control-allow-headers') ?? '', /dpop/);
      assert.equal(ok.headers.get('access-control-allow-credentials'), null);
      const unknown = await preflight(path, OTHER_ORIGIN, method);
      assert.equal(unknown.status, 204);
      assert.equal(unknown.headers.get('access-control-allow-origin'), null);
      assert.equal(unknown.headers.get('access-control-allow-methods'), null);
    });
  }

  test('a preflight for a method the endpoint does not take allows nothing', async () => {
    const res = await preflight('/connect/token', SPA_ORIGIN, 'DELETE');
    assert.equal(res.headers.get('access-control-allow-origin'), null);
  });

  test('discovery and JWKS answer a registered origin, with Vary: Origin; unknown and null origins get nothing', async () => {
    for (const path of ['/.well-known/openid-configuration', '/.well-known/jwks.json']) {
      const ok = await fetch(`${t.base}${path}`, { headers: { origin: SPA_ORIGIN } });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get('access-control-allow-origin'), SPA_ORIGIN);
      assert.match(ok.headers.get('vary') ?? '', /Origin/);
      for (const origin of [OTHER_ORIGIN, 'null']) {
        const no = await fetch(`${t.base}${path}`, { headers: { origin } });
        assert.equal(no.status, 200);
        assert.equal(no.headers.get('access-control-allow-origin'), null);
      }
    }
  });

  test("the token endpoint allows only the requesting client's origins, error answers included", async () => {
    const { code, verifier } = await obtainCode(t.base, 'rita', 'rita-password-1', { scope: 'openid' });
    const params = {
      grant_type: 'authorization_code',
      client_id: 'demo-spa',
      code,
      code_verifier: verifier,
      redirect_uri: SPA_REDIRECT,
    };
    // The origin of another client (web-origins' webOrigins): registered, but not demo-spa's.
    const foreign = await postForm(
      t.base,
      '/connect/token',
      { ...params, code: 'not-a-code' },
      { origin: WEB_ORIGIN },
    );
    assert.equal(foreign.status, 400);
    assert.equal(foreign.headers.get('access-control-allow-origin'), null);
    const own = await postForm(t.base, '/connect/token', params, { origin: SPA_ORIGIN });
    assert.equal(own.status, 200);
    assert.equal(own.headers.get('access-control-allow-origin'), SPA_ORIGIN);
    assert.match(own.headers.get('access-control-expose-headers') ?? '', /dpop-nonce/);
    const replay = await postForm(t.base, '/connect/token', params, { origin: SPA_ORIGIN });
    assert.equal(replay.status, 400);
    assert.equal(replay.headers.get('access-control-allow-origin'), SPA_ORIGIN);
  });

  test('webOrigins replaces the redirect-URI origins; a disabled client allows none', async () => {
    const ok = await preflight('/connect/token', WEB_ORIGIN);
    assert.equal(ok.headers.get('access-control-allow-origin'), WEB_ORIGIN);
    const redirectOrigin = await preflight('/connect/token', 'https://callback.example.org');
    assert.equal(redirectOrigin.headers.get('access-control-allow-origin'), null);
    const revoke = await postForm(
      t.base,
      '/connect/revocation',
      { token: 'x', client_id: 'web-origins' },
      { origin: WEB_ORIGIN },
    );
    assert.equal(revoke.headers.get('access-control-allow-origin'), WEB_ORIGIN);
    const asDemoService = await postForm(
      t.base,
      '/connect/revocation',
      { token: 'x' },
      { origin: WEB_ORIGIN, authorization: basic('demo-service', 'wrong') },
    );
    assert.equal(asDemoService.headers.get('access-control-allow-origin'), null);
  });

  test('webOrigins must be origins (no path, https or loopback http)', async () => {
    for (const bad of ['https://a.example/path', 'http://a.example', 'ftp://a.example', '*']) {
      await assert.rejects(
        t.server.store.setClientMetadata('web-origins', { webOrigins: [bad] }),
        (error: { field?: string }) => error.field === 'metadata.webOrigins[0]',
      );
    }
    const client = await t.server.store.getClient('web-origins');
    assert.deepEqual(client?.metadata.webOrigins, [WEB_ORIGIN]);
  });
});

describe('ID token and UserInfo claims', () => {
  test('the ID token carries profile, email and roles claims of the granted scopes', async () => {
    const tokens = await codeTokens('openid profile email roles');
    const id = decodeJwt(tokens.id_token as string);
    assert.equal(id.name, 'Rita Roe');
    assert.equal(id.given_name, 'Rita');
    assert.equal(id.family_name, 'Roe');
    assert.equal(id.email, 'rita@example.org');
    assert.equal(id.email_verified, true);
    assert.deepEqual(id.roles, ['clerk', 'reader']);
    assert.equal(id.aud, 'demo-spa');
    assert.equal(typeof id.at_hash, 'string');
  });

  test('only the granted scopes release claims', async () => {
    const tokens = await codeTokens('openid email');
    const id = decodeJwt(tokens.id_token as string);
    assert.equal(id.email, 'rita@example.org');
    assert.equal(id.name, undefined);
    assert.equal(id.roles, undefined);
  });

  test('the permissions scope: roles and effective permission codes (deny applied) in the ID token and UserInfo', async () => {
    const tokens = await codeTokens('openid permissions offline_access');
    const id = decodeJwt(tokens.id_token as string);
    assert.deepEqual(id.roles, ['clerk', 'reader']);
    assert.deepEqual(id.effective_permissions, ['shop.orders.read', 'shop.orders.write']);
    assert.equal(id.denied_permissions, undefined);
    const info = await fetch(`${t.base}/connect/userinfo`, {
      headers: { authorization: `Bearer ${tokens.access_token}` },
    });
    const claims = (await info.json()) as Record<string, unknown>;
    assert.deepEqual(claims.effective_permissions, ['shop.orders.read', 'shop.orders.write']);
    assert.deepEqual(claims.roles, ['clerk', 'reader']);
    // A refresh after a role change reflects it.
    await t.server.store.createRole({ name: 'admin-ish', permissions: ['shop.admin'] });
    const rita = await t.server.store.findUserByName('rita');
    await t.server.store.updateUser(rita!.id, { roles: ['clerk', 'admin-ish'] });
    const refreshed = await postForm(t.base, '/connect/token', {
      grant_type: 'refresh_token',
      client_id: 'demo-spa',
      refresh_token: tokens.refresh_token as string,
    });
    assert.equal(refreshed.status, 200);
    const next = decodeJwt(((await refreshed.json()) as { id_token: string }).id_token);
    assert.deepEqual(next.effective_permissions, ['shop.admin', 'shop.orders.read', 'shop.orders.write']);
    await t.server.store.updateUser(rita!.id, { roles: ['clerk'] });
  });

  test('claimsInIdToken: false keeps the claims UserInfo-only', async () => {
    await t.server.store.setClientMetadata('demo-spa', { claimsInIdToken: false });
    try {
      const tokens = await codeTokens('openid profile email');
      const id = decodeJwt(tokens.id_token as string);
      assert.equal(id.name, undefined);
      assert.equal(id.email, undefined);
      assert.equal(id.preferred_username, 'rita');
      const info = await fetch(`${t.base}/connect/userinfo`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      const claims = (await info.json()) as Record<string, unknown>;
      assert.equal(claims.name, 'Rita Roe');
      assert.equal(claims.email, 'rita@example.org');
    } finally {
      await t.server.store.setClientMetadata('demo-spa', {});
    }
  });

  test('discovery lists the permissions scope and its claim', async () => {
    const doc = (await (await fetch(`${t.base}/.well-known/openid-configuration`)).json()) as {
      scopes_supported: string[];
      claims_supported: string[];
    };
    assert.ok(doc.scopes_supported.includes('permissions'));
    assert.ok(doc.claims_supported.includes('effective_permissions'));
  });
});

describe('UserInfo with DPoP-bound tokens (RFC 9449 §7.1)', () => {
  const userinfo = () => `${t.base}/connect/userinfo`;

  async function dpopTokens(): Promise<{ token: string; key: Awaited<ReturnType<typeof proofKey>> }> {
    const key = await proofKey();
    const { code, verifier } = await obtainCode(t.base, 'rita', 'rita-password-1', {
      scope: 'openid profile',
    });
    const res = await postForm(
      t.base,
      '/connect/token',
      {
        grant_type: 'authorization_code',
        client_id: 'demo-spa',
        code,
        code_verifier: verifier,
        redirect_uri: SPA_REDIRECT,
      },
      { dpop: await makeProof(key, { htu: `${t.base}/connect/token` }) },
    );
    const body = (await res.json()) as { access_token: string; token_type: string };
    assert.equal(body.token_type, 'DPoP');
    return { token: body.access_token, key };
  }

  test('a DPoP token with a proof of its key is accepted (GET and POST)', async () => {
    const { token, key } = await dpopTokens();
    for (const method of ['GET', 'POST']) {
      const res = await fetch(userinfo(), {
        method,
        headers: {
          authorization: `DPoP ${token}`,
          dpop: await makeProof(key, { htm: method, htu: userinfo(), ath: ath(token) }),
        },
      });
      assert.equal(res.status, 200, method);
      assert.equal(((await res.json()) as { name: string }).name, 'Rita Roe');
    }
  });

  test('refused: as Bearer, without a proof, another key, a wrong ath, a replayed proof, a Bearer token as DPoP', async () => {
    const { token, key } = await dpopTokens();
    const asBearer = await fetch(userinfo(), { headers: { authorization: `Bearer ${token}` } });
    assert.equal(asBearer.status, 401);
    assert.match(asBearer.headers.get('www-authenticate') ?? '', /invalid_token/);

    const noProof = await fetch(userinfo(), { headers: { authorization: `DPoP ${token}` } });
    assert.equal(noProof.status, 401);
    assert.match(
      noProof.headers.get('www-authenticate') ?? '',
      /^DPoP algs="[^"]+", error="invalid_dpop_proof"/,
    );
    assert.equal(((await noProof.json()) as { error: string }).error, 'invalid_dpop_proof');

    const other = await proofKey();
    const wrongKey = await fetch(userinfo(), {
      headers: {
        authorization: `DPoP ${token}`,
        dpop: await makeProof(other, { htm: 'GET', htu: userinfo(), ath: ath(token) }),
      },
    });
    assert.equal(wrongKey.status, 401);

    const wrongAth = await fetch(userinfo(), {
      headers: {
        authorization: `DPoP ${token}`,
        dpop: await makeProof(key, { htm: 'GET', htu: userinfo(), ath: ath('x') }),
      },
    });
    assert.equal(wrongAth.status, 401);

    const proof = await makeProof(key, { htm: 'GET', htu: userinfo(), ath: ath(token) });
    assert.equal(
      (await fetch(userinfo(), { headers: { authorization: `DPoP ${token}`, dpop: proof } })).status,
      200,
    );
    const replay = await fetch(userinfo(), { headers: { authorization: `DPoP ${token}`, dpop: proof } });
    assert.equal(replay.status, 401);

    const bearer = await codeTokens('openid');
    const bearerAsDpop = await fetch(userinfo(), {
      headers: {
        authorization: `DPoP ${bearer.access_token}`,
        dpop: await makeProof(key, { htm: 'GET', htu: userinfo(), ath: ath(bearer.access_token as string) }),
      },
    });
    assert.equal(bearerAsDpop.status, 401);
    assert.match(bearerAsDpop.headers.get('www-authenticate') ?? '', /^DPoP /);
  });
});
