/**
 * A 1 GiB file goes into a box with `copyIn` and comes back with `copyOut`, byte-identical, and the copy
 * raises the peak RSS of each process doing it by less than 100 MiB — on the local runtime, and over REST
 * for the client and for the server (a process of its own, as `sandbox serve` runs). Runs in child
 * processes (`files-large-child.ts`) so that the peaks are the copy's, not this test runner's. The limit is
 * on the growth over each process's peak before the copy (SDK loaded, box created): loading the SDK under
 * Node's type stripping alone takes ≈ 110 MiB here, before any file is touched; both figures are printed.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { cleanupAll, ensureRegistry, tempHome } from './runtime-helpers.ts';

const SIZE_MIB = 1024;
const MAX_RSS_MIB = 100;
const work: string[] = [];

async function roundTrip(mode: 'local' | 'rest'): Promise<void> {
  ensureRegistry();
  const home = tempHome('sandbox-files-large-');
  const dir = mkdtempSync('/tmp/sandbox-files-large-work-');
  work.push(dir);
  const child = join(import.meta.dirname, 'files-large-child.ts');
  const { stdout } = await promisify(execFile)(process.execPath, [child, mode, home, dir, String(SIZE_MIB)], {
    maxBuffer: 1 << 20,
  });
  const result = JSON.parse(stdout.trim().split('\n').at(-1)!);
  assert.equal(result.sourceSize, SIZE_MIB * 1024 * 1024);
  assert.equal(result.backSize, result.sourceSize);
  assert.equal(result.backHash, result.sourceHash);
  const sides = mode === 'rest' ? (['client', 'server'] as const) : (['client'] as const);
  for (const side of sides) {
    const peakMiB = result.after[side] / 1024;
    const beforeMiB = result.before[side] / 1024;
    const growthMiB = peakMiB - beforeMiB;
    console.log(
      `# ${mode} ${side}: 1 GiB copyIn + copyOut, peak RSS ${peakMiB.toFixed(1)} MiB (${beforeMiB.toFixed(1)} before the copy, +${growthMiB.toFixed(1)})`,
    );
    assert.ok(
      growthMiB < MAX_RSS_MIB,
      `the copy raised the ${side}'s peak RSS by ${growthMiB.toFixed(1)} MiB, limit ${MAX_RSS_MIB}`,
    );
  }
}

describe('1 GiB copyIn/copyOut round trip with bounded memory', () => {
  it('local runtime', () => roundTrip('local'));
  it('REST runtime (client and server processes)', () => roundTrip('rest'));
});

after(async () => {
  for (const dir of work) rmSync(dir, { recursive: true, force: true });
  await cleanupAll();
});
