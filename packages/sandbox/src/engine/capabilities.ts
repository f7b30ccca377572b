/**
 * Linux capability sets of a box: Docker's default list without `NET_RAW`, with
 * `advanced.capabilities.add/drop` (spec 002 "AdvancedBoxOptions") applied on top.
 */
import { BoxError } from '../errors.ts';

/**
 * The default capability set of a box, OCI `CAP_` names: Docker/moby's default set (moby
 * `oci/caps/defaults.go`) without `CAP_NET_RAW`, so a box cannot open raw IP or packet sockets
 * (hand-made packets and frames) unless `advanced.capabilities.add` names `NET_RAW`. A `ping` that
 * uses ICMP datagram sockets (iputils) works without it: the box's config.json sets its namespace's
 * `net.ipv4.ping_group_range` (OCI `linux.sysctl`) to every group the box has (`0 65535` in a user
 * namespace). busybox `ping` opens a raw socket and needs `NET_RAW`.
 */
export const DEFAULT_CAPABILITIES: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_FSETID',
  'CAP_FOWNER',
  'CAP_MKNOD',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETFCAP',
  'CAP_SETPCAP',
  'CAP_NET_BIND_SERVICE',
  'CAP_SYS_CHROOT',
  'CAP_KILL',
  'CAP_AUDIT_WRITE',
];

/** Every capability name Linux 6.x knows (capability(7)), OCI `CAP_` form. */
export const KNOWN_CAPABILITIES: readonly string[] = [
  'CAP_CHOWN',
  'CAP_DAC_OVERRIDE',
  'CAP_DAC_READ_SEARCH',
  'CAP_FOWNER',
  'CAP_FSETID',
  'CAP_KILL',
  'CAP_SETGID',
  'CAP_SETUID',
  'CAP_SETPCAP',
  'CAP_LINUX_IMMUTABLE',
  'CAP_NET_BIND_SERVICE',
  'CAP_NET_BROADCAST',
  'CAP_NET_ADMIN',
  'CAP_NET_RAW',
  'CAP_IPC_LOCK',
  'CAP_IPC_OWNER',
  'CAP_SYS_MODULE',
  'CAP_SYS_RAWIO',
  'CAP_SYS_CHROOT',
  'CAP_SYS_PTRACE',
  'CAP_SYS_PACCT',
  'CAP_SYS_ADMIN',
  'CAP_SYS_BOOT',
  'CAP_SYS_NICE',
  'CAP_SYS_RESOURCE',
  'CAP_SYS_TIME',
  'CAP_SYS_TTY_CONFIG',
  'CAP_MKNOD',
  'CAP_LEASE',
  'CAP_AUDIT_WRITE',
  'CAP_AUDIT_CONTROL',
  'CAP_SETFCAP',
  'CAP_MAC_OVERRIDE',
  'CAP_MAC_ADMIN',
  'CAP_SYSLOG',
  'CAP_WAKE_ALARM',
  'CAP_BLOCK_SUSPEND',
  'CAP_AUDIT_READ',
  'CAP_PERFMON',
  'CAP_BPF',
  'CAP_CHECKPOINT_RESTORE',
];

/**
 * Normalizes a capability name: case-insensitive, with or without the `CAP_` prefix
 * (`net_raw`, `NET_RAW`, `CAP_NET_RAW` → `CAP_NET_RAW`); `ALL` stays `ALL`.
 * @throws BoxError naming `advanced.capabilities.<field>` when the name is not a Linux capability.
 */
export function normalizeCapability(name: string, field: 'add' | 'drop'): string {
  const upper = name.trim().toUpperCase();
  if (upper === 'ALL') return 'ALL';
  const full = upper.startsWith('CAP_') ? upper : `CAP_${upper}`;
  if (!KNOWN_CAPABILITIES.includes(full)) {
    throw new BoxError(
      `advanced.capabilities.${field}: '${name}' is not a Linux capability name (e.g. NET_RAW or CAP_NET_RAW)`,
      { field: `advanced.capabilities.${field}`, code: 'invalid_option' },
    );
  }
  return full;
}

/**
 * The effective capability list of a box: the default set, minus `drop`, plus `add`
 * (`ALL` in `drop` empties the default set first; `ALL` in `add` grants every capability), sorted.
 * @throws BoxError for an unknown capability name.
 */
export function resolveCapabilities(caps: { add: string[]; drop: string[] }): string[] {
  const add = caps.add.map((c) => normalizeCapability(c, 'add'));
  const drop = caps.drop.map((c) => normalizeCapability(c, 'drop'));
  let set = new Set(drop.includes('ALL') ? [] : DEFAULT_CAPABILITIES);
  for (const c of drop) set.delete(c);
  if (add.includes('ALL')) set = new Set(KNOWN_CAPABILITIES);
  for (const c of add) if (c !== 'ALL') set.add(c);
  return [...set].sort();
}
