/**
 * Escape suite, malicious images against the host-side writes of box creation: an image whose `etc`
 * (or `etc/ssl`) is an absolute symlink to a host directory, started with the network on (the SDK
 * writes `/etc/resolv.conf`) and with secrets (it installs its CA into the bundle), and asked for a
 * named `user` (the engine reads `/etc/passwd`). The images are built and pushed by the test; the host
 * directory they aim at is a marker directory, which must stay byte-for-byte unchanged.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { BoxError, SimpleBox } from '../../src/index.ts';
import {
  buildLayer,
  type FixtureEntry,
  type FixtureLayer,
  localRegistry,
  pushFixture,
} from '../helpers/registry.ts';
import { cleanupAll, tempHome, testRuntime } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostMarker, makeHostMarker, snapshotHost } from './helpers.ts';

let marker: HostMarker;
let busybox: FixtureLayer;
let home: string;

before(async () => {
  await localRegistry({ images: ['busybox'] });
  home = tempHome('escape-img-');
  marker = makeHostMarker(home);
  busybox = await buildLayer([
    { name: 'bin/', type: 'directory' },
    { name: 'bin/busybox', content: readFileSync('/bin/busybox'), mode: 0o755 },
    ...['sh', 'cat', 'id', 'ls', 'echo', 'grep'].map((a) => ({
      name: `bin/${a}`,
      type: 'symlink' as const,
      linkname: 'busybox',
    })),
    { name: 'tmp/', type: 'directory', mode: 0o1777 },
    { name: 'root/', type: 'directory', mode: 0o700 },
  ]);
});
after(cleanupAll);

/** Directories of the marker path as layer entries (relative), so the symlink's target exists in the image. */
function inImage(path: string): { name: string; type: 'directory' }[] {
  const parts = path.split('/').filter(Boolean);
  return parts.map((_, i) => ({ name: `${parts.slice(0, i + 1).join('/')}/`, type: 'directory' as const }));
}

/**
 * Pushes busybox plus a layer of `entries` as fixture `fixture`, runs `check` on a SimpleBox of it
 * (network on and one secret, so the box gets its resolver config and the secrets CA), and asserts the
 * host untouched once the box is gone.
 */
async function inHostileImage(
  fixture: string,
  entries: FixtureEntry[],
  check: (box: SimpleBox) => Promise<void>,
): Promise<void> {
  const image = await pushFixture(fixture, [busybox, await buildLayer(entries)]);
  const before = snapshotHost({ paths: [marker.dir] });
  {
    await using box = new SimpleBox({
      runtime: testRuntime(home),
      image: image.reference,
      network: { mode: 'enabled' },
      secrets: [{ name: 'token', value: 'never-in-the-box', hosts: ['example.com'] }],
    });
    await check(box);
  }
  assertHostUntouched(before, { allowMountsUnder: [home] });
}

describe('malicious images: symlinked etc', () => {
  test('etc → host directory: resolv.conf, the secrets CA and user: stay inside the box', async () => {
    const entries: FixtureEntry[] = [
      { name: 'etc', type: 'symlink', linkname: `${marker.dir}/etc` },
      ...inImage(`${marker.dir}/etc/ssl/certs`),
      { name: `${marker.dir.slice(1)}/etc/passwd`, content: 'root:x:0:0::/root:/bin/sh\n' },
    ];
    await inHostileImage('escape-etc', entries, async (box) => {
      const resolv = await box.exec('cat', '/etc/resolv.conf');
      assert.match(resolv.stdout, /^nameserver 10\.0\.2\.3$/m, 'the box got its resolver config');
      const bundle = await box.exec('cat', '/etc/ssl/certs/ca-certificates.crt');
      assert.match(bundle.stdout, /BEGIN CERTIFICATE/, 'the box got the CA');
      await assert.rejects(
        box.exec('id', [], {}, { user: 'markeruser' }),
        (e: Error) => e instanceof BoxError && /markeruser/.test(e.message),
      );
      const secret = await box.exec('cat', `${marker.dir}/secret`);
      assert.notEqual(secret.stdout, marker.secret);
    });
  });

  test('etc/ssl → host directory with a bundle: the bundle inside the box gets the CA', async () => {
    const entries: FixtureEntry[] = [
      { name: 'etc/', type: 'directory' },
      { name: 'etc/passwd', content: 'root:x:0:0::/root:/bin/sh\n' },
      { name: 'etc/ssl', type: 'symlink', linkname: `${marker.dir}/etc/ssl` },
      ...inImage(`${marker.dir}/etc/ssl/certs`),
      { name: `${marker.dir.slice(1)}/etc/ssl/certs/ca-certificates.crt`, content: 'IMAGE BUNDLE\n' },
    ];
    await inHostileImage('escape-etc-ssl', entries, async (box) => {
      const bundle = await box.exec('cat', '/etc/ssl/certs/ca-certificates.crt');
      assert.match(bundle.stdout, /^IMAGE BUNDLE\n-----BEGIN CERTIFICATE-----/, 'image bundle plus the CA');
    });
  });
});
