/**
 * Escape suite, hostile layers on the rootless store: runs `hostile-rootless-suite.ts` as the ordinary
 * account `sbxuser` (prepared by `npm run test:setup`, as for `rootless.test.ts`), which pulls every
 * hand-written hostile class and seeded generated ones into that account's image store and unpacks
 * seeded generated layers directly, against a canary of its own; the same classes are aimed at a canary
 * tree of root's, checked here to be unchanged.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOTLESS_TEST_USER, TEST_FILE_ENV } from '../rootless-helpers.ts';
import { ensureRegistry } from '../runtime-helpers.ts';
import { canaryFacts, makeCanary } from './hostile-layers.ts';

const suite = join(import.meta.dirname, 'hostile-rootless-suite.ts');
let dir: string;
let rootCanary: string;

before(() => {
  ensureRegistry();
  // A root-owned tree the account can name (the directory is searchable) but not change.
  dir = mkdtempSync('/tmp/hostile-rootless-root-');
  chmodSync(dir, 0o755);
  rootCanary = makeCanary(dir);
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('hostile layers on the rootless store', () => {
  it(`the suite passes as ${ROOTLESS_TEST_USER}; root's canary is unchanged`, () => {
    const user = spawnSync('id', ['-u', ROOTLESS_TEST_USER], { encoding: 'utf8' });
    assert.equal(user.status, 0, `${ROOTLESS_TEST_USER} is missing: run npm run test:setup -w @seed/sandbox`);
    const facts = canaryFacts(rootCanary);
    const r = spawnSync(
      'runuser',
      [
        '-u',
        ROOTLESS_TEST_USER,
        '--',
        // A clean environment: the parent's test-runner variables would turn the child into a subtest.
        'env',
        '-i',
        `PATH=${process.env.PATH ?? '/usr/bin:/bin'}`,
        `HOSTILE_ROOT_CANARY=${rootCanary}`,
        // Its processes are this file's (rootless.test.ts checks the account's processes meanwhile).
        `${TEST_FILE_ENV}=hostile-rootless`,
        process.execPath,
        '--conditions=seed-source',
        '--test',
        '--test-reporter=spec',
        suite,
      ],
      {
        encoding: 'utf8',
        cwd: '/',
        timeout: 240_000,
        env: { ...process.env, [TEST_FILE_ENV]: 'hostile-rootless' },
      },
    );
    assert.equal(r.status, 0, `rootless hostile suite failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /ℹ pass 24\b/, r.stdout);
    assert.match(r.stdout, /ℹ fail 0\b/);
    assert.deepEqual(canaryFacts(rootCanary), facts);
  });
});
