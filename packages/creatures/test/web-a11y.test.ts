/**
 * Accessibility of the web front end in real Chromium against the real server (in-memory database): every
 * route, at 1280×800 and at 390×844, has its own page title and no serious or critical axe-core finding
 * (WCAG 2.x A/AA and best practices, which include colour contrast ≥ 4.5:1), also with form errors shown;
 * the first Tab reaches a skip link; opening a creature moves focus to its heading. A screenshot of every
 * route at both sizes is stored in `packages/creatures/test-artifacts/` (`<route>-<width>x<height>.png`).
 */
import assert from 'node:assert/strict';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { buildWeb, WEB_DIST } from '../scripts/build-web.ts';
import { type Running, start } from './helpers.ts';
import {
  ARTIFACTS,
  assertAccessible,
  DESKTOP,
  hasFocus,
  inPage,
  launchChromium,
  openPage,
  PHONE,
} from './web-helpers.ts';

let running: Running;
let browser: Browser;
const problems: string[] = [];

/** A route of the page, what its heading and title say, and the screenshot's name. */
interface RouteCase {
  shot: string;
  hash: string;
  heading: RegExp;
  title: string;
}

const ROUTES: RouteCase[] = [
  { shot: 'home', hash: '#/', heading: /^Creatures$/, title: 'Creatures' },
  { shot: 'creature', hash: '#/creatures/Pikachu', heading: /^Pikachu/, title: 'Pikachu · Creatures' },
  {
    shot: 'edit',
    hash: '#/creatures/Pikachu/edit',
    heading: /^Edit Pikachu$/,
    title: 'Edit Pikachu · Creatures',
  },
  { shot: 'new', hash: '#/new', heading: /^New creature$/, title: 'New creature · Creatures' },
  { shot: 'not-found', hash: '#/creatures/Agumon', heading: /^Agumon$/, title: 'Not found · Creatures' },
];

/** Waits until the page shows its data: the list is loaded and the live connection is up. */
async function settled(page: Page): Promise<void> {
  await page.getByText('151 creatures', { exact: true }).waitFor();
  await page.locator('.live', { hasText: 'live' }).waitFor();
}

before(async () => {
  await buildWeb();
  running = await start({ webRoot: WEB_DIST });
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await running?.server.close();
});

for (const viewport of [DESKTOP, PHONE]) {
  const size = `${viewport.width}x${viewport.height}`;
  describe(`accessibility at ${size} (Chromium, axe-core)`, () => {
    let page: Page;
    before(async () => {
      page = await openPage(browser, { viewport, problems });
    });
    after(async () => {
      await page.context().close();
    });

    for (const route of ROUTES) {
      test(`${route.hash}: title "${route.title}", no serious or critical axe findings, screenshot`, async () => {
        await page.goto(`${running.server.url}/${route.hash}`);
        await settled(page);
        await page.getByRole('heading', { level: 1, name: route.heading }).waitFor();
        assert.equal(await page.title(), route.title);
        await assertAccessible(page, route.hash);
        const file = join(ARTIFACTS, `${route.shot}-${size}.png`);
        await page.screenshot({ path: file, fullPage: false });
        assert.ok(statSync(file).size > 5_000, 'the screenshot has content');
      });
    }

    test('a form showing the server’s errors has no serious or critical axe findings', async () => {
      await page.goto(`${running.server.url}/#/new`);
      await settled(page);
      await page.getByLabel('Name', { exact: true }).fill('pikachu');
      await page.getByRole('button', { name: 'Create creature' }).click();
      await page.locator('[aria-invalid="true"]').first().waitFor();
      await assertAccessible(page, '#/new with errors');
    });

    test('the first Tab reaches a skip link that moves focus to the main content', async () => {
      await page.goto(`${running.server.url}/#/creatures/Pikachu`);
      await page.reload(); // a fresh load of the route, not an in-page hash change
      await settled(page);
      await page.getByRole('heading', { level: 1, name: /^Pikachu/ }).waitFor();
      await page.keyboard.press('Tab');
      const skip = page.getByRole('link', { name: 'Skip to content' });
      assert.ok(await hasFocus(skip), 'the skip link has focus');
      assert.ok(await skip.isVisible(), 'the focused skip link is visible');
      await page.keyboard.press('Enter');
      assert.equal(await inPage(page, "document.activeElement?.closest('main')?.id"), 'content');
      // From the main content the creature's actions are a few Tab presses away, not past the list.
      let presses = 0;
      while (presses < 10) {
        presses++;
        await page.keyboard.press('Tab');
        if ((await inPage(page, 'document.activeElement?.textContent?.trim()')) === 'Edit') break;
      }
      assert.ok(presses < 10, `Edit is reached within ${presses} Tab presses of the skip link`);
    });
  });
}

test('no uncaught errors and no CSP violations in any page', () => {
  assert.deepEqual(problems, []);
});
