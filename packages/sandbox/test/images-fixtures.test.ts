/**
 * Image store against fixture images pushed to the local registry by the tests themselves: a multi-platform
 * index, whiteouts and opaque directories (checked through a real overlayfs mount), corrupted blobs, hostile
 * tars, zstd layers, the Bearer token flow, and rootfsPath (directory and OCI layout).
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
// internal: the registry client and push helpers build the fixture images
import { MediaType, pushBlob, pushManifest, RegistryClient, sha256Digest } from '../src/images/index.ts';
// internal: the host's OCI architecture names the fixtures' platform
import { hostArchitecture } from '../src/images/oci.ts';
// internal: points the registry client at the local registry
import { endpointFor } from '../src/images/reference.ts';
import { BoxError, ImageStore, type JsImageRegistry } from '../src/index.ts';
import { buildLayer, localRegistry, pushFixture, startRegistryProxy } from './helpers/registry.ts';

const IS_ROOT = process.getuid?.() === 0;
const dirs: string[] = [];
async function tempDir(prefix = 'seed-images-'): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}
async function newStore(
  registries: JsImageRegistry[] = [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
) {
  const homeDir = await tempDir();
  return { homeDir, store: new ImageStore({ homeDir, registries }) };
}

before(async () => {
  await localRegistry({ images: ['busybox'] });
});
after(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

describe('image content', () => {
  test('an index with several platforms resolves to linux/<this machine>', async () => {
    const arches = ['arm64', 'amd64', 's390x'];
    const descs = [];
    for (const arch of arches) {
      const layer = await buildLayer([{ name: 'platform', content: arch }]);
      const pushed = await pushFixture('multi', [layer], { tag: `only-${arch}`, architecture: arch });
      descs.push({ ...pushed.manifest, platform: { os: 'linux', architecture: arch } });
    }
    const index = Buffer.from(
      JSON.stringify({ schemaVersion: 2, mediaType: MediaType.ociIndex, manifests: descs }),
    );
    const client = new RegistryClient(endpointFor('127.0.0.1:5000'));
    await pushManifest(client, 'seed-test/multi', 'latest', index, MediaType.ociIndex);
    const { store } = await newStore();
    const img = await store.pull('127.0.0.1:5000/seed-test/multi:latest');
    const want = hostArchitecture().architecture;
    assert.equal(fs.readFileSync(join(img.layerDirs[0]!, 'platform'), 'utf8'), want);
    const chosen = descs.find((d) => d.platform.architecture === want)!;
    assert.equal(img.digest, chosen.digest);
    assert.deepEqual(img.config.exposedPorts, ['8080/tcp']);
    assert.ok(img.config.env.includes('FIXTURE=multi'));

    // pinned by digest: the index digest itself is verified and followed
    const byDigest = await store.pull(`127.0.0.1:5000/seed-test/multi@${sha256Digest(index)}`);
    assert.deepEqual(byDigest.layerDirs, img.layerDirs);
  });

  test('whiteouts and opaque directories become overlayfs whiteouts', {
    skip: !IS_ROOT && 'needs root',
  }, async () => {
    const base = await buildLayer([
      { name: 'a/', type: 'directory' },
      { name: 'a/gone', content: 'deleted above' },
      { name: 'a/kept', content: 'kept' },
      { name: 'd/', type: 'directory' },
      { name: 'd/old', content: 'hidden by opaque' },
      { name: 'sbin-tool', content: '#!/bin/sh\n', mode: 0o4755 },
    ]);
    const top = await buildLayer([
      { name: 'a/.wh.gone' },
      { name: 'd/', type: 'directory' },
      { name: 'd/.wh..wh..opq' },
      { name: 'd/new', content: 'new' },
    ]);
    const pushed = await pushFixture('whiteouts', [base, top]);
    const { store } = await newStore();
    const img = await store.pull(pushed.reference);
    assert.equal(img.layerDirs.length, 2);
    const [lower, upper] = img.layerDirs as [string, string];
    assert.equal(fs.statSync(join(lower, 'sbin-tool')).mode & 0o7777, 0o4755);
    const wh = fs.lstatSync(join(upper, 'a/gone'));
    assert.ok(wh.isCharacterDevice(), 'whiteout is a character device');
    assert.equal(wh.rdev, 0);
    assert.equal(fs.existsSync(join(upper, 'a/.wh.gone')), false);
    const xattr = execFileSync('getfattr', [
      '--only-values',
      '-n',
      'trusted.overlay.opaque',
      join(upper, 'd'),
    ]);
    assert.equal(xattr.toString(), 'y');

    // The kernel's view through an overlay mount, as a box sees it. Mounted in a private mount namespace
    // that ends with the listing: the host mount table, which the escape tests of other files compare,
    // never shows it.
    const mnt = await tempDir('seed-ovl-');
    const merged = join(mnt, 'merged');
    fs.mkdirSync(merged);
    const listing = execFileSync(
      'unshare',
      [
        '--mount',
        '--propagation',
        'private',
        '--',
        'sh',
        '-c',
        'mount -t overlay overlay -o "lowerdir=$1" "$2" && ls -A "$2/a" && echo -- && ls -A "$2/d"',
        'overlay-view',
        `${upper}:${lower}`,
        merged,
      ],
      { encoding: 'utf8' },
    );
    const [a = '', d = ''] = listing.split('--\n');
    assert.deepEqual(a.split('\n').filter(Boolean).sort(), ['kept']);
    assert.deepEqual(d.split('\n').filter(Boolean).sort(), ['new']);
  });

  test('zstd-compressed layers are unpacked', {
    skip: !('zstdCompressSync' in zlib) && 'no zstd in zlib',
  }, async () => {
    const layer = await buildLayer([{ name: 'etc/zstd', content: 'zstd ok' }], 'zstd');
    const pushed = await pushFixture('zstd', [layer]);
    const { store } = await newStore();
    const img = await store.pull(pushed.reference);
    assert.equal(fs.readFileSync(join(img.layerDirs[0]!, 'etc/zstd'), 'utf8'), 'zstd ok');
  });
});

describe('media types and store', () => {
  test('Docker schema 2 manifest list and manifest with a Docker gzip layer', async () => {
    const layer = await buildLayer([{ name: 'docker', content: 'schema2' }]);
    const client = new RegistryClient(endpointFor('127.0.0.1:5000'));
    const repo = 'seed-test/docker-v2';
    const config = Buffer.from(
      JSON.stringify({
        architecture: hostArchitecture().architecture,
        os: 'linux',
        config: { Entrypoint: ['/docker'], WorkingDir: '/srv', User: '1000:1000' },
        rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      }),
    );
    await pushBlob(client, repo, { data: layer.data });
    await pushBlob(client, repo, { data: config });
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MediaType.dockerManifest,
        config: { mediaType: MediaType.dockerConfig, digest: sha256Digest(config), size: config.length },
        layers: [
          { mediaType: MediaType.dockerLayerGzip, digest: sha256Digest(layer.data), size: layer.data.length },
        ],
      }),
    );
    const mDigest = await pushManifest(client, repo, 'single', manifest, MediaType.dockerManifest);
    const list = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MediaType.dockerManifestList,
        manifests: [
          {
            mediaType: MediaType.dockerManifest,
            digest: mDigest,
            size: manifest.length,
            platform: { os: 'linux', architecture: hostArchitecture().architecture },
          },
        ],
      }),
    );
    await pushManifest(client, repo, 'latest', list, MediaType.dockerManifestList);
    const { store } = await newStore();
    const img = await store.pull(`127.0.0.1:5000/${repo}`);
    assert.equal(img.reference, `127.0.0.1:5000/${repo}:latest`);
    assert.equal(img.digest, mDigest);
    assert.equal(fs.readFileSync(join(img.layerDirs[0]!, 'docker'), 'utf8'), 'schema2');
    assert.deepEqual(img.config, {
      env: [],
      entrypoint: ['/docker'],
      cmd: null,
      workingDir: '/srv',
      user: '1000:1000',
      exposedPorts: [],
      healthcheck: null,
    });
  });

  test('removing one image keeps the layers another image shares', async () => {
    const base = await buildLayer([{ name: 'base', content: 'shared base' }]);
    const a = await pushFixture('shared-a', [base, await buildLayer([{ name: 'top', content: 'a' }])]);
    const b = await pushFixture('shared-b', [base, await buildLayer([{ name: 'top', content: 'b' }])]);
    const { store } = await newStore();
    const imgA = await store.pull(a.reference);
    const imgB = await store.pull(b.reference);
    assert.equal(imgA.layerDirs[0], imgB.layerDirs[0], 'the shared base layer is stored once');
    await store.remove(a.reference);
    assert.equal(fs.existsSync(imgA.layerDirs[1]!), false, "a's own layer is deleted");
    assert.equal(fs.readFileSync(join(imgB.layerDirs[0]!, 'base'), 'utf8'), 'shared base');
    assert.deepEqual(await store.get(b.reference), imgB);
    assert.deepEqual(
      (await store.list()).map((i) => i.reference),
      [b.reference],
    );
  });
});

describe('integrity and containment', () => {
  test('a corrupted blob is rejected as a digest mismatch; nothing is stored', async () => {
    const layer = await buildLayer([{ name: 'data', content: 'x'.repeat(200_000) }]);
    const pushed = await pushFixture('corrupt', [layer], { tag: 'latest' });
    const proxy = await startRegistryProxy();
    try {
      proxy.corrupt.add(sha256Digest(layer.data));
      const { store, homeDir } = await newStore([{ host: proxy.host, transport: 'http', search: true }]);
      const ref = `${proxy.host}/seed-test/corrupt:latest`;
      await assert.rejects(store.pull(ref), (e: Error) => {
        assert.ok(e instanceof BoxError);
        assert.match(e.message, /seed-test\/corrupt:latest/);
        assert.match(e.message, /digest mismatch/);
        return true;
      });
      assert.deepEqual(await store.list(), []);
      assert.deepEqual(fs.readdirSync(join(homeDir, 'images', 'tmp')), []);
      assert.deepEqual(fs.readdirSync(join(homeDir, 'images', 'layers')), []);
      // the same image through the honest registry works
      proxy.corrupt.clear();
      await store.pull(ref);
      assert.equal(pushed.reference.endsWith('seed-test/corrupt:latest'), true);
    } finally {
      await proxy.close();
    }
  });

  test('transient failures (503, connection reset mid-download) are retried', async () => {
    const layer = await buildLayer([{ name: 'flaky', content: 'y'.repeat(50_000) }]);
    const pushed = await pushFixture('flaky', [layer]);
    const proxy = await startRegistryProxy();
    try {
      const digest = sha256Digest(layer.data);
      proxy.flaky.add(digest);
      const { store } = await newStore([{ host: proxy.host, transport: 'http' }]);
      const img = await store.pull(`${proxy.host}/seed-test/flaky:latest`);
      assert.equal(fs.readFileSync(join(img.layerDirs[0]!, 'flaky'), 'utf8').length, 50_000);
      const gets = proxy.requests.filter((r) => r === `GET /v2/seed-test/flaky/blobs/${digest}`);
      assert.equal(gets.length, 3);
      assert.ok(pushed.reference);
    } finally {
      await proxy.close();
    }
  });

  test('tar entries climbing out of the layer with ../ are rejected and nothing lands outside', async () => {
    const outside = await tempDir('seed-outside-');
    const name = `escape-${process.pid}`;
    const layer = await buildLayer([
      { name: 'ok', content: 'fine' },
      { name: `../../../../../../../..${outside}/${name}`, content: 'pwned' },
    ]);
    const pushed = await pushFixture('hostile-dotdot', [layer]);
    const { store, homeDir } = await newStore();
    await assert.rejects(store.pull(pushed.reference), (e: Error) => {
      assert.ok(e instanceof BoxError);
      assert.match(e.message, /hostile-dotdot/);
      assert.match(e.message, /escapes the layer root/);
      return true;
    });
    assert.deepEqual(fs.readdirSync(outside), []);
    assert.deepEqual(fs.readdirSync(join(homeDir, 'images', 'tmp')), []);
  });

  test('writing through a symlink is rejected; absolute symlinks are stored, never followed', async () => {
    const outside = await tempDir('seed-outside-');
    fs.writeFileSync(join(outside, 'target'), 'original');
    const through = await buildLayer([
      { name: 'link', type: 'symlink', linkname: outside },
      { name: 'link/pwned', content: 'pwned' },
    ]);
    const p1 = await pushFixture('hostile-symlink-dir', [through]);
    const { store } = await newStore();
    await assert.rejects(store.pull(p1.reference), /written through symlink 'link'/);
    assert.deepEqual(fs.readdirSync(outside), ['target']);

    // a symlink replaced by a file, an absolute entry name, and a hard link out of the layer
    const replace = await buildLayer([
      { name: 'etc/', type: 'directory' },
      { name: 'etc/passwd', type: 'symlink', linkname: join(outside, 'target') },
      { name: 'etc/passwd', content: 'root:x:0:0::/root:/bin/sh\n' },
      { name: '/abs-name', content: 'inside' },
      { name: 'etc/abs-link', type: 'symlink', linkname: '/etc/shadow' },
    ]);
    const p2 = await pushFixture('hostile-replace', [replace]);
    const img = await store.pull(p2.reference);
    const root = img.layerDirs[0]!;
    assert.equal(fs.readFileSync(join(outside, 'target'), 'utf8'), 'original');
    assert.equal(fs.lstatSync(join(root, 'etc/passwd')).isFile(), true);
    assert.equal(fs.readFileSync(join(root, 'abs-name'), 'utf8'), 'inside');
    assert.equal(fs.readlinkSync(join(root, 'etc/abs-link')), '/etc/shadow');

    const hardlink = await buildLayer([{ name: 'h', type: 'link', linkname: '../../../../etc/passwd' }]);
    const p3 = await pushFixture('hostile-hardlink', [hardlink]);
    await assert.rejects(store.pull(p3.reference), /escapes the layer root/);
  });

  test('device nodes in layers are skipped', async () => {
    const layer = await buildLayer([
      { name: 'dev/', type: 'directory' },
      { name: 'dev/evil', type: 'character-device' },
      { name: 'dev/ok', content: 'file' },
    ]);
    const pushed = await pushFixture('devices', [layer]);
    const { store } = await newStore();
    const img = await store.pull(pushed.reference);
    assert.deepEqual(fs.readdirSync(join(img.layerDirs[0]!, 'dev')), ['ok']);
  });
});

describe('authentication flows', () => {
  test('Bearer token flow: challenge, token request with basic credentials, retry', async () => {
    const proxy = await startRegistryProxy();
    try {
      proxy.bearer = { username: 'alice', password: 's3cret', token: 'tok-123' };
      const { store } = await newStore([
        {
          host: proxy.host,
          transport: 'http',
          search: true,
          auth: { username: 'alice', password: 's3cret' },
        },
      ]);
      const img = await store.pull('busybox');
      assert.equal(img.reference, `${proxy.host}/library/busybox:latest`);
      assert.ok(proxy.requests.includes('GET /token'));

      const bad = await newStore([
        { host: proxy.host, transport: 'http', auth: { username: 'alice', password: 'wrong' } },
      ]);
      await assert.rejects(bad.store.pull(`${proxy.host}/library/busybox:latest`), /busybox.*401/);

      const ready = await newStore([
        { host: proxy.host, transport: 'http', auth: { bearerToken: 'tok-123' } },
      ]);
      const before = proxy.requests.filter((r) => r === 'GET /token').length;
      await ready.store.pull(`${proxy.host}/library/busybox:latest`);
      assert.equal(
        proxy.requests.filter((r) => r === 'GET /token').length,
        before,
        'no token request needed',
      );
    } finally {
      await proxy.close();
    }
  });
});

describe('transport', () => {
  test('https with a self-signed certificate: rejected unless skipVerify', async () => {
    const dir = await tempDir('seed-tls-');
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    const proxy = await startRegistryProxy({
      tls: {
        key: fs.readFileSync(join(dir, 'key.pem'), 'utf8'),
        cert: fs.readFileSync(join(dir, 'cert.pem'), 'utf8'),
      },
    });
    try {
      const strict = await newStore([{ host: proxy.host, transport: 'https' }]);
      await assert.rejects(strict.store.pull(`${proxy.host}/library/busybox:latest`), (e: Error) => {
        assert.ok(e instanceof BoxError);
        assert.match(e.message, /library\/busybox:latest/);
        assert.match(e.message, /certificate/i);
        return true;
      });
      const lax = await newStore([{ host: proxy.host, transport: 'https', skipVerify: true }]);
      const img = await lax.store.pull(`${proxy.host}/library/busybox:latest`);
      assert.ok(fs.existsSync(join(img.layerDirs[0]!, 'bin/busybox')));
    } finally {
      await proxy.close();
    }
  });
});

describe('rootfsPath', () => {
  test('a prepared directory is used read-only as one layer', async () => {
    const dir = await tempDir('seed-rootfs-');
    fs.mkdirSync(join(dir, 'bin'));
    fs.symlinkSync('/bin/busybox', join(dir, 'bin/sh'));
    fs.symlinkSync('../bin/sh', join(dir, 'bin/rel'));
    const { store } = await newStore();
    const img = await store.fromRootfsPath(dir);
    assert.deepEqual(img.layerDirs, [fs.realpathSync(dir)]);
    assert.equal(img.reference, fs.realpathSync(dir));
    assert.match(img.digest, /^sha256:/);
    assert.ok(img.config.env.some((e) => e.startsWith('PATH=')));
  });

  test('a relative symlink escaping the directory is rejected', async () => {
    const dir = await tempDir('seed-rootfs-');
    fs.mkdirSync(join(dir, 'etc'));
    fs.symlinkSync('../../../../etc/shadow', join(dir, 'etc/shadow'));
    const { store } = await newStore();
    await assert.rejects(store.fromRootfsPath(dir), (e: Error) => {
      assert.ok(e instanceof BoxError);
      assert.match(e.message, /symlink 'etc\/shadow'.*escapes/);
      return true;
    });
    await assert.rejects(store.fromRootfsPath(join(dir, 'missing')), /does not exist/);
  });

  test('an OCI image layout directory is verified and unpacked; blobs escaping it are rejected', async () => {
    const layout = await tempDir('seed-layout-');
    const layer = await buildLayer([{ name: 'hello', content: 'from layout' }]);
    const config = Buffer.from(
      JSON.stringify({
        architecture: hostArchitecture().architecture,
        os: 'linux',
        config: { Cmd: ['/hello'] },
        rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      }),
    );
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MediaType.ociManifest,
        config: { mediaType: MediaType.ociConfig, digest: sha256Digest(config), size: config.length },
        layers: [{ mediaType: layer.mediaType, digest: sha256Digest(layer.data), size: layer.data.length }],
      }),
    );
    const blobs = join(layout, 'blobs', 'sha256');
    fs.mkdirSync(blobs, { recursive: true });
    for (const b of [layer.data, config, manifest])
      fs.writeFileSync(join(blobs, sha256Digest(b).slice(7)), b);
    fs.writeFileSync(join(layout, 'oci-layout'), '{"imageLayoutVersion":"1.0.0"}');
    const index = {
      schemaVersion: 2,
      manifests: [
        { mediaType: MediaType.ociManifest, digest: sha256Digest(manifest), size: manifest.length },
      ],
    };
    fs.writeFileSync(join(layout, 'index.json'), JSON.stringify(index));
    const { store } = await newStore();
    const img = await store.fromRootfsPath(layout);
    assert.equal(img.digest, sha256Digest(manifest));
    assert.equal(fs.readFileSync(join(img.layerDirs[0]!, 'hello'), 'utf8'), 'from layout');
    assert.deepEqual(img.config.cmd, ['/hello']);

    // the same layout whose layer blob is a symlink to a file outside it
    const evil = await tempDir('seed-layout-');
    const outside = await tempDir('seed-outside-');
    fs.cpSync(layout, evil, { recursive: true });
    const layerFile = join(evil, 'blobs', 'sha256', sha256Digest(layer.data).slice(7));
    fs.copyFileSync(layerFile, join(outside, 'blob'));
    fs.rmSync(layerFile);
    fs.symlinkSync(join(outside, 'blob'), layerFile);
    const other = await newStore();
    await assert.rejects(other.store.fromRootfsPath(evil), /symlink escaping the layout/);
  });
});
