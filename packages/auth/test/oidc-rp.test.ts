/**
 * OpenID Connect Core 1.0 with two independent relying-party libraries, `openid-client` 6 and `oauth4webapi`,
 * through the real login page in headless Chromium: discovery, code + PKCE with ID token validation
 * (`nonce`, `auth_time`, `amr`, `sid`, `at_hash`), UserInfo (profile, email and the `roles` scope),
 * refresh with a new ID token (§12.2), `prompt=none` (with and without a session), `prompt=login`,
 * `max_age` and `login_hint`.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import type { BrowserContext } from 'playwright-core';
import { drive, type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

const CREDENTIALS: [string, string] = ['olivia', 'olivia-password-1'];
const SCOPE = 'openid profile email roles offline_access';

let s: OidcSetup;
let config: client.Configuration;
before(async () => {
  s = await startOidcSetup();
  config = await client.discovery(new URL(s.t.base), 'demo-spa', undefined, client.None(), {
    execute: [client.allowInsecureRequests],
  });
});
after(() => s?.close());

/** at_hash computed here, independently of the server (OIDC Core §3.1.3.6, SHA-256 for RS256). */
function atHash(accessToken: string): string {
  const digest = createHash('sha256').update(accessToken).digest();
  return digest.subarray(0, 16).toString('base64url');
}

/** An authorization request of `openid-client` and the checks to redeem it. */
async function clientRequest(extra: Record<string, string> = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: s.redirectUri,
    scope: SCOPE,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return { url, checks: { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce } };
}

describe('openid-client', () => {
  let context: BrowserContext;
  before(async () => {
    context = await s.browser.newContext();
  });
  after(() => context.close());
  let firstAuthTime = 0;

  test('discovery advertises UserInfo, the scopes and claims that work', () => {
    const metadata = config.serverMetadata();
    assert.equal(metadata.userinfo_endpoint, `${s.t.base}/connect/userinfo`);
    assert.deepEqual(metadata.scopes_supported, [
      'openid',
      'profile',
      'email',
      'phone',
      'address',
      'roles',
      'permissions',
      'offline_access',
    ]);
    for (const claim of ['nonce', 'auth_time', 'amr', 'sid', 'at_hash', 'email', 'roles', 'permissions'])
      assert.ok(metadata.claims_supported?.includes(claim), claim);
    assert.deepEqual(metadata.response_types_supported, ['code']);
  });

  test('code + PKCE through the login page: the ID token validates and carries the OIDC claims', async () => {
    const { url, checks } = await clientRequest({ login_hint: 'olivia' });
    const result = await drive(s, context, url, { credentials: CREDENTIALS });
    assert.deepEqual(result.pages, ['/login']);
    assert.equal(result.prefilled, 'olivia', 'login_hint pre-fills the user name');
    const tokens = await client.authorizationCodeGrant(config, result.final, {
      ...checks,
      idTokenExpected: true,
    });
    const claims = tokens.claims()!;
    assert.equal(claims.iss, s.t.base);
    assert.equal(claims.aud, 'demo-spa');
    assert.equal(claims.nonce, checks.expectedNonce);
    assert.deepEqual(claims.amr, ['pwd']);
    assert.equal(typeof claims.sid, 'string');
    assert.equal(typeof claims.auth_time, 'number');
    assert.equal(claims.auth_time, Math.floor(s.t.clock.now / 1000));
    assert.equal(claims.at_hash, atHash(tokens.access_token));
    assert.equal(decodeProtectedHeader(tokens.id_token!).typ, 'JWT');
    firstAuthTime = claims.auth_time as number;

    const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
    assert.deepEqual(info, {
      sub: claims.sub,
      name: 'Olivia Doe',
      given_name: 'Olivia',
      family_name: 'Doe',
      preferred_username: 'olivia',
      updated_at: info.updated_at,
      email: 'olivia@example.org',
      email_verified: true,
      roles: ['clerk', 'reader'],
      permissions: ['shop.orders.read', 'shop.orders.write'],
      denied_permissions: ['shop.orders.delete'],
    });
    assert.equal(typeof info.updated_at, 'number');

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    const again = refreshed.claims()!;
    assert.equal(again.sub, claims.sub);
    assert.equal(again.auth_time, claims.auth_time, 'OIDC Core §12.2: same auth_time');
    assert.equal(again.sid, claims.sid);
    assert.equal(again.nonce, undefined);
    assert.equal(
      again.at_hash,
      undefined,
      'no at_hash on refresh (optional; both tokens signed in parallel)',
    );
  });

  test('prompt=none with the session: a code without any page', async () => {
    const { url, checks } = await clientRequest({ prompt: 'none' });
    const result = await drive(s, context, url);
    assert.deepEqual(result.pages, []);
    const tokens = await client.authorizationCodeGrant(config, result.final, checks);
    assert.equal(tokens.claims()?.auth_time, firstAuthTime);
  });

  test('prompt=none without a session: login_required', async () => {
    const fresh = await s.browser.newContext();
    try {
      const { url, checks } = await clientRequest({ prompt: 'none' });
      const result = await drive(s, fresh, url);
      await assert.rejects(client.authorizationCodeGrant(config, result.final, checks), (err: Error) => {
        assert.ok(err instanceof client.AuthorizationResponseError);
        assert.equal(err.error, 'login_required');
        return true;
      });
    } finally {
      await fresh.close();
    }
  });

  test('prompt=login and max_age=0 ask for the password again and renew auth_time', async () => {
    const cases: Record<string, string>[] = [{ prompt: 'login' }, { max_age: '0' }];
    for (const extra of cases) {
      s.t.clock.now += 5000; // the server's clock: auth_time has a 1 s resolution
      const { url, checks } = await clientRequest(extra);
      const result = await drive(s, context, url, { credentials: CREDENTIALS });
      assert.deepEqual(result.pages, ['/login'], JSON.stringify(extra));
      const tokens = await client.authorizationCodeGrant(config, result.final, checks);
      const authTime = tokens.claims()?.auth_time as number;
      assert.equal(authTime, Math.floor(s.t.clock.now / 1000), JSON.stringify(extra));
      assert.ok(authTime > firstAuthTime, JSON.stringify(extra));
    }
  });
});

describe('oauth4webapi', () => {
  const insecure = { [oauth.allowInsecureRequests]: true } as const;
  const spa: oauth.Client = { client_id: 'demo-spa' };

  test('code + PKCE, ID token, UserInfo and prompt=none as an independent RP', async () => {
    const issuer = new URL(s.t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }),
    );
    const context = await s.browser.newContext();
    try {
      const verifier = oauth.generateRandomCodeVerifier();
      const state = oauth.generateRandomState();
      const nonce = oauth.generateRandomNonce();
      const authorize = (extra: Record<string, string> = {}) => {
        const url = new URL(as.authorization_endpoint!);
        url.search = new URLSearchParams({
          response_type: 'code',
          client_id: spa.client_id,
          redirect_uri: s.redirectUri,
          scope: 'openid profile email',
          state,
          nonce,
          ...extra,
        }).toString();
        return url;
      };
      const url = authorize({
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      });
      const result = await drive(s, context, url, { credentials: CREDENTIALS });
      const params = oauth.validateAuthResponse(as, spa, result.final, state);
      const response = await oauth.authorizationCodeGrantRequest(
        as,
        spa,
        oauth.None(),
        params,
        s.redirectUri,
        verifier,
        insecure,
      );
      const tokens = await oauth.processAuthorizationCodeResponse(as, spa, response, {
        expectedNonce: nonce,
        requireIdToken: true,
      });
      const claims = oauth.getValidatedIdTokenClaims(tokens)!;
      assert.equal(claims.nonce, nonce);
      assert.deepEqual(claims.amr, ['pwd']);
      assert.equal(claims.at_hash, atHash(tokens.access_token));
      const info = await oauth.processUserInfoResponse(
        as,
        spa,
        claims.sub,
        await oauth.userInfoRequest(as, spa, tokens.access_token, insecure),
      );
      assert.equal(info.email, 'olivia@example.org');
      assert.equal(info.name, 'Olivia Doe');
      assert.equal(info.roles, undefined, 'no roles scope, no roles claim');

      const silentVerifier = oauth.generateRandomCodeVerifier();
      const silent = await drive(
        s,
        context,
        authorize({
          prompt: 'none',
          code_challenge: await oauth.calculatePKCECodeChallenge(silentVerifier),
          code_challenge_method: 'S256',
        }),
      );
      assert.deepEqual(silent.pages, []);
      const silentParams = oauth.validateAuthResponse(as, spa, silent.final, state);
      const silentTokens = await oauth.processAuthorizationCodeResponse(
        as,
        spa,
        await oauth.authorizationCodeGrantRequest(
          as,
          spa,
          oauth.None(),
          silentParams,
          s.redirectUri,
          silentVerifier,
          insecure,
        ),
        { expectedNonce: nonce, requireIdToken: true },
      );
      assert.equal(oauth.getValidatedIdTokenClaims(silentTokens)?.sid, claims.sid);
    } finally {
      await context.close();
    }
  });
});

describe('UserInfo errors (RFC 6750 §3)', () => {
  async function passwordToken(scope: string): Promise<string> {
    const res = await fetch(`${s.t.base}/connect/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from('demo-service:demo-service-secret-1').toString('base64')}`,
      },
      body: new URLSearchParams({
        grant_type: 'password',
        username: 'olivia',
        password: 'olivia-password-1',
        scope,
      }),
    });
    assert.equal(res.status, 200);
    return ((await res.json()) as { access_token: string }).access_token;
  }
  const userinfo = (init: RequestInit = {}) => fetch(`${s.t.base}/connect/userinfo`, init);

  test('POST with the form field works; the answer is no-store', async () => {
    const token = await passwordToken('openid email');
    const res = await userinfo({
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ access_token: token }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.email, 'olivia@example.org');
    assert.equal(body.name, undefined, 'no profile scope');
    assert.equal(decodeJwt(token).sub, body.sub);
  });

  test('no token, bad token, missing openid scope, two tokens, disabled user', async () => {
    const none = await userinfo();
    assert.equal(none.status, 401);
    assert.equal(none.headers.get('www-authenticate'), `Bearer realm="${s.t.base}"`);
    const bad = await userinfo({ headers: { authorization: 'Bearer abc.def.ghi' } });
    assert.equal(bad.status, 401);
    assert.match(bad.headers.get('www-authenticate') ?? '', /^Bearer realm="[^"]+", error="invalid_token"/);
    assert.equal(((await bad.json()) as { error: string }).error, 'invalid_token');
    const noOpenid = await userinfo({ headers: { authorization: `Bearer ${await passwordToken('api')}` } });
    assert.equal(noOpenid.status, 403);
    assert.match(
      noOpenid.headers.get('www-authenticate') ?? '',
      /error="insufficient_scope", .*scope="openid"/,
    );
    const token = await passwordToken('openid');
    const both = await userinfo({
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ access_token: token }),
    });
    assert.equal(both.status, 400);
    assert.equal(((await both.json()) as { error: string }).error, 'invalid_request');
    const malformed = await userinfo({
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: 'x',
    });
    assert.equal(malformed.status, 400);
    const olivia = (await s.t.server.store.findUserByName('olivia'))!;
    await s.t.server.store.updateUser(olivia.id, { isEnabled: false });
    try {
      const disabled = await userinfo({ headers: { authorization: `Bearer ${token}` } });
      assert.equal(disabled.status, 401);
      assert.match(disabled.headers.get('www-authenticate') ?? '', /error="invalid_token"/);
    } finally {
      await s.t.server.store.updateUser(olivia.id, { isEnabled: true });
    }
  });
});
