/**
 * Runs the whole test suite of the repository in one `node --test` process tree, so that one
 * summary closes the run. Test files live in `packages/<name>/test/**\/*.test.ts`, and the tests of the
 * repository as a whole (packaging) in `test/**\/*.test.ts`.
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
// Tests of the repository as a whole (packaging); left out when the run is narrowed to some packages.
if (!only) globs.push('test/**/*.test.ts');
const args = [
  // Imports of `@seed/<name>` resolve to the TypeScript sources (the `seed-source` export condition), so
  // that tests exercise the sources without a build.
  '--conditions=seed-source',
  '--test',
  `--test-concurrency=${process.env.SEED_TEST_CONCURRENCY ?? '2'}`,
  '--test-reporter=spec',
  ...process.argv.slice(2),
  ...globs,
];
const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
