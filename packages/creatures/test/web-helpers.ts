/**
 * Shared fixtures of the web front end's browser tests: Chromium launch options, pages in fresh browser
 * contexts at a given viewport, the axe-core accessibility check and the screenshot folder.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { CHROMIUM_PATH } from '../scripts/setup-browser.ts';

/** Where screenshots go (`packages/creatures/test-artifacts/`, gitignored). */
export const ARTIFACTS = join(import.meta.dirname, '..', 'test-artifacts');

/** Chromium flags: headless, no network besides the page's own server, no background services. */
export const LAUNCH_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** A desktop window, CSS pixels. */
export const DESKTOP = { width: 1280, height: 800 } as const;
/** A phone (390×844 CSS pixels, touch). */
export const PHONE = { width: 390, height: 844 } as const;

/** Options of {@link openPage}. */
export interface OpenPageOptions {
  viewport?: { width: number; height: number };
  /** Collects uncaught page errors and Content-Security-Policy violations. */
  problems?: string[];
}

/** Opens a page in a fresh browser context (its own storage, like another user's browser). */
export async function openPage(browser: Browser, options: OpenPageOptions = {}): Promise<Page> {
  const viewport = options.viewport ?? DESKTOP;
  const phone = viewport.width < 600;
  const context = await browser.newContext({ viewport, hasTouch: phone, isMobile: phone });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  const problems = options.problems;
  if (problems) {
    page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) problems.push(`CSP: ${message.text()}`);
    });
  }
  return page;
}

/** One axe-core finding, reduced to what a failure message needs. */
export interface AxeFinding {
  id: string;
  impact: string | null | undefined;
  help: string;
  targets: string[];
}

const axeSource: string = (createRequire(import.meta.url)('axe-core') as { source: string }).source;

/**
 * Runs axe-core (WCAG 2.0/2.1/2.2 A and AA rules plus best practices) on the page as it is now and resolves
 * with the serious and critical findings. axe is evaluated through the DevTools protocol, which the page's
 * Content-Security-Policy does not restrict, so the page under test keeps its real CSP.
 */
export async function seriousAxeFindings(page: Page): Promise<AxeFinding[]> {
  await page.evaluate(axeSource);
  const findings = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: typeof import('axe-core') }).axe;
    const result = await axe.run({
      runOnly: {
        type: 'tag',
        values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'wcag22aa', 'best-practice'],
      },
    });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.slice(0, 5).map((n) => n.target.join(' ')),
    }));
  });
  return findings.filter((f) => f.impact === 'serious' || f.impact === 'critical');
}

/** Whether the element of `locator` has keyboard focus. */
export function hasFocus(locator: Locator): Promise<boolean> {
  return locator.evaluate((el) => el === el.ownerDocument.activeElement);
}

/**
 * Waits until the element of `locator` has keyboard focus (the page moves focus in an effect, after it
 * renders, so a check right after the element appears could run first). Rejects after the page's timeout.
 */
export async function waitForFocus(locator: Locator): Promise<void> {
  const handle = await locator.elementHandle();
  await locator.page().waitForFunction((el) => el !== null && el === el.ownerDocument.activeElement, handle);
}

/**
 * Evaluates a JavaScript expression in the page and resolves with its value. A string, because the tests'
 * TypeScript program has no DOM types (`document`, `window`).
 */
export function inPage<T>(page: Page, expression: string): Promise<T> {
  return page.evaluate(expression) as Promise<T>;
}

/** The text of the elements a control's `aria-describedby` names (its hint and error), space-separated. */
export async function describedBy(locator: Locator): Promise<string> {
  const ids = ((await locator.getAttribute('aria-describedby')) ?? '').split(/\s+/).filter(Boolean);
  const texts = await Promise.all(ids.map((id) => locator.page().locator(`[id="${id}"]`).textContent()));
  return texts.join(' ');
}

/**
 * Launches the headless Chromium that `npm run test:setup -w @seed/creatures` installs, with
 * {@link LAUNCH_ARGS}; fails naming the set-up command when it is not installed.
 */
export async function launchChromium(): Promise<Browser> {
  assert.ok(
    existsSync(CHROMIUM_PATH),
    `${CHROMIUM_PATH} is missing: run npm run test:setup -w @seed/creatures`,
  );
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: LAUNCH_ARGS });
}

/** Fails with the findings listed when axe finds anything serious or critical. */
export async function assertAccessible(page: Page, where: string): Promise<void> {
  const findings = await seriousAxeFindings(page);
  assert.deepEqual(
    findings,
    [],
    `${where}: ${findings.length} serious/critical axe findings:\n${findings
      .map((f) => `  ${f.impact} ${f.id}: ${f.help} (${f.targets.join(', ')})`)
      .join('\n')}`,
  );
}
