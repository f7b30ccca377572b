/**
 * A box's files on the host, as the root engines (crun/runc in engine.ts, gVisor in gvisor.ts) lay
 * them out under its box directory: their names (`boxPaths`), the disk size a start uses, the box
 * index link `<stateRoot>/boxes/<id>` and the `engine.json` it leads to, the init's pid file, and
 * the staging of the root mount point, disk image, log and bind targets before the supervisor runs.
 * The bind targets are removed one by one, never recursively: a bind still mounted there would be
 * host files.
 */
import {
  chownSync,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { DEFAULT_DISK_SIZE_GB, diskLayerDirs, ensureDiskImage, type SpareRefill } from './disk.ts';
import { alive } from './host-process.ts';
import { mountsUnder } from './host-system.ts';
import type { OpenedHostPath } from './hostpath.ts';
import type { EngineBoxSpec } from './types.ts';

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * Checks a box id (1–128 characters: letters, digits, `_`, `.`, `-`, starting with a letter or digit),
 * so that it can name files and runtime containers.
 * @throws BoxError `id: '<id>' is not a box id` otherwise.
 */
export function checkBoxId(id: string): void {
  if (!ID_RE.test(id))
    throw new BoxError(`id: '${id}' is not a box id`, { field: 'id', code: 'invalid_option' });
}

/** True when `id` is a well-formed box id (see `checkBoxId`). */
export function isBoxId(id: string): boolean {
  return ID_RE.test(id);
}

/** Absolute host paths of one box's files in its box directory (both isolation tiers; see `boxPaths`). */
export interface BoxPaths {
  /** The OCI bundle: `config.json`, `init.pid` (and `hosts`, `hostname` when the box has no disk). */
  bundle: string;
  /** Where the supervisor mounts the box's overlay root. */
  rootfs: string;
  /** `<i>`: the bind target of `spec.mounts[i]`. */
  binds: string;
  /** The overlay's writable layer and work directory (on the disk when the box has one). */
  upper: string;
  work: string;
  /** The box's disk image and where it is mounted. */
  diskImg: string;
  diskDir: string;
  /** The runtime's and the supervisor's log. */
  log: string;
  /** Host pid of the box's init (crun) or sandbox process (runsc), written by `--pid-file`. */
  pidFile: string;
  /** The disk template's spare the supervisor refills once the box runs (set by `stageBoxFiles`). */
  spare?: SpareRefill;
}

/** The files of the box in `boxDir`; `diskSizeGb` absent puts the writable layer in `boxDir` itself. */
export function boxPaths(boxDir: string, diskSizeGb?: number): BoxPaths {
  const diskDir = join(boxDir, 'disk');
  const base = diskSizeGb !== undefined ? diskDir : boxDir;
  return {
    bundle: join(boxDir, 'bundle'),
    rootfs: join(boxDir, 'rootfs'),
    binds: join(boxDir, 'binds'),
    upper: join(base, 'upper'),
    work: join(base, 'work'),
    diskImg: join(boxDir, 'disk.img'),
    diskDir,
    log: join(boxDir, 'runtime.log'),
    pidFile: join(boxDir, 'bundle', 'init.pid'),
  };
}

/** Names under a box directory that the root engines create (what `remove` deletes). */
export const BOX_FILES = [
  'bundle',
  'rootfs',
  'binds',
  'upper',
  'work',
  'disk',
  'disk.img',
  'disk.img.tmp',
  'runtime.log',
] as const;

/**
 * The disk size of a box, GB: `spec.diskSizeGb`, else `DEFAULT_DISK_SIZE_GB` — every box gets a
 * size-limited disk (disk.ts) holding its writable layer and /etc files — except a box whose layer
 * predates that default (an upper dir in its box directory, no disk image): undefined, it keeps its layer.
 */
export function boxDiskSizeGb(spec: Pick<EngineBoxSpec, 'diskSizeGb' | 'boxDir'>): number | undefined {
  const legacy =
    spec.diskSizeGb === undefined &&
    existsSync(join(spec.boxDir, 'upper')) &&
    !existsSync(join(spec.boxDir, 'disk.img'));
  return spec.diskSizeGb ?? (legacy ? undefined : DEFAULT_DISK_SIZE_GB);
}

/**
 * Reads the `engine.json` of box `id` through its `<boxesDir>/<id>` link (the link is the engine's
 * own, made by `stageBoxFiles`).
 * @returns the parsed meta with the box directory and its root mount point, or undefined when the
 *   box is unknown or its file unreadable (no error is thrown).
 */
export function readBoxMeta<M>(
  boxesDir: string,
  id: string,
): (M & { boxDir: string; rootfs: string }) | undefined {
  try {
    const boxDir = readlinkSync(join(boxesDir, id));
    const meta = JSON.parse(readFileSync(join(boxDir, 'bundle', 'engine.json'), 'utf8')) as M;
    return { ...meta, boxDir, rootfs: join(boxDir, 'rootfs') };
  } catch {
    return undefined;
  }
}

/** The `engine.json` a previous start of a box left in its `bundle` directory, or undefined. */
export function readBundleMeta<M>(bundle: string): M | undefined {
  try {
    return JSON.parse(readFileSync(join(bundle, 'engine.json'), 'utf8')) as M;
  } catch {
    return undefined;
  }
}

/** The pid in `pidFile` (a runtime's `--pid-file`) while that process lives; else undefined. */
export function readLivePid(pidFile: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10);
    return pid > 0 && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** How `stageBoxFiles` prepares a box. */
export interface StageOptions {
  /** A new disk image is btrfs when the host can (snapshots of the writable layer; disk.ts). */
  snapshots: boolean;
  /** Mode of the bind target directory: `0o711` when a user namespace's root looks targets up. */
  bindsMode: number;
}

/**
 * Prepares the box's files before its supervisor runs: the root mount point, the disk image (made
 * when missing, `ensureDiskImage`; `p.upper`/`p.work` then name the layer on it, `diskLayerDirs`) or
 * the layer directories, the `<boxesDir>/<id>` link to the box directory, an empty log, no stale pid
 * file, and a fresh bind target per opened host path (a directory or an empty file, as the host
 * object is). Old bind targets are removed one by one, never recursively.
 * @returns the supervisor's bind list: `<fd>:<target>` per host path (`fd` 3, 4, … in order).
 * @throws BoxError when an old bind target is still mounted or the disk image cannot be made; the
 *   file system error otherwise.
 */
export async function stageBoxFiles(
  stateRoot: string,
  boxesDir: string,
  spec: EngineBoxSpec,
  p: BoxPaths,
  diskSizeGb: number | undefined,
  opened: OpenedHostPath[],
  options: StageOptions,
): Promise<string[]> {
  mkdirSync(p.rootfs, { recursive: true });
  if (diskSizeGb !== undefined) {
    mkdirSync(p.diskDir, { recursive: true });
    const spare = await ensureDiskImage(stateRoot, spec.id, p.diskImg, diskSizeGb, {
      snapshots: options.snapshots,
      refillLater: true,
    });
    Object.assign(p, diskLayerDirs(p.diskImg, p.diskDir), spare ? { spare } : {});
  } else {
    mkdirSync(p.upper, { recursive: true });
    mkdirSync(p.work, { recursive: true });
  }
  const link = join(boxesDir, spec.id);
  rmSync(link, { force: true });
  symlinkSync(spec.boxDir, link);
  rmSync(p.pidFile, { force: true });
  writeFileSync(p.log, '');
  // Staging points only, never recursively: a bind still mounted there would be host files.
  for (const name of existsSync(p.binds) ? readdirSync(p.binds) : []) {
    const target = join(p.binds, name);
    if (mountsUnder(target).length > 0)
      throw new BoxError(`box ${spec.id}: ${target} is still mounted`, { code: 'internal' });
    if (lstatSync(target).isDirectory()) rmdirSync(target);
    else unlinkSync(target);
  }
  try {
    rmdirSync(p.binds);
  } catch {}
  if (opened.length > 0) mkdirSync(p.binds, { mode: options.bindsMode });
  const binds: string[] = [];
  for (const [i, o] of opened.entries()) {
    const target = join(p.binds, String(i));
    if (o.isDirectory) mkdirSync(target);
    else writeFileSync(target, '');
    binds.push(`${3 + i}:${target}`);
  }
  return binds;
}

/**
 * Hands each fresh managed volume of the box (`spec.mounts[i].ownedByBox`, its top directory still
 * owned by host root) to the user namespace's root, host `uid`/`gid`. The chown follows the opened
 * descriptor's magic link (`/proc/self/fd/<fd>`) to the object checked when it was opened, never a
 * path the box controls.
 * @throws the file system error when a chown fails.
 */
export function handVolumesToMappedRoot(
  spec: Pick<EngineBoxSpec, 'mounts'>,
  opened: OpenedHostPath[],
  uid: number,
  gid: number,
): void {
  for (const [i, o] of opened.entries()) {
    if (spec.mounts[i]?.ownedByBox !== true) continue;
    const st = fstatSync(o.fd);
    if (st.uid === 0 && st.gid === 0) chownSync(`/proc/self/fd/${o.fd}`, uid, gid);
  }
}
