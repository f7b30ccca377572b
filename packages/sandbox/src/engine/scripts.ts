/**
 * Shell scripts the engine installs under its state root (POSIX `sh`, run by `/bin/sh`).
 *
 * `supervisor.sh` is the per-box launcher and parent-death watch: it mounts the box's writable
 * disk and overlay root, runs the OCI runtime (`run --detach`), reports progress on stdout
 * (`mounted`, `started` or `error <stage>`), refills the disk template's spare (`SB_SPARE`), and — for
 * a non-detached box — then blocks reading its
 * stdin, a pipe whose only writer is the Node process that created the box. When that process
 * exits for any reason (SIGKILL included) the read sees end-of-file and the script SIGKILLs every
 * process of the box's cgroup (`SB_CGROUP`) and removes that cgroup (`<runtime> kill` and `delete` when
 * the box has no cgroup of its own), unmounts its root, binds and disk and removes its network
 * namespace files (`SB_NETNS`): the box is gone then. Last it execs
 * `<runtime> delete --force`, which clears the runtime's state of the dead box (runsc: the slow step,
 * 0.5-2 s) — unless the box was meanwhile restarted with another init (another process drove it),
 * which the pid file tells. The engine writes `release` to the pipe when it
 * stops or removes the box itself, which makes the script exit without touching anything; an engine of
 * another process sends SIGTERM instead (the script's pid is in `<bundle>/supervisor.pid`).
 * No Node process sits on the critical path and nothing polls.
 *
 * `crun-hybrid.sh` runs crun in a private mount namespace with `/sys/fs/cgroup/unified` unmounted:
 * crun 1.8 refuses a cgroup v1 host that also mounts a v2 hierarchy there ("hybrid" layout).
 */

/** Source of `supervisor.sh`. Parameters come from `SB_*` environment variables (see engine.ts);
 * `SB_RT` is the runtime command line, split on spaces (state paths never contain spaces). */
export const SUPERVISOR_SH = `#!/bin/sh
# seed-sandbox box supervisor (generated; see src/engine/scripts.ts)
trap '' PIPE HUP INT
rt() { $SB_RT "$@"; }
# SIGKILL to every process of the box's cgroup (SB_CGROUP: v2 cgroup.kill, else the pids of the v1
# pids hierarchy, its v1 freezer thawed so that a paused box dies too), until it is empty, then its
# cgroup directories are removed: this ends the
# box at once (a container's init, a gVisor sandbox's Sentry and gofer) without a runtime process on the
# way (crun kill and delete are two unshare + sh + crun runs; runsc kill and delete take 0.5-2 s each on
# a loaded host). Returns 1 when the box has no cgroup of its own to kill.
killcg() {
  [ -n "$SB_CGROUP" ] || return 1
  v2=/sys/fs/cgroup/seed-sandbox/$SB_CGROUP
  v1=/sys/fs/cgroup/pids/seed-sandbox/$SB_CGROUP
  frozen=/sys/fs/cgroup/freezer/seed-sandbox/$SB_CGROUP/freezer.state
  [ -e "$v2/cgroup.procs" ] || [ -e "$v1/cgroup.procs" ] || return 1
  n=0
  while [ $n -lt 100 ]; do
    [ ! -e "$v2/cgroup.kill" ] || echo 1 >"$v2/cgroup.kill" 2>/dev/null
    found=
    for f in "$v2/cgroup.procs" "$v1/cgroup.procs"; do
      [ -e "$f" ] || continue
      while read -r p; do found=1; kill -KILL "$p" 2>/dev/null; done <"$f"
    done
    [ ! -e "$frozen" ] || echo THAWED >"$frozen" 2>/dev/null
    [ -n "$found" ] || break
    n=$((n + 1))
    sleep 0.01
  done
  # The emptied cgroups (the runtime's, or the gVisor launcher's), rmdir retried for up to 1 s while
  # the kernel finishes the exits.
  for d in "$v2" /sys/fs/cgroup/*/seed-sandbox/"$SB_CGROUP"; do
    n=0
    while [ -d "$d" ] && ! rmdir "$d" >/dev/null 2>&1 && [ $n -lt 100 ]; do n=$((n + 1)); sleep 0.01; done
  done
  return 0
}
cleanup() {
  if ! killcg; then
    rt kill "$SB_ID" KILL >/dev/null 2>&1
    rt delete --force "$SB_ID" >/dev/null 2>&1
  fi
  umount "$SB_ROOTFS" >/dev/null 2>&1
  for b in $SB_BINDS; do umount -l "\${b#*:}" >/dev/null 2>&1; done
  if [ -n "$SB_DISK_IMG" ]; then umount "$SB_DISK_DIR" >/dev/null 2>&1; fi
}
# After the creator died: the box's network namespace files; the box is gone then. Last, in place of
# this script, the runtime deletes its own state of the dead box.
orphaned() {
  for n in $SB_NETNS; do umount "$n" >/dev/null 2>&1; rm -f "$n"; done
  exec $SB_RT delete --force "$SB_ID" >/dev/null 2>&1
}
# The disk template's spare (disk.ts SpareRefill), copied in the background at the lowest CPU priority
# once the box runs, unless one exists or another process is making one (<spare>.<pid of its maker>; a
# copy whose maker is gone is removed). The copy serves the next box of any process, not this one: its
# environment does not name this box (SB_ID empty).
refill() {
  [ -n "$SB_SPARE" ] || return 0
  for f in "$SB_SPARE".*; do
    [ -e "$f" ] || continue
    [ -d /proc/"\${f##*.}" ] && return 0
    rm -f "$f"
  done
  [ -e "$SB_SPARE" ] && return 0
  SB_ID= nice -n 19 sh -c 'cp --sparse=always "$1" "$2.$$" && mv -f "$2.$$" "$2" || rm -f "$2.$$"' refill "$SB_SPARE_SRC" "$SB_SPARE" &
}
fail() {
  echo "error $1"
  cleanup
  rt delete --force "$SB_ID" >/dev/null 2>&1
  exit 1
}
# The box disk, tried up to 5 times (100-400 ms apart): the kernel can refuse a btrfs clone for a moment
# while another clone of the same template is being registered or released (disk.ts, DISK_MOUNT_ATTEMPTS).
mount_disk() {
  n=1
  until mount -o "$SB_DISK_OPTS" "$SB_DISK_IMG" "$SB_DISK_DIR" 2>>"$SB_LOG"; do
    [ $n -lt 5 ] || return 1
    sleep "0.$n"
    n=$((n + 1))
  done
}
# With a user namespace the idmap helper mounts the disk and makes these files (SB_IDMAP_DISK).
if [ -n "$SB_DISK_IMG" ] && [ -z "$SB_IDMAP" ]; then
  mount_disk || fail disk
  [ -d "$SB_UPPER" ] || mkdir "$SB_UPPER" "$SB_WORK" 2>>"$SB_LOG" || fail disk
  # The box's /etc/hosts and /etc/hostname, on its disk (kept across restarts; printf is a builtin).
  [ -e "$SB_DISK_DIR/hosts" ] || printf '%s' "$SB_HOSTS" >"$SB_DISK_DIR/hosts" || fail disk
  [ -e "$SB_DISK_DIR/hostname" ] || printf '%s' "$SB_HOSTNAME" >"$SB_DISK_DIR/hostname" || fail disk
fi
# Host paths: the engine passes each checked path as an inherited descriptor (fd:target pairs).
if [ -n "$SB_IDMAP" ]; then
  # User namespace (idmap.ts), one process: the disk mounted with its layer and /etc files
  # (SB_IDMAP_DISK; exit 2 when that fails), the writable layer owned by the mapped root (SB_IDMAP_OWN),
  # the overlay over idmapped clones of the layers, and the host paths bound, idmapped or not
  # (SB_IDMAP_BINDS).
  $SB_IDMAP $SB_IDMAP_DISK $SB_IDMAP_OWN overlay "$SB_LOWER" "$SB_UPPER" "$SB_WORK" "$SB_ROOTFS" $SB_IDMAP_BINDS 2>>"$SB_LOG" || {
    [ $? = 2 ] && fail disk
    fail overlay
  }
else
  mount -t overlay overlay -o "lowerdir=$SB_LOWER,upperdir=$SB_UPPER,workdir=$SB_WORK" "$SB_ROOTFS" 2>>"$SB_LOG" || fail overlay
  for b in $SB_BINDS; do
    mount --no-canonicalize --rbind "/proc/self/fd/\${b%%:*}" "\${b#*:}" 2>>"$SB_LOG" || fail bind
  done
fi
echo mounted
# SB_GO: the engine prepares something else meanwhile (the gVisor box's network namespace) and says go.
if [ "$SB_GO" = 1 ]; then read -r go || go=eof; [ "$go" = go ] || fail network; fi
rt run --detach --bundle "$SB_BUNDLE" --pid-file "$SB_PIDFILE" "$SB_ID" </dev/null >>"$SB_LOG" 2>&1 || fail run
echo started
exec >/dev/null 2>&1
refill
[ "$SB_WATCH" = 1 ] || exit 0
# Another process that stops or removes the box ends this watch with SIGTERM (pid file below).
trap 'exit 0' TERM
# Written whole, then renamed: a reader never sees an empty pid file.
echo $$ >"$SB_BUNDLE/supervisor.pid.new" && mv -f "$SB_BUNDLE/supervisor.pid.new" "$SB_BUNDLE/supervisor.pid"
read -r mine <"$SB_PIDFILE"
read -r cmd || cmd=eof
[ "$cmd" = release ] && exit 0
# Only if the box still runs the init this script started (another process may have restarted it).
current=
read -r current <"$SB_PIDFILE"
if [ "$current" = "$mine" ]; then cleanup; orphaned; fi
`;

/**
 * Source of `supervisor-spare.sh`, a supervisor started ahead of need (spare-supervisor.ts):
 * `/bin/sh supervisor-spare.sh <supervisor.sh>`. It waits on stdin (the creator's pipe) for the path
 * of a file with the box's `SB_*` environment (spare-supervisor.ts `shellEnvFile`: single-quoted
 * assignments), loads it with every assignment exported and execs `/bin/sh <supervisor.sh>` in its
 * place: the supervisor then has the command line, environment, pid and stdin a spawned one would
 * have. At end-of-file (the creator exited before giving it a box) it exits, having touched nothing.
 */
export const SUPERVISOR_SPARE_SH = `#!/bin/sh
# seed-sandbox spare box supervisor (generated; see src/engine/scripts.ts)
read -r params || exit 0
set -a
. "$params"
set +a
exec /bin/sh "$1"
`;

/**
 * Source of `net-link.sh`, the OCI `createRuntime` hook of a box whose network the engine links while
 * the runtime sets the box up: `sh net-link.sh <link script> <outcome>`, with the runtime's state of
 * the box (JSON, its `pid`) on stdin. In the background it sources `<link script>` (no `sh` of its
 * own) with the box's network namespace `/proc/<pid>/ns/net` as `$1`, and exits at once, so the
 * runtime goes on. The script's error output goes to `<outcome>.out`; once the script has ended, an
 * empty `<outcome>.ok` (exit 0) or `<outcome>.failed` is created: the file another process polls for
 * holds nothing, and the output it then reads was closed before it existed (no rename, no process
 * beyond the script's own).
 */
export const NET_LINK_SH = `#!/bin/sh
# seed-sandbox box network link hook (generated; see src/engine/scripts.ts)
s=
while IFS= read -r l || [ -n "$l" ]; do s="$s$l"; done
p=\${s#*'"pid":'}
p=\${p# }
p=\${p%%[!0-9]*}
link=$1
o=$2
(
  trap 'if [ $? = 0 ]; then : >"$o.ok"; else : >"$o.failed"; fi' EXIT
  [ -n "$p" ] || { echo 'no pid in the runtime state' >&2; exit 1; }
  set -- "/proc/$p/ns/net"
  . "$link"
) </dev/null >/dev/null 2>"$o.out" &
exit 0
`;

/** Source of `crun-hybrid.sh`: `crun-hybrid.sh <crun args…>`, run under `unshare -m`. */
export const CRUN_HYBRID_SH = `#!/bin/sh
# Runs crun with /sys/fs/cgroup/unified hidden (generated; see src/engine/scripts.ts)
umount /sys/fs/cgroup/unified 2>/dev/null
exec crun "$@"
`;

/**
 * Source of `tty-relay.pl`, the terminal of `exec` with `tty` (perl-base is Essential in Debian).
 * Usage: `perl tty-relay.pl <pts dir> <cols> <rows> <argv...>`. It opens a pseudo-terminal in the
 * devpts instance `<pts dir>` (the box's own, reached through `/proc/<init>/root/dev/pts`, so the
 * command sees `/dev/pts/<n>` of its box), sets its size, runs `argv` in a new session with the
 * terminal as stdin/stdout/stderr, and copies stdin to the terminal and the terminal to stdout.
 * With `SB_TTY_UID` in its environment the terminal is chowned to that host uid (the command's user
 * mapped by the box's user namespace). At the end of stdin it types the terminal's EOF character once, as script(1) does. It exits when
 * `argv` exits (after copying what is left to read; a background process holding the terminal does
 * not keep it), with the exit code of `argv` or 128 + signal.
 * The ioctl numbers are the asm-generic ones (x86_64, arm64).
 */
export const TTY_RELAY_PL = `#!/usr/bin/perl
# seed-sandbox terminal relay (generated; see src/engine/scripts.ts)
# Linux asm-generic numbers (x86_64, arm64), and no modules beyond strict: loading POSIX alone
# would add 16 ms to each exec, warnings 3 ms.
use strict;
my ($pts, $cols, $rows, @cmd) = @ARGV;
my ($O_RDWR_NOCTTY, $TIOCGPTN, $TIOCSPTLCK, $TIOCSWINSZ, $TCGETS) = (2 | 0400, 0x80045430, 0x40045431, 0x5414, 0x5401);
my ($EINTR, $EAGAIN, $WNOHANG) = (4, 11, 1);
sub fail { print STDERR "tty: $_[0]\\n"; exit 126; }
sysopen(my $m, "$pts/ptmx", $O_RDWR_NOCTTY) or fail("opening $pts/ptmx: $!");
my $unlock = pack('i', 0);
ioctl($m, $TIOCSPTLCK, $unlock) or fail("unlocking the terminal: $!");
my $n = pack('I', 0);
ioctl($m, $TIOCGPTN, $n) or fail("numbering the terminal: $!");
$n = unpack('I', $n);
sysopen(my $s, "$pts/$n", $O_RDWR_NOCTTY) or fail("opening $pts/$n: $!");
my $winsize = pack('S4', $rows, $cols, 0, 0);
ioctl($s, $TIOCSWINSZ, $winsize) or fail("sizing the terminal: $!");
# In a user namespace the terminal belongs to the command's mapped host uid (else it is nobody's there).
if (defined $ENV{SB_TTY_UID}) { chown($ENV{SB_TTY_UID}, -1, $s) or fail("chown of the terminal: $!"); delete $ENV{SB_TTY_UID}; }
$SIG{PIPE} = 'DEFAULT';
my $pid = fork() // fail("fork: $!");
if ($pid == 0) {
  # Out of the caller's foreground process group; the terminal becomes stdin, stdout and stderr.
  setpgrp(0, 0);
  open(STDIN, '<&', $s) && open(STDOUT, '>&', $s) && open(STDERR, '>&', $s) or fail("dup: $!");
  exec { $cmd[0] } @cmd;
  fail("running $cmd[0]: $!");
}
close $s;
sub put {
  my ($fh, $data) = @_;
  while (length $data) {
    my $w = syswrite($fh, $data);
    if (!defined $w) { next if $! == $EINTR || $! == $EAGAIN; return 0; }
    substr($data, 0, $w) = '';
  }
  return 1;
}
my ($exited, $status, $stdin_open, $drained) = (0, 0, 1, 0);
while (1) {
  my $rin = '';
  vec($rin, fileno($m), 1) = 1;
  vec($rin, 0, 1) = 1 if $stdin_open;
  # A background process of the command may keep the terminal open: poll for the exit itself.
  if (!$exited && waitpid($pid, $WNOHANG) == $pid) { $status = $?; $exited = 1; }
  last if $exited && ++$drained > 64;
  my $ready = select(my $rout = $rin, undef, undef, $exited ? 0.05 : 0.25);
  if ($ready < 0) { next if $! == $EINTR; last; }
  if ($ready == 0) { last if $exited; next; }
  if (vec($rout, fileno($m), 1)) {
    my $r = sysread($m, my $buf, 65536);
    if (!$r) { next if !defined $r && $! == $EINTR; last; }
    last unless put(\\*STDOUT, $buf);
  }
  if ($stdin_open && vec($rout, 0, 1)) {
    my $r = sysread(STDIN, my $buf, 65536);
    next if !defined $r && $! == $EINTR;
    if ($r) { put($m, $buf); next; }
    # End of input: type the terminal's EOF character (c_cc[VEOF], byte 21 of struct termios).
    $stdin_open = 0;
    my $termios = "\\0" x 64;
    put($m, ioctl($m, $TCGETS, $termios) ? substr($termios, 21, 1) : "\\x04");
  }
}
until ($exited) { my $w = waitpid($pid, 0); if ($w == $pid) { $status = $?; $exited = 1; } elsif ($w < 0) { last; } }
exit(($status & 127) ? 128 + ($status & 127) : $status >> 8);
`;
