/**
 * The network namespace of a gVisor box and the runsc launcher that lets runsc 20221219 use its own
 * network stack (netstack) in it, so that the Sentry runs unprivileged.
 *
 * With `--network=sandbox` runsc starts the sandbox process (the Sentry) in a new user namespace that
 * maps only `nobody` (host uid/gid 65534, capabilities of that namespace only), chrooted, and copies
 * the interfaces, addresses and routes of the sandbox's network namespace into netstack at creation:
 * the runsc parent (root of the gVisor user namespace, gvisor-userns.ts, which owns the box's network
 * namespace) joins that namespace, opens an `AF_PACKET` socket on each interface that
 * is up and has an address, hands the sockets to the Sentry and removes the addresses from the host
 * side. Interfaces made later are not seen, so the box's namespace is made and linked before runsc runs
 * (`createBoxNetns`, then the `networkPrepare` hook).
 *
 * runsc refuses `--network=sandbox` in what it takes for the host's namespace: it tests whether
 * `/proc/sys/net/core/rmem_default` exists after joining the box's namespace (`isRootNS` in
 * runsc/sandbox/network.go), and on kernels ≥ 6.x that file exists in every namespace. The launcher
 * (`RUNSC_NETNS_SH`, run under `unshare -m`) therefore runs runsc in a private mount namespace whose
 * `/proc/sys` is a tmpfs with the host's `abi`, `debug`, `dev`, `fs`, `kernel`, `user` and `vm`
 * directories bound back and no `net`: runsc's own reads (`vm/mmap_min_addr`, `kernel/cap_last_cap`)
 * still work, the test answers "not the root namespace", and nothing changes outside that mount
 * namespace. The sandbox and the gofer get mount namespaces of their own and mount a fresh `/proc`,
 * which the kernel allows a user namespace only while a proc mount is fully visible: the launcher
 * leaves a plain bind of `/proc` at `/proc/sys/.proc`. Before that, when `SB_CG_ID` is set and the
 * command is `run --detach`, the launcher (host root) makes the box's cgroup `/seed-sandbox/<id>` (v1
 * hierarchies or v2), writes its limits (`SB_CG_MEM` bytes, `SB_CG_CPU` "quota period" µs,
 * `SB_CG_PIDS`) and moves itself in, so runsc (`--ignore-cgroups`) and every process it starts are in
 * it; for `delete --force` (the supervisor's cleanup) it runs the command, then removes that cgroup.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { BoxError, codeOf } from '../errors.ts';
import { createOwnedNetns, type GVisorNamespaces } from './gvisor-userns.ts';
import { run } from './host-process.ts';
import { findExecutable } from './host-system.ts';
import type { EngineBoxSpec } from './types.ts';

/** What the `networkPrepare` hook of a gVisor engine gets, before runsc starts the box. */
export interface GVisorNetnsContext {
  id: string;
  /** The box's network namespace file (an nsfs bind mount); `lo` is up, nothing else is there. */
  netns: string;
  network: EngineBoxSpec['network'];
}

/**
 * Source of `runsc-netns.sh`: `unshare -m -- sh runsc-netns.sh <runsc> <args…>` runs `runsc <args…>`
 * with `/proc/sys/net` hidden (see the module comment). Exits 125 when the mounts fail.
 */
export const RUNSC_NETNS_SH = `#!/bin/sh
# Runs runsc with /proc/sys/net hidden, in the box's cgroup (generated; see src/engine/gvisor-netns.ts)
# The supervisor's own cleanup deletes the sandbox through this launcher: the box's cgroup goes too.
case " $* " in *" delete --force "*)
  [ -n "$SB_CG_ID" ] || exec "$@"
  "$@"
  rc=$?
  for d in /sys/fs/cgroup/seed-sandbox/"$SB_CG_ID" /sys/fs/cgroup/*/seed-sandbox/"$SB_CG_ID"; do
    n=0
    while [ -d "$d" ] && ! rmdir "$d" 2>/dev/null && [ $n -lt 20 ]; do n=$((n + 1)); sleep 0.1; done
  done
  exit $rc
esac
case " $* " in *" run --detach "*) cg=$SB_CG_ID ;; *) cg= ;; esac
if [ -n "$cg" ]; then
  # The box's cgroup, limited and joined by host root (runsc runs with --ignore-cgroups).
  if [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    p=/sys/fs/cgroup/seed-sandbox
    mkdir -p "$p/$SB_CG_ID" || exit 125
    for c in cpu memory pids; do
      grep -qw $c /sys/fs/cgroup/cgroup.subtree_control || echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control
      grep -qw $c "$p/cgroup.subtree_control" || echo "+$c" >"$p/cgroup.subtree_control"
    done
    d="$p/$SB_CG_ID"
    echo "$SB_CG_MEM" >"$d/memory.max" && echo "$SB_CG_CPU" >"$d/cpu.max" && echo "$SB_CG_PIDS" >"$d/pids.max" || exit 125
    echo $$ >"$d/cgroup.procs" || exit 125
  else
    for h in /sys/fs/cgroup/*; do
      [ "$h" != /sys/fs/cgroup/unified ] && [ -e "$h/cgroup.procs" ] || continue
      d="$h/seed-sandbox/$SB_CG_ID"
      mkdir -p "$d" || exit 125
      if [ -e "$d/cpuset.cpus" ]; then
        for x in "$h/seed-sandbox" "$d"; do
          for f in cpuset.cpus cpuset.mems; do
            [ -n "$(cat "$x/$f")" ] || cat "\${x%/*}/$f" >"$x/$f" || exit 125
          done
        done
      fi
      echo $$ >"$d/cgroup.procs" || exit 125
    done
    v1=/sys/fs/cgroup
    echo "$SB_CG_MEM" >"$v1/memory/seed-sandbox/$SB_CG_ID/memory.limit_in_bytes" || exit 125
    echo "\${SB_CG_CPU#* }" >"$v1/cpu/seed-sandbox/$SB_CG_ID/cpu.cfs_period_us" || exit 125
    echo "\${SB_CG_CPU% *}" >"$v1/cpu/seed-sandbox/$SB_CG_ID/cpu.cfs_quota_us" || exit 125
    echo "$SB_CG_PIDS" >"$v1/pids/seed-sandbox/$SB_CG_ID/pids.max" || exit 125
  fi
fi
view=$(mktemp -d /tmp/.runsc-sysctl.XXXXXX) || exit 125
mount -t tmpfs -o size=16k,mode=0555 runsc-sysctl "$view" || exit 125
for d in /proc/sys/*; do
  n=\${d##*/}
  [ "$n" = net ] && continue
  mkdir "$view/$n" && mount --rbind "$d" "$view/$n" || exit 125
done
# A /proc with nothing mounted over it (at /proc/sys/.proc): the gofer and the Sentry mount a fresh
# proc from a user namespace, which the kernel allows only while one proc mount is fully visible.
mkdir "$view/.proc" && mount --bind /proc "$view/.proc" || exit 125
mount --rbind "$view" /proc/sys || exit 125
umount -l "$view" 2>/dev/null
rmdir "$view" 2>/dev/null
exec "$@"
`;

/** How long each `unshare`, `nsenter` or `umount` call on a box's namespace may take, ms. */
const NETNS_TIMEOUT_MS = 10_000;

/**
 * Makes the network namespace of a gVisor box, persistent as a bind mount of its nsfs file on
 * `path` (a stale one there is unmounted first), with `lo` up (runsc gives netstack a loopback only
 * for an `lo` that is up). With `ns`, the namespace is owned by the gVisor user namespace
 * (gvisor-userns.ts), so that runsc, running as its root, may join it.
 * @throws BoxError when `unshare` or `ip` fails (the file is removed again).
 */
export async function createBoxNetns(path: string, ns?: GVisorNamespaces): Promise<void> {
  await removeBoxNetns(path);
  if (ns) {
    await createOwnedNetns(ns, path);
    return;
  }
  writeFileSync(path, '', { mode: 0o600 });
  const made = await run(
    findExecutable('unshare') ?? '/usr/bin/unshare',
    [`--net=${path}`, '--', 'true'],
    NETNS_TIMEOUT_MS,
  );
  const lo =
    made.code === 0
      ? await run(
          findExecutable('nsenter') ?? '/usr/bin/nsenter',
          [`--net=${path}`, '--', findExecutable('ip') ?? '/sbin/ip', 'link', 'set', 'lo', 'up'],
          NETNS_TIMEOUT_MS,
        )
      : made;
  if (lo.code !== 0) {
    await removeBoxNetns(path);
    throw new BoxError(`making the box's network namespace failed: ${lo.stderr.trim()}`, {
      code: 'internal',
    });
  }
}

/** Unmounts and deletes a namespace file made by `createBoxNetns`. Idempotent. */
export async function removeBoxNetns(path: string): Promise<void> {
  if (!existsSync(path)) return;
  await run('/bin/umount', [path], NETNS_TIMEOUT_MS);
  rmSync(path, { force: true });
}

/**
 * Makes the box's network namespace at `netns` (`createBoxNetns`, owned by `ns` when given) and, unless the box's network is
 * `disabled`, runs `prepare` on it to make the interfaces netstack will take over.
 * @throws BoxError when the namespace cannot be made, or `box <id>: network setup failed: …` when
 *   `prepare` fails (then `teardown` has run and the namespace is removed again).
 */
export async function prepareBoxNetns(
  spec: Pick<EngineBoxSpec, 'id' | 'network'>,
  netns: string,
  prepare: ((ctx: GVisorNetnsContext) => Promise<void>) | undefined,
  teardown: ((id: string) => Promise<void>) | undefined,
  ns?: GVisorNamespaces,
): Promise<void> {
  await createBoxNetns(netns, ns);
  if (!prepare || spec.network.mode === 'disabled') return;
  try {
    await prepare({ id: spec.id, netns, network: spec.network });
  } catch (err) {
    await teardown?.(spec.id).catch(() => {});
    await removeBoxNetns(netns);
    throw new BoxError(`box ${spec.id}: network setup failed: ${(err as Error).message}`, {
      cause: err,
      code: codeOf(err),
    });
  }
}

export { gvisorTunnelCommand, TUNNEL_READY_LINE } from './gvisor-tunnel.ts';
