/**
 * `npm run test:setup -w @seed/auth`: makes sure Debian's Chromium is at `/usr/bin/chromium` for the
 * browser tests (playwright-core drives it; no browser is downloaded). Idempotent: does nothing when it is
 * there; installs it with apt-get when running as root; otherwise explains what to run and fails.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CHROMIUM = '/usr/bin/chromium';

function run(command: string, args: string[]): number {
  const result = spawnSync(command, args, {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.status ?? 1;
}

if (existsSync(CHROMIUM)) {
  console.log(`auth test:setup: ${CHROMIUM} present`);
} else if (process.getuid?.() === 0) {
  console.log('auth test:setup: installing chromium with apt-get');
  const install = () => run('apt-get', ['install', '-y', '--no-install-recommends', 'chromium']);
  if (install() !== 0 && (run('apt-get', ['update']) !== 0 || install() !== 0)) {
    console.error('auth test:setup: apt-get install chromium failed');
    process.exit(1);
  }
  if (!existsSync(CHROMIUM)) {
    console.error(`auth test:setup: chromium installed but ${CHROMIUM} is missing`);
    process.exit(1);
  }
} else {
  console.error(`auth test:setup: ${CHROMIUM} is missing; run as root: apt-get install -y chromium`);
  process.exit(1);
}
