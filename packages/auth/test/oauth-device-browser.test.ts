/**
 * The device flow's user step in a real browser (RFC 8628 §3.3): openid-client 6 starts the device
 * authorization and polls while headless Debian Chromium opens `verification_uri_complete`, signs in on the
 * login page, confirms the prefilled code and allows (or denies) on the consent form.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import type { Browser } from 'playwright-core';
import { launchChromium } from './browser.ts';
import { liveClock } from './oauth-dpop-helpers.ts';
import { startTestServer, type TestServer } from './oauth-fixtures.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

let t: TestServer;
let browser: Browser;
let config: client.Configuration;
let alice: { id: string };

before(async () => {
  t = await startTestServer({ oauth: { device: { intervalSeconds: 1 } } });
  liveClock(t.clock);
  alice = await t.createUser('alice', 'alice-password-1');
  await t.createClient({
    clientId: 'tv-app',
    clientType: 'public',
    displayName: 'Living-room TV',
    allowedGrantTypes: [GRANT],
    allowedScopes: ['openid', 'profile'],
  });
  config = await client.discovery(new URL(t.base), 'tv-app', undefined, client.None(), {
    execute: [client.allowInsecureRequests],
  });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await t?.close();
});

/** Opens the complete verification URI, signs in, continues with the prefilled code, clicks `button`. */
async function userStep(
  verificationUriComplete: string,
  userCode: string,
  button: 'Allow' | 'Deny',
): Promise<string> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(verificationUriComplete);
    assert.equal(new URL(page.url()).pathname, '/login');
    await page.fill('input[name=username]', 'alice');
    await page.fill('input[name=password]', 'alice-password-1');
    await Promise.all([page.waitForURL((u) => u.pathname === '/device'), page.click('button[type=submit]')]);
    assert.equal(await page.inputValue('input[name=user_code]'), userCode);
    await Promise.all([page.waitForLoadState(), page.click('button[type=submit]')]);
    assert.match((await page.textContent('main')) ?? '', /Living-room TV.*asks to act as.*alice/s);
    await Promise.all([page.waitForLoadState(), page.click(`button:has-text("${button}")`)]);
    return (await page.textContent('h1')) ?? '';
  } finally {
    await context.close();
  }
}

test('Chromium: sign in, confirm the code, allow → the polling device gets its tokens', async () => {
  const response = await client.initiateDeviceAuthorization(config, { scope: 'openid profile' });
  const polling = client.pollDeviceAuthorizationGrant(config, response);
  assert.equal(
    await userStep(response.verification_uri_complete!, response.user_code, 'Allow'),
    'Device connected',
  );
  const tokens = await polling;
  assert.equal(decodeJwt(tokens.access_token).sub, alice.id);
  assert.equal(decodeJwt(tokens.access_token).client_id, 'tv-app');
});

test('Chromium: deny → the polling device gets access_denied', async () => {
  const response = await client.initiateDeviceAuthorization(config, { scope: 'openid' });
  // The assertion is attached as the polling starts: the poll after the denial may reject before the
  // browser step returns, and its rejection is then already handled.
  const denied = assert.rejects(
    client.pollDeviceAuthorizationGrant(config, response),
    (err: { error?: string }) => err.error === 'access_denied',
  );
  assert.equal(
    await userStep(response.verification_uri_complete!, response.user_code, 'Deny'),
    'Request denied',
  );
  await denied;
});
