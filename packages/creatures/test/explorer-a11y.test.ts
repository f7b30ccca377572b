/**
 * Accessibility of the GraphiQL explorer served at `/graphql`, in real Chromium against the real server:
 * no serious or critical axe-core finding (WCAG 2.x A/AA and best practices, the same rules as the web
 * front end's pages), with the page as it opens, after the default query ran, and with the Docs panel
 * open.
 */
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { type Running, start } from './helpers.ts';
import { assertAccessible, launchChromium } from './web-helpers.ts';

let running: Running;
let browser: Browser;

before(async () => {
  running = await start();
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await running?.server.close();
});

test('the explorer has no serious or critical axe finding: opened, after a query, with the Docs panel', async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${running.server.url}/graphql`);
  await page.waitForSelector('.graphiql-container .CodeMirror', { timeout: 20_000 });
  await assertAccessible(page, 'opened');
  await page.click('.graphiql-execute-button');
  await page.locator('.result-window').getByText('6.75kg').waitFor({ timeout: 20_000 });
  await assertAccessible(page, 'after the default query');
  await page.click('button[aria-label="Show Documentation Explorer"]');
  await page.locator('.graphiql-doc-explorer').getByText('Root Types').waitFor({ timeout: 20_000 });
  await assertAccessible(page, 'with the Docs panel');
  await page.close();
});
