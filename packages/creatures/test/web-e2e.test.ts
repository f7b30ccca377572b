/**
 * End-to-end tests of the web front end in a real browser: Debian's Chromium (`/usr/bin/chromium`, installed
 * by `scripts/setup-browser.ts`) driven by playwright-core, against the real creature server on an ephemeral
 * port with an in-memory database, serving the production build of `web/` (built when stale). Two browser
 * contexts stand for two users' browsers; live updates travel between them over GraphQL subscriptions (SSE).
 * A screenshot is stored in `packages/creatures/test-artifacts/`.
 */
import assert from 'node:assert/strict';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Locator, Page } from 'playwright-core';
import { buildWeb, WEB_DIST } from '../scripts/build-web.ts';
import { type Running, start } from './helpers.ts';
import {
  ARTIFACTS,
  DESKTOP,
  describedBy,
  inPage,
  launchChromium,
  openPage as openPageIn,
  PHONE,
  waitForFocus,
} from './web-helpers.ts';

let running: Running;
let browser: Browser;
const pages: Page[] = [];
/** Uncaught page errors and Content-Security-Policy violations seen in any page. */
const problems: string[] = [];
let page1: Page;
let page2: Page;
let base: string;
/** Listeners of the store's change feed before any page subscribed (the server's own). */
let baseline: number;

/** Opens a page in a fresh browser context (its own storage, like another user's browser). */
async function openPage(viewport: { width: number; height: number } = DESKTOP): Promise<Page> {
  const page = await openPageIn(browser, { viewport, problems });
  pages.push(page);
  return page;
}

/**
 * Waits until the server has `n` subscribers on its change feed besides its own listeners, i.e. the pages'
 * subscriptions are established and will see the next change.
 */
async function subscribers(n: number): Promise<void> {
  const events = running.server.store.events;
  for (let i = 0; events.listenerCount('change') < baseline + n; i++) {
    if (i > 1500)
      assert.fail(`expected ${n} subscriptions, have ${events.listenerCount('change') - baseline}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** The text content of an element ("" when it has none); not `innerText`, which applies CSS text-transform. */
async function text(locator: Locator): Promise<string> {
  return (await locator.textContent()) ?? '';
}

/** The cells of the table row whose first cell is `name`. */
function cells(table: Locator, name: string): Promise<string[]> {
  return table
    .getByRole('row')
    .filter({ has: table.page().getByRole('cell', { name, exact: true }) })
    .getByRole('cell')
    .allTextContents();
}

/** The names shown in a page's creature list. */
function listedNames(page: Page): Promise<string[]> {
  return page.getByRole('list', { name: 'Creatures' }).locator('li .name').allTextContents();
}

before(async () => {
  await buildWeb();
  running = await start({ webRoot: WEB_DIST });
  baseline = running.server.store.events.listenerCount('change');
  base = running.server.url;
  browser = await launchChromium();
  page1 = await openPage();
  page2 = await openPage();
});

after(async () => {
  for (const page of pages) await page.context().close();
  await browser?.close();
  await running?.server.close();
});

describe('creature web front end (Chromium)', () => {
  test('the page at / lists the 151 creatures; search by name and filter by type narrow the list', async () => {
    const response = await page1.goto(`${base}/`);
    assert.equal(response?.status(), 200);
    assert.match((await response?.headerValue('content-security-policy')) ?? '', /script-src 'self'/);
    await page1.getByRole('heading', { level: 1, name: 'Creatures', exact: true }).waitFor();
    assert.equal(await page1.title(), 'Creatures');
    await page1.locator('.live', { hasText: 'live' }).waitFor();
    await page1.getByText('151 creatures', { exact: true }).waitFor();
    const names = await listedNames(page1);
    assert.deepEqual(names.slice(0, 3), ['Bulbasaur', 'Ivysaur', 'Venusaur']);
    assert.equal(names.length, 50, 'the first page');
    // "Show more" appends the next page and moves focus to its first creature.
    await page1.getByRole('button', { name: 'Show more creatures' }).click();
    await page1.getByRole('link', { name: /Dugtrio/ }).waitFor();
    assert.equal((await listedNames(page1)).length, 100);
    await waitForFocus(page1.getByRole('link', { name: /#051/ }));

    await page1.getByLabel('Sort by').selectOption({ label: 'Max CP, highest first' });
    await page1
      .getByRole('list', { name: 'Creatures' })
      .locator('li .name')
      .first()
      .filter({ hasText: 'Mewtwo' })
      .waitFor();
    await page1.getByLabel('Sort by').selectOption({ label: 'Number' });

    await page1.getByLabel('Search by name').fill('char');
    await page1.getByText('3 of 151 match').waitFor();
    assert.deepEqual(await listedNames(page1), ['Charmander', 'Charmeleon', 'Charizard']);

    await page1.getByLabel('Search by name').fill('');
    await page1.getByLabel('Filter by type').selectOption('Electric');
    await page1.getByText('9 of 151 match').waitFor();
    assert.deepEqual(await listedNames(page1), [
      'Pikachu',
      'Raichu',
      'Magnemite',
      'Magneton',
      'Voltorb',
      'Electrode',
      'Electabuzz',
      'Jolteon',
      'Zapdos',
    ]);
    await page1.getByLabel('Filter by type').selectOption('');
    await page1.getByText('151 creatures', { exact: true }).waitFor();
  });

  test("opening a creature shows its full detail; evolutions are links to the next creature's page", async () => {
    await page1.getByLabel('Search by name').fill('pika');
    await page1
      .getByRole('list', { name: 'Creatures' })
      .getByRole('link', { name: /Pikachu/ })
      .click();
    const heading = page1.getByRole('heading', { level: 1, name: /Pikachu/ });
    await heading.waitFor();
    assert.match(await text(heading), /Pikachu\s*#025/);
    assert.equal(await page1.title(), 'Pikachu · Creatures');
    await waitForFocus(heading);
    const facts = page1.locator('dl.facts');
    assert.match(await text(facts), /Weight\s*5\.25kg – 6\.75kg/);
    assert.match(await text(facts), /Height\s*0\.35m – 0\.45m/);
    assert.match(await text(facts), /Evolves with\s*50 Pikachu candies/);
    const fast = page1.getByRole('table', { name: 'Fast attacks' });
    assert.deepEqual(await cells(fast, 'Thunder Shock'), ['Thunder Shock', 'Electric', '5']);
    assert.deepEqual(await cells(page1.getByRole('table', { name: 'Special attacks' }), 'Thunderbolt'), [
      'Thunderbolt',
      'Electric',
      '80',
    ]);

    await page1.getByRole('region', { name: 'Evolutions' }).getByRole('link', { name: 'Raichu' }).click();
    await page1.getByRole('heading', { level: 1, name: /Raichu/ }).waitFor();
    assert.match(page1.url(), /#\/creatures\/Raichu$/);
    assert.match(await text(page1.locator('dl.facts')), /Max CP\s*2182/);
    await page1.getByRole('region', { name: 'Evolutions' }).getByRole('link', { name: 'Pikachu' }).waitFor();
  });

  test('a message posted and edited in one browser shows up live in another, and stays after a reload', async () => {
    await page2.goto(`${base}/`);
    await page2.getByText('151 creatures', { exact: true }).waitFor();
    await subscribers(4); // two subscriptions (creatures, messages) per page

    await page1.getByLabel('Your name').fill('Ash');
    await page1.getByLabel('Message', { exact: true }).fill('Hello from the first browser');
    await page1.getByRole('button', { name: 'Post' }).click();
    const board1 = page1.getByRole('list', { name: 'Messages' });
    await board1.getByText('Hello from the first browser').waitFor();
    const board2 = page2.getByRole('list', { name: 'Messages' });
    await board2.getByText('Hello from the first browser').waitFor();
    assert.match(await text(board2.locator('li').first()), /Ash/);

    await board1.getByRole('button', { name: 'Edit' }).first().click();
    await page1.getByRole('textbox', { name: 'Edit message' }).fill('Hello again, edited');
    await page1.getByRole('button', { name: 'Save' }).click();
    await board1.getByText('Hello again, edited').waitFor();
    await board2.getByText('Hello again, edited').waitFor();
    assert.equal(await board2.getByText('Hello from the first browser').count(), 0);
    assert.equal(await board2.locator('li').count(), 1);

    // After a reload the board re-reads the messages this browser posted (getMessage by the remembered ids).
    await page1.reload();
    await board1.getByText('Hello again, edited').waitFor();
  });

  test('a creature edited, created and deleted in one browser changes live in the other', async () => {
    await page2.goto(`${base}/#/creatures/Pikachu`);
    await page2.getByRole('heading', { level: 1, name: /Pikachu/ }).waitFor();
    assert.match(await text(page2.locator('dl.facts')), /Max CP\s*938/);

    await page1.goto(`${base}/#/creatures/Pikachu/edit`);
    const maxCP = page1.getByLabel('Max CP');
    assert.equal(await maxCP.inputValue(), '938');
    await maxCP.fill('999');
    await page1.getByRole('button', { name: 'Save changes' }).click();
    await page1.getByRole('heading', { level: 1, name: /Pikachu/ }).waitFor();
    await page1.locator('dl.facts', { hasText: '999' }).waitFor();
    await page2.locator('dl.facts', { hasText: /Max CP\s*999/ }).waitFor();
    await page2.getByText('Pikachu was updated').waitFor();

    await page1.getByRole('link', { name: 'New creature' }).click();
    await page1.getByLabel('Name', { exact: true }).fill('Sparkmon');
    const types = page1.getByRole('group', { name: 'Types' });
    await types.getByRole('checkbox', { name: 'Electric' }).check();
    await types.getByRole('checkbox', { name: 'Fairy' }).check();
    await page1.getByRole('spinbutton', { name: 'Weight, minimum (kg)' }).fill('1.5');
    await page1.getByRole('spinbutton', { name: 'Flee rate (%)' }).fill('12');
    await page1.getByRole('button', { name: 'Add fast attack' }).click();
    await page1.getByLabel('Name of fast attack 1').fill('Zap');
    await page1.getByLabel('Type of fast attack 1').selectOption('Electric');
    await page1.getByLabel('Damage of fast attack 1').fill('7');
    await page1.getByLabel('Add to previous evolutions').fill('Pikachu');
    await page1.getByRole('button', { name: 'Add to previous evolutions' }).click();
    await page1.getByRole('group', { name: 'Previous evolutions' }).getByText('Pikachu').waitFor();
    await page1.getByRole('button', { name: 'Create creature' }).click();
    await page1.getByRole('heading', { level: 1, name: /Sparkmon/ }).waitFor();
    assert.match(await text(page1.locator('dl.facts')), /Weight\s*1\.5kg – —?/);
    assert.match(await text(page1.locator('dl.facts')), /Flee rate\s*12%/);
    assert.deepEqual(await cells(page1.getByRole('table', { name: 'Fast attacks' }), 'Zap'), [
      'Zap',
      'Electric',
      '7',
    ]);
    await page1.getByRole('region', { name: 'Evolutions' }).getByRole('link', { name: 'Pikachu' }).waitFor();
    await page2.getByLabel('Search by name').fill('spark');
    await page2.getByText('1 of 152 match').waitFor();
    assert.deepEqual(await listedNames(page2), ['Sparkmon']);

    await page1.getByRole('button', { name: 'Delete' }).click();
    await waitForFocus(page1.getByRole('button', { name: 'Cancel' }));
    await page1.getByRole('button', { name: 'Yes, delete Sparkmon' }).click();
    await page1.waitForURL(/#\/$/);
    await page2.getByText('0 of 151 match').waitFor();
    assert.deepEqual(await listedNames(page2), []);
  });

  test("the server's errors are shown next to the field they concern, which gets focus", async () => {
    await page1.goto(`${base}/#/new`);
    const name = page1.getByLabel('Name', { exact: true });
    await name.fill('pikachu');
    await page1.getByRole('button', { name: 'Create creature' }).click();
    await page1.locator('#name[aria-invalid="true"]').waitFor();
    assert.match(await describedBy(name), /^Must be unique: "pikachu" is taken by creature 025$/);
    await waitForFocus(name);
    assert.equal(await page1.getByRole('alert').count(), 0, 'no form-level error');

    await name.fill('Decimon');
    const maxCP = page1.getByRole('spinbutton', { name: 'Max CP' });
    await maxCP.fill('12.5');
    await page1.getByRole('button', { name: 'Create creature' }).click();
    await page1.locator('#maxCP[aria-invalid="true"]').waitFor();
    assert.match(await describedBy(maxCP), /^Int cannot represent non-integer value: 12\.5$/);
    assert.equal(await name.getAttribute('aria-invalid'), null, 'the name is no longer in error');
    assert.equal(await page1.getByRole('heading', { level: 1, name: 'New creature' }).count(), 1);

    // An attack's damage the server refuses: the error is under that attack's damage field.
    await maxCP.fill('');
    await page1.getByRole('button', { name: 'Add special attack' }).click();
    await page1.getByLabel('Name of special attack 1').fill('Mega Punch');
    const damage = page1.getByLabel('Damage of special attack 1');
    await damage.fill('-5');
    await page1.getByRole('button', { name: 'Create creature' }).click();
    await page1.locator('[id="special.0.damage"][aria-invalid="true"]').waitFor();
    assert.match(await describedBy(damage), /^Must be a whole number ≥ 0, got -5$/);
    await waitForFocus(damage);

    await page1.getByLabel('Message id').fill('no-such-message');
    await page1.getByRole('button', { name: 'Open' }).click();
    await page1.getByRole('alert').getByText('No message has the id “no-such-message”.').waitFor();
  });

  test('on a 390×844 phone a tap on a creature changes the route and shows its detail in view', async () => {
    const phone = await openPage(PHONE);
    await phone.goto(`${base}/`);
    await phone.getByText('151 creatures', { exact: true }).waitFor();
    const link = phone.getByRole('list', { name: 'Creatures' }).getByRole('link', { name: /Bulbasaur/ });
    await link.tap();
    await phone.waitForURL(/#\/creatures\/Bulbasaur$/);
    const heading = phone.getByRole('heading', { level: 1, name: /Bulbasaur/ });
    await heading.waitFor();
    const box = await heading.boundingBox();
    assert.ok(
      box && box.y >= 0 && box.y + box.height <= PHONE.height,
      `the heading is in view: ${JSON.stringify(box)}`,
    );
    await waitForFocus(heading);
    assert.equal(await phone.title(), 'Bulbasaur · Creatures');
    const edit = phone.getByRole('link', { name: 'Edit', exact: true });
    const editBox = await edit.boundingBox();
    assert.ok(editBox && editBox.y + editBox.height <= PHONE.height, 'the Edit link is in view');
    assert.ok(
      await inPage<boolean>(phone, 'document.documentElement.scrollWidth <= window.innerWidth'),
      'nothing is wider than the phone',
    );
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = join(ARTIFACTS, `creatures-web-${PHONE.width}x${PHONE.height}.png`);
    await phone.screenshot({ path: file });
    assert.ok(statSync(file).size > 10_000, 'the screenshot has content');
  });

  test('a screenshot of the page is stored as a test artifact', async () => {
    await page1.goto(`${base}/#/creatures/Pikachu`);
    await page1.getByRole('table', { name: 'Fast attacks' }).waitFor();
    await page1.getByRole('list', { name: 'Messages' }).getByText('Hello again, edited').waitFor();
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = join(ARTIFACTS, `creatures-web-${DESKTOP.width}x${DESKTOP.height}.png`);
    await page1.screenshot({ path: file });
    assert.ok(statSync(file).size > 10_000, 'the screenshot has content');
    assert.deepEqual(problems, [], 'no uncaught errors and no CSP violations in any page');
  });
});
