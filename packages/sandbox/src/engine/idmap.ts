/**
 * User namespaces of container-tier boxes: the host id range box ids map to, the OCI mappings, and
 * idmapped mounts of image layers and volumes (mount_setattr(2) `MOUNT_ATTR_IDMAP`).
 *
 * Every box maps its uids and gids `0..size-1` to the host range `hostUid..hostUid+size-1` (and the
 * same for gids), reserved for the sandbox as the `seed-sandbox` entry of `/etc/subuid` and
 * `/etc/subgid` (`ensureSandboxIdRange`; default `100000:65536`). All boxes share that one range, as
 * Docker's `userns-remap` does: managed volumes can be shared between boxes without per-box
 * idmaps, and the boundary this adds is between a box and the host (box root is host uid 100000,
 * owner of nothing on the host), not between boxes (namespaces, cgroups and the seccomp profile keep
 * boxes apart as before).
 *
 * Image layers are shared, read-only and owned by host ids as unpacked (root is host 0). They are
 * not copied or chowned: `idmap-mount.pl` (written by `installIdmapHelper`, run by the box
 * supervisor) makes a detached idmapped clone of each layer (open_tree(2) + mount_setattr(2) with a
 * user namespace holding the box mapping), in which on-disk uid `k` reads as host uid `hostUid + k`,
 * i.e. box uid `k`, and mounts the overlay root over those clones (`lowerdir=/proc/self/fd/<n>:…`;
 * overlayfs keeps private references, so the clones leave nothing in the mount table). Host
 * directories bound into a box get the same idmap, so host uid `k` is box uid `k` there. The helper is
 * perl (perl-base is Essential in Debian) calling the system calls through perl's builtin `syscall`:
 * no compiled addon, no util-linux ≥ 2.39 (Debian 12's `mount` ignores `X-mount.idmap`).
 * The box supervisor runs the helper once per start, and it mounts the box disk too (`disk`: a loop
 * device and the mount by system calls, no mount(8)) and makes the layer directories and /etc files
 * on it (`mkdir`, `file`) before the overlay.
 * Measured on this host (kernel 6.18): one idmapped layer clone 0.03 ms; the whole helper (user
 * namespace, layers, overlay, binds) runs in under 10 ms (ENGINE.md "User namespaces").
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { DISK_MOUNT_ATTEMPTS } from './disk.ts';

/** A box's id mapping: box uid/gid `0..size-1` are host `hostUid..`/`hostGid..` + the same offset. */
export interface IdMapping {
  /** Host uid of box uid 0. */
  hostUid: number;
  /** Host gid of box gid 0. */
  hostGid: number;
  /** Number of ids mapped (box ids `0..size-1`). */
  size: number;
}

/** Name of the sandbox's entry in `/etc/subuid` and `/etc/subgid`. */
export const SUBID_NAME = 'seed-sandbox';
/** Lowest host id the sandbox range may start at when it is added (shadow-utils' own first id). */
export const SUBID_FIRST = 100_000;
/** Ids per box: the 16-bit id space images use (`nobody` is 65534). */
export const SUBID_SIZE = 65_536;
/** The uid/gid an unmapped id shows as inside a user namespace (`/proc/sys/kernel/overflowuid`). */
export const OVERFLOW_ID = 65_534;

/** One line of `/etc/subuid` or `/etc/subgid`. */
export interface SubidEntry {
  name: string;
  start: number;
  count: number;
}

/** Parses `/etc/subuid`-format text (`name:start:count` lines; others are skipped). */
export function parseSubid(text: string): SubidEntry[] {
  const out: SubidEntry[] = [];
  for (const line of text.split('\n')) {
    const m = /^([^:#\s]+):(\d+):(\d+)\s*$/.exec(line);
    if (m) out.push({ name: m[1] as string, start: Number(m[2]), count: Number(m[3]) });
  }
  return out;
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/** First multiple of `SUBID_SIZE` at or above `SUBID_FIRST` whose range overlaps no entry. */
function freeBase(entries: SubidEntry[]): number {
  let base = SUBID_FIRST;
  for (;;) {
    const end = base + SUBID_SIZE;
    const clash = entries.find((e) => e.start < end && base < e.start + e.count);
    if (!clash) return base;
    base = Math.ceil((clash.start + clash.count) / SUBID_SIZE) * SUBID_SIZE;
  }
}

/** Files `ensureSandboxIdRange` reads and extends (tests point them elsewhere). */
export interface SubidFiles {
  subuid: string;
  subgid: string;
}

/**
 * The sandbox's host id range: the first `seed-sandbox` entry of `/etc/subuid` and `/etc/subgid`
 * with at least `SUBID_SIZE` ids. When one is missing and `add` is true (the engine runs as root),
 * a free range is appended (`seed-sandbox:<base>:65536`, base 100000 or else the next multiple of 65536
 * that overlaps no other entry, the same base in both files when possible). Idempotent; two
 * processes adding at once both use the first entry in the file afterwards.
 * @throws BoxError when there is no entry and `add` is false, or the files cannot be written.
 */
export function ensureSandboxIdRange(
  add = process.getuid?.() === 0,
  files: SubidFiles = { subuid: '/etc/subuid', subgid: '/etc/subgid' },
): IdMapping {
  const pick = (path: string): SubidEntry | undefined =>
    parseSubid(readText(path)).find((e) => e.name === SUBID_NAME && e.count >= SUBID_SIZE);
  let uid = pick(files.subuid);
  let gid = pick(files.subgid);
  if ((!uid || !gid) && add) {
    const all = [...parseSubid(readText(files.subuid)), ...parseSubid(readText(files.subgid))];
    const base = freeBase(all);
    try {
      for (const [path, have] of [
        [files.subuid, uid],
        [files.subgid, gid],
      ] as const) {
        if (have) continue;
        const text = readText(path);
        const sep = text === '' || text.endsWith('\n') ? '' : '\n';
        appendFileSync(path, `${sep}${SUBID_NAME}:${base}:${SUBID_SIZE}\n`, { mode: 0o644 });
      }
    } catch (err) {
      throw new BoxError(`userNamespace: cannot add the ${SUBID_NAME} range: ${(err as Error).message}`, {
        code: 'internal',
      });
    }
    uid = pick(files.subuid);
    gid = pick(files.subgid);
  }
  if (!uid || !gid) {
    throw new BoxError(
      `userNamespace: no '${SUBID_NAME}' entry of ${SUBID_SIZE} ids in ${files.subuid} and ${files.subgid} ` +
        `(add '${SUBID_NAME}:${SUBID_FIRST}:${SUBID_SIZE}' to both, or run the engine as root once)`,
      { code: 'unsupported' },
    );
  }
  return { hostUid: uid.start, hostGid: gid.start, size: SUBID_SIZE };
}

/** One OCI `linux.uidMappings`/`gidMappings` entry (runtime-spec `LinuxIDMapping`). */
export interface OciIdMapping {
  containerID: number;
  hostID: number;
  size: number;
}

/** The OCI `linux.uidMappings` and `linux.gidMappings` of a mapping (runtime-spec 1.0.2 "User namespace mappings"). */
export function ociIdMappings(m: IdMapping): { uidMappings: OciIdMapping[]; gidMappings: OciIdMapping[] } {
  return {
    uidMappings: [{ containerID: 0, hostID: m.hostUid, size: m.size }],
    gidMappings: [{ containerID: 0, hostID: m.hostGid, size: m.size }],
  };
}

/** A process's id map (`/proc/<pid>/uid_map` or `gid_map`): `[inside, outside, count]` ranges. */
export type ProcIdMap = [inside: number, outside: number, count: number][];

/**
 * Reads `/proc/<pid>/uid_map` (`kind` `uid`) or `gid_map`. A process outside any user namespace has
 * the identity map `0 0 4294967295`.
 * @throws the fs error when the process is gone.
 */
export function readProcIdMap(pid: number, kind: 'uid' | 'gid'): ProcIdMap {
  return readFileSync(`/proc/${pid}/${kind}_map`, 'utf8')
    .split('\n')
    .map((l) => l.trim().split(/\s+/).map(Number))
    .filter((f) => f.length === 3 && f.every(Number.isFinite)) as ProcIdMap;
}

/** The host id of namespace id `inside` under `map`, or undefined when it is not mapped. */
export function hostIdOf(map: ProcIdMap, inside: number): number | undefined {
  for (const [i, o, n] of map) if (inside >= i && inside < i + n) return o + (inside - i);
  return undefined;
}

/**
 * The namespace id of host id `outside` under `map`, or undefined when it is not mapped (the kernel
 * then shows it as `OVERFLOW_ID`, 65534, and grants box root no capability over such a file).
 */
export function nsIdOf(map: ProcIdMap, outside: number): number | undefined {
  for (const [i, o, n] of map) if (outside >= o && outside < o + n) return i + (outside - o);
  return undefined;
}

/**
 * System call numbers this helper and the gVisor tier's programs (gvisor-launcher.ts, gvisor-userns.ts) need, by Node
 * `process.arch` (x86_64 and arm64 tables).
 */
export const SYSCALLS: Record<string, { unshare: number; mount: number; umount2: number; setns: number }> = {
  x64: { unshare: 272, mount: 165, umount2: 166, setns: 308 },
  arm64: { unshare: 97, mount: 40, umount2: 39, setns: 268 },
};

/**
 * Source of `idmap-mount.pl` for this machine's architecture (open_tree 428, move_mount 429 and
 * mount_setattr 442 are the same on every architecture). Usage:
 * `perl idmap-mount.pl <hostUid> <hostGid> <size> <op>…` with ops run in order:
 * - `own <path>`: chown `path` (not following a symlink) to the mapped root when host root owns it;
 * - `overlay <lowerdirs top first, ':'-separated> <upper> <work> <target>`: mounts an overlay at
 *   `target` over idmapped read-only clones of the lower dirs;
 * - `bind <source> <target> <1|0>`: clones `source` recursively (a `/proc/self/fd/<n>` path binds that
 *   descriptor's object), idmapped when the flag is 1, and attaches it at `target`;
 * - `disk <image> <dir> <fstype> <data or ->`: mounts the disk image at `dir` (`nosuid,nodev,noatime`
 *   and the file system's `data`, e.g. `noinit_itable`) through a loop device: the one already backing
 *   that file (device and inode) when there is one, as mount(8) reuses it, else a free one attached with
 *   `LOOP_CONFIGURE` and autoclear (it detaches when the last mount goes). A refused mount is tried again
 *   after 100, 200, 300, 400 ms (disk.ts `DISK_MOUNT_ATTEMPTS`);
 * - `mkdir <path>`: creates the directory (mode 0755) unless it exists;
 * - `file <path> <variable>`: creates `path` (never through a symlink: `O_CREAT|O_EXCL`) holding the
 *   value of the environment variable, unless `path` exists.
 * Exits 0, or with `idmap-mount: <what failed>: <errno text>` on stderr: 2 when a `disk`, `mkdir` or
 * `file` operation failed, 1 otherwise.
 * @throws BoxError on an architecture without a syscall table here.
 */
export function idmapMountScript(arch: string = process.arch): string {
  const nr = SYSCALLS[arch];
  if (!nr)
    throw new BoxError(`userNamespace: idmapped mounts are not supported on ${arch} (x64, arm64)`, {
      code: 'unsupported',
    });
  return `#!/usr/bin/perl
# seed-sandbox idmapped mounts (generated; see src/engine/idmap.ts)
use strict;
my ($SYS_unshare, $SYS_mount, $SYS_open_tree, $SYS_move_mount, $SYS_mount_setattr) = (${nr.unshare}, ${nr.mount}, 428, 429, 442);
my ($CLONE_NEWUSER, $OPEN_TREE_CLONE, $O_CLOEXEC, $AT_RECURSIVE, $AT_EMPTY_PATH, $AT_FDCWD) = (0x10000000, 1, 0x80000, 0x8000, 0x1000, -100);
my ($MOUNT_ATTR_RDONLY, $MOUNT_ATTR_IDMAP, $MOVE_MOUNT_F_EMPTY_PATH) = (1, 0x100000, 4);
my ($LOOP_CONFIGURE, $LOOP_GET_STATUS64, $LOOP_CTL_GET_FREE, $LO_FLAGS_AUTOCLEAR) = (0x4C0A, 0x4C05, 0x4C82, 4);
my ($MS_NOSUID_NODEV_NOATIME, $O_WRONLY_CREAT_EXCL) = (2 | 4 | 1024, 1 | 0100 | 0200);
my ($ENOENT, $EBUSY, $EEXIST) = (2, 16, 17);
my ($uid, $gid, $size, @ops) = @ARGV;
my $status = 1;
sub fail { print STDERR "idmap-mount: $_[0]: $!\\n"; exit $status; }
my $userns;
# A user namespace holding the mapping: a child unshares, this process writes its maps and keeps
# a descriptor of the namespace (the child then exits; the descriptor keeps the namespace). The
# child's exit is not waited for: it is reaped once this process has exited.
sub userns {
  return $userns if defined $userns;
  pipe(my $r1, my $w1) or fail('pipe');
  pipe(my $r2, my $w2) or fail('pipe');
  my $pid = fork() // fail('fork');
  if ($pid == 0) {
    close $r1; close $w2;
    syswrite($w1, syscall($SYS_unshare, $CLONE_NEWUSER) == 0 ? 'y' : 'n');
    sysread($r2, my $x, 1);
    exit 0;
  }
  close $w1; close $r2;
  sysread($r1, my $ok, 1);
  $ok eq 'y' or fail('unshare(CLONE_NEWUSER)');
  for (['uid_map', $uid], ['gid_map', $gid]) {
    open(my $fh, '>', "/proc/$pid/$_->[0]") or fail("opening $_->[0]");
    syswrite($fh, "0 $_->[1] $size\\n") or fail("writing $_->[0]");
    close $fh;
  }
  open($userns, '<', "/proc/$pid/ns/user") or fail('opening the user namespace');
  close $w2;
  return $userns;
}
sub clone_tree {
  my ($path, $flags) = @_;
  my $fd = syscall($SYS_open_tree, $AT_FDCWD, $path, $OPEN_TREE_CLONE | $O_CLOEXEC | $flags);
  fail("open_tree $path") if $fd < 0;
  return $fd;
}
sub setattr {
  my ($fd, $set, $flags, $what) = @_;
  my $attr = pack('QQQQ', $set, 0, 0, fileno(userns()));
  my $empty = '';
  syscall($SYS_mount_setattr, $fd, $empty, $AT_EMPTY_PATH | $flags, $attr, length($attr)) == 0 or fail("idmapping $what");
}
# The bound loop device backing the file of device $dev and inode $ino at offset 0 and its open
# descriptor, or an empty list. Bound loop devices are the ones /proc/partitions lists (an unbound one
# has no size). The device is opened before its status is read and kept open by the caller until the
# mount holds it: an autoclear device is released at its last close, so one found bound cannot be torn
# down in between (one already being torn down answers the status request with ENXIO and is skipped).
sub bound_loop {
  my ($dev, $ino) = @_;
  open(my $parts, '<', '/proc/partitions') or return undef;
  while (my $line = <$parts>) {
    next unless $line =~ /\\s(loop\\d+)$/;
    my $n = $1;
    sysopen(my $lo, "/dev/$n", 0) or next;
    my $info = "\\0" x 232;
    ioctl($lo, $LOOP_GET_STATUS64, $info) or next;
    my ($d2, $i2, undef, $offset) = unpack('QQQQ', $info);
    return ("/dev/$n", $lo) if $d2 == $dev && $i2 == $ino && $offset == 0;
  }
  return ();
}
# Attaches the image to a loop device (see the 'disk' operation); returns its path and the open
# device (kept open until the mount holds it).
sub attach {
  my ($img) = @_;
  sysopen(my $f, $img, 2) or fail("opening $img");
  my @st = stat($f) or fail("stat $img");
  my @bound = bound_loop($st[0], $st[1]);
  return @bound if @bound;
  sysopen(my $ctl, '/dev/loop-control', 2) or fail('opening /dev/loop-control');
  for (1 .. 100) {
    my $n = ioctl($ctl, $LOOP_CTL_GET_FREE, 0) // fail('finding a free loop device');
    $n = 0 if $n eq '0 but true';
    my $lo;
    if (!sysopen($lo, "/dev/loop$n", 2)) {
      fail("opening /dev/loop$n") unless $! == $ENOENT;
      select(undef, undef, undef, 0.01);
      next;
    }
    my $config = pack('LLQQQQQLLLLa64a64a32QQ', fileno($f), 0, 0, 0, 0, 0, 0, 0, 0, 0, $LO_FLAGS_AUTOCLEAR,
      substr($img, 0, 63), '', '', 0, 0) . ("\\0" x 64);
    return ("/dev/loop$n", $lo) if ioctl($lo, $LOOP_CONFIGURE, $config);
    # Another process took that device meanwhile: ask for the next free one.
    fail("attaching $img to /dev/loop$n") unless $! == $EBUSY;
  }
  fail("attaching $img: no free loop device");
}
my @keep;
while (@ops) {
  my $op = shift @ops;
  $status = $op eq 'disk' || $op eq 'mkdir' || $op eq 'file' ? 2 : 1;
  if ($op eq 'disk') {
    my ($img, $dir, $type, $data) = splice(@ops, 0, 4);
    my $opts = $data eq '-' ? 0 : $data;
    # Each try attaches anew: a refused mount closes its device (an autoclear device then detaches).
    for my $try (1 .. ${DISK_MOUNT_ATTEMPTS}) {
      my ($dev, $lo) = attach($img);
      last if syscall($SYS_mount, $dev, $dir, $type, $MS_NOSUID_NODEV_NOATIME, $opts) == 0;
      fail("mounting $img at $dir") if $try == ${DISK_MOUNT_ATTEMPTS};
      close($lo);
      select(undef, undef, undef, 0.1 * $try);
    }
  } elsif ($op eq 'mkdir') {
    my $path = shift @ops;
    mkdir($path, 0755) or $! == $EEXIST or fail("mkdir $path");
  } elsif ($op eq 'file') {
    my ($path, $var) = splice(@ops, 0, 2);
    my $fh;
    if (!sysopen($fh, $path, $O_WRONLY_CREAT_EXCL, 0644)) {
      next if $! == $EEXIST;
      fail("creating $path");
    }
    my $text = $ENV{$var} // '';
    syswrite($fh, $text) == length($text) or fail("writing $path");
    close $fh or fail("writing $path");
  } elsif ($op eq 'own') {
    my $path = shift @ops;
    my @st = lstat($path) or fail("lstat $path");
    next if -l _ || $st[4] != 0;
    chown($uid, $gid, $path) or fail("chown $path");
  } elsif ($op eq 'overlay') {
    my ($lower, $upper, $work, $target) = splice(@ops, 0, 4);
    my @fds;
    for my $dir (split /:/, $lower) {
      my $fd = clone_tree($dir, 0);
      setattr($fd, $MOUNT_ATTR_IDMAP | $MOUNT_ATTR_RDONLY, 0, $dir);
      push @fds, $fd;
    }
    my $opts = 'lowerdir=' . join(':', map { "/proc/self/fd/$_" } @fds) . ",upperdir=$upper,workdir=$work";
    my ($src, $type) = ('overlay', 'overlay');
    syscall($SYS_mount, $src, $target, $type, 0, $opts) == 0 or fail("mounting the overlay at $target");
    push @keep, @fds;
  } elsif ($op eq 'bind') {
    my ($source, $target, $idmap) = splice(@ops, 0, 3);
    my $fd = clone_tree($source, $AT_RECURSIVE);
    setattr($fd, $MOUNT_ATTR_IDMAP, $AT_RECURSIVE, $source) if $idmap;
    my $empty = '';
    syscall($SYS_move_mount, $fd, $empty, $AT_FDCWD, $target, $MOVE_MOUNT_F_EMPTY_PATH) == 0 or fail("attaching $source at $target");
  } else {
    $! = 0;
    fail("unknown operation '$op'");
  }
}
exit 0;
`;
}

/** Where to find the installed helper: the `perl` binary and the script's path. */
export interface IdmapHelper {
  perl: string;
  script: string;
}

/**
 * Writes `idmap-mount.pl` into `binDir` (atomically, only when its content changed).
 * @param perl the host's perl binary (perl-base).
 * @returns the helper to pass to `idmapBind` or to run from a supervisor script.
 * @throws BoxError on an unsupported architecture; the fs error when `binDir` is not writable.
 */
export function installIdmapHelper(binDir: string, perl: string): IdmapHelper {
  const script = join(binDir, 'idmap-mount.pl');
  const source = idmapMountScript();
  if (readText(script) !== source) {
    const tmp = `${script}.${process.pid}.${randomBytes(4).toString('hex')}`;
    writeFileSync(tmp, source, { mode: 0o755 });
    chmodSync(tmp, 0o755);
    renameSync(tmp, script);
  }
  return { perl, script };
}

/**
 * Makes an idmapped bind mount of `source` at `target` (both host paths; `target` must exist and be
 * of the same type), in which host id `k` of `source` reads as host id `mapping.hostUid + k` (gids
 * alike), i.e. as box id `k` inside a box of that mapping. Runs the installed helper
 * (`installIdmapHelper`'s path) with `perl`; needs root.
 * @throws BoxError with the helper's message when the kernel or file system refuses.
 */
export function idmapBind(
  helper: IdmapHelper,
  mapping: IdMapping,
  source: string,
  target: string,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      helper.perl,
      [helper.script, ...idmapHelperArgs(mapping), 'bind', source, target, '1'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.on('error', (e) =>
      reject(new BoxError(`idmap: cannot run perl: ${e.message}`, { code: 'unsupported' })),
    );
    child.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new BoxError(`idmap: ${err.trim() || `exit ${code}`}`, { code: 'internal' })),
    );
  });
}

/** The helper's leading arguments for a mapping: `<hostUid> <hostGid> <size>`. */
export function idmapHelperArgs(m: IdMapping): string[] {
  return [String(m.hostUid), String(m.hostGid), String(m.size)];
}
