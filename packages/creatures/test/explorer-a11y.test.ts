/**
 * Accessibility of the GraphiQL explorer served at `/graphql`, in real Chromium against the real server:
 * no serious or critical axe-core finding (WCAG 2.x A/AA and best practices, the same rules as the web
 * front end's pages), with the page as it opens, after the default query ran, and with the Docs panel
 * open.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { type Browser, chromium, type Page } from 'playwright-core';
import { CHROMIUM_PATH } from '../scripts/setup-browser.ts';
import { type Running, start } from './helpers.ts';
import { LAUNCH_ARGS, seriousAxeFindings } from './web-helpers.ts';

let running: Running;
let browser: Browser;

before(async () => {
  assert.ok(
    existsSync(CHROMIUM_PATH),
    `${CHROMIUM_PATH} is missing: run npm run test:setup -w @seed/creatures`,
  );
  running = await start();
  browser = await chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: LAUNCH_ARGS });
});

after(async () => {
  await browser?.close();
  await running?.server.close();
});

/** Fails with the findings listed when axe finds anything serious or critical. */
async function assertAccessible(page: Page, where: string): Promise<void> {
  const findings = await seriousAxeFindings(page);
  assert.deepEqual(
    findings,
    [],
    `${where}: ${findings.length} serious/critical axe findings:\n${findings
      .map((f) => `  ${f.impact} ${f.id}: ${f.help} (${f.targets.join(', ')})`)
      .join('\n')}`,
  );
}

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
