/**
 * The hostile-layer suite on the rootless store, run by `hostile-rootless.test.ts` as the ordinary
 * account `sbxuser` (`runuser -u sbxuser -- node --test hostile-rootless-suite.ts`): every hand-written
 * hostile layer class pushed to the local registry and pulled by an `ImageStore` of that account, a few
 * generated pulls and seeded generated layers unpacked directly (fast-check); the account's canary tree
 * that the layers aim at stays the same, and nothing appears beside the target. The classes are also
 * aimed at a canary of root's (`HOSTILE_ROOT_CANARY`), which the parent test checks.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, rmSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
// internal: digest and media-type helpers build the hostile manifests
import { MediaType, sha256Digest } from '../../src/images/index.ts';
// internal: the layer unpacker is tested as a unit
import { extractLayer } from '../../src/images/unpack.ts';
import { BoxError, ImageStore } from '../../src/index.ts';
import { buildLayer, type FixtureLayer, pushFixture } from '../helpers/registry.ts';
import { cleanupAll, tempHome } from '../runtime-helpers.ts';
import { canaryFacts, HOSTILE_CASES, hostileLayer, makeCanary, tarOf } from './hostile-layers.ts';

let home: string;
let canary: string;
let stores = 0;

before(() => {
  assert.notEqual(userInfo().uid, 0, 'the rootless hostile suite must run as an ordinary account');
  home = tempHome('hostile-rootless-');
  canary = makeCanary(home);
});
after(cleanupAll);

/** A gzip layer of the entries (sparse entries allowed). */
async function layerOf(entries: Parameters<typeof tarOf>[0]): Promise<FixtureLayer> {
  const raw = await tarOf(entries);
  return { data: gzipSync(raw), mediaType: MediaType.ociLayerGzip, diffId: sha256Digest(raw) };
}

/** Pulls `reference` into a fresh store of this account; the error, if any. */
async function pullError(reference: string): Promise<Error | undefined> {
  try {
    await new ImageStore({ homeDir: join(home, `store-${stores++}`) }).pull(reference);
    return undefined;
  } catch (error) {
    return error as Error;
  }
}

describe(`hostile layers pulled into the rootless store of ${userInfo().username}`, () => {
  HOSTILE_CASES.forEach((c, i) => {
    test(`${c.name}: the canary untouched`, async () => {
      const pushed = await pushFixture(`hostile-rootless-${i}`, [await layerOf(c.entries(canary))]);
      const beforeFacts = canaryFacts(canary);
      const error = await pullError(pushed.reference);
      if (c.expect === 'refused')
        assert.ok(error instanceof BoxError && error.code === 'image', String(error));
      if (c.expect === 'confined') assert.equal(error, undefined, String(error));
      if (error) assert.ok(error instanceof BoxError && error.code === 'image', String(error));
      assert.deepEqual(canaryFacts(canary), beforeFacts);
    });
  });

  test("every class aimed at root's canary (HOSTILE_ROOT_CANARY, checked by the parent test)", async (t) => {
    const rootCanary = process.env.HOSTILE_ROOT_CANARY;
    if (!rootCanary) return t.skip('HOSTILE_ROOT_CANARY is not set');
    for (const [i, c] of HOSTILE_CASES.entries()) {
      const pushed = await pushFixture(`hostile-rootless-root-${i}`, [await layerOf(c.entries(rootCanary))]);
      const error = await pullError(pushed.reference);
      if (error) assert.ok(error instanceof BoxError && error.code === 'image', `${c.name}: ${error}`);
    }
  });

  test('generated hostile pulls (fast-check, seeded): the canary untouched', async () => {
    const gen = join(home, 'gen');
    const genCanary = join(gen, 'canary');
    let run = 0;
    await fc.assert(
      fc.asyncProperty(hostileLayer(genCanary), async (entries) => {
        rmSync(gen, { recursive: true, force: true });
        mkdirSync(gen);
        makeCanary(gen);
        const beforeFacts = canaryFacts(genCanary);
        const pushed = await pushFixture(`hostile-rootless-gen-${run++ % 4}`, [await buildLayer(entries)]);
        const error = await pullError(pushed.reference);
        if (error) assert.ok(error instanceof BoxError && error.code === 'image', String(error));
        assert.deepEqual(canaryFacts(genCanary), beforeFacts);
        assert.deepEqual(readdirSync(gen), ['canary']);
      }),
      { seed: 2729, numRuns: 6, endOnFailure: true },
    );
  });

  test('generated hostile layers unpacked by the unpacker (fast-check, seeded): the canary untouched', async () => {
    const parent = join(home, 'unpacked');
    const genCanary = join(parent, 'canary');
    const target = join(parent, 'target');
    await fc.assert(
      fc.asyncProperty(hostileLayer(genCanary), async (entries) => {
        rmSync(parent, { recursive: true, force: true });
        mkdirSync(target, { recursive: true });
        makeCanary(parent);
        const beforeFacts = canaryFacts(genCanary);
        try {
          await extractLayer(Readable.from([await tarOf(entries)]), target);
        } catch (error) {
          assert.ok(error instanceof BoxError && error.code === 'image', String(error));
        }
        assert.deepEqual(canaryFacts(genCanary), beforeFacts);
        assert.deepEqual(readdirSync(parent).sort(), ['canary', 'target']);
      }),
      { seed: 2730, numRuns: 100, endOnFailure: true },
    );
  });
});
