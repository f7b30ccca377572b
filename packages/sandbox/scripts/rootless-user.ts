/**
 * `node scripts/rootless-user.ts` (root; run by `npm run test:setup`): the account `sbxuser` the
 * rootless tests and bench run as, with a home directory it owns, prepared by
 * `sandbox setup sbxuser` (subordinate ids, delegated cgroup subtree). Idempotent. The root sandbox's
 * own id range is reserved first, so that useradd's automatic subordinate ids never overlap it. The
 * account runs the tests from this checkout: every directory above it gets search permission for
 * others (`o+x`, not read) when it lacks it (a clone under `/root`, mode 0700, say).
 *
 * It also makes the account `sbxsetup` (no home, no login shell, no subordinate ids in `/etc/subuid`)
 * that `test/rootless-cli.test.ts` runs `sandbox setup` on: made here once, before any test runs,
 * because adding or deleting an account while tests run changes `/etc/passwd`, `/etc/group`,
 * `/etc/shadow` and `/etc/subuid`, which the escape and rootless tests of other files check are unchanged.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { lookupUser } from '../src/cli/doctor.ts';
import { formatSetupReport, runSetup } from '../src/cli/setup.ts';
import { ensureSandboxIdRange } from '../src/engine/idmap.ts';

/** Name of the test account. */
export const ROOTLESS_TEST_USER = 'sbxuser';

/** Name of the account `sandbox setup` is tested on (test/rootless-cli.test.ts). */
export const SETUP_TEST_USER = 'sbxsetup';

/** Gives others search permission on `dir` and each ancestor lacking it; returns the changed ones. */
function allowTraversal(dir: string): string[] {
  const changed: string[] = [];
  for (let d = resolve(dir); ; d = dirname(d)) {
    const mode = statSync(d).mode & 0o7777;
    if ((mode & 0o001) === 0) {
      chmodSync(d, mode | 0o001);
      changed.push(d);
    }
    if (d === '/') return changed;
  }
}

if (import.meta.main) {
  if (process.getuid?.() !== 0) {
    console.error('[sandbox setup] not root: the rootless test account is not prepared');
  } else {
    ensureSandboxIdRange(true);
    if (!lookupUser(ROOTLESS_TEST_USER)) {
      const r = spawnSync('useradd', ['--create-home', '--shell', '/bin/bash', ROOTLESS_TEST_USER], {
        stdio: 'inherit',
      });
      if (r.status !== 0) process.exit(r.status ?? 1);
    }
    if (!lookupUser(SETUP_TEST_USER)) {
      const r = spawnSync(
        'useradd',
        [
          '--no-create-home',
          '--shell',
          '/usr/sbin/nologin',
          '-K',
          'SUB_UID_COUNT=0',
          '-K',
          'SUB_GID_COUNT=0',
          SETUP_TEST_USER,
        ],
        { stdio: 'inherit' },
      );
      if (r.status !== 0) process.exit(r.status ?? 1);
    }
    process.stderr.write(formatSetupReport(runSetup(ROOTLESS_TEST_USER)));
    const opened = allowTraversal(resolve(import.meta.dirname, '..', '..', '..'));
    if (opened.length > 0)
      console.error(`[sandbox setup] o+x (search only) for ${ROOTLESS_TEST_USER}: ${opened.join(' ')}`);
  }
}
