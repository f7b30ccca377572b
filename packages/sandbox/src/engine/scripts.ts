/**
 * Shell scripts the engine installs under its state root (POSIX `sh`, run by `/bin/sh`).
 *
 * `supervisor.sh` is the per-box launcher and parent-death watch: it mounts the box's writable
 * disk and overlay root, runs the OCI runtime (`run --detach`), reports progress on stdout
 * (`mounted`, `started` or `error <stage>`), and — for a non-detached box — then blocks reading its
 * stdin, a pipe whose only writer is the Node process that created the box. When that process
 * exits for any reason (SIGKILL included) the read sees end-of-file and the script kills and
 * deletes the container and unmounts its root — unless the box was meanwhile restarted with another
 * init (another process drove it), which the pid file tells. The engine writes `release` to the pipe when it
 * stops or removes the box itself, which makes the script exit without touching anything.
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
cleanup() {
  rt kill "$SB_ID" KILL >/dev/null 2>&1
  rt delete --force "$SB_ID" >/dev/null 2>&1
  umount "$SB_ROOTFS" >/dev/null 2>&1
  if [ -n "$SB_DISK_IMG" ]; then umount "$SB_DISK_DIR" >/dev/null 2>&1; fi
}
fail() { echo "error $1"; cleanup; exit 1; }
if [ -n "$SB_DISK_IMG" ]; then
  mount -o loop,noatime "$SB_DISK_IMG" "$SB_DISK_DIR" 2>>"$SB_LOG" || fail disk
  [ -d "$SB_UPPER" ] || mkdir "$SB_UPPER" "$SB_WORK" 2>>"$SB_LOG" || fail disk
fi
mount -t overlay overlay -o "lowerdir=$SB_LOWER,upperdir=$SB_UPPER,workdir=$SB_WORK" "$SB_ROOTFS" 2>>"$SB_LOG" || fail overlay
echo mounted
rt run --detach --bundle "$SB_BUNDLE" --pid-file "$SB_PIDFILE" "$SB_ID" </dev/null >>"$SB_LOG" 2>&1 || fail run
echo started
[ "$SB_WATCH" = 1 ] || exit 0
exec >/dev/null 2>&1
read -r mine <"$SB_PIDFILE"
read -r cmd || cmd=eof
[ "$cmd" = release ] && exit 0
# Only if the box still runs the init this script started (another process may have restarted it).
current=
read -r current <"$SB_PIDFILE"
[ "$current" = "$mine" ] && cleanup
`;

/** Source of `crun-hybrid.sh`: `crun-hybrid.sh <crun args…>`, run under `unshare -m`. */
export const CRUN_HYBRID_SH = `#!/bin/sh
# Runs crun with /sys/fs/cgroup/unified hidden (generated; see src/engine/scripts.ts)
umount /sys/fs/cgroup/unified 2>/dev/null
exec crun "$@"
`;
