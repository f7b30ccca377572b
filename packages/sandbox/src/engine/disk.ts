/**
 * The size-limited writable layer of a box: a sparse ext4 image (`<boxDir>/disk.img`) loop-mounted at
 * `<boxDir>/disk`, holding the overlay's `upper/` and `work/` and the box's `/etc/hosts` and
 * `/etc/hostname`. Every box has one (`DEFAULT_DISK_SIZE_GB` unless `diskSizeGb` says otherwise), so
 * nothing a box writes to its root lands on the host disk outside its limit.
 *
 * Formatting is done once per size: `mkfs.ext4` makes `<stateRoot>/disks/<bytes>.img`, and each box
 * gets a sparse copy of it (`cp --sparse=always`, ≈ 4 ms and ≈ 4 MiB on disk for 10 GB, against
 * ≈ 20 ms for mkfs). One copy is kept ready ahead (`<bytes>.spare`, refilled in the background after
 * each use), so a create usually only renames it. The copy is mounted with `noinit_itable`, so the kernel never zeroes the inode
 * tables of a fresh image in the background (≈ 160 MB of writes per 10 GB box otherwise).
 */
import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';

/** Size of a box's writable layer when `diskSizeGb` is not given, GB (10⁹ bytes). */
export const DEFAULT_DISK_SIZE_GB = 10;

/** Mount options of a box disk (see the module comment for `noinit_itable`). */
export const DISK_MOUNT_OPTIONS = 'loop,noatime,nosuid,nodev,noinit_itable';

function run(file: string, args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 60_000 }, (err, _stdout, stderr) => {
      resolve({
        code: err ? ((err as { code?: number }).code ?? 1) : 0,
        stderr: String(stderr || err?.message || ''),
      });
    });
  });
}

/** `<stateRoot>/disks/<bytes>.img`, formatted ext4, made once (concurrent makers rename atomically). */
async function template(stateRoot: string, bytes: number): Promise<string> {
  const dir = join(stateRoot, 'disks');
  const path = join(dir, `${bytes}.img`);
  if (existsSync(path)) return path;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.${Date.now()}`;
  writeFileSync(tmp, '');
  truncateSync(tmp, bytes);
  const mkfs = await run('mkfs.ext4', [
    '-q',
    '-F',
    '-m',
    '0',
    '-E',
    'lazy_itable_init=1,lazy_journal_init=1,nodiscard',
    tmp,
  ]);
  if (mkfs.code !== 0) {
    rmSync(tmp, { force: true });
    throw new BoxError(`diskSizeGb: formatting a ${bytes}-byte disk failed: ${mkfs.stderr.trim()}`);
  }
  renameSync(tmp, path);
  return path;
}

/**
 * Makes the disk image `img` of box `id` (`sizeGb` GB) unless it exists; an existing one must have
 * that size.
 * @throws BoxError naming `diskSizeGb` when an existing disk has another size or making it fails.
 */
export async function ensureDiskImage(
  stateRoot: string,
  id: string,
  img: string,
  sizeGb: number,
): Promise<void> {
  const bytes = Math.ceil(sizeGb * 1e9);
  if (existsSync(img)) {
    const size = statSync(img).size;
    if (size >= bytes) return;
    throw new BoxError(`diskSizeGb: box ${id} already has a ${size}-byte disk; it cannot shrink or grow`);
  }
  const source = await template(stateRoot, bytes);
  const spare = `${source.slice(0, -'.img'.length)}.spare`;
  try {
    // Another engine may take the spare first: rename is atomic, the loser copies.
    renameSync(spare, img);
  } catch {
    const tmp = `${img}.tmp`;
    const cp = await run('cp', ['--sparse=always', source, tmp]);
    if (cp.code !== 0) {
      rmSync(tmp, { force: true });
      throw new BoxError(
        `diskSizeGb: creating the ${sizeGb} GB disk of box ${id} failed: ${cp.stderr.trim()}`,
      );
    }
    renameSync(tmp, img);
  }
  refillSpare(source, spare);
}

/** Copies the template to `spare` in the background unless a spare or a copy in progress exists. */
function refillSpare(source: string, spare: string): void {
  const dir = spare.slice(0, spare.lastIndexOf('/'));
  const base = spare.slice(dir.length + 1);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  const pending = names.filter((n) => n.startsWith(`${base}.`));
  // A copy in progress is `<spare>.<pid>`; one whose process is gone is removed.
  for (const n of pending) {
    const pid = Number(n.slice(base.length + 1));
    if (!existsSync(`/proc/${pid}`)) rmSync(join(dir, n), { force: true });
  }
  if (names.includes(base) || pending.some((n) => existsSync(`/proc/${n.slice(base.length + 1)}`))) return;
  const tmp = `${spare}.${process.pid}`;
  const child = execFile('cp', ['--sparse=always', source, tmp], (err) => {
    try {
      if (err) rmSync(tmp, { force: true });
      else renameSync(tmp, spare);
    } catch {} // the state directory went away meanwhile
  });
  child.unref();
}
