/**
 * A 1 GiB file goes into a box with `copyIn` and comes back with `copyOut`, byte-identical, with bounded
 * memory:
 * - local runtime: a plain-JavaScript client importing the BUILT package (compiled here by tsc, as a user
 *   installing it gets it; `files-large-client.mjs`) peaks under 100 MiB of RSS in total — Node, the SDK,
 *   creating the box and the copy (the image is in the store beforehand, as for any box after the first);
 * - REST runtime: the copy raises the peak RSS of the client and of the server (a process of its own, as
 *   `sandbox serve` runs; `files-large-child.ts`) by less than 100 MiB each. Their absolute peaks are
 *   higher (printed): node:http hands every body chunk to JavaScript as a new Buffer, which V8 frees only
 *   once tens of MiB of them have built up.
 * Every measured process is a child, so that the peaks are the copy's, not this test runner's.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

const SIZE_MIB = 1024;
const MAX_RSS_MIB = 100;
const PACKAGE = join(import.meta.dirname, '..');
const TSC = join(PACKAGE, '..', '..', 'node_modules', 'typescript', 'bin', 'tsc');
/** The package compiled for this test (not `dist/`, which packing writes); deps resolve from the repo. */
const BUILT = join(PACKAGE, '.tmp', `files-large-dist-${process.pid}`);
const run = promisify(execFile);
const work: string[] = [];

interface RoundTrip {
  sourceHash: string;
  backHash: string;
  sourceSize: number;
  backSize: number;
}

function assertIdentical(result: RoundTrip): void {
  assert.equal(result.sourceSize, SIZE_MIB * 1024 * 1024);
  assert.equal(result.backSize, result.sourceSize);
  assert.equal(result.backHash, result.sourceHash);
}

function workDir(): string {
  const dir = mkdtempSync('/tmp/sandbox-files-large-work-');
  work.push(dir);
  return dir;
}

const mib = (kib: number) => (kib / 1024).toFixed(1);

before(async () => {
  ensureRegistry();
  await run(
    process.execPath,
    [
      TSC,
      ...['-p', join(PACKAGE, 'tsconfig.build.json'), '--outDir', BUILT],
      // JavaScript only: types are the business of `npm run check`, not of a memory test.
      ...['--declaration', 'false', '--sourceMap', 'false', '--inlineSources', 'false', '--noCheck'],
    ],
    { maxBuffer: 1 << 20 },
  );
});

describe('1 GiB copyIn/copyOut round trip with bounded memory', () => {
  it('local runtime: the built package peaks under 100 MiB of RSS in total', async () => {
    const home = tempHome('sandbox-files-large-');
    await testRuntime(home).images.pull(BUSYBOX);
    const client = join(import.meta.dirname, 'files-large-client.mjs');
    const sdk = join(BUILT, 'src', 'index.js');
    const { stdout } = await run(
      process.execPath,
      [client, sdk, 'local', home, workDir(), String(SIZE_MIB)],
      { maxBuffer: 1 << 20 },
    );
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as RoundTrip & {
      peaks: { start: number; imported: number; created: number; copied: number };
    };
    assertIdentical(result);
    const { start, imported, created, copied } = result.peaks;
    console.log(
      `# local, built package: peak RSS ${mib(copied)} MiB (Node ${mib(start)}, after the SDK import ${mib(imported)}, box created ${mib(created)})`,
    );
    assert.ok(copied / 1024 < MAX_RSS_MIB, `peak RSS ${mib(copied)} MiB, limit ${MAX_RSS_MIB}`);
  });

  it('REST runtime: the copy raises the client and server peaks by less than 100 MiB', async () => {
    const home = tempHome('sandbox-files-large-');
    const child = join(import.meta.dirname, 'files-large-child.ts');
    const { stdout } = await run(process.execPath, [child, 'rest', home, workDir(), String(SIZE_MIB)], {
      maxBuffer: 1 << 20,
    });
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as RoundTrip & {
      before: Record<'client' | 'server', number>;
      after: Record<'client' | 'server', number>;
    };
    assertIdentical(result);
    for (const side of ['client', 'server'] as const) {
      const growthMiB = (result.after[side] - result.before[side]) / 1024;
      console.log(
        `# rest ${side}: 1 GiB copyIn + copyOut, peak RSS ${mib(result.after[side])} MiB (${mib(result.before[side])} before the copy, +${growthMiB.toFixed(1)})`,
      );
      assert.ok(
        growthMiB < MAX_RSS_MIB,
        `the copy raised the ${side}'s peak RSS by ${growthMiB.toFixed(1)} MiB, limit ${MAX_RSS_MIB}`,
      );
    }
  });
});

after(async () => {
  for (const dir of work) rmSync(dir, { recursive: true, force: true });
  rmSync(BUILT, { recursive: true, force: true });
  await cleanupAll();
});
