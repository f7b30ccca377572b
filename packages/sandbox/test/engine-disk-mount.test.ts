/**
 * The box disk as the idmap helper mounts it (src/engine/idmap.ts `disk`, `mkdir`, `file`), with real
 * boxes of the container tier in a user namespace: the loop device, the mount options of each format,
 * the /etc files and the writable layer on the disk, one file system instance per image (a loop device
 * still backing the image is reused, and attached anew when it goes away during the mount), a failed
 * mount reported at the `disk` stage, and nothing left behind (mount, loop device, box files) once a box is removed.
 * Runs as root with crun installed (the package's test:setup installs it).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
// internal: the engine is tested as a unit
import { mountsUnder } from '../src/engine/index.ts';
import { engineTestBed, execSh } from './helpers/engine.ts';

const bed = engineTestBed('engine-disk-', 'dsk', { env: ['PATH=/bin'] });
const { spec } = bed;

/** The mount table entry of `dir` (this process's namespace): source, type and both option lists. */
function mountOf(dir: string): { source: string; type: string; options: string[] } | undefined {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f[4] !== dir) continue;
    const sep = f.indexOf('-');
    const options = [...(f[5] ?? '').split(','), ...(f[sep + 3] ?? '').split(',')];
    return { source: f[sep + 2] ?? '', type: f[sep + 1] ?? '', options };
  }
  return undefined;
}

/** The loop devices (`/dev/loopN`) whose backing file is `img`. */
function loopsOf(img: string): string[] {
  const out: string[] = [];
  for (const n of readdirSync('/sys/block')) {
    if (!n.startsWith('loop')) continue;
    try {
      if (readFileSync(`/sys/block/${n}/loop/backing_file`, 'utf8').trim() === img) out.push(`/dev/${n}`);
    } catch {} // not bound
  }
  return out;
}

/** Waits up to 10 s for no loop device to back `img` (autoclear detaches a device asynchronously). */
async function assertNoLoop(img: string): Promise<void> {
  for (let i = 0; i < 100 && loopsOf(img).length > 0; i++) await sleep(100);
  assert.deepEqual(loopsOf(img), [], `a loop device still backs ${img}`);
}

const holders: ChildProcess[] = [];
after(() => {
  for (const h of holders) h.kill('SIGKILL');
});

describe('box disk mounted by the idmap helper', () => {
  test('btrfs disk: a loop device, nosuid,nodev,noatime, /etc files and the layer on the disk; nothing left after remove', async () => {
    const s = spec({ hostname: 'disk-btrfs' });
    await bed.engine.start(s);
    const img = join(s.boxDir, 'disk.img');
    const disk = mountOf(join(s.boxDir, 'disk'));
    assert.ok(disk, 'the disk is mounted');
    assert.equal(disk.type, 'btrfs');
    assert.match(disk.source, /^\/dev\/loop\d+$/);
    for (const o of ['nosuid', 'nodev', 'noatime']) assert.ok(disk.options.includes(o), o);
    assert.deepEqual(loopsOf(img), [disk.source]);
    assert.equal(readFileSync(join(s.boxDir, 'disk', 'hostname'), 'utf8'), 'disk-btrfs\n');
    const r = await execSh(
      bed.engine,
      s.id,
      'cat /etc/hostname; grep -c localhost /etc/hosts; echo x > /root/f',
    );
    assert.equal(r.stdout, 'disk-btrfs\n2\n');
    assert.equal(readFileSync(join(s.boxDir, 'disk', 'layer', 'upper', 'root', 'f'), 'utf8'), 'x\n');
    // The writable layer and /etc files belong to the box's mapped root (host uid 100000 or the range's base).
    const r2 = await execSh(bed.engine, s.id, 'stat -c %u /etc/hostname /root/f');
    assert.equal(r2.stdout, '0\n0\n');
    await bed.engine.remove(s.id, s.boxDir);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await assertNoLoop(img);
    assert.deepEqual(readdirSync(s.boxDir), []);
  });

  test('ext4 disk (below the btrfs minimum): noinit_itable, upper and work made at its top; a restart keeps them', async () => {
    const s = spec({ hostname: 'disk-ext4', diskSizeGb: 0.2 });
    await bed.engine.start(s);
    const disk = mountOf(join(s.boxDir, 'disk'));
    assert.ok(disk);
    assert.equal(disk.type, 'ext4');
    for (const o of ['nosuid', 'nodev', 'noatime', 'noinit_itable']) assert.ok(disk.options.includes(o), o);
    assert.ok(existsSync(join(s.boxDir, 'disk', 'upper')));
    assert.ok(existsSync(join(s.boxDir, 'disk', 'work')));
    await execSh(bed.engine, s.id, 'echo kept > /root/k');
    // A restart finds the files in place (the helper creates nothing that exists).
    writeFileSync(join(s.boxDir, 'disk', 'hostname'), 'edited\n');
    await bed.engine.stop(s.id, 0);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await bed.engine.start(s);
    const r = await execSh(bed.engine, s.id, 'cat /root/k /etc/hostname');
    assert.equal(r.stdout, 'kept\nedited\n');
    const img = join(s.boxDir, 'disk.img');
    await bed.engine.remove(s.id, s.boxDir);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await assertNoLoop(img);
  });

  test('a loop device still backing the image (a mount copied into another namespace) is reused: one file system instance', async () => {
    const s = spec();
    await bed.engine.start(s);
    const img = join(s.boxDir, 'disk.img');
    const first = mountOf(join(s.boxDir, 'disk'))?.source;
    assert.ok(first);
    await execSh(bed.engine, s.id, 'echo one > /root/one');
    // A mount namespace made now keeps a copy of the disk mount (and so its loop device) after the box stops.
    const holder = spawn('unshare', ['--mount', '--propagation', 'private', 'sleep', '60'], {
      stdio: 'ignore',
    });
    holders.push(holder);
    for (let i = 0; i < 100; i++) {
      try {
        if (readFileSync(`/proc/${holder.pid}/mountinfo`, 'utf8').includes(join(s.boxDir, 'disk'))) break;
      } catch {}
      await sleep(50);
    }
    await bed.engine.stop(s.id, 0);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    assert.deepEqual(loopsOf(img), [first], 'the copy keeps the loop device bound');
    await bed.engine.start(s);
    assert.equal(mountOf(join(s.boxDir, 'disk'))?.source, first, 'the bound device is mounted again');
    assert.deepEqual(loopsOf(img), [first]);
    assert.equal((await execSh(bed.engine, s.id, 'cat /root/one')).stdout, 'one\n');
    holder.kill('SIGKILL');
    await new Promise((resolve) => holder.once('exit', resolve));
    await bed.engine.remove(s.id, s.boxDir);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await assertNoLoop(img);
  });

  test('a restart after a mount(8) of the disk, while short-lived mount namespaces keep copies of it that go away at any moment, mounts the disk every time', async () => {
    // Each `unshare` copies the host's mounts (the box disk among them) and holds that copy for 20 ms: a
    // restarted box can find the disk's loop device still bound and see it released a moment later.
    const churn = spawn('sh', ['-c', 'while :; do unshare --mount sleep 0.02; done'], { stdio: 'ignore' });
    holders.push(churn);
    const s = spec();
    try {
      await bed.engine.start(s);
      await execSh(bed.engine, s.id, 'echo kept > /root/kept');
      const img = join(s.boxDir, 'disk.img');
      const dir = join(s.boxDir, 'disk');
      for (let i = 0; i < 25; i++) {
        await bed.engine.stop(s.id, 0);
        // The disk mounted and unmounted by mount(8) in between, as snapshots and clones do (engine/snapshot.ts).
        assert.equal(spawnSync('mount', ['-o', 'loop', img, dir]).status, 0);
        assert.equal(spawnSync('umount', [dir]).status, 0);
        await bed.engine.start(s);
        assert.equal((await execSh(bed.engine, s.id, 'cat /root/kept')).stdout, 'kept\n', `restart ${i}`);
      }
    } finally {
      churn.kill('SIGKILL');
      await new Promise((resolve) => churn.once('exit', resolve));
    }
    await bed.engine.remove(s.id, s.boxDir);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await assertNoLoop(join(s.boxDir, 'disk.img'));
  });

  test('an image that holds no file system fails the start at the disk stage and leaves no mount or loop device', async () => {
    const s = spec();
    const img = join(s.boxDir, 'disk.img');
    writeFileSync(img, '');
    truncateSync(img, 10e9);
    await assert.rejects(bed.engine.start(s), /start failed at disk: .*idmap-mount: mounting /s);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await assertNoLoop(img);
    await bed.engine.remove(s.id, s.boxDir);
    assert.equal(existsSync(img), false);
  });
});
