/** Shared fixture of the browser tests: Debian's headless Chromium driven by `playwright-core`. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Where `npm run test:setup -w @seed/auth` (scripts/setup-browser.ts) puts Chromium. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * Launches headless Chromium from {@link CHROMIUM} (no browser download, no sandbox, no background
 * networking); playwright gives it a fresh temporary user-data-dir and removes it on close.
 * @throws AssertionError naming the setup command when Chromium is missing.
 */
export async function launchChromium(): Promise<Browser> {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} missing: run \`npm run test:setup -w @seed/auth\``);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
