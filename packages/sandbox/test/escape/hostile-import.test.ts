/**
 * Escape suite, box archives handed to import (`runtime.importBox` and `POST /v1/boxes/import`): archives
 * made by hand with hostile box layers (directory → symlink swaps after whiteouts and directory modes,
 * writes and hard links through planted symlinks) leave the host canary tree unchanged; options an
 * archive may not bring (host and managed volumes, added capabilities, `allowNet`, ports, secrets) are
 * dropped and listed, and apply when the caller passes them again; archives over `maxImportBytes` are
 * refused before they are unpacked (over REST as the upload arrives) and box layers over
 * `maxLayerBytes` leave no box behind.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BoxError, JsRuntime } from '../../src/index.ts';
import { type RestServer, startRestServer } from '../../src/rest/server.ts';
// internal: the archive's resource reader is tested as a unit
import { archiveResources } from '../../src/runtime/archive-import.ts';
import { tarOf } from '../helpers/registry.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, run, tempHome } from '../runtime-helpers.ts';
import {
  assertBoxLayerCaseKeepsCanary,
  assertGeneratedLayersKeepCanary,
  BOX_LAYER_CASES,
  canaryFacts,
  type HostileEntries,
  handMadeArchive,
  imageLayerTars,
  makeCanary,
} from './hostile-layers.ts';

let home: string;
let canary: string;
let runtime: JsRuntime;
let busyboxLayers: Buffer[];
let server: RestServer | null = null;
let archives = 0;

before(async () => {
  ensureRegistry();
  home = tempHome('hostile-import-');
  canary = makeCanary(home);
  runtime = new JsRuntime({ homeDir: join(home, 'rt') });
  busyboxLayers = await imageLayerTars(join(home, 'pull'), BUSYBOX);
});
after(async () => {
  await server?.close();
  await cleanupAll();
});

/** A hand-made archive on busybox's layers with `boxLayer` and `options`; its path. */
async function archiveOf(boxLayer: Buffer, options: Record<string, unknown> = { cpus: 1 }): Promise<string> {
  const path = join(home, `archive-${archives++}.tar`);
  await handMadeArchive(path, { imageLayers: busyboxLayers, boxLayer, options });
  return path;
}

const SWAPS = BOX_LAYER_CASES;

/** Imports a box whose layer holds `entries` and removes it: the error met, or undefined. */
async function importAndRemove(entries: HostileEntries): Promise<unknown> {
  const archive = await archiveOf(await tarOf(entries));
  try {
    const box = await runtime.importBox(archive);
    await runtime.remove(box.id, true);
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('hostile box layers through importBox', () => {
  for (const c of SWAPS) {
    test(`${c.name}: ${c.expect}, the canary untouched`, async () => {
      await assertBoxLayerCaseKeepsCanary(c, canary, runtime, (entries) => importAndRemove(entries));
    });
  }
});

describe('generated hostile box layers through importBox (fast-check, seeded)', () => {
  test('no generated box layer changes the canary', async () => {
    await assertGeneratedLayersKeepCanary(join(home, 'gen'), importAndRemove, { seed: 2728, numRuns: 15 });
  });
});

describe('archive options are not trusted', () => {
  const hostile = {
    cpus: 1,
    env: [{ key: 'FROM', value: 'archive' }],
    volumes: [
      { hostPath: '/', guestPath: '/host' },
      { managedVolume: 'someone-elses', guestPath: '/v' },
    ],
    network: { mode: 'enabled', allowNet: ['127.0.0.1'] },
    advanced: { capabilities: { add: ['SYS_ADMIN'] } },
    ports: [{ guestPort: 80 }],
    secrets: [{ name: 'token', value: 'from-the-archive' }],
  };
  const dropped = [
    'advanced.capabilities.add',
    'network.allowNet',
    'ports',
    'secrets',
    'volumes[0]',
    'volumes[1]',
  ];

  test('host and managed volumes, capabilities, allowNet, ports and secrets are dropped and listed', async () => {
    const archive = await archiveOf(await tarOf([{ name: 'root/hello', content: 'hi' }]), hostile);
    const box = await runtime.importBox(archive, { name: 'untrusted' });
    try {
      assert.deepEqual([...box.droppedOptions].sort(), dropped);
      const probe = await run(box, 'sh', [
        '-c',
        'cat /root/hello; echo " $FROM"; [ -e /host/etc ] && echo host || echo no-host; grep CapEff /proc/self/status',
      ]);
      const [hello, host, caps] = probe.stdout.split('\n');
      assert.equal(hello, 'hi archive');
      assert.equal(host, 'no-host');
      // CAP_SYS_ADMIN is bit 21: not in the effective set.
      const eff = BigInt(`0x${caps!.split(/\s+/)[1]}`);
      assert.equal((eff >> 21n) & 1n, 0n);
    } finally {
      await runtime.remove(box.id, true);
    }
  });

  test('options passed again by the caller apply and are not listed as dropped', async () => {
    const archive = await archiveOf(await tarOf([{ name: 'root/hello', content: 'hi' }]), hostile);
    const box = await runtime.importBox(archive, {
      options: { advanced: { capabilities: { add: ['SYS_ADMIN'] } } },
    });
    try {
      assert.deepEqual(
        [...box.droppedOptions].sort(),
        dropped.filter((d) => !d.startsWith('advanced')),
      );
      const caps = (await run(box, 'sh', ['-c', 'grep CapEff /proc/self/status'])).stdout;
      assert.equal((BigInt(`0x${caps.split(/\s+/)[1]}`) >> 21n) & 1n, 1n);
    } finally {
      await runtime.remove(box.id, true);
    }
  });
});

describe('import bounds', () => {
  test('an archive over maxImportBytes is refused before anything is unpacked', async () => {
    const small = new JsRuntime({
      homeDir: join(home, 'rt-small'),
      imageLimits: { maxImportBytes: 64 * 1024 },
    });
    const archive = await archiveOf(await tarOf([{ name: 'x', content: 'x' }]));
    assert.ok(statSync(archive).size > 64 * 1024);
    await assert.rejects(small.importBox(archive), (e: unknown) => {
      assert.ok(e instanceof BoxError && e.code === 'image', String(e));
      assert.match(e.message, /maxImportBytes \(65536 bytes\)/);
      return true;
    });
    const imports = join(home, 'rt-small', 'imports');
    assert.deepEqual(existsSync(imports) ? readdirSync(imports) : [], []);
  });

  test('a box layer over maxLayerBytes is refused naming it, and no box is left', async () => {
    const bounded = new JsRuntime({
      homeDir: join(home, 'rt-bounded'),
      imageLimits: { maxLayerBytes: 4 * 1024 * 1024 },
    });
    const archive = await archiveOf(await tarOf([{ name: 'bomb', content: Buffer.alloc(8 * 1024 * 1024) }]));
    await assert.rejects(bounded.importBox(archive), (e: unknown) => {
      assert.ok(e instanceof BoxError && e.code === 'image', String(e));
      assert.match(e.message, /maxLayerBytes/);
      return true;
    });
    assert.deepEqual(await bounded.listInfo(), []);
  });
});

describe('archive resources for REST admission', () => {
  test('archiveResources reads the numbers the archive asks for, and nothing else', async () => {
    const archive = await archiveOf(await tarOf([{ name: 'x', content: 'x' }]), {
      cpus: 2,
      memoryMib: 300,
      diskSizeGb: 'huge',
      volumes: [{ hostPath: '/', guestPath: '/host' }],
    });
    assert.deepEqual(await archiveResources(archive, 1 << 30), { cpus: 2, memoryMib: 300 });
    await assert.rejects(archiveResources(archive, 1024), /maxImportBytes \(1024 bytes\)/);
  });
});

describe('POST /v1/boxes/import', () => {
  test('answers with dropped_options; an upload over maxImportBytes is refused with 422 as it arrives', async () => {
    const served = new JsRuntime({
      homeDir: join(home, 'rt-rest'),
      imageLimits: { maxImportBytes: 1024 * 1024 * 1024 },
    });
    server = await startRestServer({ runtime: served, port: 0 });
    const client = new JsRuntime({ url: server.url });
    const archive = await archiveOf(await tarOf([{ name: 'root/hello', content: 'hi' }]), {
      cpus: 1,
      volumes: [{ hostPath: '/', guestPath: '/host' }],
    });
    const box = await client.importBox(archive, 'rest-imported');
    try {
      assert.deepEqual([...box.droppedOptions], ['volumes[0]']);
      assert.equal((await run(box, 'cat', ['/root/hello'])).stdout, 'hi');
    } finally {
      await client.remove(box.id, true);
    }
    // A hostile box layer uploaded: confined swaps leave the canary as it was; refused ones answer 422.
    for (const c of SWAPS.filter((x) => /whiteout then|written through/.test(x.name))) {
      const beforeFacts = canaryFacts(canary);
      const hostileArchive = await archiveOf(await tarOf(c.entries(canary)));
      try {
        const imported = await client.importBox(hostileArchive);
        assert.equal(c.expect, 'confined');
        await client.remove(imported.id, true);
      } catch (error) {
        assert.equal(c.expect, 'refused', String(error));
        assert.ok(error instanceof BoxError && error.code === 'image', String(error));
      }
      assert.deepEqual(canaryFacts(canary), beforeFacts);
    }
    await server.close();
    const small = new JsRuntime({
      homeDir: join(home, 'rt-rest-small'),
      imageLimits: { maxImportBytes: 64 * 1024 },
    });
    server = await startRestServer({ runtime: small, port: 0 });
    // A chunked upload (no content-length) twice the bound.
    const body = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 32; i++) controller.enqueue(new Uint8Array(4096));
        controller.close();
      },
    });
    const res = await fetch(`${server.url}/v1/boxes/import`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-tar' },
      body,
      duplex: 'half',
    } as RequestInit);
    assert.equal(res.status, 422);
    const answer = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(answer.error.code, 'image');
    assert.match(answer.error.message, /maxImportBytes/);
    assert.deepEqual(
      readdirSync(join(home, 'rt-rest-small', 'imports')).filter((n) => n.startsWith('upload-')),
      [],
    );
  });
});
