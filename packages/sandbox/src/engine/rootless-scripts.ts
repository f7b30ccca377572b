/**
 * Shell scripts of the rootless engine (rootless.ts), written under its state root and run by
 * `/bin/sh` as the calling user inside a user namespace of their own.
 *
 * `rootless-supervisor.sh` runs under `unshare --user --mount --propagation private` with the caller's
 * uid as box root and their subordinate ids as box ids 1…65535 (`--map-users`/`--map-groups`, which
 * call the setuid newuidmap/newgidmap). Inside that namespace it is root over a private mount table:
 * it shows crun only the delegated cgroup controllers (a tmpfs over `/sys/fs/cgroup` with just
 * those bound back: crun 1.8 refuses the hybrid layout and would create cgroups in hierarchies the
 * user cannot write), mounts the overlay root (`userxattr`: kernel ≥ 5.11), binds the host paths
 * (checking that each bound object is the one the engine opened and checked), runs `crun run --detach` and reports `mounted`, `started` or `error <stage>`.
 * Nothing is mounted on the host: the mounts live in namespaces that end with the box.
 * For a non-detached box it then waits on its stdin (a pipe only the creating Node process holds); at
 * end-of-file it kills and deletes the container and slirp4netns, unless the box was restarted since or
 * the engine wrote `release`.
 *
 * `rootless-crun.sh <args…>` runs crun for the commands that touch cgroups (`delete`) in a namespace
 * prepared the same way (the caller's uid as root only).
 */

/** Source of `rootless-supervisor.sh`; parameters in `SB_*` environment variables (rootless.ts). */
export const ROOTLESS_SUPERVISOR_SH = `#!/bin/sh
# seed-sandbox rootless box supervisor (generated; see src/engine/rootless-scripts.ts)
trap '' PIPE HUP INT
rt() { crun --root "$SB_STATE" $SB_CGMGR "$@"; }
killslirp() {
  p=; read -r p <"$SB_BUNDLE/slirp.pid" 2>/dev/null
  [ -n "$p" ] && kill -9 "$p" 2>/dev/null
}
fail() { echo "error $1"; rt delete --force "$SB_ID" >/dev/null 2>&1; exit 1; }
if [ -n "$SB_CGSAVE" ]; then
  mount --rbind /sys/fs/cgroup "$SB_CGSAVE" 2>>"$SB_LOG" || fail cgroup
  mount -t tmpfs -o mode=755,nosuid,nodev,noexec cgroup /sys/fs/cgroup 2>>"$SB_LOG" || fail cgroup
  for c in $SB_CGROUPS; do
    mkdir "/sys/fs/cgroup/$c" && mount --bind "$SB_CGSAVE/$c" "/sys/fs/cgroup/$c" 2>>"$SB_LOG" || fail cgroup
  done
  umount -l "$SB_CGSAVE"
fi
mount -t overlay overlay -o "lowerdir=$SB_LOWER,upperdir=$SB_UPPER,workdir=$SB_WORK,userxattr" "$SB_ROOTFS" 2>>"$SB_LOG" || fail overlay
# Host paths: the engine checked each one (no symlinks) and passes it open (fd:target pairs, path in
# SB_BIND_SRC_<i>). A descriptor of the host's mount namespace cannot be bound from this one, so the
# path is bound and the result must be the very object checked (device and inode), else it is undone.
i=0
for b in $SB_BINDS; do
  fd=\${b%%:*}
  target=\${b#*:}
  eval "src=\\$SB_BIND_SRC_$i"
  want=$(stat -L -c %d:%i "/proc/self/fd/$fd") || fail bind
  mount --rbind -- "$src" "$target" 2>>"$SB_LOG" || fail bind
  got=$(stat -c %d:%i "$target")
  if [ "$got" != "$want" ]; then
    umount -l "$target"
    echo "$src changed while it was being bound" >>"$SB_LOG"
    fail bind
  fi
  i=$((i + 1))
done
echo mounted
rt run --detach --bundle "$SB_BUNDLE" --pid-file "$SB_PIDFILE" "$SB_ID" </dev/null >>"$SB_LOG" 2>&1 || fail run
echo started
[ "$SB_WATCH" = 1 ] || exit 0
exec >/dev/null 2>&1
trap 'exit 0' TERM
# Written whole, then renamed: a reader never sees an empty pid file.
echo $$ >"$SB_BUNDLE/supervisor.pid.new" && mv -f "$SB_BUNDLE/supervisor.pid.new" "$SB_BUNDLE/supervisor.pid"
read -r mine <"$SB_PIDFILE"
read -r cmd || cmd=eof
[ "$cmd" = release ] && exit 0
current=
read -r current <"$SB_PIDFILE"
if [ "$current" = "$mine" ]; then
  rt kill "$SB_ID" KILL >/dev/null 2>&1
  killslirp
  rt delete --force "$SB_ID" >/dev/null 2>&1
fi
`;

/** Source of `rootless-crun.sh <crun args…>`: crun with only the delegated cgroups in view. */
export const ROOTLESS_CRUN_SH = `#!/bin/sh
# crun for a rootless engine (generated; see src/engine/rootless-scripts.ts)
if [ -n "$SB_CGSAVE" ]; then
  mount --rbind /sys/fs/cgroup "$SB_CGSAVE" || exit 1
  mount -t tmpfs -o mode=755,nosuid,nodev,noexec cgroup /sys/fs/cgroup || exit 1
  for c in $SB_CGROUPS; do
    mkdir "/sys/fs/cgroup/$c" && mount --bind "$SB_CGSAVE/$c" "/sys/fs/cgroup/$c" || exit 1
  done
  umount -l "$SB_CGSAVE"
fi
exec crun --root "$SB_STATE" $SB_CGMGR "$@"
`;
