/**
 * Host facts the rootless engine, `sandbox doctor` and `sandbox setup` share: the caller's
 * account, its subordinate id ranges (`/etc/subuid`, `/etc/subgid`, subuid(5)), the cgroup layout and
 * the cgroup subtree delegated to an ordinary user, the kernel version and the lowest unprivileged port.
 *
 * Cgroup delegation without systemd (`sandbox setup <user>`): for each limit controller (`cpu`,
 * `memory`, `pids`) a directory `seed-sandbox-users/<user>` owned by the user, at the root of the
 * controller's v1 hierarchy (hybrid and v1 hosts) or of the cgroup2 tree with the controllers enabled
 * in `cgroup.subtree_control` (v2 hosts). With systemd as PID 1 on a v2 host, `user@.service`
 * delegation is used instead (the user's own `user@<uid>.service` subtree).
 */
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { parseSubid, type SubidEntry } from './idmap.ts';

/** A subordinate id range: `count` ids from `start` (subuid(5) line `owner:start:count`). */
export interface SubordinateRange {
  start: number;
  count: number;
}

/** The account a rootless runtime runs as. */
export interface HostUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** Ids a rootless box needs beyond the caller's own: box uids 1…65536. */
export const ROOTLESS_RANGE_SIZE = 65536;
/** Root of the per-user cgroup subtrees `sandbox setup` delegates (`/<this>/<user>` in each hierarchy). */
export const USER_CGROUP_PARENT = 'seed-sandbox-users';
/** Controllers the rootless engine needs for `cpus`, `memoryMib` and the pids limit. */
export const LIMIT_CONTROLLERS = ['cpu', 'memory', 'pids'] as const;
/**
 * Controllers delegated on a v1 or hybrid host: the limit controllers and `freezer` (crun reads the
 * box's freezer state on every exec; cgroup2 has the freezer built in).
 */
export const V1_DELEGATED_CONTROLLERS = [...LIMIT_CONTROLLERS, 'freezer'] as const;

/** Controllers to delegate on a host with this layout. */
export function delegatedControllers(layout: CgroupLayout): readonly string[] {
  return layout === 'v2' ? LIMIT_CONTROLLERS : V1_DELEGATED_CONTROLLERS;
}
/** Root of the cgroup file systems. */
export const CGROUP_ROOT = '/sys/fs/cgroup';

/** The account of this process (name, uid, gid, home directory). */
export function currentUser(): HostUser {
  const info = userInfo();
  return { name: info.username, uid: info.uid, gid: info.gid, home: info.homedir };
}

/** Entries of a subordinate id file (`name:start:count`, idmap.ts `parseSubid`); an absent file has none. */
export function readSubordinateFile(path: string): SubidEntry[] {
  try {
    return parseSubid(readFileSync(path, 'utf8'));
  } catch {
    return [];
  }
}

/**
 * The ranges of `user` in `path` (`/etc/subuid` or `/etc/subgid`), matched by name or numeric id, as
 * newuidmap(1) matches them.
 */
export function subordinateRanges(path: string, user: Pick<HostUser, 'name' | 'uid'>): SubordinateRange[] {
  return readSubordinateFile(path)
    .filter((e) => e.name === user.name || e.name === String(user.uid))
    .map(({ start, count }) => ({ start, count }));
}

/** The first range of `ranges` holding at least {@link ROOTLESS_RANGE_SIZE} ids, if any. */
export function usableRange(ranges: SubordinateRange[]): SubordinateRange | undefined {
  return ranges.find((r) => r.count >= ROOTLESS_RANGE_SIZE);
}

/**
 * The lowest start ≥ `minimum` of a block of `count` ids overlapping none of `taken`.
 * @param taken ranges already in use (every line of both files, and the root sandbox's own range).
 */
export function freeRange(taken: SubordinateRange[], count: number, minimum = 100000): SubordinateRange {
  const sorted = [...taken].sort((a, b) => a.start - b.start);
  let start = minimum;
  for (const r of sorted) {
    if (r.start + r.count <= start) continue;
    if (r.start >= start + count) break;
    start = r.start + r.count;
  }
  return { start, count };
}

/** `[major, minor]` of the running kernel (from `/proc/sys/kernel/osrelease`). */
export function kernelVersion(): [number, number] {
  const release = readFileSync('/proc/sys/kernel/osrelease', 'utf8');
  const m = /^(\d+)\.(\d+)/.exec(release);
  return m ? [Number(m[1]), Number(m[2])] : [0, 0];
}

/** True when the running kernel is at least `major.minor`. */
export function kernelAtLeast(major: number, minor: number): boolean {
  const [a, b] = kernelVersion();
  return a > major || (a === major && b >= minor);
}

/** Reads a number from a `/proc/sys` file, or undefined when absent. */
export function readSysctl(path: string): number | undefined {
  try {
    const n = Number(readFileSync(path, 'utf8').trim());
    return Number.isFinite(n) ? n : undefined;
  } catch {
    return undefined;
  }
}

/** The lowest TCP port an ordinary user may bind (`net.ipv4.ip_unprivileged_port_start`, default 1024). */
export function unprivilegedPortStart(): number {
  return readSysctl('/proc/sys/net/ipv4/ip_unprivileged_port_start') ?? 1024;
}

/** The cgroup layout: `v2` (unified only), `hybrid` (v1 controllers and a cgroup2 at `unified`), `v1`. */
export type CgroupLayout = 'v2' | 'hybrid' | 'v1';

/** Mount points of the cgroup file systems: v1 controller name → mount point, and the cgroup2 mount. */
export interface CgroupMounts {
  layout: CgroupLayout;
  /** v1 controller (`cpu`, `memory`, `name=systemd`, …) → mount point. Empty on v2 hosts. */
  v1: Map<string, string>;
  /** Mount point of the cgroup2 hierarchy, if mounted. */
  unified?: string;
}

/** Reads the cgroup mounts of this process's mount namespace (`/proc/self/mountinfo`). */
export function cgroupMounts(): CgroupMounts {
  const v1 = new Map<string, string>();
  let unified: string | undefined;
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const mountPoint = left.split(' ')[4]!;
    const [fsType, , superOptions = ''] = right.split(' ');
    if (fsType === 'cgroup2') unified ??= mountPoint;
    if (fsType !== 'cgroup') continue;
    for (const option of superOptions.split(',')) {
      if (['rw', 'ro', 'relatime', 'noatime', 'nosuid', 'nodev', 'noexec'].includes(option)) continue;
      if (!v1.has(option)) v1.set(option, mountPoint);
    }
  }
  const layout: CgroupLayout = v1.size === 0 ? 'v2' : unified ? 'hybrid' : 'v1';
  return { layout, v1, ...(unified ? { unified } : {}) };
}

/** True when PID 1 is systemd. */
export function systemdIsInit(): boolean {
  try {
    return readFileSync('/proc/1/comm', 'utf8').trim() === 'systemd';
  } catch {
    return false;
  }
}

/** The cgroup subtree a rootless runtime may create box cgroups under, per controller. */
export interface CgroupDelegation {
  layout: CgroupLayout;
  /** Cgroup path of the subtree (`/seed-sandbox-users/<user>`, or the user's systemd service). */
  path: string;
  /** Controllers ({@link delegatedControllers}) whose subtree exists and is writable by the user. */
  controllers: string[];
  /** Controllers that are not delegated. */
  missing: string[];
  /** Host directory of each delegated controller's subtree (v1: one per controller; v2: one). */
  dirs: Map<string, string>;
}

function writableDir(path: string): boolean {
  try {
    if (!statSync(path).isDirectory()) return false;
    accessSync(path, constants.W_OK | constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function ownedBy(path: string, uid: number): boolean {
  try {
    return statSync(path).uid === uid;
  } catch {
    return false;
  }
}

/** The user's own cgroup2 path (`0::<path>` of `/proc/self/cgroup`). */
function ownUnifiedPath(): string {
  const line = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('0::'));
  return line ? line.slice(3) : '/';
}

/**
 * The cgroup subtree delegated to `user` (see the module comment), checked for the user's write
 * access when `user` is this process's account, else for ownership.
 */
export function cgroupDelegation(
  user: Pick<HostUser, 'name' | 'uid'>,
  mounts = cgroupMounts(),
): CgroupDelegation {
  const mine = process.getuid?.() === user.uid;
  const usable = (dir: string) => (mine ? writableDir(dir) : ownedBy(dir, user.uid));
  const dirs = new Map<string, string>();
  let path = `/${USER_CGROUP_PARENT}/${user.name}`;
  if (mounts.layout === 'v2') {
    const root = mounts.unified ?? CGROUP_ROOT;
    const candidates = [path];
    // systemd user@.service delegation: the user's service subtree holds this process.
    if (mine && /\/user@\d+\.service(\/|$)/.test(ownUnifiedPath())) {
      candidates.unshift(ownUnifiedPath().replace(/(\/user@\d+\.service).*$/, '$1'));
    }
    for (const candidate of candidates) {
      const dir = join(root, candidate);
      if (!usable(dir)) continue;
      let enabled: string[] = [];
      try {
        enabled = readFileSync(join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
      } catch {}
      path = candidate;
      for (const c of LIMIT_CONTROLLERS) if (enabled.includes(c)) dirs.set(c, dir);
      break;
    }
  } else {
    for (const c of V1_DELEGATED_CONTROLLERS) {
      const mount = mounts.v1.get(c);
      if (mount && usable(join(mount, path))) dirs.set(c, join(mount, path));
    }
  }
  const wanted = delegatedControllers(mounts.layout);
  return {
    layout: mounts.layout,
    path,
    controllers: wanted.filter((c) => dirs.has(c)),
    missing: wanted.filter((c) => !dirs.has(c)),
    dirs,
  };
}
