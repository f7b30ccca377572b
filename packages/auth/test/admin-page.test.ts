/**
 * The admin web page at `{BasePath}/` end to end (issue 6), in headless Debian Chromium driven by
 * `playwright-core` (no browser download): sign-in through the server's own authorization-code + PKCE flow
 * and login page as the bootstrap administrator, then list and edit users, roles and clients, see API errors,
 * and browse the audit log. The page loads nothing from another origin.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { type AuthServer, buildAuthServer } from '../src/server.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import { launchChromium } from './browser.ts';

const ADMIN_PASSWORD = 'admin-password-for-page';

let server: AuthServer;
let base: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const foreignRequests: string[] = [];

before(async () => {
  server = await buildAuthServer({
    store: new SqliteAuthStore(),
    hashParams: { ln: 10, r: 8, p: 1 },
    bootstrap: { adminPassword: ADMIN_PASSWORD, demoClientSecret: 'demo-service-secret-1' },
  });
  // The issuer becomes http://127.0.0.1:<port>; the bootstrap registers {issuer}/auth-admin/ for demo-spa.
  base = await server.listen(0, '127.0.0.1');
  browser = await launchChromium();
  context = await browser.newContext();
  page = await context.newPage();
  page.on('request', (request) => {
    if (!request.url().startsWith(base)) foreignRequests.push(request.url());
  });
  page.on('dialog', (dialog) => dialog.accept());
});
after(async () => {
  await browser?.close();
  await server?.app.close();
});

const status = () => page.locator('#status');
const row = (attribute: string, value: string) => page.locator(`tr[data-${attribute}="${value}"]`);

describe('admin page', () => {
  test('serves the page with a strict CSP and no third-party assets', async () => {
    const res = await fetch(`${base}/auth-admin/`);
    assert.equal(res.status, 200);
    assert.match(String(res.headers.get('content-type')), /^text\/html/);
    assert.match(String(res.headers.get('content-security-policy')), /default-src 'none'; script-src 'self'/);
    assert.equal(res.headers.get('referrer-policy'), 'no-referrer');
    const html = await res.text();
    assert.ok(!/https?:\/\//.test(html.replace(/xmlns="[^"]*"/g, '')), 'no absolute URLs in the page');
    const bare = await fetch(`${base}/auth-admin`, { redirect: 'manual' });
    assert.equal(bare.status, 301);
    assert.equal(bare.headers.get('location'), '/auth-admin/');
  });

  test('signs in through the authorization-code + PKCE flow and the login page', async () => {
    await page.goto(`${base}/auth-admin/`);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL((url) => url.pathname === '/login');
    await page.fill('input[name=username]', 'admin');
    await page.fill('input[name=password]', ADMIN_PASSWORD);
    await page.click('button[type=submit]');
    await page.waitForURL((url) => url.pathname === '/auth-admin/' && url.search === '');
    await row('user', 'admin').waitFor();
    assert.equal(await page.locator('#who').textContent(), 'admin');
    const event = (await server.store.listAudit({ category: 'Login', outcome: 'Success', limit: 1 }))
      .items[0];
    assert.ok(event, 'the sign-in went through credential validation');
  });

  test('creates, edits and disables a user', async () => {
    const form = page.getByRole('form', { name: 'New user' });
    await form.getByLabel('User name').fill('carol');
    await form.getByLabel('Password').fill('carol-password-1');
    await form.getByLabel('Roles (comma-separated)').fill('administrator');
    await form.getByRole('button', { name: 'Create user' }).click();
    await row('user', 'carol').waitFor();
    assert.match(String(await status().textContent()), /Created user carol/);
    const carol = (await server.store.findUserByName('carol'))!;
    assert.deepEqual(carol.roles, ['administrator']);
    assert.ok(carol.passwordHash && (await server.hasher.verify('carol-password-1', carol.passwordHash)));

    await row('user', 'carol').getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByRole('form', { name: 'Edit user carol' });
    await editor.getByLabel('Roles').fill('');
    await editor.getByLabel('Direct permissions').fill('auth.admin.read, shop.orders.read');
    await editor.getByRole('button', { name: 'Save user' }).click();
    await row('user', 'carol').filter({ hasText: 'shop.orders.read' }).waitFor();
    const edited = (await server.store.findUserByName('carol'))!;
    assert.deepEqual(edited.roles, []);
    assert.deepEqual(edited.directPermissions, ['auth.admin.read', 'shop.orders.read']);

    await row('user', 'carol').getByRole('button', { name: 'Disable' }).click();
    await row('user', 'carol').getByRole('button', { name: 'Enable' }).waitFor();
    assert.equal((await server.store.findUserByName('carol'))!.isEnabled, false);

    const search = page.getByRole('search', { name: 'Search users' });
    await search.getByLabel('Search').fill('car');
    await search.getByRole('button', { name: 'Search' }).click();
    await row('user', 'admin').waitFor({ state: 'detached' });
    assert.equal(await row('user', 'carol').count(), 1);
    await page.getByRole('search', { name: 'Search users' }).getByLabel('Search').fill('');
    await page.getByRole('search', { name: 'Search users' }).getByRole('button', { name: 'Search' }).click();
    await row('user', 'admin').waitFor();
  });

  test('shows the API’s error message (409 duplicate user)', async () => {
    const form = page.getByRole('form', { name: 'New user' });
    await form.getByLabel('User name').fill('Carol');
    await form.getByRole('button', { name: 'Create user' }).click();
    await page.locator('#status .error').waitFor();
    assert.equal(
      await page.locator('#status .error').textContent(),
      "user with userName 'Carol' already exists",
    );
  });

  test('creates and edits a role', async () => {
    await page.getByRole('button', { name: 'Roles', exact: true }).click();
    const form = page.getByRole('form', { name: 'New role' });
    await form.getByLabel('Name', { exact: true }).fill('support');
    await form.getByLabel('Description').fill('Help desk');
    await form.getByLabel('Permissions', { exact: true }).fill('auth.admin.read');
    await form.getByRole('button', { name: 'Create role' }).click();
    await row('role', 'support').waitFor();
    await row('role', 'support').getByRole('button', { name: 'Edit' }).click();
    const editor = page.getByRole('form', { name: 'Edit role support' });
    await editor.getByLabel('Permissions', { exact: true }).fill('auth.admin.read, auth.admin.users');
    await editor.getByRole('button', { name: 'Save role' }).click();
    await row('role', 'support').filter({ hasText: 'auth.admin.users' }).waitFor();
    const role = (await server.store.findRoleByName('support'))!;
    assert.deepEqual(role.permissions, ['auth.admin.read', 'auth.admin.users']);
    assert.equal(role.description, 'Help desk');
    assert.equal(await row('role', 'administrator').getByRole('button', { name: 'Delete' }).count(), 0);
  });

  test('registers a confidential client and shows its secret once', async () => {
    await page.getByRole('button', { name: 'Clients', exact: true }).click();
    await row('client', 'demo-spa').waitFor();
    const form = page.getByRole('form', { name: 'New client' });
    await form.getByLabel('Client id').fill('reports');
    await form.getByLabel('Type').selectOption('confidential');
    await form.getByLabel('Scopes').fill('api');
    await form.getByLabel('client_credentials').check();
    await form.getByRole('button', { name: 'Create client' }).click();
    await row('client', 'reports').waitFor();
    const secret = String(await page.locator('#status code').textContent());
    assert.ok(secret.length >= 32);
    const client = (await server.store.getClient('reports'))!;
    assert.deepEqual(client.allowedGrantTypes, ['client_credentials']);
    assert.ok(await server.hasher.verify(secret, client.secretHash!));

    await row('client', 'reports').getByRole('button', { name: 'Disable' }).click();
    await row('client', 'reports').getByRole('button', { name: 'Enable' }).waitFor();
    assert.equal((await server.store.getClient('reports'))!.isEnabled, false);
  });

  test('browses the audit log with a filter', async () => {
    await page.getByRole('button', { name: 'Audit log' }).click();
    const filter = page.getByRole('form', { name: 'Audit filter' });
    await filter.getByLabel('Category').fill('Admin');
    await filter.getByLabel('Outcome').fill('Success');
    await filter.getByRole('button', { name: 'Apply filter' }).click();
    // The unfiltered table stays on screen until the filtered answer arrives: poll for the filtered one
    // (up to 10 s), then assert on what is shown.
    const filtered = (texts: string[]) =>
      texts.length >= 5 && texts.every((text) => text.includes('Admin') && text.includes('Success'));
    let rows = await page.locator('#view tbody tr').allTextContents();
    for (const deadline = Date.now() + 10_000; !filtered(rows) && Date.now() < deadline; ) {
      await page.waitForTimeout(50);
      rows = await page.locator('#view tbody tr').allTextContents();
    }
    assert.ok(rows.length >= 5, `admin events listed: ${rows.length}`);
    assert.ok(rows.every((text) => text.includes('Admin') && text.includes('Success')));
    assert.ok(rows.some((text) => text.includes('user.create') && text.includes('admin')));
    assert.ok(!rows.some((text) => text.includes('Login')), 'the filter applies');
  });

  test('pages through the audit log', async () => {
    const t0 = Date.now() - 3600_000;
    for (let i = 0; i < 60; i++) {
      await server.store.appendAudit({
        time: t0 + i * 1000,
        category: 'Paging',
        outcome: 'Denied',
        subjectId: `p-${i}`,
      });
    }
    const filter = page.getByRole('form', { name: 'Audit filter' });
    await filter.getByLabel('Category').fill('Paging');
    await filter.getByLabel('Outcome').fill('');
    await filter.getByRole('button', { name: 'Apply filter' }).click();
    await page.getByText('1–50 of 60').waitFor();
    assert.match(String(await page.locator('#view tbody tr').first().textContent()), /p-59/);
    await page.getByRole('button', { name: 'Older' }).click();
    await page.getByText('51–60 of 60').waitFor();
    assert.equal(await page.locator('#view tbody tr').count(), 10);
    assert.match(String(await page.locator('#view tbody tr').last().textContent()), /p-0\b/);
    assert.equal(await page.getByRole('button', { name: 'Older' }).isDisabled(), true);
    await page.getByRole('button', { name: 'Newer' }).click();
    await page.getByText('1–50 of 60').waitFor();
  });

  test('loaded nothing from another origin', () => {
    assert.deepEqual(foreignRequests, []);
  });

  test('signing out forgets the token', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem('seed-auth-admin.tokens')), null);
  });

  test('refuses a callback it did not start (state mismatch) and stays signed out', async () => {
    await page.goto(`${base}/auth-admin/?code=forged-code&state=forged-state`);
    await page.locator('#status .error').waitFor();
    assert.match(String(await page.locator('#status .error').textContent()), /state mismatch/);
    assert.equal(page.url(), `${base}/auth-admin/`, 'the code is removed from the address bar');
    assert.equal(await page.evaluate(() => sessionStorage.getItem('seed-auth-admin.tokens')), null);
    assert.equal(await page.getByRole('button', { name: 'Sign in' }).isVisible(), true);
  });
});
