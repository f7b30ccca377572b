/**
 * Escape suite, options passed again to `POST /v1/boxes/import` (the `X-Box-Options` header, sent by
 * `importBox(path, { options })` of a REST runtime): they apply inside the box (capabilities, env, a
 * managed volume); the refusals of `POST /v1/boxes` hold (host bind mounts, `rootfs_path`, `ports`: 400
 * naming the field, no box, no upload left, the host canary unchanged); a managed volume named by
 * another tenant's name or id never resolves to that tenant's volume; `isolation: 'gvisor'` passed again
 * starts a box imported with a hostile box layer under runsc, the canary unchanged.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BoxError, JsRuntime } from '../../src/index.ts';
import type { RestServer } from '../../src/rest/server.ts';
import { tarOf } from '../helpers/registry.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, GVISOR_SKIP, run, tempHome } from '../runtime-helpers.ts';
import { api, createKey, startTenantServer } from '../tenants-helpers.ts';
import {
  BOX_LAYER_CASES,
  canaryFacts,
  handMadeArchive,
  imageLayerTars,
  makeCanary,
} from './hostile-layers.ts';

let home: string;
let canary: string;
let server: RestServer;
let url: string;
let serverHome: string;
let keyA: string;
let keyB: string;
let volumeA: string;
let archive: string;
let canaryBefore: string[];

/** What the archive asks for and may not bring: a host bind, A's volume by name, caps, allowNet. */
const HOSTILE = {
  cpus: 1,
  volumes: [
    { hostPath: '/', guestPath: '/host' },
    { managedVolume: 'data', guestPath: '/data' },
  ],
  network: { mode: 'enabled', allowNet: ['127.0.0.1'] },
  advanced: { capabilities: { add: ['SYS_ADMIN'] } },
};

before(async () => {
  ensureRegistry();
  home = tempHome('rest-import-options-');
  canary = makeCanary(home);
  ({ server, url, home: serverHome } = await startTenantServer());
  keyA = (await createKey(url, 'tenant-a')).key;
  keyB = (await createKey(url, 'tenant-b')).key;
  // Tenant A's volume `data` holding a file only A may read.
  const boxA = await api(url, 'POST', '/v1/boxes', keyA, {
    image: BUSYBOX,
    volumes: [{ managed_volume: 'data', guest_path: '/data' }],
  });
  assert.equal(boxA.status, 201, JSON.stringify(boxA.body));
  const put = await api(
    url,
    'PUT',
    `/v1/boxes/${boxA.body.id}/files/content?path=/data/secret.txt`,
    keyA,
    Buffer.from('A only'),
  );
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const removed = await api(url, 'DELETE', `/v1/boxes/${boxA.body.id}?force=true`, keyA);
  assert.equal(removed.status, 204);
  volumeA = (await api(url, 'GET', '/v1/volumes', keyA)).body[0].id;
  archive = join(home, 'archive.tar');
  await handMadeArchive(archive, {
    imageLayers: await imageLayerTars(join(home, 'pull'), BUSYBOX),
    boxLayer: await tarOf([{ name: 'root/hello', content: 'hi' }]),
    options: HOSTILE,
  });
  canaryBefore = canaryFacts(canary);
});
after(async () => {
  await server.close();
  await cleanupAll();
});

/** Tenant A's volume still holds exactly its one file, as A wrote it. */
async function volumeAUntouched(): Promise<void> {
  const boxA = await api(url, 'POST', '/v1/boxes', keyA, {
    image: BUSYBOX,
    volumes: [{ managed_volume: 'data', guest_path: '/data' }],
  });
  assert.equal(boxA.status, 201, JSON.stringify(boxA.body));
  const client = new JsRuntime({ url, apiKey: keyA });
  const box = await client.get(boxA.body.id);
  assert.ok(box);
  assert.equal(
    (await run(box, 'sh', ['-c', 'ls -A /data; cat /data/secret.txt'])).stdout,
    'secret.txt\nA only',
  );
  await client.remove(box.id, true);
}

/** The upload files the server left in its imports directory. */
function uploadsLeft(): string[] {
  const dir = join(serverHome, 'imports');
  return existsSync(dir) ? readdirSync(dir).filter((n) => n.startsWith('upload-')) : [];
}

describe('importBox over REST with options passed again', () => {
  test("the options apply inside the box and are not listed as dropped; managed volumes are the caller's own", async () => {
    const client = new JsRuntime({ url, apiKey: keyB });
    const box = await client.importBox(archive, {
      name: 'imported',
      options: {
        env: [{ key: 'GIVEN', value: 'passed again é' }],
        advanced: { capabilities: { add: ['SYS_ADMIN'] } },
        volumes: [{ managedVolume: 'data', guestPath: '/data' }],
      },
    });
    try {
      assert.deepEqual([...box.droppedOptions], ['network.allowNet']);
      const probe = await run(box, 'sh', [
        '-c',
        'cat /root/hello; echo; echo "$GIVEN"; ls -A /data | wc -l; [ -e /host/etc ] && echo host || echo no-host; grep CapEff /proc/self/status',
      ]);
      const [hello, given, files, host, caps] = probe.stdout.split('\n');
      assert.equal(hello, 'hi');
      assert.equal(given, 'passed again é');
      // B's own `data`: a new, empty volume, not A's.
      assert.equal(files?.trim(), '0');
      assert.equal(host, 'no-host');
      assert.equal((BigInt(`0x${caps!.split(/\s+/)[1]}`) >> 21n) & 1n, 1n, 'CAP_SYS_ADMIN given again');
      const volumesB = (await api(url, 'GET', '/v1/volumes', keyB)).body as { id: string; name: string }[];
      assert.deepEqual(
        volumesB.map((v) => v.name),
        ['data'],
      );
      assert.notEqual(volumesB[0]!.id, volumeA);
    } finally {
      await client.remove(box.id, true);
    }
    await volumeAUntouched();
    assert.deepEqual(canaryFacts(canary), canaryBefore);
  });

  test("another tenant's volume id is not found for the caller and never resolves to that volume", async () => {
    const client = new JsRuntime({ url, apiKey: keyB });
    assert.equal((await api(url, 'GET', `/v1/volumes/${volumeA}`, keyB)).status, 404);
    const box = await client.importBox(archive, {
      options: { volumes: [{ managedVolume: volumeA, guestPath: '/data' }] },
    });
    try {
      assert.equal((await run(box, 'sh', ['-c', 'ls -A /data | wc -l'])).stdout.trim(), '0');
    } finally {
      await client.remove(box.id, true);
    }
    // The name resolved among B's own volumes: B now has a volume of that name, and it is not A's.
    const named = await api(url, 'GET', `/v1/volumes/${volumeA}`, keyB);
    assert.equal(named.status, 200, JSON.stringify(named.body));
    assert.notEqual(named.body.id, volumeA);
    await volumeAUntouched();
  });

  test('isolation passed again: a hostile box layer imported over REST onto the gVisor tier stays confined', {
    skip: GVISOR_SKIP,
  }, async () => {
    // ptrace explicitly: the KVM probe is covered by gvisor.test.ts.
    process.env.SEED_SANDBOX_GVISOR_PLATFORM = 'ptrace';
    const swap = BOX_LAYER_CASES.find((c) => c.expect === 'confined')!;
    const hostile = join(home, 'hostile-gvisor.tar');
    await handMadeArchive(hostile, {
      imageLayers: await imageLayerTars(join(home, 'pull-gv'), BUSYBOX),
      boxLayer: await tarOf(swap.entries(canary)),
      options: { cpus: 1 },
    });
    const client = new JsRuntime({ url, apiKey: keyB });
    const box = await client.importBox(hostile, { options: { isolation: 'gvisor' } });
    try {
      assert.equal((await box.info()).isolation?.tier, 'gvisor');
      assert.equal((await run(box, 'true')).exitCode, 0);
    } finally {
      await client.remove(box.id, true);
    }
    assert.deepEqual(canaryFacts(canary), canaryBefore);
  });

  test('host paths and ports are refused before any byte leaves the client', async () => {
    const client = new JsRuntime({ url, apiKey: keyB });
    const cases: [Record<string, unknown>, string][] = [
      [{ volumes: [{ hostPath: '/', guestPath: '/host' }] }, 'volumes[0].hostPath'],
      [{ rootfsPath: '/' }, 'rootfsPath'],
      [{ ports: [{ guestPort: 80 }] }, 'ports'],
    ];
    for (const [options, field] of cases) {
      await assert.rejects(client.importBox(archive, { options }), (e: unknown) => {
        assert.ok(e instanceof BoxError && e.code === 'invalid_option', String(e));
        assert.equal(e.field, field);
        return true;
      });
    }
  });
});

describe('POST /v1/boxes/import refuses what POST /v1/boxes refuses', () => {
  const body = () => Buffer.from(new Uint8Array(0));
  const cases: [string, number, string, string][] = [
    [
      JSON.stringify({ volumes: [{ host_path: '/', guest_path: '/host' }] }),
      400,
      'invalid_option',
      'volumes[0].hostPath',
    ],
    [
      JSON.stringify({
        volumes: [
          { managed_volume: 'data', guest_path: '/d' },
          { host_path: '/etc', guest_path: '/e' },
        ],
      }),
      400,
      'invalid_option',
      'volumes[1].hostPath',
    ],
    [JSON.stringify({ rootfs_path: '/' }), 400, 'invalid_option', 'rootfsPath'],
    [JSON.stringify({ ports: [{ guest_port: 80 }] }), 400, 'invalid_option', 'ports'],
    [JSON.stringify({ name: 'x' }), 400, 'unknown_field', 'name'],
    [JSON.stringify({ mounts: [] }), 400, 'unknown_field', 'mounts'],
    [JSON.stringify(['a']), 400, 'invalid_option', 'options'],
    ['{not json', 400, 'invalid_option', 'options'],
  ];
  for (const [header, status, code, field] of cases) {
    test(`X-Box-Options ${header.slice(0, 60)} → ${status} ${code} naming ${field}`, async () => {
      const boxes = (await api(url, 'GET', '/v1/boxes', keyB)).body.length;
      const answer = await api(url, 'POST', '/v1/boxes/import', keyB, body(), {
        'content-type': 'application/x-tar',
        'x-box-options': header,
      });
      assert.equal(answer.status, status, JSON.stringify(answer.body));
      assert.equal(answer.body.error.code, code);
      assert.equal(answer.body.error.field, field);
      assert.equal((await api(url, 'GET', '/v1/boxes', keyB)).body.length, boxes, 'no box');
      assert.deepEqual(uploadsLeft(), []);
      assert.deepEqual(canaryFacts(canary), canaryBefore);
    });
  }

  test('the same archive with refused options sent in full is refused and leaves nothing', async () => {
    const answer = await api(url, 'POST', '/v1/boxes/import', keyB, readFileSync(archive), {
      'content-type': 'application/x-tar',
      'x-box-options': JSON.stringify({ volumes: [{ host_path: canary, guest_path: '/c' }] }),
    });
    assert.equal(answer.status, 400, JSON.stringify(answer.body));
    assert.equal(answer.body.error.field, 'volumes[0].hostPath');
    assert.deepEqual(uploadsLeft(), []);
    assert.deepEqual(canaryFacts(canary), canaryBefore);
  });
});

describe('create, clone and import refuse host reach alike (one rule, rest/host-reach.ts)', () => {
  test('each refused option answers the same error on the three routes, and no box is made', async () => {
    const made = await api(url, 'POST', '/v1/boxes', keyB, { image: BUSYBOX });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const refused: Record<string, unknown>[] = [
      { volumes: [{ host_path: canary, guest_path: '/c' }] },
      { rootfs_path: canary },
      { ports: [{ guest_port: 80 }] },
    ];
    try {
      for (const options of refused) {
        const boxes = (await api(url, 'GET', '/v1/boxes', keyB)).body.length;
        const create = await api(url, 'POST', '/v1/boxes', keyB, { image: BUSYBOX, ...options });
        const clone = await api(url, 'POST', `/v1/boxes/${made.body.id}/clone`, keyB, options);
        const imported = await api(url, 'POST', '/v1/boxes/import', keyB, readFileSync(archive), {
          'content-type': 'application/x-tar',
          'x-box-options': JSON.stringify(options),
        });
        for (const answer of [create, clone, imported]) {
          assert.equal(answer.status, 400, JSON.stringify(answer.body));
          assert.deepEqual(answer.body, create.body);
        }
        assert.equal((await api(url, 'GET', '/v1/boxes', keyB)).body.length, boxes, 'no box');
      }
    } finally {
      await api(url, 'DELETE', `/v1/boxes/${made.body.id}?force=true`, keyB);
    }
    assert.deepEqual(uploadsLeft(), []);
    assert.deepEqual(canaryFacts(canary), canaryBefore);
  });
});
