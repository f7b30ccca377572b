/**
 * Host-untouched assertions shared by the escape suite (`test/escape/*.test.ts`).
 *
 *   const marker = makeHostMarker();                     // host files a hostile box aims at
 *   const before = snapshotHost({ paths: [marker.dir] });
 *   … run the attack …
 *   assertHostUntouched(before, { allowMountsUnder: [tmp] });
 *   for (const p of boxProcessHostUids(initPid)) assert.notEqual(p.uids[1], 0);
 *
 * A snapshot holds: the listing, modes, owners, symlink targets and SHA-256 of every file under the
 * given host paths (plus a few host files a box would aim at: `/etc/passwd`, `/etc/hosts`,
 * `/etc/resolv.conf`, the CA bundle); the host mount table (`/proc/self/mountinfo` mount points);
 * the listening TCP/UDP sockets of the host network namespace (`/proc/net/{tcp,tcp6,udp,udp6}`);
 * and the pid namespaces that have processes. Attack targets in tests should be marker files, never
 * real host files, so that a regression fails a test instead of damaging the machine.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Host files every snapshot watches in addition to the caller's paths (missing ones are recorded as such). */
export const WATCHED_HOST_FILES: readonly string[] = [
  '/etc/passwd',
  '/etc/group',
  '/etc/shadow',
  '/etc/hosts',
  '/etc/hostname',
  '/etc/resolv.conf',
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/ssl/certs',
];

/** One host file as recorded: `type mode uid:gid size sha256-or-link-target`, or `missing`. */
type FileFacts = string;

/** What `snapshotHost` records; compare with `assertHostUntouched`. */
export interface HostSnapshot {
  /** Host path → facts, for every file under the watched paths. */
  files: Map<string, FileFacts>;
  /** Mount points of the host mount table. */
  mounts: Set<string>;
  /** Listening sockets of the host network namespace: `proto address:port`. */
  listeners: Set<string>;
  /** Pid namespace ids (`pid:[…]`) with at least one process. */
  pidNamespaces: Set<string>;
}

/** A host directory of marker files a hostile box or image aims at instead of real host files. */
export interface HostMarker {
  /** Absolute host path of the marker directory (contains `etc/passwd`, `etc/ssl/certs/`, `secret`). */
  dir: string;
  /** Content of `<dir>/secret`: a box must never read it. */
  secret: string;
}

/**
 * Creates a marker directory on the host, shaped like an `/etc` (`etc/passwd` with a user
 * `markeruser` of uid 4242, `etc/ssl/certs/ca-certificates.crt`, `etc/resolv.conf`) plus `secret`.
 * @param parent directory to create it in (default the OS temp dir).
 */
export function makeHostMarker(parent = tmpdir()): HostMarker {
  const dir = mkdtempSync(join(parent, 'seed-escape-marker-'));
  const secret = `host-secret-${process.pid}-${Date.now()}`;
  mkdirSync(join(dir, 'etc/ssl/certs'), { recursive: true });
  writeFileSync(join(dir, 'secret'), secret, { mode: 0o600 });
  writeFileSync(join(dir, 'etc/passwd'), 'root:x:0:0::/root:/bin/sh\nmarkeruser:x:4242:4242::/:/bin/sh\n');
  writeFileSync(join(dir, 'etc/group'), 'root:x:0:\nmarkergroup:x:4242:\n');
  writeFileSync(join(dir, 'etc/resolv.conf'), 'nameserver 192.0.2.53\n');
  writeFileSync(join(dir, 'etc/ssl/certs/ca-certificates.crt'), '-----MARKER BUNDLE-----\n');
  return { dir, secret };
}

function facts(path: string): FileFacts {
  try {
    const st = lstatSync(path);
    const head = `${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.size}`;
    if (st.isSymbolicLink()) return `link ${head} -> ${readlinkSync(path)}`;
    if (st.isFile()) return `file ${head} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`;
    if (st.isDirectory()) return `dir ${head}`;
    return `other ${head} ${st.rdev}`;
  } catch {
    return 'missing';
  }
}

function walk(path: string, out: Map<string, FileFacts>): void {
  const f = facts(path);
  out.set(path, f);
  if (!f.startsWith('dir ')) return;
  let names: string[] = [];
  try {
    names = readdirSync(path);
  } catch {}
  for (const name of names) walk(join(path, name), out);
}

/**
 * True for a mount the engine makes for a box of any runtime (other test files run boxes at the same
 * time, and a box being created may not have its bundle yet): a box's root, disk or checked host binds
 * directly in an engine box directory (`<home>/boxes/<id>/rootfs`, `…/disk`, `…/binds/<i>`), or a box's
 * network namespace (`/run/netns/sbx-<id>`, or `<home>/boxes/<id>/bundle/netns` while a gVisor box
 * starts), or a disk template being formatted (`<stateRoot>/disks/mnt-XXXXXX`). A box that escaped
 * would mount where it chose, not at these names.
 */
function isEngineMount(mountPoint: string): boolean {
  return (
    /^\/run\/netns\/sbx-[0-9A-Za-z]+$/.test(mountPoint) ||
    // The gVisor tier's user and network namespace pair, made once per boot by the first gVisor box
    // (src/engine/gvisor-userns.ts) and kept for the boot: new on a fresh host, never box-controlled.
    /^\/run\/seed-sandbox-gvisor\/(userns|netns)$/.test(mountPoint) ||
    /\/boxes\/[0-9A-Za-z_-]+\/(rootfs|disk|binds\/\d+|bundle\/netns)$/.test(mountPoint) ||
    // A btrfs disk template being laid out (src/engine/disk.ts formatBtrfs), mounted for a moment at a
    // fresh `<stateRoot>/disks/mnt-XXXXXX` while another test file's engine makes its first disk.
    /\/disks\/mnt-[0-9A-Za-z]{6}$/.test(mountPoint)
  );
}

function mountPoints(): Set<string> {
  const out = new Set<string>();
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const mp = line.split(' ')[4];
    if (mp) out.add(mp.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))));
  }
  return out;
}

/** Listening sockets of the host network namespace (TCP state 0A; UDP sockets bound, state 07). */
function listeners(): Set<string> {
  const out = new Set<string>();
  for (const proto of ['tcp', 'tcp6', 'udp', 'udp6']) {
    let text = '';
    try {
      text = readFileSync(`/proc/net/${proto}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4) continue;
      if ((proto.startsWith('tcp') && f[3] === '0A') || (proto.startsWith('udp') && f[3] === '07')) {
        out.add(`${proto} ${f[1]}`);
      }
    }
  }
  return out;
}

function pids(): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number);
}

function pidNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Pid namespaces whose init (the process that is pid 1 in it) is alive, not a zombie. */
function namespacesWithLiveInit(): Set<string> {
  const out = new Set<string>();
  for (const pid of pids()) {
    let status: string;
    try {
      status = readFileSync(`/proc/${pid}/status`, 'utf8');
    } catch {
      continue;
    }
    const nspid = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/);
    if (nspid?.at(-1) !== '1' || /^State:\s+[ZX]/m.test(status)) continue;
    const ns = pidNamespace(pid);
    if (ns) out.add(ns);
  }
  return out;
}

function pidNamespaces(): Set<string> {
  const out = new Set<string>();
  for (const pid of pids()) {
    const ns = pidNamespace(pid);
    if (ns) out.add(ns);
  }
  return out;
}

/**
 * Records the host state an escape would change.
 * @param options.paths host files or directories to record recursively (e.g. a `HostMarker.dir`);
 *   `WATCHED_HOST_FILES` are always recorded (directories among them without recursion).
 */
export function snapshotHost(options: { paths?: string[] } = {}): HostSnapshot {
  const files = new Map<string, FileFacts>();
  for (const p of WATCHED_HOST_FILES) files.set(p, facts(p));
  for (const p of options.paths ?? []) walk(p, files);
  return { files, mounts: mountPoints(), listeners: listeners(), pidNamespaces: pidNamespaces() };
}

/** Options of `assertHostUntouched`. */
export interface UntouchedOptions {
  /** Host directories where new mounts are expected (the test's box directories). */
  allowMountsUnder?: string[];
  /** Host listeners the test itself opened on purpose (`proto hexaddr:hexport` as in /proc/net). */
  allowListeners?: string[];
  /**
   * Init pids of boxes that are still meant to run: their pid namespaces may remain. Every other
   * pid namespace created since the snapshot must be gone (no box process left behind).
   */
  runningInits?: number[];
}

/**
 * Asserts that the host did not change since `before`: same files (content, mode, owner, symlink
 * targets, nothing added or removed under the watched paths), no new mount outside
 * `allowMountsUnder` (mounts the engine makes for boxes are expected), no new listener of the host network
 * namespace owned by a process of another pid namespace (a box), and no box process (one in an engine cgroup
 * `/seed-sandbox/…`) left in a pid namespace created since the snapshot whose init is gone (after up to
 * `LEFT_GRACE_MS` for it to exit), except those of `runningInits`.
 * @throws AssertionError naming what changed.
 */
export function assertHostUntouched(before: HostSnapshot, options: UntouchedOptions = {}): void {
  const now = new Map<string, FileFacts>();
  for (const p of WATCHED_HOST_FILES) now.set(p, facts(p));
  const roots = [...before.files.keys()].filter((p) => !WATCHED_HOST_FILES.includes(p));
  for (const p of roots.filter((p) => !roots.some((q) => q !== p && p.startsWith(`${q}/`)))) walk(p, now);
  const changed: string[] = [];
  for (const [path, was] of before.files)
    if (now.get(path) !== was) changed.push(`${path}: ${was} → ${now.get(path)}`);
  for (const path of now.keys()) if (!before.files.has(path)) changed.push(`${path}: added`);
  assert.deepEqual(changed, [], 'host files changed');

  const allowed = options.allowMountsUnder ?? [];
  const newMounts = [...mountPoints()].filter(
    (m) =>
      !before.mounts.has(m) && !allowed.some((a) => m === a || m.startsWith(`${a}/`)) && !isEngineMount(m),
  );
  assert.deepEqual(newMounts, [], 'new host mounts outside the allowed directories');

  const hostNs = pidNamespace(process.pid);
  const fresh = [...listeners()].filter(
    (l) => !before.listeners.has(l) && !options.allowListeners?.includes(l),
  );
  if (fresh.length > 0) {
    // Only listeners owned by processes of another pid namespace (a box) count: other test files
    // of this machine open host listeners of their own at any time.
    const inodes = socketOwners();
    const hostile = fresh.filter((l) => {
      const owner = inodes.get(listenerInode(l) ?? '');
      return owner !== undefined && pidNamespace(owner) !== hostNs;
    });
    assert.deepEqual(hostile, [], 'a box process listens on the host network namespace');
  }

  // A box process that outlived its box's init is looked for again for up to `LEFT_GRACE_MS`: a box being
  // removed (this test's, or another test file's at the same time) has its init killed first and its
  // other processes a moment later, seconds on a loaded machine; one that outlives its box stays.
  let left = boxProcessesLeft(before, options.runningInits ?? [], hostNs);
  const until = Date.now() + LEFT_GRACE_MS;
  while (left.length > 0 && Date.now() < until) {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    left = boxProcessesLeft(before, options.runningInits ?? [], hostNs);
  }
  assert.deepEqual(left, [], 'box processes left on the host');
}

/** How long `assertHostUntouched` lets the processes of a box whose init is gone take to exit, ms. */
const LEFT_GRACE_MS = 10_000;

/**
 * Box processes (in an engine cgroup) of pid namespaces made since `before` whose init is gone, as
 * `<pid> <comm> (<namespace>)`; namespaces of `runningInits` and of live inits are left out.
 */
function boxProcessesLeft(
  before: HostSnapshot,
  runningInits: number[],
  hostNs: string | undefined,
): string[] {
  const keep = new Set(runningInits.map(pidNamespace).filter((n) => n !== undefined));
  // A pid namespace whose init still runs is a running box (of this test, or of another test file that
  // runs at the same time); what must not exist is a box process that outlived its box's init.
  for (const ns of namespacesWithLiveInit()) keep.add(ns);
  const left: string[] = [];
  for (const pid of pids()) {
    const ns = pidNamespace(pid);
    if (!ns || before.pidNamespaces.has(ns) || keep.has(ns) || ns === hostNs || !inBoxCgroup(pid)) continue;
    try {
      if (/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))) continue; // exited, awaiting its reaper
    } catch {
      continue; // gone meanwhile
    }
    left.push(`${pid} ${comm(pid)} (${ns})`);
  }
  return left;
}

/** True when `pid` is in a cgroup of the engine (`/seed-sandbox/<id>`): a box process. */
function inBoxCgroup(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes('/seed-sandbox/');
  } catch {
    return false;
  }
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}

function listenerInode(listener: string): string | undefined {
  const [proto, addr] = listener.split(' ');
  try {
    for (const line of readFileSync(`/proc/net/${proto}`, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[1] === addr) return f[9];
    }
  } catch {}
  return undefined;
}

/** Socket inode → a pid holding it (from `/proc/<pid>/fd`). */
function socketOwners(): Map<string, number> {
  const out = new Map<string, number>();
  for (const pid of pids()) {
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m?.[1]) out.set(m[1], pid);
      } catch {}
    }
  }
  return out;
}

/** A process of a box as the host sees it. */
export interface BoxHostProcess {
  /** Host pid. */
  pid: number;
  /** `comm` of the process. */
  comm: string;
  /** Host uids: real, effective, saved, filesystem (the `Uid:` line of `/proc/<pid>/status`). */
  uids: number[];
  /** Host gids, same order (`Gid:`). */
  gids: number[];
}

/**
 * Every process of the box whose init has host pid `initPid` (from `engine.start()`'s `pid` or
 * `(await box.info()).state.pid`): the processes sharing its pid namespace, with their host uids
 * and gids read from `/proc/<pid>/status`. Empty when the init is gone.
 */
export function boxProcessHostUids(initPid: number): BoxHostProcess[] {
  const ns = pidNamespace(initPid);
  if (!ns) return [];
  const out: BoxHostProcess[] = [];
  for (const pid of pids()) {
    if (pidNamespace(pid) !== ns) continue;
    try {
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const ids = (key: string) =>
        (new RegExp(`^${key}:\\s+(.*)$`, 'm').exec(status)?.[1] ?? '').split(/\s+/).map(Number);
      out.push({ pid, comm: comm(pid), uids: ids('Uid'), gids: ids('Gid') });
    } catch {}
  }
  return out;
}
