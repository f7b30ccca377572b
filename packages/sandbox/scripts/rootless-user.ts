/**
 * `node scripts/rootless-user.ts` (root; run by `npm run test:setup`): the account `sbxuser` the
 * rootless tests and bench run as (issue 16), with a home directory it owns, prepared by
 * `sandbox setup sbxuser` (subordinate ids, delegated cgroup subtree). Idempotent. The root sandbox's
 * own id range is reserved first, so that useradd's automatic subordinate ids never overlap it.
 */
import { spawnSync } from 'node:child_process';
import { lookupUser } from '../src/cli/doctor.ts';
import { formatSetupReport, runSetup } from '../src/cli/setup.ts';
import { ensureSandboxIdRange } from '../src/engine/idmap.ts';

/** Name of the test account. */
export const ROOTLESS_TEST_USER = 'sbxuser';

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
    process.stderr.write(formatSetupReport(runSetup(ROOTLESS_TEST_USER)));
  }
}
