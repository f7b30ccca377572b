/**
 * The box's gateway: a network namespace of its own between the box and slirp4netns, where the
 * network policy is enforced. The box cannot reach it: it is not the box's namespace, the box holds no
 * handle on it, and nothing in it listens. Whatever the box sends (ordinary sockets, raw IP packets,
 * hand-made Ethernet frames, with any capability inside its own namespace) reaches the outside only
 * by being routed through this namespace's `forward` chain.
 *
 * ```
 * box netns                 gateway netns (/run/netns/sbx-<id>)                host netns
 * eth0 10.0.2.100/24 ──veth── veth0 10.0.2.2/24 + 10.0.2.3/32
 *   default via 10.0.2.2     tap0 198.18.0.100/24 ── slirp4netns ── host sockets (198.18.0.2 = host 127.0.0.1)
 * ```
 *
 * The box keeps seeing the classic slirp addresses (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3); the
 * slirp4netns side uses `198.18.0.0/24` (RFC 2544 benchmarking range, never routed), so box addresses
 * and slirp addresses never meet. The ruleset (table `inet sandbox`):
 *
 * - `prerouting` (nat): DNS `10.0.2.3:53` → the per-box resolver on the host (`198.18.0.2:<port>`) or
 *   slirp4netns's forwarder (`198.18.0.3:53`); `10.0.2.2:3128` → the secrets proxy; `10.0.2.2:*` →
 *   the host loopback only when `allowNet` names it; inbound publications from slirp4netns → the box.
 * - `postrouting` (nat): everything leaving through `tap0` is masqueraded to `198.18.0.100`.
 * - `forward` (filter, policy drop): replies (tap0 → veth0); only IPv4 from `10.0.2.100` in through
 *   `veth0` and out through `tap0`, every packet of a connection checked (so a destination the policy
 *   stops allowing is refused from the next packet on: established connections are cut); replies of
 *   inbound publications; the box's DNATed connections (resolver, proxy, and the host loopback only
 *   while `allowNet` names it); then host-reserved destinations (`destinations.ts`: loopback,
 *   link-local, the box and slirp networks, the host's own addresses at setup time) unless named
 *   exactly in `allowNet`; then the allow sets (`nets`: IP/CIDR rules, `hosts`: addresses admitted by
 *   the DNS resolver) or, for an empty `allowNet`, everything else. Refusals are immediate (TCP reset,
 *   ICMP port unreachable).
 * - `input` (filter): the gateway itself answers nothing from the box (reset/unreachable).
 */
import { spawn } from 'node:child_process';
import { lstatSync, mkdirSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { hostIpv4Addresses, isLocalOnly, RESERVED_IPV4 } from './destinations.ts';
import { GUEST_IP, inNetns, SLIRP_DNS_IP } from './netns.ts';
import { type AllowPolicy, allowsHostLoopback, HOST_LOOPBACK_IP } from './policy.ts';

/** Host loopback as slirp4netns serves it on the gateway side (its `--cidr` host address). */
export const SLIRP_HOST_IP = '198.18.0.2';
/** slirp4netns's DNS forwarder on the gateway side. */
export const SLIRP_RESOLVER_IP = '198.18.0.3';
/** The gateway namespace's own address on slirp4netns's network (`tap0`), target of host forwards. */
export const SLIRP_GUEST_IP = '198.18.0.100';
/** MTU of every link (slirp4netns's maximum). */
export const MTU = 65520;

/** What the ruleset needs to know about the box. */
export interface GatewayRulesOptions {
  policy: AllowPolicy;
  /** UDP port of the per-box resolver on the host's 127.0.0.1 (absent: slirp4netns resolves). */
  dnsPort?: number;
  /** TCP port of the secrets proxy on the host's 127.0.0.1 (absent: no proxy). */
  proxyPort?: number;
  /** The host's own IPv4 addresses; default: those configured now. */
  hostAddresses?: string[];
  /** IPv4 addresses the resolver admitted already for listed names (the `hosts` set's elements). */
  hosts?: string[];
}

/** The gateway's nftables ruleset (`nft -f` syntax); see the module comment. */
export function gatewayRules(options: GatewayRulesOptions): string {
  const { policy, dnsPort, proxyPort } = options;
  const nat: string[] = [];
  /** `forward` rules for the box's DNATed connections (checked on every packet, so policy changes cut them). */
  const accepted: string[] = [];
  if (dnsPort !== undefined) {
    nat.push(`iifname "veth0" ip daddr ${SLIRP_DNS_IP} udp dport 53 dnat ip to ${SLIRP_HOST_IP}:${dnsPort}`);
    accepted.push(`ct status dnat ip daddr ${SLIRP_HOST_IP} udp dport ${dnsPort} accept`);
  } else {
    nat.push(
      `iifname "veth0" ip daddr ${SLIRP_DNS_IP} meta l4proto { tcp, udp } th dport 53 dnat ip to ${SLIRP_RESOLVER_IP}:53`,
    );
    accepted.push(`ct status dnat ip daddr ${SLIRP_RESOLVER_IP} th dport 53 accept`);
  }
  if (proxyPort !== undefined) {
    nat.push(
      `iifname "veth0" ip daddr ${HOST_LOOPBACK_IP} tcp dport 3128 dnat ip to ${SLIRP_HOST_IP}:${proxyPort}`,
    );
    accepted.push(`ct status dnat ip daddr ${SLIRP_HOST_IP} tcp dport ${proxyPort} accept`);
  }
  if (allowsHostLoopback(policy)) {
    nat.push(`iifname "veth0" ip daddr ${HOST_LOOPBACK_IP} dnat ip to ${SLIRP_HOST_IP}`);
    accepted.push(`ct status dnat ct original ip daddr ${HOST_LOOPBACK_IP} accept`);
  }
  nat.push(`iifname "tap0" ip daddr ${SLIRP_GUEST_IP} dnat ip to ${GUEST_IP}`);

  const ipv4 = (list: Iterable<string>) => [...list].filter((a) => !a.includes(':'));
  const named = ipv4(policy.exact).filter((a) => !isLocalOnly(a));
  const reserved = [...RESERVED_IPV4, ...(options.hostAddresses ?? hostIpv4Addresses())];
  const nets = ipv4(policy.cidrs);
  const hosts = policy.open ? [] : ipv4(options.hosts ?? []);
  const set = (name: string, elements: string[]) =>
    `  set ${name} { type ipv4_addr; flags interval; auto-merge;${elements.length ? ` elements = { ${elements.join(', ')} };` : ''} }`;
  return [
    'table inet sandbox {',
    set('named', named),
    set('reserved', reserved),
    set('nets', nets),
    `  set hosts { type ipv4_addr;${hosts.length ? ` elements = { ${hosts.join(', ')} };` : ''} }`,
    '  chain prerouting {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    ...nat.map((r) => `    ${r}`),
    '  }',
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    '    oifname "tap0" masquerade',
    '  }',
    '  chain refuse {',
    '    meta l4proto tcp reject with tcp reset',
    '    reject with icmpx type port-unreachable',
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter; policy drop;',
    '    ct state invalid drop',
    '    iifname "tap0" oifname "veth0" ct state established,related accept',
    '    iifname "tap0" oifname "veth0" ct status dnat accept',
    '    iifname != "veth0" drop',
    '    oifname != "tap0" goto refuse',
    '    meta nfproto != ipv4 drop',
    `    ip saddr != ${GUEST_IP} drop`,
    '    ct direction reply ct status dnat accept',
    ...accepted.map((r) => `    ${r}`),
    '    ip daddr @named accept',
    '    ip daddr @reserved goto refuse',
    '    ip daddr @nets accept',
    '    ip daddr @hosts accept',
    policy.open ? '    accept' : '    goto refuse',
    '  }',
    '  chain input {',
    '    type filter hook input priority filter; policy drop;',
    '    iifname "lo" accept',
    '    ct state established,related accept',
    '    iifname "veth0" goto refuse',
    '  }',
    '}',
    '',
  ].join('\n');
}

function exec(cmd: string, args: string[], input?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'ignore', 'pipe'] });
    const err: Buffer[] = [];
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.stdin.on('error', () => {});
    child.on('close', (code) =>
      code === 0
        ? resolve()
        : reject(
            new Error(`${cmd} ${args.join(' ')} failed (${code}): ${Buffer.concat(err).toString().trim()}`),
          ),
    );
    child.stdin.end(input ?? '');
  });
}

/** Where gateway namespaces are bind-mounted: iproute2's directory, so `ip -n`/`netns NAME` find them. */
export const NETNS_DIR = '/run/netns';

/** The name of box `id`'s gateway namespace (a file in `/run/netns`). */
export function gatewayName(id: string): string {
  return `sbx-${id}`;
}

/** Whether `/run/netns/<name>` exists as a file or a symlink (dangling included). */
function present(nsPath: string): boolean {
  try {
    lstatSync(nsPath);
    return true;
  } catch {
    return false;
  }
}

/**
 * Creates the gateway namespace `name`, persistent as a bind mount of its nsfs file at
 * `/run/netns/<name>` (as `ip netns add` does; a stale one of the same name is removed first).
 * slirp4netns, `linkBox` and `loadGatewayRules` can run on it as soon as this resolves.
 * `options.nice`: run `unshare` at this niceness (the helper's spare gateways: 19).
 * @throws Error when `unshare` fails (the file is removed again).
 */
export async function createGatewayNamespace(name: string, options: { nice?: number } = {}): Promise<string> {
  const nsPath = join(NETNS_DIR, name);
  mkdirSync(NETNS_DIR, { recursive: true });
  if (present(nsPath)) await removeGatewayNamespace(name);
  writeFileSync(nsPath, '', { mode: 0o600 });
  try {
    const unshare = ['unshare', `--net=${nsPath}`, '--', 'true'];
    if (options.nice === undefined) await exec(unshare[0]!, unshare.slice(1));
    else await exec('nice', ['-n', String(options.nice), ...unshare]);
  } catch (error) {
    rmSync(nsPath, { force: true });
    throw error;
  }
  return nsPath;
}

/**
 * Names the gateway namespace `spare` (a file in `/run/netns`, made by `createGatewayNamespace`) also
 * `name`: `/run/netns/<name>` becomes a relative symlink to it, which `nsenter --net=`, `ip … netns
 * <name>` and `umount` follow. A stale `name` is removed first.
 */
export async function bindGatewayNamespace(name: string, spare: string): Promise<void> {
  const nsPath = join(NETNS_DIR, name);
  if (present(nsPath)) await removeGatewayNamespace(name);
  symlinkSync(spare, nsPath);
}

/**
 * The gateway namespace file `/run/netns/<name>` points to: `name` itself, or for a symlink made by
 * `bindGatewayNamespace` the name it links to; null when there is no such file or the link leads out
 * of `/run/netns`.
 */
export function gatewayTarget(name: string): string | null {
  const nsPath = join(NETNS_DIR, name);
  try {
    if (!lstatSync(nsPath).isSymbolicLink()) return name;
    const target = resolve(NETNS_DIR, readlinkSync(nsPath));
    return dirname(target) === NETNS_DIR ? basename(target) : null;
  } catch {
    return null;
  }
}

/**
 * Turns IPv6 off in the gateway namespace, loads `rules` (`nft -f`) and then turns IPv4 forwarding on,
 * in one shell run inside it (forwarding starts only with a ruleset in force). A ruleset loaded before
 * is replaced in the same nft transaction (the table is deleted and made again), so the box never sees
 * a moment without one; connections already tracked keep their NAT and meet the new `forward` chain
 * with their next packet. `options.fresh`: the namespace was just made and has no ruleset, so none is
 * deleted (nft then runs in about a third of the time: a transaction that deletes a table first reads
 * the kernel's ruleset).
 * @throws Error with the failing command's stderr (the gateway namespace is gone: `ENOENT` text).
 */
export async function loadGatewayRules(
  name: string,
  rules: string,
  options: { fresh?: boolean } = {},
): Promise<void> {
  const script = [
    'set -e',
    'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6',
    'nft -f -',
    'echo 1 > /proc/sys/net/ipv4/ip_forward',
  ].join('\n');
  const input = options.fresh ? rules : `table inet sandbox\ndelete table inet sandbox\n${rules}`;
  await inNetns(join(NETNS_DIR, name), 'sh', ['-c', script], input);
}

/** Adds addresses to the gateway's `hosts` set (what the DNS resolver admitted for a listed name). */
export async function admitHosts(name: string, addresses: string[]): Promise<void> {
  await inNetns(join(NETNS_DIR, name), 'nft', [
    'add',
    'element',
    'inet',
    'sandbox',
    'hosts',
    `{ ${addresses.join(', ')} }`,
  ]);
}

/**
 * Removes the gateway namespace `name` (unmounts and deletes its file); the veth pair goes with it.
 * For a symlink made by `bindGatewayNamespace` the namespace file it points to is unmounted and
 * deleted first, then the link. Idempotent: a missing file is fine.
 */
export async function removeGatewayNamespace(name: string): Promise<void> {
  const nsPath = join(NETNS_DIR, name);
  let link: boolean;
  try {
    link = lstatSync(nsPath).isSymbolicLink();
  } catch {
    return;
  }
  if (link) {
    const target = gatewayTarget(name);
    if (target !== null && target !== name) await removeGatewayNamespace(target);
  } else {
    await exec('umount', [nsPath]).catch(() => {});
  }
  rmSync(nsPath, { force: true });
}
