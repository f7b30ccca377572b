/**
 * Image store against the real local registries (Debian docker-registry): anonymous and htpasswd pulls,
 * search-registry resolution, sharing of concurrent pulls, progress, list/remove, references.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
// internal: image reference parsing is tested as a unit
import { candidates, parseReference } from '../src/images/index.ts';
import { BoxError, ImageStore, type PullProgress, renderPullProgress } from '../src/index.ts';
import { type LocalRegistry, localRegistry, startRegistryProxy } from './helpers/registry.ts';

let reg: LocalRegistry;
const homes: string[] = [];
async function home(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'seed-images-'));
  homes.push(d);
  return d;
}

before(async () => {
  reg = await localRegistry({ auth: true, images: ['busybox'] });
});
after(async () => {
  for (const d of homes) await rm(d, { recursive: true, force: true });
});

describe('references', () => {
  test('parses and normalizes like the distribution reference grammar', () => {
    assert.deepEqual(parseReference('python:slim'), {
      domain: undefined,
      path: 'python',
      tag: 'slim',
      digest: undefined,
    });
    assert.deepEqual(parseReference('127.0.0.1:5000/library/busybox'), {
      domain: '127.0.0.1:5000',
      path: 'library/busybox',
      tag: undefined,
      digest: undefined,
    });
    const [hub] = candidates('ubuntu');
    assert.deepEqual(hub, {
      domain: 'docker.io',
      repository: 'library/ubuntu',
      tag: 'latest',
      digest: undefined,
    });
  });

  test('unqualified names try search registries in order, then Docker Hub', () => {
    const list = candidates('python:slim', [
      { host: 'a.example', search: true },
      { host: 'b.example' },
      { host: '127.0.0.1:5000', transport: 'http', search: true },
    ]);
    assert.deepEqual(
      list.map((c) => `${c.domain}/${c.repository}:${c.tag}`),
      [
        'a.example/library/python:slim',
        '127.0.0.1:5000/library/python:slim',
        'docker.io/library/python:slim',
      ],
    );
  });

  test('malformed references are rejected with a BoxError naming the rule', () => {
    assert.throws(
      () => parseReference('Python:slim'),
      (e: Error) => e instanceof BoxError && /lower-case/.test(e.message),
    );
    assert.throws(() => parseReference('busybox:bad tag'), /tag 'bad tag'/);
    assert.throws(() => parseReference('busybox@sha256:xyz'), /digest/);
    assert.throws(() => parseReference(''), /non-empty/);
  });
});

describe('pull from the local registry', () => {
  test('unqualified busybox resolves through the search registry and unpacks a usable root', async () => {
    const store = new ImageStore({
      homeDir: await home(),
      registries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
    });
    const img = await store.pull('busybox');
    assert.equal(img.reference, '127.0.0.1:5000/library/busybox:latest');
    assert.match(img.digest, /^sha256:[a-f0-9]{64}$/);
    assert.equal(img.layerDirs.length, 1);
    const root = img.layerDirs[0]!;
    assert.ok(fs.statSync(join(root, 'bin/busybox')).mode & 0o111, 'busybox is executable');
    assert.equal(fs.readlinkSync(join(root, 'bin/sh')), '/bin/busybox');
    assert.equal(fs.statSync(join(root, 'tmp')).mode & 0o7777, 0o1777);
    assert.deepEqual(img.config.cmd, ['sh']);
    assert.ok(img.config.env.some((e) => e.startsWith('PATH=')));
    // stored: get() answers without network, pull() reuses
    assert.deepEqual(await store.get('busybox:latest'), img);
    assert.deepEqual(await store.pull('busybox'), img);
  });

  test('htpasswd registry: credentials work, missing or wrong ones fail with 401 naming the image', async () => {
    const ok = new ImageStore({ homeDir: await home(), registries: reg.registries });
    const img = await ok.pull(`${reg.host}/library/busybox:latest`);
    assert.ok(fs.existsSync(join(img.layerDirs[0]!, 'bin/busybox')));

    const anon = new ImageStore({
      homeDir: await home(),
      registries: [{ host: reg.host, transport: 'http' }],
    });
    await assert.rejects(anon.pull(`${reg.host}/library/busybox:latest`), (e: Error) => {
      assert.ok(e instanceof BoxError);
      assert.match(e.message, /127\.0\.0\.1:5001\/library\/busybox:latest/);
      assert.match(e.message, /401/);
      return true;
    });
    const wrong = new ImageStore({
      homeDir: await home(),
      registries: [{ host: reg.host, transport: 'http', auth: { username: 'seed', password: 'nope' } }],
    });
    await assert.rejects(wrong.pull(`${reg.host}/library/busybox:latest`), /busybox.*401/);
  });

  test('a missing image is a BoxError with 404 naming the image; nothing is stored', async () => {
    const store = new ImageStore({ homeDir: await home() });
    await assert.rejects(store.pull('127.0.0.1:5000/seed-test/does-not-exist:1'), (e: Error) => {
      assert.ok(e instanceof BoxError);
      assert.match(e.message, /seed-test\/does-not-exist:1/);
      assert.match(e.message, /404/);
      return true;
    });
    assert.deepEqual(await store.list(), []);
  });

  test('a search registry lacking the image falls through to the next one', async () => {
    const proxy = await startRegistryProxy();
    try {
      proxy.notFound = true;
      const store = new ImageStore({
        homeDir: await home(),
        registries: [
          { host: proxy.host, transport: 'http', search: true },
          { host: '127.0.0.1:5000', transport: 'http', search: true },
        ],
      });
      const img = await store.pull('busybox');
      assert.equal(img.reference, '127.0.0.1:5000/library/busybox:latest');
      assert.ok(proxy.requests.some((r) => r === 'GET /v2/library/busybox/manifests/latest'));
    } finally {
      await proxy.close();
    }
  });

  test('concurrent pulls of one image share one download and report progress', async () => {
    const proxy = await startRegistryProxy();
    try {
      const store = new ImageStore({
        homeDir: await home(),
        registries: [{ host: proxy.host, transport: 'http', search: true }],
      });
      const events: PullProgress[] = [];
      const [a, b, c] = await Promise.all([
        store.pull('busybox', { onProgress: (p) => events.push(p) }),
        store.pull('busybox'),
        store.pull(`${proxy.host}/library/busybox:latest`),
      ]);
      assert.deepEqual(a, b);
      assert.deepEqual(a.layerDirs, c.layerDirs);
      const blobGets = proxy.requests.filter((r) => r.startsWith('GET ') && r.includes('/blobs/'));
      // one config and one layer blob: the third call (another reference string) reused the layer in flight
      assert.equal(new Set(blobGets).size, blobGets.length, `blobs fetched twice: ${blobGets.join(', ')}`);
      // Whichever call started the shared pull, the listener follows it from where it stood when it joined.
      const order = ['resolving', 'downloading', 'unpacking', 'done'];
      const phases = events.map((e) => order.indexOf(e.phase));
      assert.ok(phases[0]! <= 1, `first event ${events[0]?.phase}`);
      assert.deepEqual(
        phases,
        [...phases].sort((x, y) => x - y),
        'phases only move forward',
      );
      const last = events.at(-1)!;
      assert.equal(last.phase, 'done');
      assert.equal(last.layersDone, last.layersTotal);
      assert.equal(last.bytesDone, last.bytesTotal);
      assert.ok(last.bytesTotal > 500_000);
    } finally {
      await proxy.close();
    }
  });

  test('two processes pulling into one homeDir both succeed with one copy of each layer', async () => {
    const homeDir = await home();
    const storeUrl = new URL('../src/images/index.ts', import.meta.url).href;
    const code = `import { ImageStore } from ${JSON.stringify(storeUrl)};
      const s = new ImageStore({ homeDir: process.argv[1] });
      const img = await s.pull('127.0.0.1:5000/library/busybox:latest');
      console.log(JSON.stringify(img.layerDirs));`;
    const run = () =>
      new Promise<string>((res, rej) => {
        execFile(process.execPath, ['--input-type=module', '-e', code, homeDir], (err, out) =>
          err ? rej(err) : res(out),
        );
      });
    const [a, b] = await Promise.all([run(), run()]);
    assert.deepEqual(JSON.parse(a), JSON.parse(b));
    assert.equal(fs.readdirSync(join(homeDir, 'images', 'layers', 'sha256')).length, 1);
    assert.deepEqual(fs.readdirSync(join(homeDir, 'images', 'tmp')), []);
    const store = new ImageStore({ homeDir });
    assert.equal((await store.list()).length, 1);
  });

  test('the CLI progress renderer draws a bar that ends at 100%', () => {
    let out = '';
    const stream = Object.assign(new PassThrough(), {
      isTTY: true,
      columns: 120,
      cursorTo: () => true,
      clearLine: () => true,
      moveCursor: () => true,
    });
    stream.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const render = renderPullProgress(stream as unknown as NodeJS.WriteStream);
    const base = {
      reference: '127.0.0.1:5000/library/busybox:latest',
      layersTotal: 2,
      bytesTotal: 4 * 1048576,
    };
    render({ ...base, phase: 'downloading', layersDone: 0, bytesDone: 1048576 });
    render({ ...base, phase: 'done', layersDone: 2, bytesDone: 4 * 1048576 });
    assert.match(out, /127\.0\.0\.1:5000\/library\/busybox:latest/);
    assert.match(out, /100%/);
    assert.match(out, /layers 2\/2/);
  });

  test('list shows pulled images; remove deletes the reference and its unshared layers', async () => {
    const homeDir = await home();
    const store = new ImageStore({
      homeDir,
      registries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
    });
    const img = await store.pull('busybox');
    const list = await store.list();
    assert.equal(list.length, 1);
    assert.equal(list[0]!.reference, '127.0.0.1:5000/library/busybox:latest');
    assert.equal(list[0]!.digest, img.digest);
    assert.ok(list[0]!.sizeBytes > 1_000_000);
    assert.ok(!Number.isNaN(Date.parse(list[0]!.pulledAt)));
    await store.remove('busybox');
    assert.deepEqual(await store.list(), []);
    assert.equal(fs.existsSync(img.layerDirs[0]!), false);
    assert.equal(await store.get('busybox'), null);
    await assert.rejects(
      store.remove('busybox'),
      (e: Error) => e instanceof BoxError && /not stored/.test(e.message),
    );
  });

  test('an aborted pull rejects, stores nothing and leaves no temporary files', async () => {
    const proxy = await startRegistryProxy();
    try {
      const homeDir = await home();
      const store = new ImageStore({
        homeDir,
        registries: [{ host: proxy.host, transport: 'http', search: true }],
      });
      // stall every layer blob of busybox: learn its digest from a first pull elsewhere
      const ref = await new ImageStore({ homeDir: await home() }).pull(
        '127.0.0.1:5000/library/busybox:latest',
      );
      const layerDigest = `sha256:${ref.layerDirs[0]!.split('/').at(-2)}`;
      proxy.stall.add(layerDigest);
      const controller = new AbortController();
      const pulling = store.pull('busybox', {
        signal: controller.signal,
        onProgress: (p) => {
          if (p.phase === 'downloading') setTimeout(() => controller.abort(), 50);
        },
      });
      await assert.rejects(pulling, (e: Error) => e instanceof BoxError && /aborted/.test(e.message));
      // the aborted download cleans up its temporary directory in the background: wait for it (bounded)
      const tmp = join(homeDir, 'images', 'tmp');
      for (let i = 0; i < 600 && fs.readdirSync(tmp).length > 0; i++)
        await new Promise((r) => setTimeout(r, 25));
      assert.deepEqual(await store.list(), []);
      assert.deepEqual(fs.readdirSync(join(homeDir, 'images', 'tmp')), []);
      assert.equal(fs.existsSync(join(homeDir, 'images', 'layers', 'sha256', layerDigest.slice(7))), false);
    } finally {
      await proxy.close();
    }
  });
});
