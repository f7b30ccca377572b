/**
 * Escape suite, hostile images through a real pull: every hand-written hostile layer class and a few
 * generated ones (fast-check, seeded) are pushed to the local registry and pulled by an `ImageStore`; the
 * canary tree the layers aim at stays the same. A layer whose digest or diff_id does not match leaves the
 * store as it was (no layer, nothing in tmp) and the host untouched; decompression bombs stop at the
 * layer, image and store bounds, naming them, without the bomb's file in the store.
 */
import assert from 'node:assert/strict';
import { lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
// internal: digest and media-type helpers build the hostile manifests
import { sha256Digest } from '../../src/images/index.ts';
// internal: a store budget ledger is driven directly
import { StoreBudget } from '../../src/images/store-budget.ts';
import { BoxError, type ImageLimits, ImageStore } from '../../src/index.ts';
import {
  buildLayer,
  type FixtureEntry,
  localRegistry,
  pushFixture,
  startRegistryProxy,
} from '../helpers/registry.ts';
import { cleanupAll, tempHome } from '../runtime-helpers.ts';
import { assertGeneratedLayersKeepCanary, canaryFacts, HOSTILE_CASES, makeCanary } from './hostile-layers.ts';

let home: string;
let canary: string;
let stores = 0;

before(async () => {
  await localRegistry({ images: ['busybox'] });
  home = tempHome('hostile-pull-');
  canary = makeCanary(home);
});
after(cleanupAll);

/** A fresh store under the test's home. */
function newStore(
  limits?: Partial<ImageLimits>,
  registries?: { host: string; transport: 'http' }[],
): {
  store: ImageStore;
  root: string;
} {
  const homeDir = join(home, `store-${stores++}`);
  return {
    store: new ImageStore({ homeDir, ...(limits ? { limits } : {}), ...(registries ? { registries } : {}) }),
    root: join(homeDir, 'images'),
  };
}

/**
 * Every path below `dir` with its type and size (no times: a failed pull may touch directory mtimes),
 * the budget ledger's files aside (its journal grows with every reservation; `ledgerBytes` reads it).
 */
function listing(dir: string): string[] {
  const out: string[] = [];
  const walk = (path: string, rel: string) => {
    for (const name of readdirSync(path).sort()) {
      if (rel === '' && name.startsWith('budget.db')) continue;
      const st = lstatSync(join(path, name));
      out.push(`${rel}${name} ${st.isDirectory() ? 'dir' : st.size}`);
      if (st.isDirectory()) walk(join(path, name), `${rel}${name}/`);
    }
  };
  walk(dir, '');
  return out;
}

/** Bytes the store's budget ledger under `root` counts (stored layers and reservations). */
function ledgerBytes(root: string): number {
  const ledger = new StoreBudget(root, { name: 'maxStoreBytes', max: 1 });
  try {
    return ledger.usedBytes;
  } finally {
    ledger.close();
  }
}

/** Pulls `reference` into `store`; the error, if any. */
async function pullError(store: ImageStore, reference: string): Promise<Error | undefined> {
  try {
    await store.pull(reference);
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

describe('hostile layers through a pull', () => {
  HOSTILE_CASES.forEach((c, i) => {
    test(`${c.name}: ${c.expect}, the canary untouched`, async () => {
      const pushed = await pushFixture(`hostile-${i}`, [await buildLayer(c.entries(canary))]);
      const { store } = newStore();
      const beforeFacts = canaryFacts(canary);
      const error = await pullError(store, pushed.reference);
      if (c.expect === 'refused')
        assert.ok(error instanceof BoxError && error.code === 'image', String(error));
      if (c.expect === 'confined') assert.equal(error, undefined, String(error));
      if (error) assert.match(error.message, new RegExp(`hostile-${i}`));
      assert.deepEqual(canaryFacts(canary), beforeFacts);
    });
  });

  test('generated hostile layers (fast-check, seeded): the canary untouched', async () => {
    let run = 0;
    await assertGeneratedLayersKeepCanary(
      join(home, 'gen'),
      async (entries) => {
        const pushed = await pushFixture(`hostile-gen-${run++ % 4}`, [await buildLayer(entries)]);
        return pullError(newStore().store, pushed.reference);
      },
      { seed: 2727, numRuns: 12 },
    );
  });
});

describe('verify before unpack', () => {
  test('a layer whose blob does not match its digest leaves the store and the host as they were', async () => {
    const layer = await buildLayer([
      { name: 'd/', type: 'directory', mode: 0o777 },
      { name: 'd/.wh.victim' },
      { name: 'd', type: 'symlink', linkname: canary },
      { name: 'payload', content: 'p'.repeat(10_000) },
    ]);
    await pushFixture('hostile-corrupt', [layer]);
    const proxy = await startRegistryProxy();
    try {
      proxy.corrupt.add(sha256Digest(layer.data));
      const { store, root } = newStore(undefined, [{ host: proxy.host, transport: 'http' }]);
      await store.list();
      const storeBefore = listing(root);
      const hostBefore = canaryFacts(canary);
      const error = await pullError(store, `${proxy.host}/seed-test/hostile-corrupt:latest`);
      assert.ok(error instanceof BoxError && error.code === 'image', String(error));
      assert.match(error.message, /digest mismatch/);
      assert.deepEqual(listing(root), storeBefore);
      assert.equal(ledgerBytes(root), 0, 'nothing stored or reserved in the budget ledger');
      assert.deepEqual(readdirSync(join(root, 'tmp')), []);
      assert.deepEqual(readdirSync(join(root, 'layers')), []);
      assert.deepEqual(canaryFacts(canary), hostBefore);
    } finally {
      await proxy.close();
    }
  });

  test('a layer whose diff_id does not match is not published; nothing is left in tmp', async () => {
    const layer = await buildLayer([{ name: 'f', content: 'content' }]);
    const pushed = await pushFixture('hostile-diffid', [
      { ...layer, diffId: sha256Digest(Buffer.from('other')) },
    ]);
    const { store, root } = newStore();
    const error = await pullError(store, pushed.reference);
    assert.ok(error instanceof BoxError && error.code === 'image', String(error));
    assert.match(error.message, /diff_id mismatch/);
    assert.deepEqual(readdirSync(join(root, 'tmp')), []);
    assert.deepEqual(readdirSync(join(root, 'layers')), []);
  });
});

describe('decompression bombs stop at their bounds', () => {
  const MiB = 1024 * 1024;
  const zeros = (name: string, bytes: number): FixtureEntry => ({ name, content: Buffer.alloc(bytes) });

  test('a layer over maxLayerBytes is refused naming it; its file is not in the store', async () => {
    const pushed = await pushFixture('bomb-layer', [await buildLayer([zeros('bomb', 8 * MiB)])]);
    const { store, root } = newStore({ maxLayerBytes: MiB });
    const error = await pullError(store, pushed.reference);
    assert.ok(error instanceof BoxError && error.code === 'image', String(error));
    assert.match(error.message, /maxLayerBytes \(1048576 bytes\)/);
    assert.deepEqual(readdirSync(join(root, 'tmp')), []);
    assert.equal(
      listing(root).some((l) => l.includes('bomb')),
      false,
    );
  });

  test('layers each under the layer bound but over maxImageBytes together are refused naming it', async () => {
    const pushed = await pushFixture('bomb-image', [
      await buildLayer([zeros('a', 700 * 1024)]),
      await buildLayer([zeros('b', 700 * 1024)]),
    ]);
    const { store, root } = newStore({ maxLayerBytes: MiB, maxImageBytes: MiB });
    const error = await pullError(store, pushed.reference);
    assert.ok(error instanceof BoxError && error.code === 'image', String(error));
    assert.match(error.message, /maxImageBytes \(1048576 bytes\)/);
    assert.deepEqual(readdirSync(join(root, 'refs')), []);
  });

  test('a pull that would take the store past maxStoreBytes is refused naming it', async () => {
    const first = await pushFixture('store-a', [await buildLayer([zeros('a', 700 * 1024)])]);
    const second = await pushFixture('store-b', [await buildLayer([zeros('b', 700 * 1024)])]);
    const { store } = newStore({ maxStoreBytes: MiB });
    assert.equal(await pullError(store, first.reference), undefined);
    const error = await pullError(store, second.reference);
    assert.ok(error instanceof BoxError && error.code === 'image', String(error));
    assert.match(error.message, /maxStoreBytes \(1048576 bytes\)/);
    // Removing the first image gives its bytes back.
    await store.remove(first.reference);
    assert.equal(await pullError(store, second.reference), undefined);
  });

  test('limits that are not positive integers are refused naming the field', () => {
    assert.throws(
      () => new ImageStore({ homeDir: join(home, 'bad'), limits: { maxLayerBytes: -1 } }),
      (e: unknown) =>
        e instanceof BoxError && e.code === 'invalid_option' && e.field === 'imageLimits.maxLayerBytes',
    );
  });
});
