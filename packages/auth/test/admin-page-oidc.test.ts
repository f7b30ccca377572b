/**
 * The admin page's OpenID Connect additions in Chromium: a user's profile fields, a user's consents to
 * third-party clients (listed and revoked), a role's parent roles, and a client's logout and consent
 * settings — each edited through the page and checked in the store.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

let s: OidcSetup;
let page: Page;
const row = (attribute: string, value: string) => page.locator(`tr[data-${attribute}="${value}"]`);

before(async () => {
  s = await startOidcSetup();
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
    await editor.getByRole('button', { name: 'Save user' }).click();
    await page.locator('#status').filter({ hasText: 'Saved olivia' }).waitFor();
    const olivia = (await s.t.server.store.findUserByName('olivia'))!;
    assert.deepEqual(
      [olivia.displayName, olivia.familyName, olivia.givenName, olivia.email],
      ['Olivia Roe', 'Roe', 'Olivia', null],
    );
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
});
