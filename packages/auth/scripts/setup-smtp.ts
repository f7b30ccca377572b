/**
 * `npm run test:setup -w @seed/auth`: makes sure Debian's `python3-aiosmtpd` is installed, the SMTP server
 * the self-service tests start (`python3 -m aiosmtpd -n -l 127.0.0.1:<port>`) to receive the reset and
 * verification mails. Idempotent: does nothing when `/usr/bin/python3` imports `aiosmtpd`; installs the
 * package with apt-get when running as root; otherwise explains what to run and fails.
 */
import { spawnSync } from 'node:child_process';

const PYTHON = '/usr/bin/python3';

function run(command: string, args: string[], quiet = false): number {
  const result = spawnSync(command, args, {
    stdio: quiet ? 'ignore' : 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.status ?? 1;
}

const present = () => run(PYTHON, ['-c', 'import aiosmtpd'], true) === 0;

if (present()) {
  console.log('auth test:setup: python3-aiosmtpd present');
} else if (process.getuid?.() === 0) {
  console.log('auth test:setup: installing python3-aiosmtpd with apt-get');
  const install = () => run('apt-get', ['install', '-y', '--no-install-recommends', 'python3-aiosmtpd']);
  if (install() !== 0 && (run('apt-get', ['update']) !== 0 || install() !== 0)) {
    console.error('auth test:setup: apt-get install python3-aiosmtpd failed');
    process.exit(1);
  }
  if (!present()) {
    console.error(`auth test:setup: python3-aiosmtpd installed but ${PYTHON} cannot import aiosmtpd`);
    process.exit(1);
  }
} else {
  console.error(
    'auth test:setup: python3-aiosmtpd is missing; run as root: apt-get install -y python3-aiosmtpd',
  );
  process.exit(1);
}
