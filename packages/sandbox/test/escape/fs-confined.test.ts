/**
 * Escape suite, host-side file operations: the engine runs as host root, so every file it touches in
 * a box root must stay in that root (src/engine/confined.ts), and host paths bound into boxes must not
 * pass through symlinks (src/engine/hostpath.ts). Roots here are hostile on purpose: `etc` a symlink
 * to a host directory, `etc/passwd` a symlink climbing out with `..`, loops, symlinks swapped in while
 * a box runs. Every case asserts that the host marker files are unchanged, not only that a call failed.
 */
import assert from 'node:assert/strict';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
// internal: the confined file operations are tested as units
import { lstatInRoot, readFileInRoot, writeFileInRoot } from '../../src/engine/confined.ts';
// internal: host path opening is tested as a unit
import { openHostPath } from '../../src/engine/hostpath.ts';
// internal: boxes are made with the engine directly
import { createEngine, makeBusyboxRootfs, type OciEngine } from '../../src/engine/index.ts';
import { BoxError } from '../../src/index.ts';
import { execSh, specFactory } from '../helpers/engine.ts';
import { assertHostUntouched, type HostMarker, makeHostMarker, snapshotHost } from './helpers.ts';

const tmp = mkdtempSync(join(tmpdir(), 'escape-fs-'));
let marker: HostMarker;

before(() => {
  marker = makeHostMarker(tmp);
});
after(() => rmSync(tmp, { recursive: true, force: true }));

/** A fresh directory standing for a box root. */
function root(name: string): string {
  const dir = join(tmp, 'roots', name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

describe('confined file operations on a hostile root', () => {
  test('an etc symlinked to a host directory is resolved inside the root (reads and writes)', () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const r = root('etc-abs');
    symlinkSync(join(marker.dir, 'etc'), join(r, 'etc'));
    // The box sees /etc → <marker>/etc, which does not exist in its root.
    assert.equal(readFileInRoot(r, '/etc/passwd'), undefined);
    writeFileInRoot(r, '/etc/resolv.conf', 'nameserver 10.0.2.3\n');
    assertHostUntouched(before);
    // The write created the directories inside the root, where the box's symlink points.
    assert.equal(readFileSync(join(r, marker.dir, 'etc/resolv.conf'), 'utf8'), 'nameserver 10.0.2.3\n');
    assert.equal(readFileInRoot(r, '/etc/resolv.conf')?.toString(), 'nameserver 10.0.2.3\n');
  });

  test('relative symlinks climbing with .. stop at the root', () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const r = root('climb');
    mkdirSync(join(r, 'etc'));
    const up = '../'.repeat(30);
    symlinkSync(`${up}${marker.dir.slice(1)}/etc/passwd`, join(r, 'etc/passwd'));
    symlinkSync(`${up}${marker.dir.slice(1)}/secret`, join(r, 'etc/group'));
    assert.equal(readFileInRoot(r, '/etc/passwd'), undefined);
    assert.equal(readFileInRoot(r, '/etc/group'), undefined);
    assert.equal(readFileInRoot(r, `/../../..${marker.dir}/secret`), undefined);
    // Inside the root the same climb reaches the root's own copy.
    mkdirSync(join(r, marker.dir), { recursive: true });
    writeFileSync(join(r, marker.dir, 'secret'), 'box copy');
    assert.equal(readFileInRoot(r, '/etc/group')?.toString(), 'box copy');
    assertHostUntouched(before);
  });

  test('a write replaces a symlink, never writes through it; a symlinked etc/ssl stays in the root', () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const r = root('ssl');
    mkdirSync(join(r, 'etc'));
    symlinkSync(join(marker.dir, 'etc/ssl'), join(r, 'etc/ssl'));
    writeFileInRoot(r, '/etc/ssl/certs/sandbox-ca.pem', 'CA');
    mkdirSync(join(r, 'etc/pki'));
    symlinkSync(join(marker.dir, 'etc/ssl/certs/ca-certificates.crt'), join(r, 'etc/pki/bundle.crt'));
    writeFileInRoot(r, '/etc/pki/bundle.crt', 'replaced');
    assert.equal(readlinkSync(join(r, 'etc/ssl')), join(marker.dir, 'etc/ssl'), 'the box symlink is kept');
    assert.equal(readFileSync(join(r, 'etc/pki/bundle.crt'), 'utf8'), 'replaced');
    assertHostUntouched(before);
  });

  test('loops, non-files and huge files are BoxErrors; lstat never follows the last component', () => {
    const r = root('loops');
    symlinkSync('a', join(r, 'b'));
    symlinkSync('b', join(r, 'a'));
    assert.throws(
      () => readFileInRoot(r, '/a'),
      (e: Error) => e instanceof BoxError && /symbolic links/.test(e.message),
    );
    mkdirSync(join(r, 'dir'));
    assert.throws(() => readFileInRoot(r, '/dir'), /not a regular file/);
    writeFileSync(join(r, 'big'), Buffer.alloc(5 * 1024 * 1024));
    assert.throws(() => readFileInRoot(r, '/big'), /larger than/);
    symlinkSync(join(marker.dir, 'secret'), join(r, 'link'));
    assert.equal(lstatInRoot(r, '/link')?.isSymbolicLink(), true);
    assert.equal(lstatInRoot(r, `${marker.dir}/secret`), undefined, 'host files do not exist in the root');
  });
});

describe('host paths of bind mounts', () => {
  test('a path through a symlink is refused naming the field, the symlink and its target', () => {
    const shared = join(tmp, 'shared');
    mkdirSync(shared);
    symlinkSync(join(marker.dir, 'etc'), join(shared, 'planted'));
    assert.throws(
      () => openHostPath(join(shared, 'planted'), 'mounts[0].hostPath'),
      (e: Error) =>
        e instanceof BoxError &&
        e.message.startsWith('mounts[0].hostPath:') &&
        e.message.includes(`'${join(shared, 'planted')}' (→ '${join(marker.dir, 'etc')}')`),
    );
    assert.throws(() => openHostPath(join(shared, 'planted/passwd'), 'f'), /passes through the symlink/);
    assert.throws(() => openHostPath(`${shared}/../shared`, 'f'), /'\.\.'/);
    assert.throws(() => openHostPath(join(shared, 'missing'), 'f'), /does not exist/);
    assert.throws(() => openHostPath('relative', 'f'), /must be absolute/);
    const ok = openHostPath(`${shared}/`, 'f');
    assert.equal(readlinkSync(`/proc/self/fd/${ok.fd}`), shared);
    ok.close();
  });
});

describe('engine boxes with hostile roots', () => {
  let engine: OciEngine;
  let spec: ReturnType<typeof specFactory>;
  const busybox = join(tmp, 'busybox');

  before(async () => {
    makeBusyboxRootfs(busybox);
    spec = specFactory(tmp, busybox, 'escfs');
    engine = await createEngine({ stateRoot: join(tmp, 'state') });
  });
  after(async () => {
    for (const b of await engine.list()) await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id));
  });

  test('user: resolution with etc (then etc/passwd) symlinked to host files reads the box, not the host', async () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const layer = join(tmp, 'layer-etc');
    mkdirSync(layer);
    symlinkSync(join(marker.dir, 'etc'), join(layer, 'etc'));
    // The symlink's target exists inside the image too (without a passwd), so the box starts.
    mkdirSync(join(layer, marker.dir, 'etc'), { recursive: true });
    const s = spec({ layerDirs: [busybox, layer] });
    await engine.start(s);
    try {
      await assert.rejects(
        engine.exec(s.id, { cmd: 'id', args: [], env: [], user: 'markeruser' }),
        (e: Error) =>
          e instanceof BoxError && /user 'markeruser' is not in the image's \/etc\/passwd/.test(e.message),
      );
      // The box replaces its passwd with a symlink to the host's marker while it runs.
      const r = await execSh(
        engine,
        s.id,
        `rm -f /etc; mkdir /etc; ln -s ${marker.dir}/etc/passwd /etc/passwd; ls -l /etc`,
      );
      assert.equal(r.code, 0, r.stderr);
      await assert.rejects(
        engine.exec(s.id, { cmd: 'id', args: [], env: [], user: 'markeruser' }),
        /not in the image/,
      );
      // A passwd of its own is honoured.
      await execSh(engine, s.id, 'rm /etc/passwd; echo "boxuser:x:777:778::/:/bin/sh" > /etc/passwd');
      const id = await execSh(engine, s.id, 'id -u; id -g', { user: 'boxuser' });
      assert.equal(id.stdout, '777\n778\n');
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
    assertHostUntouched(before, { allowMountsUnder: [tmp] });
  });

  test('a hostPath through a symlink a box planted in a shared directory is refused; nothing is mounted', async () => {
    const before = snapshotHost({ paths: [marker.dir] });
    const shared = join(tmp, 'shared-box');
    mkdirSync(shared);
    const writer = spec({ mounts: [{ hostPath: shared, guestPath: '/shared', readOnly: false }] });
    await engine.start(writer);
    try {
      const r = await execSh(engine, writer.id, `ln -s ${marker.dir}/etc /shared/data && ls -l /shared`);
      assert.equal(r.code, 0, r.stderr);
      const victim = spec({
        mounts: [{ hostPath: join(shared, 'data'), guestPath: '/data', readOnly: false }],
      });
      await assert.rejects(
        engine.start(victim),
        (e: Error) =>
          e instanceof BoxError && /^mounts\[0\]\.hostPath: .* passes through the symlink/.test(e.message),
      );
      assert.equal(
        existsSync(join(victim.boxDir, 'bundle')),
        false,
        'nothing of the refused box was written',
      );
      // A plain directory binds, and writes land in it.
      mkdirSync(join(shared, 'plain'));
      const ok = spec({ mounts: [{ hostPath: join(shared, 'plain'), guestPath: '/data', readOnly: false }] });
      await engine.start(ok);
      await execSh(engine, ok.id, 'echo hi > /data/f');
      assert.equal(readFileSync(join(shared, 'plain/f'), 'utf8'), 'hi\n');
      // A restart re-binds the directory; the staging point is replaced, the host files stay.
      await engine.stop(ok.id);
      await engine.start(ok);
      assert.equal((await execSh(engine, ok.id, 'cat /data/f')).stdout, 'hi\n');
      await engine.remove(ok.id, ok.boxDir);
      assert.equal(readFileSync(join(shared, 'plain/f'), 'utf8'), 'hi\n', 'remove leaves the host files');
    } finally {
      await engine.remove(writer.id, writer.boxDir);
    }
    assertHostUntouched(before, { allowMountsUnder: [tmp] });
  });
});
