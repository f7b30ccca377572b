/**
 * Snapshots, clone and export/import on both runtimes: `box.snapshot.create/list/get/restore/
 * remove` on a running, paused and stopped box, `runtime.cloneBox` from the current state and from a
 * snapshot, `box.export` to an OCI archive that skopeo opens and `runtime.importBox` into another
 * runtime (another homeDir locally), with files, owners, modes and options intact; and what a box cannot
 * do through them (its symlinks are stored, never followed on the host).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsBox, type JsRuntime } from '../src/index.ts';
import { BUSYBOX, run } from './runtime-helpers.ts';

/** A runtime under test and where its imports go (another homeDir locally, the same server over REST). */
export interface SnapshotTarget {
  kind: 'local' | 'rest';
  runtime: JsRuntime;
  /** A runtime to import into. */
  importer: () => JsRuntime;
}

/** Runs a shell script in the box; fails the test on a non-zero exit. */
async function sh(box: JsBox, script: string): Promise<string> {
  const r = await run(box, 'sh', ['-c', script]);
  assert.equal(r.exitCode, 0, `${script}: ${r.stderr}`);
  return r.stdout;
}

const hasCode = (code: string) => (e: unknown) => e instanceof BoxError && e.code === code;

/** The state the tests write: files, an owner, a mode, a deleted image file and a symlink. */
const WRITE =
  'echo one > /a.txt && mkdir -p /d/e && echo deep > /d/e/f && chown 1000:1001 /a.txt && chmod 0750 /d && ' +
  'rm /bin/ls && ln -s /etc/shadow /leak && dd if=/dev/zero of=/big bs=1M count=3 2>/dev/null';
/** Reads back that state in one line per item. */
const READ =
  'cat /a.txt; stat -c "%u:%g %a" /a.txt /d; cat /d/e/f; [ -e /bin/ls ] && echo ls-back || echo ls-gone; ' +
  'readlink /leak; wc -c < /big; [ -e /n.txt ] && echo new-present || echo new-absent';
const EXPECTED = [
  'one',
  '1000:1001 644',
  '0:0 750',
  'deep',
  'ls-gone',
  '/etc/shadow',
  '3145728',
  'new-absent',
];

/** Registers the snapshot suite; boxes are named with `prefix` and removed at the end. */
export function snapshotSuite(title: string, prefix: string, setup: () => Promise<SnapshotTarget>): void {
  describe(title, () => {
    let target: SnapshotTarget;
    let runtime: JsRuntime;
    const name = (suffix: string) => `${prefix}-sn-${suffix}`;
    const quiet = { image: BUSYBOX, network: { mode: 'disabled' as const } };
    let scratch = '';

    before(async () => {
      scratch = mkdtempSync(join(tmpdir(), 'sandbox-snap-'));
      target = await setup();
      runtime = target.runtime;
    });

    after(async () => {
      for (const info of await runtime.listInfo()) {
        if (info.name?.startsWith(`${prefix}-sn-`)) await runtime.remove(info.id, true).catch(() => {});
      }
      if (scratch) rmSync(scratch, { recursive: true, force: true });
    });

    it('snapshot.create while the box runs, list, get, restore (box restarts, same id), remove', async () => {
      const box = await runtime.create({ ...quiet, env: [{ key: 'KEEP', value: 'me' }] }, name('main'));
      await sh(box, WRITE);
      const pid = (await box.info()).state.pid;
      const snap = await box.snapshot.create('one');
      assert.equal(snap.name, 'one');
      assert.ok(Math.abs(Date.parse(snap.createdAt) - Date.now()) < 60_000, snap.createdAt);
      assert.ok(snap.sizeBytes >= 3 * 1024 * 1024, `sizeBytes ${snap.sizeBytes}`);
      // The box kept running through it, with its processes (same init).
      assert.equal((await box.info()).state.pid, pid);
      assert.deepEqual((await sh(box, READ)).split('\n'), EXPECTED);

      // Break things, then restore.
      await sh(box, 'echo two > /a.txt; rm -rf /d /big; echo n > /n.txt; rm "$(which wc)"');
      const two = await box.snapshot.create();
      assert.match(two.name, /^snap-\d{8}-\d{6}-\d{3}$/);
      assert.deepEqual(
        (await box.snapshot.list()).map((s) => s.name),
        ['one', two.name],
      );
      assert.deepEqual(await box.snapshot.get('one'), { ...snap, sizeBytes: snap.sizeBytes });
      assert.equal(await box.snapshot.get('nope'), null);
      await box.snapshot.restore('one');
      const after = await box.info();
      assert.equal(after.state.status, 'running');
      assert.equal(after.id, box.id);
      assert.deepEqual((await sh(box, READ)).split('\n'), EXPECTED);
      assert.equal((await sh(box, 'echo $KEEP')).trim(), 'me');
      // Back to the later one, and the first one is still there.
      await box.snapshot.restore(two.name);
      assert.equal((await sh(box, 'cat /a.txt /n.txt; which wc || echo wc-gone')).trim(), 'two\nn\nwc-gone');
      await box.snapshot.remove('one');
      assert.deepEqual(
        (await box.snapshot.list()).map((s) => s.name),
        [two.name],
      );
      await assert.rejects(box.snapshot.restore('one'), hasCode('not_found'));
      await assert.rejects(box.snapshot.remove('one'), hasCode('not_found'));
      await assert.rejects(box.snapshot.create(two.name), hasCode('conflict'));
      await assert.rejects(box.snapshot.create('../x'), hasCode('invalid_option'));
      await assert.rejects(box.snapshot.create('.hidden'), hasCode('invalid_option'));
    });

    it('a paused box stays paused through a snapshot; a stopped box is snapshotted and restored stopped', async () => {
      const box = await runtime.create(quiet, name('states'));
      await sh(box, 'echo before > /s.txt');
      await box.pause();
      await box.snapshot.create('paused');
      assert.equal((await box.info()).state.status, 'paused');
      await box.resume();
      await sh(box, 'echo after > /s.txt');
      await box.stop();
      await box.snapshot.create('stopped');
      await box.snapshot.restore('paused');
      assert.equal((await box.info()).state.status, 'stopped');
      await box.start();
      assert.equal((await sh(box, 'cat /s.txt')).trim(), 'before');
      await box.snapshot.restore('stopped');
      assert.equal((await sh(box, 'cat /s.txt')).trim(), 'after');
    });

    it('cloneBox from the current state and from a snapshot; clones are independent boxes with the source labels', async () => {
      const labels = { team: 'core', 'app.kubernetes.io/name': 'web' };
      const box = await runtime.create({ ...quiet, memoryMib: 384, labels }, name('src'));
      await sh(box, WRITE);
      await box.snapshot.create('base');
      await sh(box, 'echo later > /a.txt');
      const now = await runtime.cloneBox(name('src'), {}, name('clone-now'));
      const old = await runtime.cloneBox(
        box.id,
        { snapshot: 'base', cpus: 2, labels: { team: 'copy' } },
        name('clone-base'),
      );
      assert.deepEqual((await now.info()).labels, labels, 'a clone has the labels of its source');
      assert.equal((await sh(now, 'cat /a.txt')).trim(), 'later');
      assert.deepEqual((await sh(old, READ)).split('\n'), EXPECTED);
      const info = await old.info();
      assert.equal(info.cpus, 2);
      assert.equal(info.memoryMib, 384);
      assert.deepEqual(info.labels, { team: 'copy' }, 'labels given to the clone replace the source labels');
      assert.notEqual(info.id, box.id);
      // Independent: a write in a clone is not in the source.
      await sh(old, 'echo mine > /a.txt');
      assert.equal((await sh(box, 'cat /a.txt')).trim(), 'later');
      await assert.rejects(runtime.cloneBox(box.id, { snapshot: 'nope' }), hasCode('not_found'));
      await assert.rejects(runtime.cloneBox(name('no-such-box')), hasCode('not_found'));
    });

    it('export writes an OCI archive (skopeo opens it); importBox brings files, owners, modes and options back', async () => {
      const box = await runtime.create(
        {
          ...quiet,
          cpus: 2,
          memoryMib: 300,
          workingDir: '/d',
          env: [{ key: 'FROM', value: 'export' }],
          labels: { from: 'export' },
        },
        name('exp'),
      );
      await sh(box, WRITE);
      // A whiteout of a directory the image has, and an opaque directory replacing one.
      await sh(box, 'rm -rf /home && rm -rf /var && mkdir /var && echo fresh > /var/only');
      const archive = join(scratch, 'box.tar');
      await box.export(archive);
      const inspect = spawnSync('skopeo', ['inspect', `oci-archive:${archive}`], { encoding: 'utf8' });
      assert.equal(inspect.status, 0, inspect.stderr);
      const image = JSON.parse(inspect.stdout) as { Labels: Record<string, string>; Layers: string[] };
      assert.ok(image.Layers.length >= 2, 'image layers plus the box layer');
      const options = JSON.parse(image.Labels['org.seed.sandbox.options']!) as Record<string, unknown>;
      assert.equal(options.cpus, 2);
      // Nothing of the host's /etc/shadow (the box's symlink is stored as a link).
      const shadow = readFileSync('/etc/shadow');
      assert.equal(readFileSync(archive).includes(shadow.subarray(0, 24)), false);
      const shadowHash = createHash('sha256').update(shadow).digest('hex');

      await runtime.remove(box.id, true);
      const importer = target.importer();
      const back = await importer.importBox(archive, name('imp'));
      try {
        assert.deepEqual((await sh(back, READ)).split('\n'), EXPECTED);
        assert.equal(
          (await sh(back, '[ -e /home ] && echo home || echo no-home; ls /var; pwd; echo $FROM')).trim(),
          'no-home\nonly\n/d\nexport',
        );
        const info = await back.info();
        assert.equal(info.cpus, 2);
        assert.equal(info.memoryMib, 300);
        assert.deepEqual(info.labels, { from: 'export' });
        assert.equal(info.state.status, 'running');
        // Exported again, it opens as well (the imported image is an OCI layout).
        const again = join(scratch, 'again.tar');
        await back.export(again);
        assert.equal(spawnSync('skopeo', ['inspect', `oci-archive:${again}`]).status, 0);
      } finally {
        await importer.remove(back.id, true);
      }
      assert.equal(createHash('sha256').update(readFileSync('/etc/shadow')).digest('hex'), shadowHash);
      await assert.rejects(importer.importBox(join(scratch, 'missing.tar')), hasCode('not_found'));
      const notArchive = join(scratch, 'not.tar');
      spawnSync('tar', ['-cf', notArchive, '-C', scratch, '.']);
      if (existsSync(notArchive))
        await assert.rejects(importer.importBox(notArchive), hasCode('invalid_option'));
    });

    it('a box whose disk is ext4 (below the btrfs minimum) refuses snapshots with unsupported, naming why', async () => {
      const box = await runtime.create({ ...quiet, diskSizeGb: 0.1 }, name('ext4'));
      await assert.rejects(box.snapshot.create('x'), (e: unknown) => {
        assert.ok(e instanceof BoxError && e.code === 'unsupported', String(e));
        assert.match(e.message, /btrfs/);
        return true;
      });
      await assert.rejects(runtime.cloneBox(box.id), hasCode('unsupported'));
    });

    it('a gVisor box refuses snapshots, clone and export with unsupported, naming the isolation option', async () => {
      const box = await runtime.create({ ...quiet, isolation: 'gvisor' }, name('gvisor'));
      const attempts = [
        () => box.snapshot.create('x'),
        () => runtime.cloneBox(box.id),
        () => box.export(join(scratch, 'g.tar')),
      ];
      for (const attempt of attempts) {
        await assert.rejects(attempt(), (e: unknown) => {
          assert.ok(e instanceof BoxError && e.code === 'unsupported', String(e));
          assert.match(e.message, /isolation/);
          return true;
        });
      }
    });
  });
}
