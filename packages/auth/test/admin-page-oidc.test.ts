/**
 * The admin page's OpenID Connect and OAuth additions in Chromium: a user's profile fields, a user's consents
 * to third-party clients (listed and revoked), a role's parent roles, a client's logout and consent settings,
 * and a client's OAuth settings (grant types, token endpoint authentication, DPoP required, PAR required,
 * resources, token exchange; `client_secret_jwt` issuing a sealed secret shown once) — each edited through
 * the page and checked in the store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

let s: OidcSetup;
let page: Page;
const row = (attribute: string, value: string) => page.locator(`tr[data-${attribute}="${value}"]`);

before(async () => {
  s = await startOidcSetup({ oauth: { clientSecretKey: 'admin-page-test-client-secret-key-0123456789' } });
  const adminPage = `${s.t.base}/auth-admin/`;
  await s.t.server.store.updateClient('demo-spa', {
    redirectUris: [s.redirectUri, adminPage],
    postLogoutRedirectUris: [s.postLogoutUri, adminPage],
  });
  await s.t.createClient({
    clientId: 'partner-app',
    clientType: 'public',
    redirectUris: [s.redirectUri],
    allowedGrantTypes: ['authorization_code'],
    allowedScopes: ['openid', 'email'],
    requireConsent: true,
  });
  await s.t.createClient({
    clientId: 'svc-app',
    clientType: 'confidential',
    secret: 'svc-app-secret-1',
    allowedGrantTypes: ['client_credentials'],
    allowedScopes: ['api'],
  });
  const olivia = (await s.t.server.store.findUserByName('olivia'))!;
  await s.t.server.store.grantConsent(olivia.id, 'partner-app', ['openid', 'email']);
  page = await (await s.browser.newContext()).newPage();
  page.on('dialog', (dialog) => dialog.accept());
  await page.goto(adminPage);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', 'admin-password-1');
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(adminPage)),
    page.click('button[type=submit]'),
  ]);
  await row('user', 'olivia').waitFor();
});
after(() => s?.close());

describe('admin page: OpenID Connect settings', () => {
  test("edits a user's profile fields", async () => {
    await row('user', 'olivia').getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByRole('form', { name: 'Edit user olivia' });
    assert.equal(await editor.getByLabel('Display name').inputValue(), 'Olivia Doe');
    assert.equal(await editor.getByLabel('E-mail', { exact: true }).inputValue(), 'olivia@example.org');
    assert.equal(await editor.getByLabel('E-mail verified').isChecked(), true);
    await editor.getByLabel('Display name').fill('Olivia Roe');
    await editor.getByLabel('Family name').fill('Roe');
    await editor.getByLabel('E-mail', { exact: true }).fill('');
    await editor.getByLabel(/Phone number \(E\.164/).fill('+15551234567');
    await editor.getByLabel('Phone number verified').check();
    await editor.getByLabel('Street address').fill('1 Main Street');
    await editor.getByLabel('Locality (city)').fill('Springfield');
    await editor.getByLabel('Country').fill('US');
    await editor.getByRole('button', { name: 'Save user' }).click();
    await page.locator('#status').filter({ hasText: 'Saved olivia' }).waitFor();
    const olivia = (await s.t.server.store.findUserByName('olivia'))!;
    assert.deepEqual(
      [olivia.displayName, olivia.familyName, olivia.givenName, olivia.email],
      ['Olivia Roe', 'Roe', 'Olivia', null],
    );
    assert.equal(olivia.phoneNumber, '+15551234567');
    assert.equal(olivia.phoneNumberVerified, true);
    assert.deepEqual(olivia.address, {
      streetAddress: '1 Main Street',
      locality: 'Springfield',
      country: 'US',
    });
    // A malformed number is refused naming the field, and nothing changes.
    await row('user', 'olivia').getByRole('button', { name: 'Edit' }).click();
    assert.equal(await editor.getByLabel('Street address').inputValue(), '1 Main Street');
    await editor.getByLabel(/Phone number \(E\.164/).fill('555-1234');
    await editor.getByRole('button', { name: 'Save user' }).click();
    await page
      .locator('#status')
      .filter({ hasText: /phoneNumber/ })
      .waitFor();
    assert.equal((await s.t.server.store.findUserByName('olivia'))!.phoneNumber, '+15551234567');
  });

  test("lists a user's consents and revokes one", async () => {
    await row('user', 'olivia').getByRole('button', { name: 'Edit' }).click();
    const consents = page.getByRole('region', { name: 'Consents of olivia' });
    await consents.locator('tr[data-consent="partner-app"]').waitFor();
    assert.match(
      String(await consents.locator('tr[data-consent="partner-app"]').textContent()),
      /email, openid/,
    );
    await consents.getByRole('button', { name: 'Revoke' }).click();
    await page.locator('#status').filter({ hasText: 'Revoked the consent to partner-app' }).waitFor();
    const olivia = (await s.t.server.store.findUserByName('olivia'))!;
    assert.equal(await s.t.server.store.getConsent(olivia.id, 'partner-app'), undefined);
  });

  test("edits a role's parent roles", async () => {
    await page.getByRole('button', { name: 'Roles' }).click();
    await row('role', 'clerk').waitFor();
    assert.match(String(await row('role', 'clerk').textContent()), /reader/);
    await row('role', 'clerk').getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByRole('form', { name: 'Edit role clerk' });
    assert.equal(await editor.getByLabel('Parent roles').inputValue(), 'reader');
    await editor.getByLabel('Parent roles').fill('clerk');
    await editor.getByRole('button', { name: 'Save role' }).click();
    await page.locator('#status .error').waitFor();
    assert.match(String(await page.locator('#status').textContent()), /cycles are not allowed/);
    await editor.getByLabel('Parent roles').fill('');
    await editor.getByRole('button', { name: 'Save role' }).click();
    await page.locator('#status').filter({ hasText: 'Saved role clerk' }).waitFor();
    assert.deepEqual((await s.t.server.store.findRoleByName('clerk'))!.parentRoles, []);
  });

  test("edits a client's logout and consent settings", async () => {
    await page.getByRole('button', { name: 'Clients' }).click();
    await row('client', 'partner-app').getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByRole('form', { name: 'Edit client partner-app' });
    assert.equal(await editor.getByLabel('Third-party (users must consent)').isChecked(), true);
    await editor.getByLabel('Post-logout redirect URIs').fill(s.postLogoutUri);
    await editor.getByLabel('Back-channel logout URI').fill(s.backchannelUri);
    await editor.getByLabel('Third-party (users must consent)').uncheck();
    await editor.getByRole('button', { name: 'Save client' }).click();
    await page.locator('#status').filter({ hasText: 'Saved client partner-app' }).waitFor();
    const client = (await s.t.server.store.getClient('partner-app'))!;
    assert.deepEqual(client.postLogoutRedirectUris, [s.postLogoutUri]);
    assert.equal(client.backchannelLogoutUri, s.backchannelUri);
    assert.equal(client.requireConsent, false);
    await row('client', 'partner-app').getByRole('button', { name: 'Edit' }).click();
    assert.equal(await editor.getByLabel('Back-channel logout URI').inputValue(), s.backchannelUri);
    await editor.getByLabel('Back-channel logout URI').fill('ftp://nope.example/');
    await editor.getByRole('button', { name: 'Save client' }).click();
    await page.locator('#status .error').waitFor();
    assert.match(
      String(await page.locator('#status').textContent()),
      /backchannelLogoutUri: must use http or https/,
    );
  });

  test("edits a client's grant types and OAuth settings; a bad value shows the API's error", async () => {
    await page.getByRole('button', { name: 'Clients' }).click();
    await row('client', 'svc-app').getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByRole('form', { name: 'Edit client svc-app' });
    await editor.getByLabel('token exchange', { exact: true }).check();
    await editor.getByRole('button', { name: 'Save client' }).click();
    await page.locator('#status').filter({ hasText: 'Saved client svc-app' }).waitFor();
    assert.deepEqual([...(await s.t.server.store.getClient('svc-app'))!.allowedGrantTypes].sort(), [
      'client_credentials',
      'urn:ietf:params:oauth:grant-type:token-exchange',
    ]);

    await row('client', 'svc-app').getByRole('button', { name: 'Edit' }).click();
    const settings = page.getByRole('form', { name: 'OAuth settings of svc-app' });
    await settings.getByLabel('Token endpoint authentication').selectOption('client_secret_post');
    await settings.getByLabel('DPoP required (DPoP-bound tokens only)').check();
    await settings.getByLabel('PAR required').check();
    await settings
      .getByLabel('Allowed resources')
      .fill('https://api.example.test/\nhttps://reports.example.test/');
    await settings.getByLabel('Token exchange: subject clients').fill('demo-spa');
    await settings.getByLabel('Token exchange: delegation').check();
    await settings.getByRole('button', { name: 'Save OAuth settings' }).click();
    await page.locator('#status').filter({ hasText: 'Saved the OAuth settings of svc-app' }).waitFor();
    assert.deepEqual((await s.t.server.store.getClient('svc-app'))!.metadata, {
      tokenEndpointAuthMethod: 'client_secret_post',
      dpopBoundAccessTokens: true,
      requirePushedAuthorizationRequests: true,
      allowedResources: ['https://api.example.test/', 'https://reports.example.test/'],
      tokenExchange: { subjectClients: ['demo-spa'], impersonation: false, delegation: true },
    });

    // The editor shows the stored settings.
    await row('client', 'svc-app').getByRole('button', { name: 'Edit' }).click();
    assert.equal(
      await settings.getByLabel('Token endpoint authentication').inputValue(),
      'client_secret_post',
    );
    assert.equal(await settings.getByLabel('DPoP required (DPoP-bound tokens only)').isChecked(), true);
    assert.equal(await settings.getByLabel('Token exchange: impersonation').isChecked(), false);

    await settings.getByLabel('JWKS URI (private_key_jwt)').fill('http://keys.example.test/jwks.json');
    await settings.getByRole('button', { name: 'Save OAuth settings' }).click();
    await page.locator('#status .error').waitFor();
    assert.match(String(await page.locator('#status').textContent()), /jwksUri/);
  });

  test('choosing client_secret_jwt shows the new secret once; it is stored sealed', async () => {
    await row('client', 'svc-app').getByRole('button', { name: 'Edit' }).click();
    const settings = page.getByRole('form', { name: 'OAuth settings of svc-app' });
    await settings.getByLabel('JWKS URI (private_key_jwt)').fill('');
    await settings.getByLabel('Token endpoint authentication').selectOption('client_secret_jwt');
    await settings.getByRole('button', { name: 'Save OAuth settings' }).click();
    const shown = page.locator('#status').filter({ hasText: 'Its new secret (shown once)' });
    await shown.waitFor();
    const secret = String(await shown.locator('code').textContent());
    assert.match(secret, /^[A-Za-z0-9_-]{43}$/);
    const stored = (await s.t.server.store.getClient('svc-app'))!;
    assert.equal(stored.metadata.tokenEndpointAuthMethod, 'client_secret_jwt');
    assert.match(stored.secretHash!, /^sealed:v1:/);
    assert.ok(!stored.secretHash!.includes(secret));
  });
});
