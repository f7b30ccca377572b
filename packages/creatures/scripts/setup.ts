/**
 * `npm run test:setup -w @seed/creatures`: installs what the creature tests need beyond npm packages —
 * a Chromium for the explorer's browser test. Idempotent: does nothing when a Chromium is present;
 * installs Debian's `chromium` with apt-get when running as root; otherwise says what is missing
 * (the browser test then skips with that reason).
 */
import { spawnSync } from 'node:child_process';
import { findChromium } from '../test/chromium.ts';

if (findChromium()) {
  console.log(`creatures test:setup: chromium found at ${findChromium()}`);
} else if (process.getuid?.() === 0 && spawnSync('which', ['apt-get']).status === 0) {
  console.log('creatures test:setup: installing chromium with apt-get');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  let r = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], {
    stdio: 'inherit',
    env,
  });
  if (r.status !== 0) {
    spawnSync('apt-get', ['update'], { stdio: 'inherit', env });
    r = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'chromium'], {
      stdio: 'inherit',
      env,
    });
  }
  if (r.status !== 0 || !findChromium()) {
    console.error('creatures test:setup: could not install chromium');
    process.exit(1);
  }
} else {
  console.log('creatures test:setup: no chromium and not root; the explorer browser test will be skipped');
}
