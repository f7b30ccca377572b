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
/** Test options: skipped, with the reason, when Debian's Chromium is not installed. */
const needsChromium = {
  skip: executablePath
    ? false
    : `no Chromium at ${CHROMIUM_PATH} (npm run test:setup -w @seed/creatures installs it as root)`,
};

after(async () => {
  await browser?.close();
  await s?.server.close();
});

test(
  'the explorer renders offline in Chromium: Docs panel shows Query, and the default query runs',
  needsChromium,
  async () => {
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
  },
);

test(
  'a subscription run in the explorer streams live events over WebSocket until stopped',
  needsChromium,
  async () => {
    const page = await browser.newPage();
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    const sockets: string[] = [];
    page.on('websocket', (socket) => sockets.push(new URL(socket.url()).pathname));
    const query = 'subscription Live {\n  messageChanged { kind message { content author } }\n}\n';
    await page.goto(`${s.server.url}/graphql?query=${encodeURIComponent(query)}`);
    await page.waitForSelector('.graphiql-container', { timeout: 20_000 });
    await page.click('.graphiql-execute-button');
    const result = page.locator('.result-window');
    // The stream is established asynchronously: post messages until one shows up in the result pane.
    let shown = '';
    // Up to 30 s: a loaded machine is slow.
    for (let i = 0, end = Date.now() + 30_000; !shown && Date.now() < end; i++) {
      const posted = await s.gql(
        'mutation ($c: String) { createMessage(input: { content: $c, author: "explorer-test" }) { id } }',
        {
          c: `live-${i}`,
        },
      );
      assert.equal(posted.status, 200);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const text = (await result.textContent()) ?? '';
      if (/live-\d+/.test(text)) shown = text;
    }
    assert.match(shown, /"kind": "CREATED"/);
    assert.match(shown, /"author": "explorer-test"/);
    assert.deepEqual(sockets, ['/graphql'], 'one GraphQL-over-WebSocket connection to /graphql');
    // Stop ends the stream: later messages no longer arrive.
    await page.click('.graphiql-execute-button');
    await new Promise((resolve) => setTimeout(resolve, 300));
    await s.gql(
      'mutation { createMessage(input: { content: "after-stop", author: "explorer-test" }) { id } }',
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.doesNotMatch((await result.textContent()) ?? '', /after-stop/);
    assert.deepEqual(pageErrors, []);
  },
);
