/**
 * Installs what the web end-to-end tests need to drive a real browser: Debian's `chromium` package (the
 * tests use `playwright-core` with `/usr/bin/chromium`; no browser is downloaded from anywhere else) and a
 * font so screenshots show text. Idempotent: does nothing when both are present. Installs with `apt-get`
 * only when running as root; otherwise exits with status 1 and says what to install.
 *
 * Environment: `CHROMIUM_PATH` (default `/usr/bin/chromium`) — the browser binary to look for.
 *
 * Run: `node scripts/setup-browser.ts` (part of `npm run test:setup -w @seed/creatures`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Where the tests expect Chromium. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

const FONT_PACKAGE = 'fonts-dejavu-core';

function installed(pkg: string): boolean {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a dpkg-query format, not a template
  const status = spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' });
  return status.status === 0 && status.stdout.includes('install ok installed');
}

function aptGet(args: string[]): void {
  const result = spawnSync('apt-get', args, {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (result.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed with status ${result.status}`);
}

/** Ensures Chromium and a font are installed; throws when they are missing and cannot be installed. */
export function setupBrowser(): void {
  const missing: string[] = [];
  if (!existsSync(CHROMIUM_PATH)) missing.push('chromium');
  if (existsSync('/usr/bin/dpkg-query') && !installed(FONT_PACKAGE)) missing.push(FONT_PACKAGE);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new Error(
      `The web tests need ${missing.join(' and ')} (${CHROMIUM_PATH}); install as root: apt-get install -y ${missing.join(' ')}`,
    );
  }
  console.error(`[creatures] installing ${missing.join(', ')} with apt-get`);
  const install = ['install', '-y', '--no-install-recommends', ...missing];
  try {
    aptGet(install);
  } catch {
    // A fresh machine may have no package lists yet.
    aptGet(['update']);
    aptGet(install);
  }
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(`apt-get installed chromium, but ${CHROMIUM_PATH} is missing`);
}

if (import.meta.main) {
  try {
    setupBrowser();
  } catch (err) {
    console.error(`[creatures] ${(err as Error).message}`);
    process.exit(1);
  }
}
