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
 * runsc refuses `--network=sandbox` in what it takes for the host's namespace (`isRootNS` in
 * runsc/sandbox/network.go tests whether `/proc/sys/net/core/rmem_default` exists, and on kernels ≥ 6.x
 * it exists in every namespace): the runsc launcher (`gvisor-launcher.ts`) therefore runs runsc in a
 * private mount namespace whose `/proc/sys` has no `net`, and also makes and joins the box's cgroup.
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
