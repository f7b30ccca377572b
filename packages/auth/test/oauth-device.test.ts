/**
 * Device Authorization Grant (RFC 8628) over HTTP: the device authorization endpoint, openid-client 6 and
 * oauth4webapi polling while the user approves on the verification page (forms posted with plain HTTP here;
 * `oauth-device-browser.test.ts` does the user's step in Chromium), and every error row: §3.2
 * (`unauthorized_client`, `invalid_scope`, `invalid_client`), §3.5 (`authorization_pending`, `slow_down`,
 * `access_denied`, `expired_token`), reuse, another client's code, and the page's refusals.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { liveClock } from './oauth-dpop-helpers.ts';
import { CookieJar, postForm, startTestServer, submitLogin, type TestServer } from './oauth-fixtures.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const insecure = { execute: [client.allowInsecureRequests] };

let t: TestServer;
let jar: CookieJar;
let alice: { id: string };

before(async () => {
  t = await startTestServer({ oauth: { device: { intervalSeconds: 1 } } });
  liveClock(t.clock);
  alice = await t.createUser('alice', 'alice-password-1');
  await t.createClient({
    clientId: 'tv-app',
    clientType: 'public',
    displayName: 'Living-room TV',
    allowedGrantTypes: [GRANT, 'refresh_token'],
    allowedScopes: ['openid', 'profile', 'offline_access'],
  });
  await t.createClient({
    clientId: 'other-tv',
    clientType: 'public',
    allowedGrantTypes: [GRANT],
    allowedScopes: ['openid'],
  });
  jar = new CookieJar();
  await submitLogin(t.base, jar, 'alice', 'alice-password-1');
});
after(() => t?.close());

const csrfOf = (html: string) => /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';

/** The user's step through the verification page with plain HTTP: enter the code, then allow or deny. */
async function decide(userCode: string, decision: 'approve' | 'deny', cookies = jar): Promise<Response> {
  const form = await fetch(`${t.base}/device?${new URLSearchParams({ user_code: userCode })}`, {
    headers: { cookie: cookies.header() },
  });
  cookies.take(form);
  const html = await form.text();
  assert.match(html, new RegExp(`value="${userCode}"`));
  const consent = await postForm(
    t.base,
    '/device',
    { _csrf: csrfOf(html), user_code: userCode },
    { cookie: cookies.header() },
  );
  cookies.take(consent);
  const consentHtml = await consent.text();
  assert.equal(consent.status, 200, consentHtml);
  assert.match(consentHtml, /Living-room TV|other-tv/);
  return postForm(
    t.base,
    '/device/decision',
    { _csrf: csrfOf(consentHtml), user_code: userCode, decision },
    { cookie: cookies.header() },
  );
}

const start = async (clientId = 'tv-app', scope = 'openid offline_access') => {
  const res = await postForm(t.base, '/connect/device', { client_id: clientId, scope });
  assert.equal(res.status, 200);
  return (await res.json()) as {
    device_code: string;
    user_code: string;
    verification_uri: string;
    verification_uri_complete: string;
    expires_in: number;
    interval: number;
  };
};
const poll = (deviceCode: string, clientId = 'tv-app') =>
  postForm(t.base, '/connect/token', { grant_type: GRANT, device_code: deviceCode, client_id: clientId });
const errorOf = async (res: Response) => ((await res.json()) as { error: string }).error;

describe('device flow with client libraries', () => {
  test('discovery advertises the device authorization endpoint and the grant', async () => {
    const config = await client.discovery(new URL(t.base), 'tv-app', undefined, client.None(), insecure);
    assert.equal(config.serverMetadata().device_authorization_endpoint, `${t.base}/connect/device`);
    assert.ok(config.serverMetadata().grant_types_supported?.includes(GRANT));
  });

  test('openid-client 6: initiate, the user approves, polling returns tokens (ID token, refresh token)', async () => {
    const config = await client.discovery(new URL(t.base), 'tv-app', undefined, client.None(), insecure);
    const response = await client.initiateDeviceAuthorization(config, { scope: 'openid offline_access' });
    assert.match(response.user_code, /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    assert.equal(response.verification_uri, `${t.base}/device`);
    assert.equal(response.interval, 1);
    const polling = client.pollDeviceAuthorizationGrant(config, response);
    const decided = await decide(response.user_code, 'approve');
    assert.equal(decided.status, 200);
    assert.match(await decided.text(), /Device connected/);
    const tokens = await polling;
    assert.equal(decodeJwt(tokens.access_token).sub, alice.id);
    assert.ok(tokens.refresh_token);
    assert.equal(tokens.claims()?.sub, alice.id);
  });

  test('oauth4webapi: deviceAuthorizationRequest, authorization_pending, then the tokens', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const c: oauth.Client = { client_id: 'tv-app' };
    const opts = { [oauth.allowInsecureRequests]: true } as const;
    const device = await oauth.processDeviceAuthorizationResponse(
      as,
      c,
      await oauth.deviceAuthorizationRequest(as, c, oauth.None(), { scope: 'openid' }, opts),
    );
    await assert.rejects(
      oauth.processDeviceCodeResponse(
        as,
        c,
        await oauth.deviceCodeGrantRequest(as, c, oauth.None(), device.device_code, opts),
      ),
      (err: oauth.ResponseBodyError) => err.error === 'authorization_pending',
    );
    assert.equal((await decide(device.user_code, 'approve')).status, 200);
    const tokens = await oauth.processDeviceCodeResponse(
      as,
      c,
      await oauth.deviceCodeGrantRequest(as, c, oauth.None(), device.device_code, opts),
    );
    assert.equal(decodeJwt(tokens.access_token).sub, alice.id);
  });
});

describe('polling errors (RFC 8628 §3.5)', () => {
  test('authorization_pending, then slow_down when polled faster than the interval (interval +5 s)', async () => {
    const { device_code } = await start();
    assert.equal(await errorOf(await poll(device_code)), 'authorization_pending');
    const fast = await poll(device_code);
    assert.equal(fast.status, 400);
    assert.equal(await errorOf(fast), 'slow_down');
    // The interval is now 6 s: 2 s later is still too fast.
    t.clock.now += 2000;
    assert.equal(await errorOf(await poll(device_code)), 'slow_down');
  });

  test('access_denied after the user denies', async () => {
    const { device_code, user_code } = await start();
    const denied = await decide(user_code, 'deny');
    assert.match(await denied.text(), /Request denied/);
    assert.equal(await errorOf(await poll(device_code)), 'access_denied');
  });

  test('expired_token after expires_in', async () => {
    const { device_code, expires_in } = await start();
    t.clock.now += (expires_in + 1) * 1000;
    try {
      assert.equal(await errorOf(await poll(device_code)), 'expired_token');
    } finally {
      t.clock.now -= (expires_in + 1) * 1000;
    }
  });

  test('tokens are issued once: a second poll after success → invalid_grant', async () => {
    const { device_code, user_code } = await start();
    await decide(user_code, 'approve');
    assert.equal((await poll(device_code)).status, 200);
    assert.equal(await errorOf(await poll(device_code)), 'invalid_grant');
  });

  test("another client's device_code, an unknown one, or none → invalid_grant / invalid_request", async () => {
    const { device_code } = await start();
    assert.equal(await errorOf(await poll(device_code, 'other-tv')), 'invalid_grant');
    assert.equal(await errorOf(await poll('no-such-code')), 'invalid_grant');
    const none = await postForm(t.base, '/connect/token', { grant_type: GRANT, client_id: 'tv-app' });
    assert.equal(await errorOf(none), 'invalid_request');
  });
});

describe('device authorization endpoint errors (RFC 8628 §3.2)', () => {
  test('client without the grant → unauthorized_client', async () => {
    const res = await postForm(t.base, '/connect/device', { client_id: 'demo-spa' });
    assert.equal(res.status, 400);
    assert.equal(await errorOf(res), 'unauthorized_client');
  });
  test('scope not allowed → invalid_scope', async () => {
    const res = await postForm(t.base, '/connect/device', { client_id: 'tv-app', scope: 'admin' });
    assert.equal(await errorOf(res), 'invalid_scope');
  });
  test('unknown client → 401 invalid_client', async () => {
    const res = await postForm(t.base, '/connect/device', { client_id: 'nobody' });
    assert.equal(res.status, 401);
    assert.equal(await errorOf(res), 'invalid_client');
  });
});

describe('verification page refusals', () => {
  test('without a session: to the login page, and back to /device with the code', async () => {
    const res = await fetch(`${t.base}/device?user_code=BCDF-GHJK`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    const location = new URL(res.headers.get('location')!, t.base);
    assert.equal(location.pathname, '/login');
    assert.equal(location.searchParams.get('return_to'), '/device?user_code=BCDF-GHJK');
  });

  test('an unknown code → 400 with the form again, audited', async () => {
    const form = await fetch(`${t.base}/device`, { headers: { cookie: jar.header() } });
    jar.take(form);
    const res = await postForm(
      t.base,
      '/device',
      { _csrf: csrfOf(await form.text()), user_code: 'BBBB-BBBB' },
      { cookie: jar.header() },
    );
    assert.equal(res.status, 400);
    assert.match(await res.text(), /Unknown or expired code/);
    const audit = await t.server.store.listAudit({ category: 'Authorization', subjectId: alice.id });
    assert.ok(audit.items.some((e) => e.failureCode === 'invalid_user_code'));
  });

  test('a POST without the CSRF token is refused and decides nothing', async () => {
    const { device_code, user_code } = await start();
    const res = await postForm(
      t.base,
      '/device/decision',
      { user_code, decision: 'approve' },
      { cookie: jar.header() },
    );
    assert.equal(res.status, 403);
    assert.equal(await errorOf(await poll(device_code)), 'authorization_pending');
  });

  test('a code already decided cannot be decided again', async () => {
    const { user_code } = await start();
    await decide(user_code, 'deny');
    const form = await fetch(`${t.base}/device`, { headers: { cookie: jar.header() } });
    jar.take(form);
    const res = await postForm(
      t.base,
      '/device',
      { _csrf: csrfOf(await form.text()), user_code },
      { cookie: jar.header() },
    );
    assert.equal(res.status, 400);
  });
});
