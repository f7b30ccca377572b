/**
 * The box's link to its gateway (`gateway.ts`): a veth pair between the box's network namespace
 * (`eth0`, 10.0.2.100/24, default route via 10.0.2.2) and its gateway namespace (`veth0`, 10.0.2.2/24
 * and the DNS address 10.0.2.3/32). The container engine runs `linkScript` from the runtime's
 * `createRuntime` hook (engine/scripts.ts `NET_LINK_SH`); the gVisor tier and runc boxes use `linkBox`.
 */
import { join } from 'node:path';
import { MTU, NETNS_DIR } from './gateway.ts';
import { GUEST_IP, inNetns, SLIRP_DNS_IP } from './netns.ts';
import { HOST_LOOPBACK_IP } from './policy.ts';

/**
 * The shell script (POSIX `sh`) that links a box to its gateway `name`, run inside the box's network
 * namespace: two `ip -batch` runs (each `ip` start costs about 3 ms here, its netlink requests well
 * under 1 ms) — a veth pair (`eth0` here, `veth0` made in the gateway namespace), the box's address
 * and its default route via the gateway (accepted before the peer is up: the gateway is on `eth0`'s
 * prefix); then, entered with `nsenter` (`ip -n` would also make a mount namespace and mount a sysfs,
 * ≈ 1.5 ms more here and more with every mount of the host), the gateway's addresses and `veth0` up —
 * and ICMP datagram sockets (`ping` without `NET_RAW`) for every group in the box. Exits non-zero
 * with the failing command's stderr.
 */
export function linkScript(name: string): string {
  return [
    'set -e',
    'echo "0 2147483647" > /proc/sys/net/ipv4/ping_group_range',
    'ip -batch - <<EOF',
    `link add eth0 mtu ${MTU} type veth peer name veth0 mtu ${MTU} netns ${name}`,
    `addr add ${GUEST_IP}/24 dev eth0`,
    'link set eth0 up',
    `route add default via ${HOST_LOOPBACK_IP}`,
    'EOF',
    `exec nsenter --net=${join(NETNS_DIR, name)} ip -batch - <<EOF`,
    `addr add ${HOST_LOOPBACK_IP}/24 dev veth0`,
    `addr add ${SLIRP_DNS_IP}/32 dev veth0`,
    'link set veth0 up',
    'EOF',
    '',
  ].join('\n');
}

/**
 * Links the box to its gateway `name` (`linkScript`, in one shell run inside the box's namespace).
 * `box`: the box init's host pid, or its namespace file.
 * @throws Error with the failing command's stderr.
 */
export async function linkBox(name: string, box: number | string): Promise<void> {
  await inNetns(box, 'sh', ['-c', linkScript(name)]);
}
