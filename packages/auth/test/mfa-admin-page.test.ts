/**
 * The admin web page's second-factor section in headless Chromium: signed in as the bootstrap
 * administrator, the user editor shows a user's TOTP factor, recovery codes left and passkeys, requires two
 * factors for the user, and removes the passkey and the TOTP factor through the administration API; the role
 * and client editors require two factors for a role and a client.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { type AuthServer, buildAuthServer } from '../src/server.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { UserRecord } from '../src/store/types.ts';
import { launchChromium } from './browser.ts';

const ADMIN_PASSWORD = 'admin-password-for-mfa-page';
let server: AuthServer;
let base: string;
let browser: Browser;
let page: Page;
let uma: UserRecord;

before(async () => {
  server = await buildAuthServer({
    store: new SqliteAuthStore(),
    hashParams: { ln: 10, r: 8, p: 1 },
    bootstrap: { adminPassword: ADMIN_PASSWORD, demoClientSecret: 'demo-service-secret-1' },
  });
  base = await server.listen(0, '127.0.0.1');
  uma = await server.store.createUser({ userName: 'uma' });
  const now = Date.now();
  await server.store.factors.setTotp(uma.id, 'v1.sealed-seed', 1, now);
  await server.store.factors.replaceRecoveryCodes(uma.id, ['a', 'b', 'c'], now);
  await server.store.factors.passkeys.add({
    id: 'uma-passkey',
    userId: uma.id,
    publicKey: 'cose-key',
    counter: 0,
    transports: ['internal'],
    deviceType: 'singleDevice',
    backedUp: false,
    name: 'Uma laptop',
    createdAt: now,
  });
  browser = await launchChromium();
  page = await (await browser.newContext()).newPage();
  page.on('dialog', (dialog) => dialog.accept());
});
after(async () => {
  await browser?.close();
  await server?.app.close();
});

test('the user editor shows, requires and removes second factors', async () => {
  await page.goto(`${base}/auth-admin/`);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname === '/login');
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', ADMIN_PASSWORD);
  await page.click('button[type=submit]');
  await page.waitForURL((url) => url.pathname === '/auth-admin/' && url.search === '');
  const row = page.locator('tr[data-user="uma"]');
  await row.getByRole('button', { name: 'Edit' }).click();
  const section = page.getByRole('region', { name: 'Second factors of uma' });
  await section.locator('[data-factor=totp]').filter({ hasText: '3 recovery code(s) left' }).waitFor();
  await section.locator('tr[data-passkey="uma-passkey"]').filter({ hasText: 'Uma laptop' }).waitFor();

  await section.getByRole('button', { name: 'Require two factors' }).click();
  await page.locator('#status').filter({ hasText: 'Two factors required.' }).waitFor();
  assert.equal(await server.store.factors.isMfaRequired(uma.id, null), true);

  await row.getByRole('button', { name: 'Edit' }).click();
  await section.locator('tr[data-passkey="uma-passkey"]').getByRole('button', { name: 'Remove' }).click();
  await page.locator('#status').filter({ hasText: 'Removed the passkey Uma laptop.' }).waitFor();
  assert.deepEqual(await server.store.factors.passkeys.list(uma.id), []);

  await row.getByRole('button', { name: 'Edit' }).click();
  await section.getByRole('button', { name: 'Remove TOTP' }).click();
  await page.locator('#status').filter({ hasText: 'Removed the authenticator app of uma.' }).waitFor();
  assert.equal(await server.store.factors.getTotp(uma.id), undefined);
  const actions = (await server.store.listAudit({ category: 'Admin', limit: 3 })).items.map(
    (e) => e.details?.action,
  );
  assert.deepEqual(actions, ['factor.remove', 'factor.remove', 'mfa.require']);
});

test('the role and client editors require two factors for every holder of the role and every sign-in to the client', async () => {
  const admin = await server.store.findRoleByName('administrator');
  await page.getByRole('button', { name: 'Roles', exact: true }).click();
  await page.locator('tr[data-role="administrator"]').getByRole('button', { name: 'Edit' }).click();
  const roleBox = page.getByRole('region', { name: 'Two factors for role administrator' });
  await roleBox.getByRole('button', { name: 'Require two factors' }).click();
  await page.locator('#status').filter({ hasText: 'Two factors required for role administrator.' }).waitFor();
  assert.deepEqual(
    (await server.store.factors.listMfaRequirements())
      .filter((r) => r.targetKind === 'role')
      .map((r) => r.targetId),
    [admin!.id],
  );
  await page.getByRole('button', { name: 'Clients', exact: true }).click();
  await page.locator('tr[data-client="demo-spa"]').getByRole('button', { name: 'Edit' }).click();
  const clientBox = page.getByRole('region', { name: 'Two factors for client demo-spa' });
  await clientBox.getByRole('button', { name: 'Require two factors' }).click();
  await page.locator('#status').filter({ hasText: 'Two factors required for client demo-spa.' }).waitFor();
  assert.equal(await server.store.factors.isMfaRequired('someone', 'demo-spa'), true);
  await page.locator('tr[data-client="demo-spa"]').getByRole('button', { name: 'Edit' }).click();
  await clientBox.getByRole('button', { name: 'Stop requiring two factors' }).click();
  await page.locator('#status').filter({ hasText: 'no longer required for client demo-spa' }).waitFor();
  assert.equal(await server.store.factors.isMfaRequired('someone', 'demo-spa'), false);
});
