/**
 * Escape suite, snapshots, clone, export and import: host root snapshots, restores, copies and archives a
 * box's writable layer, so a box that fills its root with symlinks named like the host-side paths
 * (`layer`, `snapshots`, `upper`, `.old-*`) or pointing at host files must not make any of these follow
 * them. Every case asserts that the host marker files are unchanged and that no marker bytes reached an
 * archive or another box.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { JsRuntime } from '../../src/index.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, run, tempHome, testRuntime } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostMarker, makeHostMarker, snapshotHost } from './helpers.ts';

const tmp = mkdtempSync(join(tmpdir(), 'escape-snap-'));
let marker: HostMarker;
let home: string;
let runtime: JsRuntime;

before(() => {
  ensureRegistry();
  marker = makeHostMarker(tmp);
  home = tempHome('escape-snap-home-');
  runtime = testRuntime(home);
});
after(async () => {
  await cleanupAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe('snapshots of a hostile box', () => {
  test('symlinks named like the host-side paths or aimed at host files are stored, never followed', async () => {
    const box = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    const m = marker.dir;
    const plant = [
      `ln -s ${m} /layer`,
      `ln -s ${m} /snapshots`,
      `ln -s ${m}/etc /upper`,
      `ln -s ${m} /.old-1`,
      `ln -s ${m}/secret /secret`,
      `mkdir -p /work && ln -s ${m}/etc/passwd /work/passwd`,
      `ln -s ../../../../../../../../${m}/secret /climb`,
    ].join(' && ');
    assert.equal((await run(box, 'sh', ['-c', plant])).exitCode, 0);
    const before = snapshotHost({ paths: [marker.dir] });
    const other = tempHome('escape-snap-other-');

    await box.snapshot.create('hostile');
    await run(box, 'sh', ['-c', 'rm -f /layer /snapshots /upper /secret']);
    await box.snapshot.restore('hostile');
    const clone = await runtime.cloneBox(box.id, { snapshot: 'hostile' });
    const archive = join(tmp, 'hostile.tar');
    await box.export(archive);
    await box.snapshot.remove('hostile');
    const imported = await new JsRuntime({ homeDir: other }).importBox(archive);

    assertHostUntouched(before, { allowMountsUnder: [home, other] });
    assert.equal(
      readFileSync(archive).includes(Buffer.from(marker.secret)),
      false,
      'no host secret in the archive',
    );
    for (const b of [box, clone, imported]) {
      const r = await run(b, 'sh', [
        '-c',
        'readlink /secret; cat /secret /climb 2>&1; cat /work/passwd 2>&1',
      ]);
      assert.equal(r.stdout.split('\n')[0], `${m}/secret`);
      assert.equal(r.stdout.includes(marker.secret), false, 'the box reads no host secret');
      assert.equal(r.stdout.includes('markeruser'), false, 'the box reads no host passwd');
    }
    await new JsRuntime({ homeDir: other }).remove(imported.id, true);
  });
});
