/**
 * The image store's disk budget (`maxStoreBytes`) holds for several processes sharing one `homeDir`
 * (`src/images/store-budget.ts`): two processes pulling at the same moment, each image fitting alone but
 * not both, store one image at most and the other is refused naming the bound; what a process reserved
 * counts for every other process until it ends, and a killed process's reservation is dropped.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
// internal: digest and media-type helpers build the test blobs
import { MediaType, sha256Digest } from '../../src/images/index.ts';
// internal: the store budget is tested as a unit
import { StoreBudget } from '../../src/images/store-budget.ts';
import { BoxError } from '../../src/index.ts';
import { type FixtureLayer, localRegistry, pushFixture, tarOf } from '../helpers/registry.ts';
import { cleanupAll, tempHome } from '../runtime-helpers.ts';

const MiB = 1024 * 1024;
const CHILD = join(import.meta.dirname, 'store-budget-child.ts');
let home: string;
const children: ChildProcess[] = [];

before(async () => {
  await localRegistry({ images: ['busybox'] });
  home = tempHome('store-budget-');
});
after(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await cleanupAll();
});

/** A one-file gzip layer of `bytes` zero bytes. */
async function zeroLayer(name: string, bytes: number): Promise<FixtureLayer> {
  const raw = await tarOf([{ name, content: Buffer.alloc(bytes) }]);
  return { data: gzipSync(raw), mediaType: MediaType.ociLayerGzip, diffId: sha256Digest(raw) };
}

/** Starts a child (`store-budget-child.ts`); resolves with it and its stdout lines, after its first line. */
async function child(args: string[]): Promise<{ proc: ChildProcess; lines: AsyncIterator<string> }> {
  const proc = spawn(process.execPath, [CHILD, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(proc);
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]();
  const first = await lines.next();
  assert.ok(!first.done && (first.value === 'ready' || first.value === 'held'), String(first.value));
  return { proc, lines };
}

/** Unpacked bytes of the layers stored under `root`, from their `layer.json`. */
function storedBytes(root: string): number {
  let total = 0;
  for (const alg of readdirSync(join(root, 'layers'))) {
    for (const hex of readdirSync(join(root, 'layers', alg))) {
      total += JSON.parse(readFileSync(join(root, 'layers', alg, hex, 'layer.json'), 'utf8')).sizeBytes;
    }
  }
  return total;
}

describe('store-wide disk budget across processes', () => {
  test('two processes pulling at once into one homeDir store one image at most; the other is refused', async () => {
    const max = 5 * MiB;
    const a = await pushFixture('budget-a', [await zeroLayer('a', 3 * MiB)]);
    const b = await pushFixture('budget-b', [await zeroLayer('b', 3 * MiB)]);
    const homeDir = join(home, 'shared');
    const pulls = [
      await child(['pull', homeDir, String(max), a.reference]),
      await child(['pull', homeDir, String(max), b.reference]),
    ];
    // Both have opened the store (and counted it empty) before either pulls.
    for (const { proc } of pulls) proc.stdin!.write('go\n');
    const results = await Promise.all(
      pulls.map(async ({ lines }) => JSON.parse((await lines.next()).value as string)),
    );
    assert.equal(results.filter((r) => r.ok).length, 1, JSON.stringify(results));
    const refused = results.find((r) => !r.ok);
    assert.equal(refused.code, 'image');
    assert.match(refused.message, /maxStoreBytes \(5242880 bytes\)/);
    await Promise.all(pulls.map(({ proc }) => (proc.exitCode === null ? once(proc, 'exit') : null)));
    const root = join(homeDir, 'images');
    assert.equal(storedBytes(root), 3 * MiB);
    // The ledger counts exactly what is stored: nothing is left reserved by the processes that ended.
    const ledger = new StoreBudget(root, { name: 'maxStoreBytes', max });
    try {
      assert.equal(ledger.usedBytes, 3 * MiB);
    } finally {
      ledger.close();
    }
  });

  test("one process's reservation counts for another until it is killed", async () => {
    const max = 5 * MiB;
    const homeDir = join(home, 'held');
    const root = join(homeDir, 'images');
    const holder = await child(['hold', homeDir, String(max), String(4 * MiB)]);
    const budget = new StoreBudget(root, { name: 'maxStoreBytes', max });
    try {
      assert.throws(
        () => budget.take(2 * MiB, 0),
        (e: unknown) =>
          e instanceof BoxError && e.code === 'image' && /maxStoreBytes \(5242880 bytes\)/.test(e.message),
      );
      budget.take(MiB, 0);
      budget.give(MiB);
      holder.proc.kill('SIGKILL');
      await once(holder.proc, 'exit');
      budget.take(4 * MiB, 0);
      assert.ok(budget.usedBytes >= 4 * MiB && budget.usedBytes <= max, String(budget.usedBytes));
      budget.give(4 * MiB);
      assert.equal(budget.usedBytes, 0);
    } finally {
      budget.close();
    }
  });
});
