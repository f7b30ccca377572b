/**
 * Escape suite, box archives imported onto the gVisor tier (`importBox(path, { options: { isolation:
 * 'gvisor' } })`): every hostile box-layer class and a few seeded generated ones leave the host canary
 * tree unchanged, and a box imported with them starts under runsc; an archive's untrusted options stay
 * dropped there (no host bind, no added capability). Skipped only when runsc is missing.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { JsRuntime } from '../../src/index.ts';
import { tarOf } from '../helpers/registry.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, GVISOR_SKIP, run, tempHome } from '../runtime-helpers.ts';
import {
  assertBoxLayerCaseKeepsCanary,
  assertGeneratedLayersKeepCanary,
  BOX_LAYER_CASES,
  handMadeArchive,
  imageLayerTars,
  makeCanary,
} from './hostile-layers.ts';

const skip = GVISOR_SKIP;
const GVISOR = { isolation: 'gvisor' } as const;
let home: string;
let canary: string;
let runtime: JsRuntime;
let busyboxLayers: Buffer[];
let archives = 0;

before(async () => {
  if (skip) return;
  // ptrace explicitly: the KVM probe is covered by gvisor.test.ts.
  process.env.SEED_SANDBOX_GVISOR_PLATFORM = 'ptrace';
  ensureRegistry();
  home = tempHome('hostile-import-gv-');
  canary = makeCanary(home);
  runtime = new JsRuntime({ homeDir: join(home, 'rt') });
  busyboxLayers = await imageLayerTars(join(home, 'pull'), BUSYBOX);
});
after(cleanupAll);

/** A hand-made archive on busybox's layers with `boxLayer` and `options`; its path. */
async function archiveOf(boxLayer: Buffer, options: Record<string, unknown> = { cpus: 1 }): Promise<string> {
  const path = join(home, `archive-${archives++}.tar`);
  await handMadeArchive(path, { imageLayers: busyboxLayers, boxLayer, options });
  return path;
}

/** Imports `archive` on the gVisor tier; checks the box runs under runsc, then removes it. The error, if any. */
async function importOnGvisor(archive: string): Promise<unknown> {
  try {
    const box = await runtime.importBox(archive, { options: GVISOR });
    try {
      assert.equal((await box.info()).isolation?.tier, 'gvisor');
      assert.equal((await run(box, 'true')).exitCode, 0);
    } finally {
      await runtime.remove(box.id, true);
    }
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('hostile box layers imported onto the gVisor tier', { skip }, () => {
  for (const c of BOX_LAYER_CASES) {
    test(`${c.name}: ${c.expect}, the canary untouched`, async () => {
      await assertBoxLayerCaseKeepsCanary(c, canary, runtime, async (entries) =>
        importOnGvisor(await archiveOf(await tarOf(entries))),
      );
    });
  }

  test('generated hostile box layers (fast-check, seeded): the canary untouched', async () => {
    await assertGeneratedLayersKeepCanary(
      join(home, 'gen'),
      async (entries) => importOnGvisor(await archiveOf(await tarOf(entries))),
      { seed: 2731, numRuns: 4 },
    );
  });

  test("the archive's host bind and added capability stay dropped under runsc", async () => {
    const archive = await archiveOf(await tarOf([{ name: 'root/hello', content: 'hi' }]), {
      cpus: 1,
      volumes: [{ hostPath: '/', guestPath: '/host' }],
      advanced: { capabilities: { add: ['SYS_ADMIN'] } },
    });
    const box = await runtime.importBox(archive, { options: GVISOR });
    try {
      assert.deepEqual([...box.droppedOptions].sort(), ['advanced.capabilities.add', 'volumes[0]']);
      assert.equal((await box.info()).isolation?.tier, 'gvisor');
      const probe = await run(box, 'sh', [
        '-c',
        'cat /root/hello; echo; [ -e /host/etc ] && echo host || echo no-host; grep CapEff /proc/self/status',
      ]);
      const [hello, host, caps] = probe.stdout.split('\n');
      assert.equal(hello, 'hi');
      assert.equal(host, 'no-host');
      assert.equal((BigInt(`0x${caps!.split(/\s+/)[1]}`) >> 21n) & 1n, 0n);
    } finally {
      await runtime.remove(box.id, true);
    }
  });
});
