/**
 * The host user namespace every runsc call of the gVisor tier runs in, so that no process of a
 * gVisor box is host root (SECURITY.md "gVisor tier").
 *
 * One user namespace per host maps ids `0..size-1` to the sandbox's subordinate range (idmap.ts
 * `ensureSandboxIdRange`, default host `100000..165535`), the same mapping as container-tier boxes.
 * It is kept as an nsfs bind mount, `<GVISOR_NS_DIR>/userns`, with a network namespace it owns,
 * `<GVISOR_NS_DIR>/netns`, in which runsc runs (its control sockets are abstract unix sockets of that
 * namespace, and runsc must be able to return to its own network namespace after joining the box's).
 * Every runsc command line is `nsenter --user=<userns> --net=<netns> -- runsc …`: runsc then runs as
 * namespace root, host uid `hostUid`, with capabilities over that namespace only; the gofer it starts
 * is host uid `hostUid`, and the Sentry and its stubs, in the user namespace runsc makes for them
 * (mapping only `nobody`), host uid `hostUid + 65534`.
 *
 * What runsc can no longer do itself as namespace root is done by the engine as host root: the box's
 * root is an overlay over idmapped layer clones (idmap.ts), the box's network namespace is made by a
 * process of the user namespace (so runsc may join it), and the box's cgroup is made, limited and
 * joined by the launcher before runsc runs with `--ignore-cgroups` (gvisor-launcher.ts).
 */
import { spawn } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { CGROUP_PARENT } from './box-bundle.ts';
import { handVolumesToMappedRoot } from './box-files.ts';
import { run, sleep } from './host-process.ts';
import { allowTraversal, findExecutable, mountsUnder } from './host-system.ts';
import type { OpenedHostPath } from './hostpath.ts';
import { type IdMapping, idmapHelperArgs, installIdmapHelper, SYSCALLS } from './idmap.ts';
import type { EngineBoxSpec } from './types.ts';

/** Host directory of the gVisor tier's user and network namespace files (shared by every engine). */
export const GVISOR_NS_DIR = '/run/seed-sandbox-gvisor';

/** The namespace files of `ensureGVisorNamespaces`, absolute. */
export interface GVisorNamespaces {
  /** nsfs bind mount of the user namespace (ids `0..size-1` → the sandbox range). */
  userns: string;
  /** nsfs bind mount of a network namespace owned by `userns`, where runsc itself runs. */
  netns: string;
  mapping: IdMapping;
}

/** How long making one namespace may take, ms. */
const NS_TIMEOUT_MS = 10_000;

/** True when `path` is a mount point (an nsfs bind mount here). */
function mounted(path: string): boolean {
  return mountsUnder(path).includes(path);
}

/**
 * Runs `argv` (which must end in a new namespace of `kind`, then print `ready` and wait on stdin),
 * then binds that namespace onto `target` (`/proc/<pid>/ns/<kind>`), with `setup(pid)` run in between.
 * @throws BoxError when the process, `setup` or the bind fails.
 */
async function holdNamespace(
  argv: string[],
  kind: 'user' | 'net',
  target: string,
  setup: (pid: number) => void = () => {},
): Promise<void> {
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out')), NS_TIMEOUT_MS);
      child.stdout.on('data', (d: Buffer) => {
        if (d.toString().includes('ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.on('error', reject);
      child.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`exited ${code}: ${err.trim()}`));
      });
    });
    const pid = child.pid as number;
    setup(pid);
    if (!existsSync(target)) writeFileSync(target, '', { mode: 0o600 });
    const bind = await run(findExecutable('mount') ?? '/bin/mount', [
      '--bind',
      `/proc/${pid}/ns/${kind}`,
      target,
    ]);
    if (bind.code !== 0) throw new Error(bind.stderr.trim());
  } catch (e) {
    throw new BoxError(
      `isolation: 'gvisor': making the ${kind} namespace ${target} failed: ${(e as Error).message}`,
      { code: 'internal' },
    );
  } finally {
    child.stdin.end();
    child.kill('SIGKILL');
  }
}

/**
 * Makes (once per boot; idempotent) the user namespace of the sandbox range and the network namespace
 * runsc runs in, as nsfs bind mounts under `dir`. Needs host root.
 * @throws BoxError when `unshare`/`nsenter` is missing or a namespace cannot be made.
 */
export async function ensureGVisorNamespaces(
  mapping: IdMapping,
  dir: string = GVISOR_NS_DIR,
): Promise<GVisorNamespaces> {
  const unshare = findExecutable('unshare');
  const nsenter = findExecutable('nsenter');
  if (!unshare || !nsenter)
    throw new BoxError("isolation: 'gvisor' needs unshare and nsenter (util-linux)", { code: 'unsupported' });
  mkdirSync(dir, { recursive: true, mode: 0o711 });
  const ns: GVisorNamespaces = { userns: join(dir, 'userns'), netns: join(dir, 'netns'), mapping };
  const wait = ['/bin/sh', '-c', 'echo ready; read x'];
  if (!mounted(ns.userns)) {
    await holdNamespace([unshare, '--user', '--', ...wait], 'user', ns.userns, (pid) => {
      writeFileSync(`/proc/${pid}/uid_map`, `0 ${mapping.hostUid} ${mapping.size}\n`);
      writeFileSync(`/proc/${pid}/gid_map`, `0 ${mapping.hostGid} ${mapping.size}\n`);
    });
  }
  if (!mounted(ns.netns)) {
    await holdNamespace(
      [nsenter, `--user=${ns.userns}`, '--', unshare, '--net', '--', ...wait],
      'net',
      ns.netns,
    );
  }
  return ns;
}

/** The command-line prefix that runs a program in the namespaces (`nsenter --user=… --net=… --`). */
export function inGVisorNamespaces(ns: GVisorNamespaces): string[] {
  return [findExecutable('nsenter') ?? '/usr/bin/nsenter', `--user=${ns.userns}`, `--net=${ns.netns}`, '--'];
}

/**
 * The system call numbers of `arch` (Node `process.arch`) for the tier's perl programs (idmap.ts
 * `SYSCALLS`).
 * @throws BoxError `unsupported` on an architecture without a table (only x64 and arm64 have one).
 */
export function gvisorSyscalls(arch: string): (typeof SYSCALLS)[string] {
  const nr = SYSCALLS[arch];
  if (!nr)
    throw new BoxError(`isolation: 'gvisor' is not supported on ${arch} (x64, arm64)`, {
      code: 'unsupported',
    });
  return nr;
}

/**
 * Source of the perl program (`perl -e <source> <userns file> <target>`) that makes a box's network
 * namespace in one process: a child joins the gVisor user namespace (setns), unshares a network
 * namespace (owned by that user namespace) and sets `lo` up (SIOCSIFFLAGS); the parent, host root in
 * the host's mount namespace, binds `/proc/<child>/ns/net` onto `target` (an empty file it makes
 * when missing), then lets the child exit. Exits 0, or 1 with `netns: <what failed>: <errno text>`.
 * @throws BoxError `unsupported` on an architecture without a syscall table (`gvisorSyscalls`).
 */
export function ownedNetnsScript(arch: string = process.arch): string {
  const nr = gvisorSyscalls(arch);
  return `use strict;
my ($SYS_setns, $SYS_unshare, $SYS_mount) = (${nr.setns}, ${nr.unshare}, ${nr.mount});
my ($CLONE_NEWUSER, $CLONE_NEWNET, $MS_BIND, $SIOCGIFFLAGS, $SIOCSIFFLAGS, $IFF_UP) = (0x10000000, 0x40000000, 0x1000, 0x8913, 0x8914, 1);
my ($userns, $target) = @ARGV;
sub fail { print STDERR "netns: $_[0]: $!\\n"; exit 1; }
open(my $u, '<', $userns) or fail("opening $userns");
pipe(my $r1, my $w1) or fail('pipe');
pipe(my $r2, my $w2) or fail('pipe');
my $pid = fork() // fail('fork');
if ($pid == 0) {
  close $r1; close $w2;
  my $ok = syscall($SYS_setns, fileno($u), $CLONE_NEWUSER) == 0 && syscall($SYS_unshare, $CLONE_NEWNET) == 0;
  if ($ok) {
    # struct ifreq: the name (16 bytes), then the flags (a short) in a 24-byte union.
    my ($s, $ifr) = (undef, pack('a16 s x22', 'lo', 0));
    $ok = socket($s, 2, 2, 0) && ioctl($s, $SIOCGIFFLAGS, $ifr);
    if ($ok) {
      my $flags = unpack('x16 s', $ifr);
      $ifr = pack('a16 s x22', 'lo', $flags | $IFF_UP);
      $ok = ioctl($s, $SIOCSIFFLAGS, $ifr);
    }
  }
  syswrite($w1, $ok ? 'y' : "n$!");
  sysread($r2, my $x, 1);
  exit 0;
}
close $w1; close $r2;
sysread($r1, my $ok, 256);
if (substr($ok, 0, 1) ne 'y') { $! = 0; fail('joining the user namespace, unsharing the network namespace or setting lo up: ' . substr($ok, 1)); }
if (!-e $target) { open(my $t, '>', $target) or fail("creating $target"); close $t; chmod(0600, $target); }
my ($src, $none) = ("/proc/$pid/ns/net", 0);
syscall($SYS_mount, $src, $target, $none, $MS_BIND, $none) == 0 or fail("binding the namespace on $target");
close $w2;
waitpid($pid, 0);
exit 0;
`;
}

/**
 * Makes a box's network namespace owned by the gVisor user namespace (runsc, as its root, must join
 * it) with `lo` up, kept as an nsfs bind mount on `path` (made by host root): one perl process
 * (`ownedNetnsScript`), no `nsenter`, `unshare`, `ip` or `mount` process.
 * @throws BoxError `internal` when the namespace cannot be made (with the program's message).
 */
export async function createOwnedNetns(ns: GVisorNamespaces, path: string): Promise<void> {
  const made = await run(
    findExecutable('perl') ?? '/usr/bin/perl',
    ['-e', ownedNetnsScript(), ns.userns, path],
    NS_TIMEOUT_MS,
  );
  if (made.code !== 0)
    throw new BoxError(
      `isolation: 'gvisor': making the net namespace ${path} failed: ${made.stderr.trim()}`,
      { code: 'internal' },
    );
}

/**
 * Hands a host directory or file to the namespace's root (host `hostUid:hostGid`): runsc writes its
 * state, pid files and exec pid files there.
 */
export function ownByNamespaceRoot(ns: GVisorNamespaces, path: string): void {
  chownSync(path, ns.mapping.hostUid, ns.mapping.hostGid);
}

/**
 * Readies the engine's state directory for runsc running as the namespace's root: `owned` (runsc's
 * state and exec pid file directories, which runsc writes) handed to it, search permission on
 * `stateRoot` and its ancestors (runsc looks the bundles up through it: traverse, not list), and the
 * idmapped-mount helper installed in `binDir` (idmap.ts).
 * @returns the helper command with the namespace's mapping: `[perl, idmap-mount.pl, hostUid, hostGid, size]`.
 * @throws BoxError when the host has no perl; the file system error when a chown or chmod fails.
 */
export function prepareStateForNamespace(
  ns: GVisorNamespaces,
  stateRoot: string,
  owned: string[],
  binDir: string,
): string[] {
  for (const dir of owned) ownByNamespaceRoot(ns, dir);
  allowTraversal(stateRoot);
  const perl = findExecutable('perl');
  if (!perl)
    throw new BoxError("isolation: 'gvisor' needs perl on the host (perl-base)", { code: 'unsupported' });
  const helper = installIdmapHelper(binDir, perl);
  return [helper.perl, helper.script, ...idmapHelperArgs(ns.mapping)];
}

/**
 * Readies a box's host files for runsc running as the namespace's root: search permission on the box
 * directory and its ancestors (`allowTraversal`), the bundle (runsc's pid file) handed to it, and
 * each fresh managed volume (`ownedByBox`, still host root's) handed to it; the chown follows the
 * opened descriptor's magic link, never a path the box controls.
 */
export function stageForNamespace(
  ns: GVisorNamespaces,
  spec: Pick<EngineBoxSpec, 'boxDir' | 'mounts'>,
  bundle: string,
  opened: OpenedHostPath[],
): void {
  allowTraversal(spec.boxDir);
  ownByNamespaceRoot(ns, bundle);
  handVolumesToMappedRoot(spec, opened, ns.mapping.hostUid, ns.mapping.hostGid);
}

/** The cgroup directories of box `id` on this host (`/<hierarchy>/seed-sandbox/<id>`, v1 or v2). */
export function boxCgroupDirs(id: string): string[] {
  const root = '/sys/fs/cgroup';
  if (existsSync(join(root, 'cgroup.controllers'))) return [join(root, CGROUP_PARENT, id)];
  const out: string[] = [];
  for (const h of readdirSync(root)) {
    if (h === 'unified' || !existsSync(join(root, h, 'cgroup.procs'))) continue;
    out.push(join(root, h, CGROUP_PARENT, id));
  }
  return out;
}

/**
 * Removes the cgroup directories of box `id` (made by the launcher), waiting up to 2 s for the
 * sandbox's processes to leave them. Idempotent; a directory still busy after that is left.
 */
export async function removeBoxCgroups(id: string): Promise<void> {
  for (const dir of boxCgroupDirs(id)) {
    for (let i = 0; i < 200 && existsSync(dir); i++) {
      try {
        rmdirSync(dir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EBUSY') break;
        await sleep(10);
      }
    }
  }
}
