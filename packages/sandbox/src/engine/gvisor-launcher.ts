/**
 * The launcher every runsc command of a gVisor box's supervisor goes through (`SB_RT`, scripts.ts):
 * one perl process (perl-base is Essential in Debian) that does as host root, through system calls,
 * what runsc cannot do in the gVisor user namespace, then execs the runsc command line — no shell and
 * no `mount`, `mkdir` or `cat` process on the start path (each spawn costs several ms on a loaded
 * host; the same steps as `unshare -m` + `sh` + a dozen `mount` runs measured 75 ms a start).
 *
 * For `run --detach` with `SB_CG_ID` set, it makes the box's cgroup `/seed-sandbox/<id>` (cgroup v2,
 * or every v1 hierarchy with the cpuset copied from the parent), writes its limits (`SB_CG_MEM` bytes,
 * `SB_CG_CPU` "quota period" µs, `SB_CG_PIDS`) and moves itself in, so that runsc (which runs with
 * `--ignore-cgroups`) and every process it starts are in it.
 *
 * For `run`, it then runs runsc in a private mount namespace whose `/proc/sys` hides `net`: runsc
 * 20221219 refuses `--network=sandbox` where `/proc/sys/net/core/rmem_default` exists after joining the
 * box's network namespace (`isRootNS` in runsc/sandbox/network.go), and on kernels ≥ 6.x that file exists
 * in every network namespace. A tmpfs is mounted on `/proc/sys` with the host's other entries (`abi`,
 * `debug`, `dev`, `fs`, `kernel`, `user`, `vm`) attached back as recursive clones (open_tree), so runsc's
 * own reads (`vm/mmap_min_addr`, `kernel/cap_last_cap`) still work; and a clone of `/proc` with nothing
 * mounted over it is attached at `/proc/sys/.proc`: the gofer and the Sentry mount a fresh `/proc` from a
 * user namespace, which the kernel allows only while one proc mount of the mount namespace is fully
 * visible. A tmpfs over `/proc/sys/net` alone would not do: each network namespace has its own
 * `/proc/sys/net` dentries. Nothing changes outside that mount namespace.
 *
 * For `run` with `SB_GV_GATE` and `SB_GV_FIFO` (a box with a network), it makes the start gate's FIFO
 * (owned by the bundle's owner, mode 0600), connects to the engine's gate (`openStartGate`, an abstract
 * unix socket of the host) and relays the gate's answer (`go` or `stop`) into the FIFO, which the prestart
 * hook of config.json reads (gvisor-bundle.ts): runsc boots the sandbox (gofer, Sentry) while the engine
 * links the box's network namespace, and copies the namespace's interfaces only after the hook (runsc
 * runs prestart hooks after booting the sandbox and before its network set-up). The FIFO is removed when
 * runsc returns.
 *
 * For `delete --force` with `SB_CG_ID` set (the supervisor's cleanup), it runs the command, then
 * removes the box's cgroup directories (retried for up to 2 s while the sandbox's processes exit) and
 * exits with the command's status. Any other command is exec'd as it is.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { gvisorSyscalls } from './gvisor-userns.ts';
import { writeIfChanged } from './host-process.ts';

/** `mknodat`'s system call number on the architectures of `gvisorSyscalls`. */
const MKNODAT: Record<string, number> = { x64: 259, arm64: 33 };

/**
 * Source of `runsc-launch.pl` for this machine's architecture (open_tree 428 and move_mount 429 are the
 * same on every architecture). Usage: `perl runsc-launch.pl <runsc command line…>` (see the module
 * comment). Exits 125 with `runsc-launch: <what failed>: <errno text>` on stderr when a step fails.
 * @throws BoxError `unsupported` on an architecture without a syscall table (gvisor-userns.ts `gvisorSyscalls`).
 */
export function runscLauncherScript(arch: string = process.arch): string {
  const nr = gvisorSyscalls(arch);
  const mknodat = MKNODAT[arch];
  return `#!/usr/bin/perl
# seed-sandbox runsc launcher (generated; see src/engine/gvisor-launcher.ts)
use strict;
my ($SYS_unshare, $SYS_mount, $SYS_umount2, $SYS_open_tree, $SYS_move_mount) = (${nr.unshare}, ${nr.mount}, ${nr.umount2}, 428, 429);
my ($CLONE_NEWNS, $MS_REC, $MS_PRIVATE) = (0x20000, 0x4000, 0x40000);
my ($OPEN_TREE_CLONE, $O_CLOEXEC, $AT_RECURSIVE, $AT_FDCWD, $MOVE_MOUNT_F_EMPTY_PATH) = (1, 0x80000, 0x8000, -100, 4);
my ($SYS_mknodat, $S_IFIFO, $O_RDWR, $AF_UNIX, $SOCK_STREAM) = (${mknodat}, 0010000, 2, 1, 1);
my @cmd = @ARGV;
my $args = " @cmd ";
my $cg = $ENV{SB_CG_ID} // '';
my $fs = '/sys/fs/cgroup';
sub fail { print STDERR "runsc-launch: $_[0]: $!\\n"; exit 125; }
sub get {
  open(my $fh, '<', $_[0]) or fail("opening $_[0]");
  my $v = do { local $/; <$fh> } // '';
  close $fh;
  chomp $v;
  return $v;
}
sub put {
  open(my $fh, '>', $_[0]) or fail("opening $_[0]");
  defined(syswrite($fh, $_[1])) or fail("writing '$_[1]' to $_[0]");
  close $fh;
}
sub mkdirs { for (@_) { mkdir($_) or -d $_ or fail("mkdir $_"); } }
# The v1 hierarchies (named ones included), as the directories under /sys/fs/cgroup with cgroup.procs.
sub hierarchies {
  opendir(my $dh, $fs) or fail("listing $fs");
  my @h = grep { !/^\\./ && $_ ne 'unified' && -e "$fs/$_/cgroup.procs" } readdir($dh);
  closedir $dh;
  return map { "$fs/$_" } sort @h;
}
if ($args =~ / delete --force /) {
  exec { $cmd[0] } @cmd or fail("running $cmd[0]") if $cg eq '';
  system { $cmd[0] } @cmd;
  my $rc = $? == -1 ? 127 : ($? & 127) ? 128 + ($? & 127) : $? >> 8;
  for my $d ("$fs/seed-sandbox/$cg", map { "$_/seed-sandbox/$cg" } hierarchies()) {
    for (my $n = 0; -d $d && !rmdir($d) && $n < 20; $n++) { select(undef, undef, undef, 0.1); }
  }
  exit $rc;
}
if ($cg ne '' && $args =~ / run --detach /) {
  my ($quota, $period) = split / /, ($ENV{SB_CG_CPU} // '');
  if (-e "$fs/cgroup.controllers") {
    my $p = "$fs/seed-sandbox";
    mkdirs($p, "$p/$cg");
    for my $c ('cpu', 'memory', 'pids') {
      for my $f ("$fs/cgroup.subtree_control", "$p/cgroup.subtree_control") {
        put($f, "+$c") unless get($f) =~ /\\b$c\\b/;
      }
    }
    put("$p/$cg/memory.max", $ENV{SB_CG_MEM});
    put("$p/$cg/cpu.max", "$quota $period");
    put("$p/$cg/pids.max", $ENV{SB_CG_PIDS});
    put("$p/$cg/cgroup.procs", $$);
  } else {
    for my $h (hierarchies()) {
      my $d = "$h/seed-sandbox/$cg";
      mkdirs("$h/seed-sandbox", $d);
      if (-e "$d/cpuset.cpus") {
        for my $x ("$h/seed-sandbox", $d) {
          (my $parent = $x) =~ s{/[^/]*$}{};
          for my $f ('cpuset.cpus', 'cpuset.mems') {
            put("$x/$f", get("$parent/$f")) if get("$x/$f") eq '';
          }
        }
      }
      put("$d/cgroup.procs", $$);
    }
    put("$fs/memory/seed-sandbox/$cg/memory.limit_in_bytes", $ENV{SB_CG_MEM});
    put("$fs/cpu/seed-sandbox/$cg/cpu.cfs_period_us", $period);
    put("$fs/cpu/seed-sandbox/$cg/cpu.cfs_quota_us", $quota);
    put("$fs/pids/seed-sandbox/$cg/pids.max", $ENV{SB_CG_PIDS});
  }
}
# The box's network namespace file: once runsc has run the sandbox, which holds the namespace from
# then on, it is unmounted and removed here (this process never leaves the host's mount namespace).
my $netns = $ENV{SB_GV_NETNS} // '';
# The start gate (see the module comment): this process relays the engine's answer to the prestart hook.
my ($gate, $fifo) = ($ENV{SB_GV_GATE} // '', $ENV{SB_GV_FIFO} // '');
my ($gateSock, $gateFifo);
if ($gate ne '' && $fifo ne '' && $args =~ / run --detach /) {
  unlink($fifo);
  syscall($SYS_mknodat, $AT_FDCWD, $fifo, $S_IFIFO | 0600, 0) == 0 or fail("mkfifo $fifo");
  (my $dir = $fifo) =~ s{/[^/]*$}{};
  my @owner = (stat($dir))[4, 5];
  chown($owner[0], $owner[1], $fifo) or fail("chown $fifo");
  sysopen($gateFifo, $fifo, $O_RDWR) or fail("opening $fifo");
  socket($gateSock, $AF_UNIX, $SOCK_STREAM, 0) or fail('socket(AF_UNIX)');
  connect($gateSock, pack('S', $AF_UNIX) . "\\0$gate") or fail('connecting to the start gate');
}
if (($netns ne '' || $gateSock) && $args =~ / run /) {
  my $pid = fork() // fail('fork');
  if ($pid) {
    if ($gateSock) {
      my $answer = '';
      while ($answer !~ /\\n/) { sysread($gateSock, $answer, 16, length $answer) or last; }
      syswrite($gateFifo, $answer eq "go\\n" ? "go\\n" : "stop\\n");
    }
    waitpid($pid, 0);
    my $rc = ($? & 127) ? 128 + ($? & 127) : $? >> 8;
    unlink($fifo) if $gateSock;
    unlink($netns) if $netns ne '' && $rc == 0 && syscall($SYS_umount2, $netns, 0) == 0;
    exit $rc;
  }
  close($gateSock) if $gateSock;
  close($gateFifo) if $gateFifo;
}
if ($args =~ / run / && $args =~ / --network=sandbox /) {
  # String arguments of syscall must be writable scalars (perl passes their buffers), not literals.
  my ($root, $proc, $sys, $tmpfs, $name, $opts, $empty) = ('/', '/proc', '/proc/sys', 'tmpfs', 'runsc-sysctl', 'size=16k,mode=0555', '');
  syscall($SYS_unshare, $CLONE_NEWNS) == 0 or fail('unshare(CLONE_NEWNS)');
  syscall($SYS_mount, 0, $root, 0, $MS_REC | $MS_PRIVATE, 0) == 0 or fail('making / private');
  opendir(my $dh, '/proc/sys') or fail('listing /proc/sys');
  my @names = grep { !/^\\./ && $_ ne 'net' } readdir($dh);
  closedir $dh;
  my @trees;
  for my $n (sort @names) {
    my $fd = syscall($SYS_open_tree, $AT_FDCWD, "/proc/sys/$n", $OPEN_TREE_CLONE | $O_CLOEXEC | $AT_RECURSIVE);
    $fd >= 0 or fail("open_tree /proc/sys/$n");
    push @trees, [$n, $fd];
  }
  my $fd = syscall($SYS_open_tree, $AT_FDCWD, $proc, $OPEN_TREE_CLONE | $O_CLOEXEC);
  $fd >= 0 or fail('open_tree /proc');
  push @trees, ['.proc', $fd];
  syscall($SYS_mount, $name, $sys, $tmpfs, 0, $opts) == 0 or fail('mounting a tmpfs on /proc/sys');
  for (@trees) {
    my ($n, $fd) = @$_;
    mkdir("/proc/sys/$n") or fail("mkdir /proc/sys/$n");
    syscall($SYS_move_mount, $fd, $empty, $AT_FDCWD, "/proc/sys/$n", $MOVE_MOUNT_F_EMPTY_PATH) == 0 or fail("attaching /proc/sys/$n");
  }
}
exec { $cmd[0] } @cmd or fail("running $cmd[0]");
`;
}

/**
 * Writes `runsc-launch.pl` into `binDir` (only when its content changed).
 * @returns the launcher's command-line prefix, `[perl, <binDir>/runsc-launch.pl]`.
 * @throws BoxError `unsupported` on an architecture without a syscall table; the fs error when
 *   `binDir` is not writable.
 */
export function installRunscLauncher(binDir: string, perl: string): string[] {
  const script = join(binDir, 'runsc-launch.pl');
  writeIfChanged(script, runscLauncherScript());
  return [perl, script];
}

/** The start gate's FIFO in a box's bundle (`SB_GV_FIFO`, read by config.json's prestart hook). */
export const START_GATE = 'start-gate';

/** A box's start gate (`openStartGate`): its abstract socket name (`SB_GV_GATE`) and how to close it. */
export interface StartGate {
  /** The socket's name in the abstract namespace, without the leading NUL byte. */
  readonly name: string;
  /** Stops listening and drops the connections still open. Idempotent. */
  close(): void;
}

/**
 * Opens the start gate the launcher waits on between `runsc create` and `runsc start` (`SB_GV_GATE`): a
 * unix socket of the host's abstract namespace with a random name, answering each connection (at most 4
 * at a time) `go\n` once `ready` resolves or `stop\n` when it rejects, then closing it.
 * @throws the socket error when it cannot listen.
 */
export async function openStartGate(ready: Promise<unknown>): Promise<StartGate> {
  const name = `seed-sandbox-gate-${randomBytes(12).toString('hex')}`;
  const open = new Set<Socket>();
  const answer = ready.then(
    () => 'go\n',
    () => 'stop\n',
  );
  const server = createServer((sock) => {
    open.add(sock);
    sock.on('error', () => {});
    sock.on('close', () => open.delete(sock));
    void answer.then((line) => sock.end(line));
  });
  server.maxConnections = 4;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ path: `\0${name}` }, () => resolve());
  });
  server.on('error', () => {});
  // The gate never keeps the process alive on its own.
  server.unref();
  return {
    name,
    close() {
      server.close();
      for (const sock of open) sock.destroy();
    },
  };
}
