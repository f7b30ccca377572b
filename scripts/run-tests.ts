/**
 * Runs the whole test suite of the repository in one `node --test` process tree, so that one
 * summary closes the run. Test files live in `packages/<name>/test/**\/*.test.ts`.
 *
 * Environment: `SEED_TEST_PACKAGES` (comma-separated package folder names) narrows the run;
 * `SEED_TEST_CONCURRENCY` sets how many test files run at once (default 2, one per core here).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const only = process.env.SEED_TEST_PACKAGES?.split(',').filter(Boolean);
const packages = readdirSync(join(root, 'packages')).filter(
  (name) => existsSync(join(root, 'packages', name, 'test')) && (!only || only.includes(name)),
);
const globs = packages.map((name) => `packages/${name}/test/**/*.test.ts`);
const args = [
  '--test',
  `--test-concurrency=${process.env.SEED_TEST_CONCURRENCY ?? '2'}`,
  '--test-reporter=spec',
  ...process.argv.slice(2),
  ...globs,
];
const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
