/**
 * Escape suite, disk: every writable path of a box is inside its disk limit (a default one when
 * `diskSizeGb` is not given): the root's writable layer, `/etc/hosts` and `/etc/hostname`. Filling the
 * disk or its inodes stops with `ENOSPC` in the box, and the host filesystem holding the box
 * directories loses no more than the box's limit (counted in this file's own directory tree, which holds
 * every box directory and the engine's state: other test files running at the same time write to the
 * same host filesystem, so its free space is no measure of what this file's boxes cost).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
// internal: the box disk is tested as a unit
import { btrfsAvailable, DEFAULT_DISK_SIZE_GB } from '../../src/engine/disk.ts';
import { engineTestBed, execSh } from '../helpers/engine.ts';
import { assertHostUntouched, snapshotHost } from './helpers.ts';

const bed = engineTestBed('escape-disk-', 'escd');
const { tmp, spec } = bed;

/** Free inodes of the filesystem holding `dir`. */
function freeInodes(dir: string): number {
  return statfsSync(dir).ffree;
}

/**
 * Bytes allocated and inodes used on the host by the tree `dir`, staying on its filesystem (`du -x`:
 * the box disks mounted inside it are not entered, their image files are counted). A file removed while
 * `du` walks makes it warn and exit 1; its total is still printed.
 */
function hostUsage(dir: string): { bytes: number; inodes: number } {
  const total = (flag: string) => {
    const r = spawnSync('du', ['-sx', flag, dir], { encoding: 'utf8' });
    const n = Number(r.stdout.split('\t')[0]);
    assert.ok(Number.isSafeInteger(n), `du ${flag} ${dir}: ${r.stdout} ${r.stderr}`);
    return n;
  };
  return { bytes: total('-B1'), inodes: total('--inodes') };
}

describe('disk limits', () => {
  test('a box without diskSizeGb has a disk of the default size, holding its root, /etc/hosts and /etc/hostname', async () => {
    const s = spec();
    await bed.engine.start(s);
    try {
      const r = await execSh(bed.engine, s.id, 'df -k / /etc/hosts /etc/hostname | tail -n 3');
      assert.equal(r.code, 0, r.stderr);
      const rows = r.stdout
        .trim()
        .split('\n')
        .map((l) => l.trim().split(/\s+/));
      assert.equal(rows.length, 3);
      for (const row of rows) {
        const kib = Number(row[1]);
        assert.ok(kib > DEFAULT_DISK_SIZE_GB * 0.9e6 && kib <= DEFAULT_DISK_SIZE_GB * 1e6, `size ${kib} KiB`);
      }
      // The same filesystem: /etc/hosts counts against the box's disk, not the host's.
      assert.equal(new Set(rows.map((row) => row[0])).size <= 2, true);
      const hosts = await execSh(
        bed.engine,
        s.id,
        'echo "10.1.2.3 extra" >> /etc/hosts && grep -c . /etc/hosts',
      );
      assert.equal(hosts.code, 0, hosts.stderr);
      // A formatted copy is made ready for the next box, in the engine's state directory (btrfs when
      // btrfs-progs is installed, disk.ts).
      const format = btrfsAvailable() ? '.btrfs' : '';
      const spare = join(tmp, 'state', 'disks', `${DEFAULT_DISK_SIZE_GB * 1e9}${format}.spare`);
      // Copied at the lowest CPU priority: seconds on a loaded machine.
      for (let i = 0; i < 1000 && !existsSync(spare); i++) await sleep(20);
      assert.ok(existsSync(spare), 'a spare disk is ready');
    } finally {
      await bed.engine.remove(s.id, s.boxDir);
    }
  });

  test('filling the disk through the root and through /etc/hosts stops at the limit; the host loses at most that', async () => {
    const snap = snapshotHost();
    const before = hostUsage(tmp);
    const s = spec({ diskSizeGb: 0.06 });
    await bed.engine.start(s);
    try {
      const root = await execSh(
        bed.engine,
        s.id,
        'dd if=/dev/zero of=/fill bs=1M count=200 2>&1; echo rc=$?',
      );
      assert.match(root.stdout, /No space left on device/);
      const hosts = await execSh(
        bed.engine,
        s.id,
        'rm /fill; dd if=/dev/zero of=/etc/hosts bs=1M count=200 2>&1; echo rc=$?',
      );
      assert.match(hosts.stdout, /No space left on device/);
      const size = await execSh(bed.engine, s.id, 'wc -c < /etc/hosts');
      assert.ok(Number(size.stdout) <= 60e6, `/etc/hosts grew to ${size.stdout.trim()} bytes`);
      const used = hostUsage(tmp).bytes - before.bytes;
      assert.ok(used < 60e6 + 32 * 1024 * 1024, `the host lost ${used} bytes`);
    } finally {
      await bed.engine.remove(s.id, s.boxDir);
    }
    assertHostUntouched(snap, { allowMountsUnder: [tmp] });
  });

  test('inode exhaustion stops in the box; host inodes are not consumed', async () => {
    const before = hostUsage(tmp);
    const s = spec({ diskSizeGb: 0.02 });
    await bed.engine.start(s);
    try {
      const r = await execSh(
        bed.engine,
        s.id,
        'mkdir /m && cd /m && i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done; echo $i',
      );
      const made = Number(r.stdout.trim());
      assert.ok(made > 100 && made < 20_000, `${made} files before the box ran out of inodes`);
      // The box ran out because its own disk has no inodes left, not the host's file system.
      assert.ok(freeInodes(join(s.boxDir, 'disk')) < 16, "the box's disk is out of inodes");
      // Files that reached the host would cost it at least one inode each, in this file's tree (the box
      // directory, the engine's state), besides the few the start and the spare disk copy make.
      const used = hostUsage(tmp).inodes - before.inodes;
      assert.ok(used < made, `the host lost ${used} inodes for ${made} files made in the box`);
    } finally {
      await bed.engine.remove(s.id, s.boxDir);
    }
  });
});
