/**
 * The network namespace of a gVisor box and the runsc launcher that lets runsc 20221219 use its own
 * network stack (netstack) in it, so that the Sentry runs unprivileged.
 *
 * With `--network=sandbox` runsc starts the sandbox process (the Sentry) in a new user namespace that
 * maps only `nobody` (host uid/gid 65534, capabilities of that namespace only), chrooted, and copies
 * the interfaces, addresses and routes of the sandbox's network namespace into netstack at creation:
 * the runsc parent (host root) joins that namespace, opens an `AF_PACKET` socket on each interface that
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
 * namespace. The sandbox and the gofer get mount namespaces of their own and mount a fresh `/proc`.
 */
import { execFile } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { BoxError } from '../errors.ts';
import { findExecutable } from './engine.ts';
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
# Runs runsc with /proc/sys/net hidden (generated; see src/engine/gvisor-netns.ts)
view=$(mktemp -d /tmp/.runsc-sysctl.XXXXXX) || exit 125
mount -t tmpfs -o size=16k,mode=0555 runsc-sysctl "$view" || exit 125
for d in /proc/sys/*; do
  n=\${d##*/}
  [ "$n" = net ] && continue
  mkdir "$view/$n" && mount --rbind "$d" "$view/$n" || exit 125
done
mount --rbind "$view" /proc/sys || exit 125
umount -l "$view" 2>/dev/null
rmdir "$view" 2>/dev/null
exec "$@"
`;

function run(file: string, args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 10_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stderr: String(stderr) });
    });
  });
}

/**
 * Makes the network namespace of a gVisor box, persistent as a bind mount of its nsfs file on
 * `path` (a stale one there is unmounted first), with `lo` up (runsc gives netstack a loopback only
 * for an `lo` that is up).
 * @throws BoxError when `unshare` or `ip` fails (the file is removed again).
 */
export async function createBoxNetns(path: string): Promise<void> {
  await removeBoxNetns(path);
  writeFileSync(path, '', { mode: 0o600 });
  const made = await run(findExecutable('unshare') ?? '/usr/bin/unshare', [`--net=${path}`, '--', 'true']);
  const lo =
    made.code === 0
      ? await run(findExecutable('nsenter') ?? '/usr/bin/nsenter', [
          `--net=${path}`,
          '--',
          findExecutable('ip') ?? '/sbin/ip',
          'link',
          'set',
          'lo',
          'up',
        ])
      : made;
  if (lo.code !== 0) {
    await removeBoxNetns(path);
    throw new BoxError(`making the box's network namespace failed: ${lo.stderr.trim()}`);
  }
}

/** Unmounts and deletes a namespace file made by `createBoxNetns`. Idempotent. */
export async function removeBoxNetns(path: string): Promise<void> {
  if (!existsSync(path)) return;
  await run('/bin/umount', [path]);
  rmSync(path, { force: true });
}

/**
 * The line a tunnel relay writes on stderr once it is connected (socat's own, so one reader serves
 * both relays; network/tunnel.ts).
 */
export const TUNNEL_READY_LINE = 'starting data transfer loop';

/** Host pid of a gVisor sandbox → how to run a command in it (filled by the gVisor engines of this process). */
const sandboxes = new Map<number, { rt: string[]; id: string }>();

/** Records that host pid `pid` is the sandbox of box `id`, driven with the runsc command line `rt`. */
export function registerSandbox(pid: number, rt: string[], id: string): void {
  sandboxes.set(pid, { rt, id });
}

/** Forgets the sandbox of box `id` (stopped or removed). */
export function forgetSandbox(id: string): void {
  for (const [pid, s] of sandboxes) if (s.id === id) sandboxes.delete(pid);
}

/**
 * The command that relays its stdin/stdout to TCP `127.0.0.1:port` inside the gVisor box whose
 * sandbox has host pid `pid`, or undefined when `pid` is no gVisor sandbox this process started or
 * looked up. A box's sockets live in the Sentry's netstack, which no host namespace reaches, so the
 * relay runs in the box (`runsc exec`): the host's static busybox (bound at `/.sandbox/busybox`)
 * connects with `nc` and, once connected, writes `TUNNEL_READY_LINE` on stderr and copies the
 * socket to the caller's stdout and the caller's stdin to the socket (descriptors 3 and 4 keep the
 * caller's stdio across `nc -e`). A refused connection ends it with busybox's message and exit 1.
 * The host side learns the box from this process's own records, never from the sandbox process.
 */
export function gvisorTunnelCommand(pid: number, port: number): string[] | undefined {
  const sandbox = sandboxes.get(pid);
  if (!sandbox || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  const bb = '/.sandbox/busybox';
  const relay = `echo '${TUNNEL_READY_LINE}' >&2; ${bb} cat <&3 & exec ${bb} cat >&4`;
  return [
    ...sandbox.rt,
    'exec',
    sandbox.id,
    bb,
    'sh',
    '-c',
    `exec 3<&0 4>&1; exec ${bb} nc 127.0.0.1 ${port} -e ${bb} sh -c "${relay}"`,
  ];
}
