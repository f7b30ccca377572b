/**
 * Pushed Authorization Requests (RFC 9126) with openid-client 6 and oauth4webapi against the real server:
 * push, then the authorization endpoint with `request_uri` (through the login round trip), the code
 * exchange; per-client and global "PAR required"; every error row of the PAR endpoint (§2.3) and of
 * `request_uri` at the authorization endpoint (§4).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { liveClock } from './oauth-dpop-helpers.ts';
import {
  basic,
  CookieJar,
  pkcePair,
  postForm,
  SPA_REDIRECT,
  startTestServer,
  submitLogin,
  type TestServer,
} from './oauth-fixtures.ts';

const insecure = { execute: [client.allowInsecureRequests] };
const WEB_SECRET = 'web-app-secret-1';

let t: TestServer;
let jar: CookieJar;

before(async () => {
  t = await startTestServer();
  liveClock(t.clock);
  await t.createUser('alice', 'alice-password-1');
  await t.createClient({
    clientId: 'web-app',
    clientType: 'confidential',
    secret: WEB_SECRET,
    redirectUris: [SPA_REDIRECT],
    allowedGrantTypes: ['authorization_code'],
    allowedScopes: ['openid', 'profile', 'api'],
  });
  jar = new CookieJar();
  await submitLogin(t.base, jar, 'alice', 'alice-password-1');
});
after(() => t?.close());

/** GETs an authorization URL with the signed-in jar; @returns the 302 location (or the 400 text). */
async function follow(
  url: URL | string,
  cookies = jar,
): Promise<{ status: number; location: URL | null; text: string }> {
  const res = await fetch(url, { headers: { cookie: cookies.header() }, redirect: 'manual' });
  const location = res.headers.get('location');
  return {
    status: res.status,
    location: location ? new URL(location, t.base) : null,
    text: await res.text(),
  };
}

const push = (
  params: Record<string, string>,
  headers: Record<string, string> = { authorization: basic('web-app', WEB_SECRET) },
) => postForm(t.base, '/connect/par', params, headers);

const pushed = async (params: Record<string, string> = {}) => {
  const { challenge, verifier } = pkcePair();
  const res = await push({
    response_type: 'code',
    redirect_uri: SPA_REDIRECT,
    scope: 'api',
    state: 's1',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...params,
  });
  assert.equal(res.status, 201);
  const body = (await res.json()) as { request_uri: string; expires_in: number };
  return { ...body, verifier };
};

describe('PAR with client libraries', () => {
  test('discovery advertises the endpoint; PAR not required by default', async () => {
    const config = await client.discovery(
      new URL(t.base),
      'web-app',
      undefined,
      client.ClientSecretBasic(WEB_SECRET),
      insecure,
    );
    assert.equal(config.serverMetadata().pushed_authorization_request_endpoint, `${t.base}/connect/par`);
    assert.equal(config.serverMetadata().require_pushed_authorization_requests, false);
  });

  test('openid-client 6: buildAuthorizationUrlWithPAR, the authorization endpoint, the code grant', async () => {
    const config = await client.discovery(
      new URL(t.base),
      'web-app',
      undefined,
      client.ClientSecretBasic(WEB_SECRET),
      insecure,
    );
    const verifier = client.randomPKCECodeVerifier();
    const url = await client.buildAuthorizationUrlWithPAR(config, {
      redirect_uri: SPA_REDIRECT,
      scope: 'api',
      state: 'st-par',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    assert.ok(url.searchParams.get('request_uri')?.startsWith('urn:ietf:params:oauth:request_uri:'));
    const { status, location } = await follow(url);
    assert.equal(status, 302);
    const tokens = await client.authorizationCodeGrant(config, location!, {
      pkceCodeVerifier: verifier,
      expectedState: 'st-par',
    });
    assert.equal(decodeJwt(tokens.access_token).scope, 'api');
  });

  test('oauth4webapi: pushedAuthorizationRequest for the public client, through the login round trip', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const c: oauth.Client = { client_id: 'demo-spa' };
    const verifier = oauth.generateRandomCodeVerifier();
    const response = await oauth.pushedAuthorizationRequest(
      as,
      c,
      oauth.None(),
      {
        response_type: 'code',
        redirect_uri: SPA_REDIRECT,
        scope: 'openid',
        state: 'st-spa',
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      },
      { [oauth.allowInsecureRequests]: true },
    );
    const { request_uri } = await oauth.processPushedAuthorizationResponse(as, c, response);
    const authorizeUrl = `${t.base}/connect/authorize?${new URLSearchParams({ client_id: 'demo-spa', request_uri })}`;
    // No session yet: to the login page and back with the same request_uri (not used up by the detour).
    const fresh = new CookieJar();
    const first = await follow(authorizeUrl, fresh);
    assert.equal(first.status, 302);
    assert.equal(first.location?.pathname, '/login');
    const returnTo = first.location!.searchParams.get('return_to')!;
    const login = await submitLogin(t.base, fresh, 'alice', 'alice-password-1', returnTo);
    const back = await follow(new URL(login.headers.get('location')!, t.base), fresh);
    assert.equal(back.status, 302);
    const params = oauth.validateAuthResponse(as, c, back.location!, 'st-spa');
    const tokens = await oauth.processAuthorizationCodeResponse(
      as,
      c,
      await oauth.authorizationCodeGrantRequest(as, c, oauth.None(), params, SPA_REDIRECT, verifier, {
        [oauth.allowInsecureRequests]: true,
      }),
      { expectedNonce: oauth.expectNoNonce, requireIdToken: true },
    );
    assert.ok(tokens.id_token);
  });

  test('query parameters other than client_id are ignored when request_uri is used (§4)', async () => {
    const { request_uri } = await pushed({ scope: 'api', state: 'pushed-state' });
    const url = `${t.base}/connect/authorize?${new URLSearchParams({ client_id: 'web-app', request_uri, scope: 'openid profile', state: 'query-state' })}`;
    const { status, location } = await follow(url);
    assert.equal(status, 302);
    assert.equal(location!.searchParams.get('state'), 'pushed-state');
  });
});

describe('PAR endpoint errors (RFC 9126 §2.3)', () => {
  const rows: [string, Record<string, string>, Record<string, string> | undefined, number, string][] = [
    [
      'request_uri in the body',
      { response_type: 'code', request_uri: 'urn:x' },
      undefined,
      400,
      'invalid_request',
    ],
    ['no client authentication', { response_type: 'code', client_id: 'web-app' }, {}, 401, 'invalid_client'],
    [
      'wrong client secret',
      { response_type: 'code' },
      { authorization: basic('web-app', 'wrong') },
      401,
      'invalid_client',
    ],
    [
      'redirect_uri not registered',
      { response_type: 'code', redirect_uri: 'https://evil.test/cb' },
      undefined,
      400,
      'invalid_request',
    ],
    ['response_type other than code', { response_type: 'token' }, undefined, 400, 'invalid_request'],
    ['scope not allowed', { response_type: 'code', scope: 'admin' }, undefined, 400, 'invalid_scope'],
    [
      'client without the code flow',
      { response_type: 'code' },
      { authorization: basic('demo-service', 'demo-service-secret-1') },
      400,
      'unauthorized_client',
    ],
  ];
  for (const [name, params, headers, status, error] of rows) {
    test(`${name} → ${status} ${error}`, async () => {
      const res = await push(params, headers);
      assert.equal(res.status, status);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(((await res.json()) as { error: string }).error, error);
    });
  }
});

describe('request_uri at the authorization endpoint (RFC 9126 §4)', () => {
  const authorizeWith = (clientId: string, requestUri: string) =>
    follow(
      `${t.base}/connect/authorize?${new URLSearchParams({ client_id: clientId, request_uri: requestUri })}`,
    );

  test('used once: a second use → 400 text/plain, no redirect', async () => {
    const { request_uri } = await pushed();
    assert.equal((await authorizeWith('web-app', request_uri)).status, 302);
    const again = await authorizeWith('web-app', request_uri);
    assert.equal(again.status, 400);
    assert.equal(again.location, null);
    assert.match(again.text, /already used/);
  });

  test('another client presenting it → 400', async () => {
    const { request_uri } = await pushed();
    const res = await authorizeWith('demo-spa', request_uri);
    assert.equal(res.status, 400);
    assert.match(res.text, /invalid_request_uri/);
  });

  test('unknown or foreign-format request_uri → 400', async () => {
    assert.equal((await authorizeWith('web-app', 'urn:ietf:params:oauth:request_uri:nope')).status, 400);
    assert.equal((await authorizeWith('web-app', 'https://elsewhere.test/req')).status, 400);
  });

  test('expired after expires_in → 400', async () => {
    const { request_uri, expires_in } = await pushed();
    assert.equal(expires_in, 60);
    t.clock.now += 61_000;
    try {
      const res = await authorizeWith('web-app', request_uri);
      assert.equal(res.status, 400);
      assert.match(res.text, /expired/);
    } finally {
      t.clock.now -= 61_000;
    }
  });

  test('per-client "PAR required": a plain authorization request → 400; a pushed one works', async () => {
    await t.server.store.setClientMetadata('web-app', { requirePushedAuthorizationRequests: true });
    try {
      const { challenge } = pkcePair();
      const plain = await follow(
        `${t.base}/connect/authorize?${new URLSearchParams({ client_id: 'web-app', response_type: 'code', redirect_uri: SPA_REDIRECT, code_challenge: challenge, code_challenge_method: 'S256' })}`,
      );
      assert.equal(plain.status, 400);
      assert.match(plain.text, /must use pushed authorization requests/);
      const { request_uri } = await pushed();
      assert.equal((await authorizeWith('web-app', request_uri)).status, 302);
    } finally {
      await t.server.store.setClientMetadata('web-app', {});
    }
  });
});

describe('server settings', () => {
  test('global "PAR required" is advertised and enforced for every client', async () => {
    const strict = await startTestServer({ oauth: { par: { requirePushedAuthorizationRequests: true } } });
    try {
      const meta = (await (
        await fetch(`${strict.base}/.well-known/oauth-authorization-server`)
      ).json()) as Record<string, unknown>;
      assert.equal(meta.require_pushed_authorization_requests, true);
      const { challenge } = pkcePair();
      const res = await fetch(
        `${strict.base}/connect/authorize?${new URLSearchParams({ client_id: 'demo-spa', response_type: 'code', redirect_uri: SPA_REDIRECT, code_challenge: challenge, code_challenge_method: 'S256' })}`,
        { redirect: 'manual' },
      );
      assert.equal(res.status, 400);
    } finally {
      await strict.close();
    }
  });

  test('PAR off: not advertised, no endpoint', async () => {
    const off = await startTestServer({ oauth: { par: false } });
    try {
      const meta = (await (
        await fetch(`${off.base}/.well-known/oauth-authorization-server`)
      ).json()) as Record<string, unknown>;
      assert.equal(meta.pushed_authorization_request_endpoint, undefined);
      assert.equal(
        (await postForm(off.base, '/connect/par', { response_type: 'code', client_id: 'demo-spa' })).status,
        404,
      );
    } finally {
      await off.close();
    }
  });
});
