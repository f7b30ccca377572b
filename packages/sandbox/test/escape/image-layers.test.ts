/**
 * Escape suite, malicious image layers (built and pushed by the test): tar entries climbing out with
 * `..`, absolute names, hard links to host files (absolute and relative), writes through a symlink the
 * same layer planted, device nodes. Each pull is refused (or the device skipped) and the host marker
 * directory the layers aim at stays byte-for-byte the same; nothing is written outside the store.
 */
import assert from 'node:assert/strict';
import { existsSync, lstatSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BoxError, ImageStore } from '../../src/index.ts';
import { buildLayer, type FixtureEntry, localRegistry, pushFixture } from '../helpers/registry.ts';
import { cleanupAll, tempHome } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostMarker, makeHostMarker, snapshotHost } from './helpers.ts';

let marker: HostMarker;
let home: string;

before(async () => {
  const reg = await localRegistry({ images: ['busybox'] });
  assert.ok(reg.host);
  home = tempHome('escape-layers-');
  marker = makeHostMarker(home);
});
after(cleanupAll);

/** Pushes a one-layer image of `entries` and pulls it into a fresh store; returns the store and the outcome. */
async function pull(name: string, entries: FixtureEntry[]): Promise<{ error?: Error; layerDir?: string }> {
  const pushed = await pushFixture(`escape-${name}`, [await buildLayer(entries)]);
  const store = new ImageStore({ homeDir: join(home, name) });
  try {
    const img = await store.pull(pushed.reference);
    return { layerDir: img.layerDirs[0] };
  } catch (error) {
    return { error: error as Error };
  }
}

const up = '../'.repeat(20);

describe('malicious layers', () => {
  const cases: [string, () => FixtureEntry[], RegExp][] = [
    [
      'dotdot',
      () => [{ name: `${up}${marker.dir.slice(1)}/secret`, content: 'pwned' }],
      /escapes the layer root/,
    ],
    [
      'dotdot-inside',
      () => [
        { name: 'a/', type: 'directory' },
        { name: `a/${up}${marker.dir.slice(1)}/etc/passwd`, content: 'pwned' },
      ],
      /escapes the layer root/,
    ],
    [
      'hardlink-abs',
      () => [{ name: 'h', type: 'link', linkname: `${marker.dir}/secret` }],
      /escapes|outside|link/,
    ],
    [
      'hardlink-rel',
      () => [{ name: 'h', type: 'link', linkname: `${up}${marker.dir.slice(1)}/secret` }],
      /escapes/,
    ],
    [
      'symlink-dir-write-through',
      () => [
        { name: 'link', type: 'symlink', linkname: `${marker.dir}/etc` },
        { name: 'link/passwd', content: 'pwned' },
      ],
      /written through symlink 'link'/,
    ],
    [
      'symlink-file-write-through',
      () => [
        { name: 'secret', type: 'symlink', linkname: `${marker.dir}/secret` },
        { name: 'secret', content: 'pwned' },
      ],
      /./,
    ],
  ];
  for (const [name, entries, rule] of cases) {
    test(`${name}: refused or confined to the layer, the host untouched`, async () => {
      const before = snapshotHost({ paths: [marker.dir] });
      const { error, layerDir } = await pull(name, entries());
      if (error) {
        assert.ok(error instanceof BoxError, String(error));
        assert.match(error.message, rule);
      } else {
        // Accepted only when confined: the layer holds a plain file, never a link to the marker.
        assert.ok(layerDir);
        for (const entry of readdirSync(layerDir, { recursive: true }) as string[]) {
          const st = lstatSync(join(layerDir, entry));
          assert.ok(!st.isFile() || st.nlink === 1, `${entry} is not a hard link`);
        }
      }
      assertHostUntouched(before);
    });
  }

  test('absolute entry names land inside the layer', async () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const { error, layerDir } = await pull('absolute', [{ name: `${marker.dir}/secret`, content: 'pwned' }]);
    if (!error) {
      assert.ok(layerDir && existsSync(join(layerDir, marker.dir, 'secret')), 'stored under the layer root');
    } else {
      assert.ok(error instanceof BoxError);
    }
    assertHostUntouched(before);
  });

  test('device nodes are skipped', async () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const { error, layerDir } = await pull('devices', [
      { name: 'dev/', type: 'directory' },
      { name: 'dev/mem', type: 'character-device', mode: 0o666 },
      { name: 'dev/fifo', type: 'fifo' },
      { name: 'ok', content: 'fine' },
    ]);
    assert.equal(error, undefined);
    assert.ok(layerDir);
    assert.equal(existsSync(join(layerDir, 'dev/mem')), false);
    assert.ok(existsSync(join(layerDir, 'ok')));
    assertHostUntouched(before);
  });
});
