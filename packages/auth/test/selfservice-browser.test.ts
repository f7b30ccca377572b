/**
 * Password reset end to end in headless Chromium with a real SMTP server (`python3-aiosmtpd`): the user
 * follows "Forgot your password?" from the login page, asks for a link, the mail arrives at the SMTP server,
 * the browser opens the link from the mail, sets a new password, and signs in with it on the login page
 * (the account page then opens for the user); the old password no longer signs in, and the link does not work twice.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './browser.ts';
import { startTestServer, type TestServer } from './oauth-fixtures.ts';
import { linkIn, SmtpSink } from './smtp-sink.ts';

let smtp: SmtpSink;
let t: TestServer;
let browser: Browser;
before(async () => {
  smtp = await SmtpSink.start();
  t = await startTestServer({
    oauth: { selfService: { smtpUrl: `smtp://127.0.0.1:${smtp.port}`, from: 'auth@example.org' } },
  });
  const rosa = await t.createUser('rosa', 'rosa-old-password');
  await t.server.store.updateUser(rosa.id, { email: 'rosa@example.org' });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await t?.close();
  smtp?.stop();
});

/** Fills the login page and submits it; resolves once the next page has loaded. */
async function signIn(page: Page, password: string): Promise<void> {
  await page.goto(`${t.base}/login`);
  await page.fill('input[name=username]', 'rosa');
  await page.fill('input[name=password]', password);
  await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('button[type=submit]')]);
}

test('forgot password → mail → link opened in the browser → new password → sign-in with it', async () => {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(`${t.base}/login`);
    await Promise.all([page.waitForURL(/\/login\/forgot$/), page.click('#forgot')]);
    await page.fill('#account', 'rosa@example.org');
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('button[type=submit]')]);

    const message = await smtp.message(0);
    assert.match(message, /To: rosa@example.org/);
    const link = linkIn(message, '/login/reset');
    assert.equal(link.origin, t.base, 'the link points at the issuer');

    // A fresh browser context, as when the mail is opened on another device.
    const mailContext = await browser.newContext();
    try {
      const resetPage = await mailContext.newPage();
      await resetPage.goto(link.href);
      await resetPage.fill('#password', 'rosa-new-password');
      await resetPage.fill('#password2', 'rosa-new-password');
      await Promise.all([
        resetPage.waitForNavigation({ waitUntil: 'load' }),
        resetPage.click('button[type=submit]'),
      ]);
      assert.match((await resetPage.textContent('body')) ?? '', /Your password has been changed\./);

      // The same link again: the one failure page.
      await resetPage.goto(link.href);
      assert.match((await resetPage.textContent('body')) ?? '', /not valid or has expired/);
    } finally {
      await mailContext.close();
    }

    await signIn(page, 'rosa-old-password');
    assert.match(page.url(), /\/login\?.*err=1/, 'the old password fails');
    await signIn(page, 'rosa-new-password');
    assert.doesNotMatch(page.url(), /err=1/);
    await page.goto(`${t.base}/login/account`);
    assert.equal(new URL(page.url()).pathname, '/login/account', 'signed in: the account page is shown');
    assert.match((await page.textContent('body')) ?? '', /Signed in as rosa/);

    const events = await t.server.store.listAudit({ category: 'Login', limit: 20 });
    const kinds = events.items.map((e) => `${e.details?.event ?? ''}:${e.failureCode ?? ''}`);
    assert.ok(kinds.includes('password_reset:'), kinds.join(' '));
    assert.ok(kinds.includes(':invalid_credentials'), kinds.join(' '));
  } finally {
    await context.close();
  }
});
