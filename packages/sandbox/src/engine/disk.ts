/**
 * The size-limited writable layer of a box: a sparse ext4 image (`<boxDir>/disk.img`) loop-mounted at
 * `<boxDir>/disk`, holding the overlay's `upper/` and `work/` and the box's `/etc/hosts` and
 * `/etc/hostname`. Every box has one (`DEFAULT_DISK_SIZE_GB` unless `diskSizeGb` says otherwise), so
 * nothing a box writes to its root lands on the host disk outside its limit.
 *
 * Formatting is done once per size: `mkfs.ext4` makes `<stateRoot>/disks/<bytes>.img`, and each box
 * gets a sparse copy of it (`cp --sparse=always`, ≈ 4 ms and ≈ 4 MiB on disk for 10 GB, against
 * ≈ 20 ms for mkfs). One copy is kept ready ahead (`<bytes>.spare`, refilled after each use: by the
 * box's supervisor once the box runs, `SpareRefill`, or in the background), so a create usually only
 * renames it. The copy is mounted with `noinit_itable`, so the kernel never zeroes the inode
 * tables of a fresh image in the background (≈ 160 MB of writes per 10 GB box otherwise).
 *
 * Format: a disk of at least `BTRFS_MIN_BYTES` asked for with `{ snapshots: true }` (the crun engine's
 * boxes) is btrfs when `mkfs.btrfs` (Debian `btrfs-progs`) is installed, its template made with the subvolume
 * `layer/` holding `upper/` and `work/` (overlay renames between them: one subvolume; the engine finds
 * them with `diskLayerDirs`) and a `snapshots/` directory,
 * so a snapshot of the writable layer is a read-only btrfs snapshot of `layer/` (O(1), `snapshot.ts`). Templates are `<bytes>.btrfs.img` /
 * `<bytes>.btrfs.spare`. Smaller disks, the gVisor tier's, and hosts without btrfs-progs or with a kernel
 * older than 6.7 get ext4
 * (`<bytes>.img`): no snapshots. Several boxes' disks share one btrfs fsid (copies of a template); kernel
 * ≥ 6.7 mounts such single-device clones side by side (`temp_fsid`). The mount options follow the
 * format of the image (`diskMountOptions`).
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  closeSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { release } from 'node:os';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';

/** Size of a box's writable layer when `diskSizeGb` is not given, GB (10⁹ bytes). */
export const DEFAULT_DISK_SIZE_GB = 10;

/** The ext4 box disk's file-system-specific mount data (see the module comment for `noinit_itable`). */
const EXT4_MOUNT_DATA = 'noinit_itable';

/** Mount options of a btrfs box disk (`noinit_itable` is ext4's; btrfs has no inode tables). */
export const BTRFS_MOUNT_OPTIONS = 'loop,noatime,nosuid,nodev';

/** Mount options of an ext4 box disk: the btrfs disk's and the ext4 data. */
export const DISK_MOUNT_OPTIONS = `${BTRFS_MOUNT_OPTIONS},${EXT4_MOUNT_DATA}`;

/** Smallest disk made btrfs, bytes: mkfs.btrfs refuses devices under ≈ 109 MiB; below this, ext4. */
export const BTRFS_MIN_BYTES = 256 * 1024 * 1024;

/** File system of a box disk image. */
export type DiskFormat = 'btrfs' | 'ext4';

/** Host paths searched for `mkfs.btrfs` (root's PATH may lack sbin). */
const MKFS_BTRFS = ['/usr/sbin/mkfs.btrfs', '/sbin/mkfs.btrfs'];

/**
 * True when `mkfs.btrfs` and `btrfs` are installed and the kernel mounts single-device btrfs clones side
 * by side (`temp_fsid`, Linux ≥ 6.7): every box disk is a copy of one template, so all share its fsid.
 */
export function btrfsAvailable(): boolean {
  const [major = 0, minor = 0] = release()
    .split('.')
    .map((n) => Number.parseInt(n, 10));
  const tempFsid = major > 6 || (major === 6 && minor >= 7);
  return tempFsid && MKFS_BTRFS.some((p) => existsSync(p)) && existsSync('/usr/bin/btrfs');
}

/**
 * The file system in the image `img` (btrfs superblock magic `_BHRfS_M` at 0x10040, ext2/3/4 magic
 * 0xEF53 at 0x438), or null when it is neither or cannot be read.
 */
export function diskFormat(img: string): DiskFormat | null {
  let fd: number;
  try {
    fd = openSync(img, 'r');
  } catch {
    return null;
  }
  try {
    const buf = Buffer.alloc(8);
    if (readSync(fd, buf, 0, 8, 0x10040) === 8 && buf.toString('latin1') === '_BHRfS_M') return 'btrfs';
    if (readSync(fd, buf, 0, 2, 0x438) === 2 && buf.readUInt16LE(0) === 0xef53) return 'ext4';
    return null;
  } finally {
    closeSync(fd);
  }
}

/**
 * The overlay's upper and work directories on the box disk mounted at `diskDir` from `img`: in the
 * `layer` subvolume of a btrfs disk, at the top of an ext4 one.
 */
export function diskLayerDirs(img: string, diskDir: string): { upper: string; work: string } {
  const base = diskFormat(img) === 'btrfs' ? join(diskDir, 'layer') : diskDir;
  return { upper: join(base, 'upper'), work: join(base, 'work') };
}

/** Mount options for the disk image `img` by its format (ext4's when unknown). */
export function diskMountOptions(img: string): string {
  return diskFormat(img) === 'btrfs' ? BTRFS_MOUNT_OPTIONS : DISK_MOUNT_OPTIONS;
}

/**
 * The file system type and mount data (`-`: none) of the disk image `img` by its format (ext4's when
 * unknown), for the idmap helper's `disk` operation (idmap.ts), which adds `nosuid,nodev,noatime`: the
 * same mount as `diskMountOptions` gives mount(8).
 */
export function diskFsMount(img: string): [type: DiskFormat, data: string] {
  return diskFormat(img) === 'btrfs' ? ['btrfs', '-'] : ['ext4', EXT4_MOUNT_DATA];
}

/**
 * Attempts of a box disk mount before it fails. The kernel can refuse a btrfs clone for a moment while
 * another clone of the same template (same fsid and device uuid) is being registered or released
 * (`mount(2)`: EEXIST), so a failed mount is tried again after 100, 200, 300, 400 ms; the supervisor
 * script (`scripts.ts`, `mount_disk`) and the idmap helper (idmap.ts, `disk`) retry the same way.
 */
export const DISK_MOUNT_ATTEMPTS = 5;

/**
 * Mounts the box disk image `img` at `dir` with the options of its format, trying up to
 * `DISK_MOUNT_ATTEMPTS` times.
 * @returns the last `mount` exit code (0: mounted) and its standard error.
 */
export async function mountDisk(img: string, dir: string): Promise<{ code: number; stderr: string }> {
  let result = { code: 1, stderr: '' };
  for (let attempt = 1; attempt <= DISK_MOUNT_ATTEMPTS; attempt++) {
    result = await run('mount', ['-o', diskMountOptions(img), img, dir]);
    if (result.code === 0) return result;
    if (attempt < DISK_MOUNT_ATTEMPTS) await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
  }
  return result;
}

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

/** Templates being made by this process, by path: concurrent boxes of one size wait for one maker. */
const makingTemplates = new Map<string, Promise<string>>();

/**
 * `<stateRoot>/disks/<bytes>.img` formatted ext4, or `<bytes>.btrfs.img` formatted btrfs with the
 * `layer` subvolume, made once: the boxes of this process wait for one maker (`makingTemplates`); of
 * makers in several processes, the first to finish publishes it (`publishTemplate`).
 */
function template(stateRoot: string, bytes: number, format: DiskFormat): Promise<string> {
  const path = join(stateRoot, 'disks', format === 'btrfs' ? `${bytes}.btrfs.img` : `${bytes}.img`);
  if (existsSync(path)) return Promise.resolve(path);
  let making = makingTemplates.get(path);
  if (making === undefined) {
    making = makeTemplate(path, bytes, format).finally(() => makingTemplates.delete(path));
    makingTemplates.set(path, making);
  }
  return making;
}

/** Formats the template `path` in a file of its own (`<path>.<random>`) and publishes it. */
async function makeTemplate(path: string, bytes: number, format: DiskFormat): Promise<string> {
  const dir = join(path, '..');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Unique per maker: two makers sharing a file would format it under each other.
  const tmp = `${path}.${randomUUID()}`;
  writeFileSync(tmp, '');
  truncateSync(tmp, bytes);
  if (format === 'btrfs') {
    try {
      await formatBtrfs(tmp, dir);
    } catch (error) {
      rmSync(tmp, { force: true });
      throw error;
    }
    publishTemplate(tmp, path);
    return path;
  }
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
    throw new BoxError(`diskSizeGb: formatting a ${bytes}-byte disk failed: ${mkfs.stderr.trim()}`, {
      code: 'internal',
    });
  }
  publishTemplate(tmp, path);
  return path;
}

/**
 * Puts the freshly formatted `tmp` in place as the template `path` unless a concurrent maker already
 * did: `link` never replaces an existing file, so a template another box is being copied from is never
 * swapped under it (a `rename` would be). `tmp` is removed either way.
 */
function publishTemplate(tmp: string, path: string): void {
  try {
    linkSync(tmp, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
      rmSync(tmp, { force: true });
      throw error;
    }
  }
  rmSync(tmp, { force: true });
}

/**
 * Lays out a fresh btrfs box disk mounted at `$2` from `$1` (`layout.sh <img> <mnt> <mount options>`),
 * run under `unshare --mount --propagation private`: the mount exists in that namespace only, so no
 * mount namespace made meanwhile (a box's runtime, slirp4netns) holds a copy of it that outlives the
 * `umount` here and writes to the image after it is published. The mount is tried up to
 * `DISK_MOUNT_ATTEMPTS` times like every box disk's.
 */
const LAYOUT_SH = `set -e
n=1
until mount -o "$3" "$1" "$2"; do
  [ $n -lt ${DISK_MOUNT_ATTEMPTS} ] || exit 1
  sleep "0.$n"
  n=$((n + 1))
done
trap 'umount "$2"' EXIT
/usr/bin/btrfs -q subvolume create "$2/layer"
mkdir "$2/layer/upper" "$2/layer/work"
mkdir -m 700 "$2/snapshots"
`;

/**
 * Formats `img` btrfs (`-K`: no discard of the fresh sparse file) and lays out a box disk in it: the
 * subvolume `layer` (what snapshots copy-on-write) holding `upper` and `work`, and `snapshots`
 * (`LAYOUT_SH`). Overlay renames from work/ into upper/ on copy-up: both are in one subvolume (a rename
 * across subvolumes fails with EXDEV); the engine finds them there with `diskLayerDirs`.
 * @throws BoxError naming `diskSizeGb` with the tool's message.
 */
async function formatBtrfs(img: string, dir: string): Promise<void> {
  const mkfs = MKFS_BTRFS.find((p) => existsSync(p)) ?? 'mkfs.btrfs';
  const made = await run(mkfs, ['-q', '-f', '-K', img]);
  if (made.code !== 0)
    throw new BoxError(`diskSizeGb: formatting a btrfs disk failed: ${made.stderr.trim()}`, {
      code: 'internal',
    });
  const mnt = mkdtempSync(join(dir, 'mnt-'));
  try {
    const laid = await run('unshare', [
      '--mount',
      '--propagation',
      'private',
      '--',
      '/bin/sh',
      '-c',
      LAYOUT_SH,
      'layout',
      img,
      mnt,
      BTRFS_MOUNT_OPTIONS,
    ]);
    if (laid.code !== 0)
      throw new BoxError(`diskSizeGb: laying out a new btrfs disk failed: ${laid.stderr.trim()}`, {
        code: 'internal',
      });
  } finally {
    rmdirSync(mnt);
  }
}

/**
 * The copy of a disk template that refills its spare (`cp --sparse=always <source> <spare>.<pid>`, then
 * a rename to `spare`), for the box supervisor to make once the box runs (scripts.ts `refill`): a
 * spawn from this process would hold its event loop for the length of a `fork` of it (≈ 8 ms on a
 * loaded 2-core host) on the box's start path.
 */
export interface SpareRefill {
  /** The formatted template (`<stateRoot>/disks/<bytes>[.btrfs].img`). */
  source: string;
  /** The spare to make (`<stateRoot>/disks/<bytes>[.btrfs].spare`). */
  spare: string;
}

/**
 * Makes the disk image `img` of box `id` (`sizeGb` GB) unless it exists; an existing one must have
 * that size. With `options.snapshots` it is btrfs when the host can (see the module comment). The
 * template's spare is refilled in the background, or, with `options.refillLater`, left to the caller.
 * @returns the spare refill left to the caller (`refillLater` and a spare was used), else undefined.
 * @throws BoxError naming `diskSizeGb` when an existing disk has another size or making it fails.
 */
export async function ensureDiskImage(
  stateRoot: string,
  id: string,
  img: string,
  sizeGb: number,
  options: { snapshots?: boolean; refillLater?: boolean } = {},
): Promise<SpareRefill | undefined> {
  const bytes = Math.ceil(sizeGb * 1e9);
  if (existsSync(img)) {
    const size = statSync(img).size;
    if (size >= bytes) return undefined;
    throw new BoxError(`diskSizeGb: box ${id} already has a ${size}-byte disk; it cannot shrink or grow`, {
      code: 'conflict',
    });
  }
  const format: DiskFormat =
    options.snapshots === true && bytes >= BTRFS_MIN_BYTES && btrfsAvailable() ? 'btrfs' : 'ext4';
  const source = await template(stateRoot, bytes, format);
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
        { code: 'internal' },
      );
    }
    renameSync(tmp, img);
  }
  if (options.refillLater === true) return { source, spare };
  refillSpare(source, spare);
  return undefined;
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
