/**
 * Runs every `*.bench.ts` and `*-bench.ts` file of this folder in turn, each in its own Node process (so one benchmark's heap
 * and JIT state do not skew the next). `npm run bench -w @seed/auth`; pass file name fragments to run only
 * some: `npm run bench -w @seed/auth -- decisions`.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const only = process.argv.slice(2);
const files = readdirSync(import.meta.dirname)
  .filter((f) => /[.-]bench\.ts$/.test(f) && (only.length === 0 || only.some((o) => f.includes(o))))
  .sort();
let failed = 0;
for (const file of files) {
  console.log(`\n== ${file} ==`);
  const result = spawnSync(process.execPath, [join(import.meta.dirname, file)], { stdio: 'inherit' });
  if (result.status !== 0) failed++;
}
process.exit(failed ? 1 : 0);
