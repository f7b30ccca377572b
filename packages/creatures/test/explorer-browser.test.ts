import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { CHROMIUM_PATH } from '../scripts/setup-browser.ts';
import { type Running, start } from './helpers.ts';

const executablePath = existsSync(CHROMIUM_PATH) ? CHROMIUM_PATH : undefined;
let s: Running;
let browser: Browser;

before(async () => {
  if (!executablePath) return;
  s = await start();
  browser = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await s?.server.close();
});

test('the explorer renders offline in Chromium: Docs panel shows Query, and the default query runs', {
  skip: executablePath
    ? false
    : `no Chromium at ${CHROMIUM_PATH} (npm run test:setup -w @seed/creatures installs it as root)`,
}, async () => {
  const page = await browser.newPage();
  const foreign: string[] = [];
  const origin = new URL(s.server.url).origin;
  // No internet: anything not served by our server fails, and is recorded.
  await page.route('**/*', (route) => {
    if (new URL(route.request().url()).origin === origin) return route.continue();
    foreign.push(route.request().url());
    return route.abort();
  });
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${s.server.url}/graphql`);
  await page.waitForSelector('.graphiql-container', { timeout: 20_000 });
  await page.click('button[aria-label="Show Documentation Explorer"]');
  const docs = page.locator('.graphiql-doc-explorer');
  await docs.getByText('Root Types').waitFor({ timeout: 20_000 });
  const text = (await docs.textContent()) ?? '';
  assert.match(text, /query:\s*Query/);
  assert.match(text, /mutation:\s*Mutation/);
  await page.click('.graphiql-execute-button');
  const result = page.locator('.result-window');
  await result.getByText('6.75kg').waitFor({ timeout: 20_000 });
  assert.match((await result.textContent()) ?? '', /Thunder Shock/);
  assert.deepEqual(foreign, []);
  assert.deepEqual(pageErrors, []);
});
