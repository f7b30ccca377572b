/**
 * The hostile-layer suite on the rootless store, run by `hostile-rootless.test.ts` as the ordinary
 * account `sbxuser` (`runuser -u sbxuser -- node --test hostile-rootless-suite.ts`): every hand-written
 * hostile layer class pushed to the local registry and pulled by an `ImageStore` of that account, a few
 * generated pulls and seeded generated layers unpacked directly (fast-check); the account's canary tree
 * that the layers aim at stays the same, and nothing appears beside the target. The classes are also
 * aimed at a canary of root's (`HOSTILE_ROOT_CANARY`), which the parent test checks.
 */
import assert from 'node:assert/strict';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
// internal: the layer unpacker is tested as a unit
import { extractLayer } from '../../src/images/unpack.ts';
import { BoxError, ImageStore } from '../../src/index.ts';
import { buildLayer, pushFixture, tarOf } from '../helpers/registry.ts';
import { cleanupAll, tempHome } from '../runtime-helpers.ts';
import { assertGeneratedLayersKeepCanary, canaryFacts, HOSTILE_CASES, makeCanary } from './hostile-layers.ts';

let home: string;
let canary: string;
let stores = 0;

before(() => {
  assert.notEqual(userInfo().uid, 0, 'the rootless hostile suite must run as an ordinary account');
  home = tempHome('hostile-rootless-');
  canary = makeCanary(home);
});
after(cleanupAll);

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
      const pushed = await pushFixture(`hostile-rootless-${i}`, [await buildLayer(c.entries(canary))]);
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
      const pushed = await pushFixture(`hostile-rootless-root-${i}`, [
        await buildLayer(c.entries(rootCanary)),
      ]);
      const error = await pullError(pushed.reference);
      if (error) assert.ok(error instanceof BoxError && error.code === 'image', `${c.name}: ${error}`);
    }
  });

  test('generated hostile pulls (fast-check, seeded): the canary untouched', async () => {
    let run = 0;
    await assertGeneratedLayersKeepCanary(
      join(home, 'gen'),
      async (entries) => {
        const pushed = await pushFixture(`hostile-rootless-gen-${run++ % 4}`, [await buildLayer(entries)]);
        return pullError(pushed.reference);
      },
      { seed: 2729, numRuns: 6 },
    );
  });

  test('generated hostile layers unpacked by the unpacker (fast-check, seeded): the canary untouched', async () => {
    const parent = join(home, 'unpacked');
    await assertGeneratedLayersKeepCanary(
      parent,
      async (entries) => {
        try {
          await extractLayer(Readable.from([await tarOf(entries)]), join(parent, 'target'));
        } catch (error) {
          return error;
        }
      },
      { seed: 2730, numRuns: 100, beside: ['target'] },
    );
  });
});
