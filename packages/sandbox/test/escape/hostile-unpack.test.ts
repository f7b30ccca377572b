/**
 * Escape suite, the layer unpacker itself (`extractLayer`): every hand-written class of hostile layer and
 * a seeded property-based suite (fast-check) of generated orderings of directories, files, symlinks, hard
 * links, whiteouts, opaque markers, devices, `..` and absolute names. Oracle: the canary tree next to the
 * target (what the layers aim at, by absolute and relative symlinks) is byte-for-byte, mode-for-mode and
 * xattr-for-xattr the same afterwards, and nothing appears beside the target. Bombs stop at their bound.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, test } from 'node:test';
// internal: the layer unpacker is tested as a unit
import { UnpackBudget } from '../../src/images/limits.ts';
// internal: the layer unpacker is tested as a unit
import { extractLayer } from '../../src/images/unpack.ts';
import { BoxError } from '../../src/index.ts';
import { tarOf } from '../helpers/registry.ts';
import { assertGeneratedLayersKeepCanary, canaryFacts, HOSTILE_CASES, makeCanary } from './hostile-layers.ts';

const work = mkdtempSync(join(tmpdir(), 'seed-hostile-unpack-'));
after(() => rmSync(work, { recursive: true, force: true }));

let runs = 0;
/** A fresh `<parent>/{canary,target}`; returns both paths. */
function arena(): { parent: string; canary: string; target: string } {
  const parent = join(work, String(runs++));
  mkdirSync(parent);
  const canary = makeCanary(parent);
  const target = join(parent, 'target');
  mkdirSync(target);
  return { parent, canary, target };
}

/** Unpacks `data` into `target`; returns the error, if any. */
async function unpack(data: Buffer, target: string, budgets?: UnpackBudget[]): Promise<Error | undefined> {
  try {
    await extractLayer(Readable.from([data]), target, budgets ? { budgets } : {});
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

describe('hand-written hostile layers', () => {
  for (const c of HOSTILE_CASES) {
    test(`${c.name}: ${c.expect}, the canary untouched`, async () => {
      const { parent, canary, target } = arena();
      const before = canaryFacts(canary);
      const error = await unpack(await tarOf(c.entries(canary)), target);
      if (c.expect === 'refused') {
        assert.ok(error instanceof BoxError, `refused with a BoxError, got ${error}`);
        assert.equal(error.code, 'image');
      } else if (c.expect === 'confined') {
        assert.equal(error, undefined, String(error?.stack));
      } else if (error) {
        assert.ok(error instanceof BoxError && error.code === 'image', String(error));
      }
      assert.deepEqual(canaryFacts(canary), before);
      assert.deepEqual(readdirSync(parent).sort(), ['canary', 'target']);
    });
  }

  test('an absolute name lands below the root', async () => {
    const { canary, target } = arena();
    assert.equal(
      await unpack(await tarOf([{ name: `${canary}/victim`, content: 'inside' }]), target),
      undefined,
    );
    assert.ok(existsSync(join(target, canary, 'victim')));
  });

  test('a whiteout becomes a 0:0 device and an opaque marker an xattr, on the directory of the entry', async () => {
    const { target } = arena();
    const error = await unpack(
      await tarOf([
        { name: 'd/', type: 'directory', mode: 0o750 },
        { name: 'd/.wh.gone' },
        { name: 'd/.wh..wh..opq' },
      ]),
      target,
    );
    assert.equal(error, undefined);
    const dev = lstatSync(join(target, 'd/gone'));
    assert.ok(dev.isCharacterDevice() && dev.rdev === 0);
    assert.equal(lstatSync(join(target, 'd')).mode & 0o7777, 0o750);
    assert.match(canaryFacts(join(target, 'd')).at(-1)!, /overlay\.opaque="y"/);
  });

  test('a whiteout and an entry of the same name in one layer: the entry stays', async () => {
    const { target } = arena();
    assert.equal(
      await unpack(await tarOf([{ name: '.wh.x' }, { name: 'x', content: 'kept' }]), target),
      undefined,
    );
    assert.ok(lstatSync(join(target, 'x')).isFile());
  });
});

describe('many directories', () => {
  test('more directories with deferred work than handles kept open: every mode applied, swaps still confined', async () => {
    const { canary, target } = arena();
    const before = canaryFacts(canary);
    const entries = Array.from({ length: 1100 }, (_, i) => ({
      name: `d${i}/`,
      type: 'directory' as const,
      mode: 0o750,
    }));
    entries.push({ name: 'd0/', type: 'directory', mode: 0o777 });
    const error = await unpack(
      await tarOf([...entries, { name: 'd0/.wh.victim' }, { name: 'd0', type: 'symlink', linkname: canary }]),
      target,
    );
    assert.equal(error, undefined, String(error));
    for (const i of [1, 500, 1099]) assert.equal(lstatSync(join(target, `d${i}`)).mode & 0o7777, 0o750);
    assert.ok(lstatSync(join(target, 'd0')).isSymbolicLink());
    assert.deepEqual(canaryFacts(canary), before);
  });
});

describe('bombs stop at their bound', () => {
  test('a file larger than the layer bound is refused before a byte of it is written', async () => {
    const { target } = arena();
    const budget = new UnpackBudget(
      { name: 'maxLayerBytes', max: 4096 },
      { name: 'maxLayerEntries', max: 100 },
    );
    const error = await unpack(
      await tarOf([
        { name: 'small', content: 'x'.repeat(1000) },
        { name: 'big', content: 'y'.repeat(8192) },
      ]),
      target,
      [budget],
    );
    assert.ok(error instanceof BoxError && error.code === 'image', String(error));
    assert.match(error.message, /maxLayerBytes \(4096 bytes\)/);
    assert.equal(existsSync(join(target, 'big')), false);
    assert.ok(budget.usedBytes <= 4096);
  });

  test('entries beyond the entry bound are refused', async () => {
    const { target } = arena();
    const budget = new UnpackBudget(
      { name: 'maxLayerBytes', max: 1 << 20 },
      { name: 'maxLayerEntries', max: 10 },
    );
    const entries = Array.from({ length: 50 }, (_, i) => ({ name: `f${i}`, content: '' }));
    const error = await unpack(await tarOf(entries), target, [budget]);
    assert.ok(error instanceof BoxError && error.code === 'image');
    assert.match(error.message, /maxLayerEntries \(10 entries\)/);
    assert.equal(readdirSync(target).length, 10);
  });

  test('skipped entries count too: a huge device or sparse entry cannot pass the byte bound', async () => {
    const { target } = arena();
    const budget = new UnpackBudget({ name: 'maxImageBytes', max: 512 });
    const error = await unpack(
      await tarOf([{ name: 's', content: 'z'.repeat(4096), sparse: true }]),
      target,
      [budget],
    );
    assert.ok(error instanceof BoxError && error.code === 'image');
    assert.match(error.message, /maxImageBytes/);
  });
});

describe('generated hostile layers (fast-check, seeded)', () => {
  test('no generated layer changes the canary or writes beside the target', async () => {
    // One fixed arena, made afresh for every run, so that the generated entries can name its canary.
    const parent = join(work, 'generated');
    await assertGeneratedLayersKeepCanary(
      parent,
      async (entries) => unpack(await tarOf(entries), join(parent, 'target')),
      { seed: 27, numRuns: 300, beside: ['target'] },
    );
  });
});
