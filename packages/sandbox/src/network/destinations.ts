/**
 * Which destinations count as "the host", decided on normalized addresses (never on spellings).
 *
 * Host-reserved destinations are: loopback (`127.0.0.0/8`, `::1`), unspecified (`0.0.0.0/8`, `::`),
 * link-local (`169.254.0.0/16`, `fe80::/10`), multicast and broadcast, the boxes' own networks
 * (`10.0.2.0/24` seen by the box, `198.18.0.0/24` behind its policy namespace), IPv6 forms that carry
 * an IPv4 address the host may route to itself (IPv4-compatible `::/96`, NAT64 `64:ff9b::/96`, 6to4
 * `2002::/16`, Teredo `2001::/32`), and every address configured on the host's interfaces. IPv4-mapped
 * IPv6 (`::ffff:a.b.c.d`, any spelling) is the IPv4 address it maps.
 *
 * The rule: such a destination is reachable only when `allowNet` names it exactly (an IP entry or a
 * `/32`/`/128` CIDR equal to it); an empty `allowNet`, a hostname rule or a wider CIDR never admits it.
 * Loopback and unspecified addresses are never admitted by IP: in `allowNet` they mean the box's own
 * loopback; the host's loopback is named only by `host.sandbox.internal` or `10.0.2.2`.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import {
  type AllowPolicy,
  allowsAddress,
  allowsHostLoopback,
  allowsName,
  canonicalIp,
  HOST_LOOPBACK_IP,
  HOST_LOOPBACK_NAME,
  normalizeHostname,
} from './policy.ts';

/** Network of the slirp4netns side of a box's policy namespace (never visible to the box). */
export const SLIRP_CIDR = '198.18.0.0/24';
/** Network the box sees (its `eth0`, gateway `10.0.2.2`, DNS `10.0.2.3`). */
export const BOX_CIDR = '10.0.2.0/24';

/** IPv4 blocks that are host-reserved (see the module comment), as CIDR strings for the firewall. */
export const RESERVED_IPV4: readonly string[] = [
  '0.0.0.0/8',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '224.0.0.0/4',
  '255.255.255.255/32',
  BOX_CIDR,
  SLIRP_CIDR,
];
const RESERVED_IPV6: readonly [string, number][] = [
  ['::', 96],
  ['::1', 128],
  ['fe80::', 10],
  ['ff00::', 8],
  ['64:ff9b::', 96],
  ['2002::', 16],
  ['2001::', 32],
];

/** Loopback and unspecified: the box's own when named in `allowNet`, never a host destination by IP. */
const LOCAL_ONLY = new BlockList();
LOCAL_ONLY.addSubnet('0.0.0.0', 8, 'ipv4');
LOCAL_ONLY.addSubnet('127.0.0.0', 8, 'ipv4');
LOCAL_ONLY.addSubnet('::', 127, 'ipv6');

const RESERVED = new BlockList();
for (const cidr of RESERVED_IPV4) {
  const [ip, bits] = cidr.split('/');
  RESERVED.addSubnet(ip!, Number(bits), 'ipv4');
}
for (const [ip, bits] of RESERVED_IPV6) RESERVED.addSubnet(ip, bits, 'ipv6');

/** True for a loopback or unspecified IP (the box's own when named in `allowNet`, never the host's). */
export function isLocalOnly(ip: string): boolean {
  const a = normalizeAddress(ip);
  return a !== null && LOCAL_ONLY.check(a.address, a.family);
}

/** A normalized address: canonical text, IPv4-mapped IPv6 turned into IPv4. */
export interface Address {
  address: string;
  family: 'ipv4' | 'ipv6';
}

/**
 * Normalizes an IP literal: `::FFFF:7f00:1`, `0:0:0:0:0:ffff:127.0.0.1` → `127.0.0.1` (ipv4);
 * other IPv6 to its canonical compressed form. Returns null for anything that is not an IP literal
 * (names, `0x7f.1` and other inet_aton spellings: those are resolved first, see `resolveDestination`).
 */
export function normalizeAddress(ip: string): Address | null {
  const bare = ip.split('%')[0]!;
  if (isIP(bare) === 0) return null;
  const address = canonicalIp(bare);
  return { address, family: isIP(address) === 4 ? 'ipv4' : 'ipv6' };
}

/** Every address configured on the host's interfaces right now (normalized), as a BlockList. */
export function hostAddresses(): BlockList {
  const list = new BlockList();
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) {
      const n = normalizeAddress(a.address);
      if (n) list.addAddress(n.address, n.family);
    }
  }
  return list;
}

/** The host's own IPv4 addresses (normalized, deduplicated), for the firewall. */
export function hostIpv4Addresses(): string[] {
  const out = new Set<string>();
  for (const addresses of Object.values(networkInterfaces())) {
    for (const a of addresses ?? []) {
      const n = normalizeAddress(a.address);
      if (n?.family === 'ipv4') out.add(n.address);
    }
  }
  return [...out];
}

/** True when a normalized address is host-reserved (see the module comment). */
export function isHostReserved(a: Address, host: BlockList = hostAddresses()): boolean {
  return RESERVED.check(a.address, a.family) || host.check(a.address, a.family);
}

/** True when `allowNet` names this normalized address exactly (an IP entry or a full-length CIDR). */
export function namesExactly(policy: AllowPolicy, a: Address): boolean {
  return policy.exact.has(a.address);
}

/**
 * True when a box may reach the IP destination `a` (normalized): host-reserved addresses only when
 * named exactly (loopback and unspecified never), others when the policy is open or an IP/CIDR rule
 * covers them.
 */
export function admitsAddress(policy: AllowPolicy, a: Address, host: BlockList = hostAddresses()): boolean {
  if (LOCAL_ONLY.check(a.address, a.family)) return false;
  if (isHostReserved(a, host)) return namesExactly(policy, a);
  return policy.open || allowsAddress(policy, a.address);
}

/** `lookup(name)` as `dns.promises.lookup(name, { all: true })` returns it; replaceable in tests. */
export type Lookup = (name: string) => Promise<{ address: string; family: number }[]>;

const defaultLookup: Lookup = (name) => dnsLookup(name, { all: true, order: 'ipv4first' });

/**
 * The address a host-side client (the secrets proxy) must dial for a destination the box asked for,
 * or null when the box may not reach it. `rawHost` is what the box sent (name or IP literal, with or
 * without `[]`): `host.sandbox.internal`/`10.0.2.2` → `127.0.0.1` when `allowNet` names the host's
 * loopback; an IP literal is normalized and checked by `admitsAddress`; a name must be allowed by
 * `allowNet` and is resolved here (so `localhost`, `2130706433`, `0x7f.1` are checked as the
 * addresses they resolve to), and the first resolved address that is not host-reserved is returned.
 * The caller connects to the returned address, never to the name, so what was checked is what is
 * reached.
 */
export async function resolveDestination(
  policy: AllowPolicy,
  rawHost: string,
  lookup: Lookup = defaultLookup,
): Promise<string | null> {
  const host = normalizeHostname(rawHost.replace(/^\[(.*)\]$/, '$1'));
  const literal = normalizeAddress(host);
  if (host === HOST_LOOPBACK_NAME || literal?.address === HOST_LOOPBACK_IP) {
    return allowsHostLoopback(policy) ? '127.0.0.1' : null;
  }
  const local = hostAddresses();
  if (literal) return admitsAddress(policy, literal, local) ? literal.address : null;
  if (!allowsName(policy, host)) return null;
  let found: { address: string }[];
  try {
    found = await lookup(host);
  } catch {
    return null;
  }
  for (const { address } of found) {
    const a = normalizeAddress(address);
    if (a && !LOCAL_ONLY.check(a.address, a.family) && !isHostReserved(a, local)) return a.address;
  }
  return null;
}
