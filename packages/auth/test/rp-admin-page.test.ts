/**
 * The admin page keeps and edits a client's relying-party settings in Chromium: the web origins allowed
 * cross-origin (CORS) and the switch that keeps scope claims out of the ID token. Saving other OAuth
 * settings must not drop them.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Page } from 'playwright-core';
import { type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

let s: OidcSetup;
let page: Page;

before(async () => {
  s = await startOidcSetup();
  const adminPage = `${s.t.base}/auth-admin/`;
  await s.t.server.store.updateClient('demo-spa', {
    redirectUris: [s.redirectUri, adminPage],
    postLogoutRedirectUris: [s.postLogoutUri, adminPage],
  });
  await s.t.createClient({
    clientId: 'spa-two',
    clientType: 'public',
    redirectUris: ['https://two.example.org/cb'],
    allowedGrantTypes: ['authorization_code'],
    allowedScopes: ['openid'],
  });
  await s.t.server.store.setClientMetadata('spa-two', {
    webOrigins: ['https://two.example.org'],
    claimsInIdToken: false,
  });
  page = await (await s.browser.newContext()).newPage();
  await page.goto(adminPage);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', 'admin-password-1');
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(adminPage)),
    page.click('button[type=submit]'),
  ]);
  await page.locator('tr[data-user="olivia"]').waitFor();
  await page.getByRole('button', { name: 'Clients', exact: true }).click();
  await page.locator('tr[data-client="spa-two"]').waitFor();
});
after(() => s?.close());

test('web origins and the ID-token claims switch are shown, kept on save, and edited', async () => {
  await page.locator('tr[data-client="spa-two"]').getByRole('button', { name: 'Edit' }).click();
  const settings = page.getByRole('form', { name: 'OAuth settings of spa-two' });
  const origins = settings.getByLabel('Web origins (CORS; empty: the origins of the redirect URIs)');
  const claims = settings.getByLabel('Profile, e-mail and role claims in the ID token (off: UserInfo only)');
  assert.equal(await origins.inputValue(), 'https://two.example.org');
  assert.equal(await claims.isChecked(), false);

  // Saving another setting keeps both.
  await settings.getByLabel('PAR required').check();
  await settings.getByRole('button', { name: 'Save OAuth settings' }).click();
  await page.locator('#status').filter({ hasText: 'Saved the OAuth settings of spa-two' }).waitFor();
  assert.deepEqual((await s.t.server.store.getClient('spa-two'))!.metadata, {
    requirePushedAuthorizationRequests: true,
    webOrigins: ['https://two.example.org'],
    claimsInIdToken: false,
  });

  await page.locator('tr[data-client="spa-two"]').getByRole('button', { name: 'Edit' }).click();
  await origins.fill('https://two.example.org\nhttp://localhost:5173');
  await claims.check();
  await settings.getByRole('button', { name: 'Save OAuth settings' }).click();
  await page.locator('#status').filter({ hasText: 'Saved the OAuth settings of spa-two' }).waitFor();
  assert.deepEqual((await s.t.server.store.getClient('spa-two'))!.metadata, {
    requirePushedAuthorizationRequests: true,
    webOrigins: ['https://two.example.org', 'http://localhost:5173'],
  });

  // An invalid origin is refused with the API's words, and nothing changes.
  await page.locator('tr[data-client="spa-two"]').getByRole('button', { name: 'Edit' }).click();
  await origins.fill('https://two.example.org/path');
  await settings.getByRole('button', { name: 'Save OAuth settings' }).click();
  await page.locator('#status .error').waitFor();
  assert.match(String(await page.locator('#status').textContent()), /webOrigins\[0\]/);
  assert.deepEqual((await s.t.server.store.getClient('spa-two'))!.metadata.webOrigins, [
    'https://two.example.org',
    'http://localhost:5173',
  ]);
});
