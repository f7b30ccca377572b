/**
 * Snapshots of a box's writable layer (BoxLite #205 / E2B naming), copy-on-write
 * on the box's btrfs disk (`disk.ts`).
 *
 * A box disk made btrfs keeps the overlay's `upper/` and `work/` in the subvolume `layer/` (`disk.ts`),
 * and `snapshots/`, which the box cannot reach (its root is the overlay; the disk's top is never mounted
 * in the box).
 * - create: `btrfs subvolume snapshot -r layer snapshots/<name>`: O(1) in the layer's size (btrfs shares
 *   every extent; the kernel first writes back the upper's dirty pages, so a layer just written costs
 *   that write-back once). The caller freezes the box around it (`freezer.ts`) for a consistent layer;
 *   the box's dirty pages are written back before the freeze (`syncfs`), so the frozen window is short.
 * - restore: `layer` is renamed aside and replaced by a writable snapshot of `snapshots/<name>`; the box
 *   is restarted (the overlay mounted at the next start uses it) and the old layer deleted.
 * - remove: `btrfs subvolume delete snapshots/<name>` (space is freed by the kernel's cleaner).
 *
 * Records (`name`, `createdAt` RFC 3339, `sizeBytes`: bytes in use on the box disk when it was taken,
 * from statfs) live in `<boxDir>/snapshots.json`, host-only.
 *
 * Security: host root acts on `<boxDir>/disk/layer` and `<boxDir>/disk/snapshots/<name>` only, paths the
 * box cannot name or replace (the disk's top directory is not in the box), with names checked against
 * `SNAPSHOT_NAME_RE`. Snapshot contents are read-only subvolumes: nothing the box does changes them.
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BoxError, conflict, notFound } from '../errors.ts';
import { diskFormat, mountDisk } from './disk.ts';
import { mountsUnder } from './host-system.ts';

/** A snapshot as the SDK reports it. */
export interface SnapshotInfo {
  /** Name, unique per box (`SNAPSHOT_NAME_RE`). */
  name: string;
  /** When it was taken, RFC 3339 (UTC). */
  createdAt: string;
  /**
   * Bytes in use on the box's disk when the snapshot was taken (statfs): its layer plus data of earlier
   * snapshots it does not share, so an upper bound of what it holds; O(1) to read, unlike a walk.
   */
  sizeBytes: number;
}

/** Snapshot names: 1–64 characters of letters, digits, `.`, `_`, `-`, not starting with `.` or `-`. */
export const SNAPSHOT_NAME_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/;

const BTRFS = '/usr/bin/btrfs';

function run(file: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 120_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      resolve({
        code: err ? ((err as { code?: number }).code ?? 1) : 0,
        stdout: String(stdout),
        stderr: String(stderr || err?.message || ''),
      });
    });
  });
}

/** Paths of a box's disk (`engine.ts` layout). */
export function diskPaths(boxDir: string) {
  const disk = join(boxDir, 'disk');
  return {
    img: join(boxDir, 'disk.img'),
    disk,
    /** The subvolume holding `upper/` and `work/`: what a snapshot copies on write. */
    layer: join(disk, 'layer'),
    upper: join(disk, 'layer', 'upper'),
    snapshots: join(disk, 'snapshots'),
    records: join(boxDir, 'snapshots.json'),
  };
}

/**
 * Why the box in `boxDir` cannot have snapshots, or null when it can (a btrfs disk).
 * The message names what to change.
 */
export function snapshotsUnsupported(boxDir: string): string | null {
  const p = diskPaths(boxDir);
  if (!existsSync(p.img)) {
    return 'its writable layer is not on a box disk (boxes of ordinary accounts, which cannot use loop devices, and boxes made before disks existed have none)';
  }
  const format = diskFormat(p.img);
  if (format === 'btrfs') return null;
  return `its disk is ${format ?? 'of an unknown format'}, not btrfs: boxes get btrfs disks when btrfs-progs is installed (sandbox setup), the kernel is 6.7 or later and diskSizeGb ≥ 0.27; create a new box`;
}

/** @throws BoxError `unsupported` with the reason of `snapshotsUnsupported`. */
export function assertSnapshots(boxDir: string, box: string): void {
  const why = snapshotsUnsupported(boxDir);
  if (why) throw new BoxError(`snapshots: box ${box} cannot have snapshots: ${why}`, { code: 'unsupported' });
}

/** @throws BoxError `invalid_option` naming `field` when `name` is not a valid snapshot name. */
export function checkSnapshotName(name: unknown, field = 'name'): string {
  if (typeof name !== 'string' || !SNAPSHOT_NAME_RE.test(name)) {
    throw new BoxError(
      `invalid snapshot name ${JSON.stringify(name)}: 1–64 letters, digits, '.', '_' or '-', not starting with '.' or '-'`,
      { field },
    );
  }
  return name;
}

type Records = Record<string, { createdAt: string; sizeBytes?: number }>;

function readRecords(boxDir: string): Records {
  try {
    return JSON.parse(readFileSync(diskPaths(boxDir).records, 'utf8')) as Records;
  } catch {
    return {};
  }
}

function writeRecords(boxDir: string, records: Records): void {
  const path = diskPaths(boxDir).records;
  const tmp = `${path}.${process.pid}`;
  writeFileSync(tmp, JSON.stringify(records), { mode: 0o600 });
  renameSync(tmp, path);
}

/** True when the box disk is mounted at `<boxDir>/disk` (the box runs, or an operation holds it). */
export function diskMounted(boxDir: string): boolean {
  return mountsUnder(diskPaths(boxDir).disk).includes(diskPaths(boxDir).disk);
}

/**
 * Runs `fn` with the box disk mounted at `<boxDir>/disk`: as it is when the box runs, else mounted for
 * the call and unmounted after.
 * @throws BoxError when mounting fails.
 */
export async function withDisk<T>(boxDir: string, fn: () => Promise<T>): Promise<T> {
  const p = diskPaths(boxDir);
  if (diskMounted(boxDir)) return fn();
  mkdirSync(p.disk, { recursive: true });
  const m = await mountDisk(p.img, p.disk);
  if (m.code !== 0)
    throw new BoxError(`snapshots: mounting the disk of ${boxDir} failed: ${m.stderr.trim()}`, {
      code: 'internal',
    });
  try {
    return await fn();
  } finally {
    await run('umount', [p.disk]);
  }
}

/** Writes back the dirty pages of the box disk's file system (`sync -f`, syncfs(2)); best effort. */
export async function flushDisk(boxDir: string): Promise<void> {
  await run('sync', ['-f', diskPaths(boxDir).upper]);
}

/**
 * Takes a read-only snapshot of the mounted disk's `layer` (upper and work) as `snapshots/<name>` and records it; the
 * caller has the box frozen (or stopped) and the disk mounted.
 * @throws BoxError `conflict` when the name is taken, or naming btrfs's message.
 */
export async function takeSnapshot(boxDir: string, name: string): Promise<SnapshotInfo> {
  const p = diskPaths(boxDir);
  const records = readRecords(boxDir);
  if (records[name] || existsSync(join(p.snapshots, name)))
    throw conflict(`snapshot '${name}' already exists`);
  mkdirSync(p.snapshots, { recursive: true, mode: 0o700 });
  const r = await run(BTRFS, ['-q', 'subvolume', 'snapshot', '-r', p.layer, join(p.snapshots, name)]);
  if (r.code !== 0)
    throw new BoxError(`snapshot '${name}': btrfs snapshot failed: ${r.stderr.trim()}`, { code: 'internal' });
  const createdAt = new Date().toISOString();
  const fs = statfsSync(p.disk);
  const sizeBytes = (fs.blocks - fs.bfree) * fs.bsize;
  records[name] = { createdAt, sizeBytes };
  writeRecords(boxDir, records);
  return { name, createdAt, sizeBytes };
}

/** The box's snapshots, oldest first. */
export async function listSnapshots(boxDir: string): Promise<SnapshotInfo[]> {
  return Object.entries(readRecords(boxDir))
    .map(([name, r]) => ({ name, createdAt: r.createdAt, sizeBytes: r.sizeBytes ?? 0 }))
    .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.name.localeCompare(b.name));
}

/** One snapshot or null. */
export async function getSnapshot(boxDir: string, name: string): Promise<SnapshotInfo | null> {
  return (await listSnapshots(boxDir)).find((s) => s.name === name) ?? null;
}

/**
 * Deletes snapshot `name` (disk mounted for the call when needed).
 * @throws BoxError `not_found` when the box has no such snapshot.
 */
export async function removeSnapshot(boxDir: string, name: string): Promise<void> {
  const records = readRecords(boxDir);
  if (!records[name]) throw notFound(`snapshot '${name}' does not exist`);
  await withDisk(boxDir, async () => {
    const path = join(diskPaths(boxDir).snapshots, name);
    if (existsSync(path)) {
      const r = await run(BTRFS, ['-q', 'subvolume', 'delete', path]);
      if (r.code !== 0)
        throw new BoxError(`snapshot '${name}': btrfs delete failed: ${r.stderr.trim()}`, {
          code: 'internal',
        });
    }
  });
  const now = readRecords(boxDir);
  delete now[name];
  writeRecords(boxDir, now);
}

/**
 * Makes snapshot `name` the box's writable layer: `layer` is renamed aside (`.old-<time>`, deleted by
 * `purgeOldLayers`) and a writable snapshot of `snapshots/<name>` takes its place. On a running box (disk
 * mounted) the overlay keeps the renamed layer until the box is stopped, and the next start mounts the
 * restored one; on a stopped box the disk is mounted for the call and the old layer deleted at once.
 * The snapshot itself is kept.
 * @throws BoxError `not_found` when there is no such snapshot, or naming btrfs's message.
 */
export async function restoreLayer(boxDir: string, name: string): Promise<void> {
  if (!readRecords(boxDir)[name]) throw notFound(`snapshot '${name}' does not exist`);
  const mounted = diskMounted(boxDir);
  await withDisk(boxDir, async () => {
    const p = diskPaths(boxDir);
    const source = join(p.snapshots, name);
    if (!existsSync(source)) throw notFound(`snapshot '${name}' is missing from the box disk`);
    if (existsSync(p.layer)) renameSync(p.layer, join(p.disk, `.old-${Date.now()}-${process.pid}`));
    const snap = await run(BTRFS, ['-q', 'subvolume', 'snapshot', source, p.layer]);
    if (snap.code !== 0)
      throw new BoxError(`restore '${name}': btrfs snapshot failed: ${snap.stderr.trim()}`, {
        code: 'internal',
      });
    if (!mounted) await purgeOldLayers(boxDir);
  });
}

/** Deletes the layers `restoreLayer` set aside (`.old-*` subvolumes at the disk's top); disk mounted. */
export async function purgeOldLayers(boxDir: string): Promise<void> {
  const p = diskPaths(boxDir);
  const old = readdirSync(p.disk).filter((n) => n.startsWith('.old-'));
  if (old.length === 0) return;
  await run(BTRFS, ['-q', 'subvolume', 'delete', ...old.map((n) => join(p.disk, n))]);
}

/**
 * Copies the `upper/` of the read-only subvolume `source` (a snapshot of another box) into the writable layer of the box
 * in `boxDir` (its disk mounted for the call; the box not started yet): `cp -a` keeps owners, modes,
 * times, hard links, overlay whiteouts and xattrs (opaque directories); it never follows a symlink.
 * Cost is proportional to the data (two box disks share no extents).
 * @throws BoxError naming cp's message.
 */
export async function seedLayer(boxDir: string, source: string): Promise<void> {
  await withDisk(boxDir, async () => {
    const r = await run('cp', ['-a', '--', `${join(source, 'upper')}/.`, `${diskPaths(boxDir).upper}/`]);
    if (r.code !== 0)
      throw new BoxError(`copying the writable layer failed: ${r.stderr.trim()}`, { code: 'internal' });
  });
}
