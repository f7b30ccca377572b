/**
 * `allowNet` rules (spec 002 `NetworkSpec.allowNet`): hostnames (exact, or `*.` wildcard for any
 * subdomain), IPv4/IPv6 addresses and CIDR blocks. An empty list means full outbound access.
 */
import { BlockList, isIP, SocketAddress } from 'node:net';
import { BoxError } from '../errors.ts';

/** Name a box uses to reach the host's loopback (`127.0.0.1` on the host), when `allowNet` permits it. */
export const HOST_LOOPBACK_NAME = 'host.sandbox.internal';
/** Address of the host's loopback as seen from a box (the slirp4netns gateway). */
export const HOST_LOOPBACK_IP = '10.0.2.2';

const LABEL_RE = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/** Parsed `allowNet` rules. */
export interface AllowPolicy {
  /** True when the list was empty: every destination except the host loopback is reachable. */
  open: boolean;
  /** Exact hostnames, lower case, without a trailing dot. */
  names: Set<string>;
  /** Suffixes of `*.` rules, with their leading dot (`.example.com`). */
  suffixes: string[];
  /** IP addresses and CIDR blocks. */
  addresses: BlockList;
  /** The textual IP and CIDR rules (`10.0.0.0/8`, `192.0.2.1`), for the firewall. */
  cidrs: string[];
  /**
   * Addresses named exactly (IP entries and `/32`/`/128` CIDRs), normalized (IPv4-mapped IPv6 as
   * IPv4): the only rules that admit a host-reserved destination (`destinations.ts`).
   */
  exact: Set<string>;
}

/** Lower-cases a hostname and strips one trailing dot. */
export function normalizeHostname(name: string): string {
  const n = name.toLowerCase();
  return n.endsWith('.') ? n.slice(0, -1) : n;
}

function validHostname(name: string): boolean {
  return name.length > 0 && name.length <= 253 && name.split('.').every((l) => LABEL_RE.test(l));
}

/**
 * Parses `allowNet`. Accepted entries: `example.com`, `*.example.com`, `192.0.2.1`, `2001:db8::1`,
 * `10.0.0.0/8`, `2001:db8::/32`.
 * @throws BoxError naming `network.allowNet[i]` for anything else.
 */
export function parseAllowNet(allowNet: readonly string[]): AllowPolicy {
  const policy: AllowPolicy = {
    open: allowNet.length === 0,
    names: new Set(),
    suffixes: [],
    addresses: new BlockList(),
    cidrs: [],
    exact: new Set(),
  };
  allowNet.forEach((raw, i) => {
    const field = `network.allowNet[${i}]`;
    const bad = (rule: string): never => {
      throw new BoxError(`invalid box option ${field}: '${raw}' ${rule}`, { field });
    };
    if (typeof raw !== 'string' || raw.trim() === '') bad('must be a hostname, IP address or CIDR');
    const entry = raw.trim();
    const slash = entry.indexOf('/');
    if (slash >= 0) {
      const ip = entry.slice(0, slash);
      const bits = entry.slice(slash + 1);
      const family = isIP(ip);
      const max = family === 4 ? 32 : 128;
      if (family === 0 || !/^\d{1,3}$/.test(bits) || Number(bits) > max) {
        bad(`is not a CIDR block (address/prefix, prefix 0–${family === 6 ? 128 : 32})`);
      }
      policy.addresses.addSubnet(ip, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
      policy.cidrs.push(`${ip}/${bits}`);
      if (Number(bits) === max) policy.exact.add(canonicalIp(ip));
      return;
    }
    const family = isIP(entry);
    if (family !== 0) {
      policy.addresses.addAddress(entry, family === 4 ? 'ipv4' : 'ipv6');
      policy.cidrs.push(entry);
      policy.exact.add(canonicalIp(entry));
      return;
    }
    const name = normalizeHostname(entry);
    if (entry.startsWith('*.')) {
      if (!validHostname(name.slice(2))) bad('is not a valid wildcard hostname (`*.` then a hostname)');
      policy.suffixes.push(name.slice(1));
      return;
    }
    if (!validHostname(name)) bad('is not a valid hostname, IP address or CIDR');
    policy.names.add(name);
  });
  return policy;
}

/** True when the hostname is listed exactly or under a `*.` rule (always true for an open policy). */
export function allowsName(policy: AllowPolicy, hostname: string): boolean {
  if (policy.open) return true;
  const name = normalizeHostname(hostname);
  return policy.names.has(name) || policy.suffixes.some((s) => name.endsWith(s));
}

/** True when an IP address (not a name) is covered by an IP or CIDR rule. */
export function allowsAddress(policy: AllowPolicy, ip: string): boolean {
  const family = isIP(ip);
  if (family === 0) return false;
  return policy.addresses.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * True when the box may reach the host's loopback: only when `allowNet` names it, by
 * `host.sandbox.internal` itself or `*.sandbox.internal`, or by the address `10.0.2.2` itself (or
 * `10.0.2.2/32`). Wider rules (`*.internal`, `10.0.2.0/24`, `10.0.0.0/8`) do not.
 */
export function allowsHostLoopback(policy: AllowPolicy): boolean {
  if (policy.open) return false;
  return (
    policy.names.has(HOST_LOOPBACK_NAME) ||
    policy.suffixes.includes(HOST_LOOPBACK_NAME.slice(HOST_LOOPBACK_NAME.indexOf('.'))) ||
    policy.exact.has(HOST_LOOPBACK_IP)
  );
}

/** Canonical text of an IP literal; IPv4-mapped IPv6 (`::ffff:7f00:1`) becomes IPv4 (`127.0.0.1`). */
export function canonicalIp(ip: string): string {
  if (isIP(ip) === 4) return new SocketAddress({ address: ip }).address;
  const text = new SocketAddress({ address: ip, family: 'ipv6' }).address;
  return /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(text)?.[1] ?? text;
}
