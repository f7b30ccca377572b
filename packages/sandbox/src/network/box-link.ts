/**
 * The box's link to its gateway (`gateway.ts`): a veth pair between the box's network namespace
 * (`eth0`, 10.0.2.100/24, default route via 10.0.2.2) and its gateway namespace (`veth0`, 10.0.2.2/24
 * and the DNS address 10.0.2.3/32). The container engine runs `linkScript` from the runtime's
 * `createRuntime` hook (engine/scripts.ts `NET_LINK_SH`); the gVisor tier and runc boxes use `linkBox`.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { MTU, NETNS_DIR } from './gateway.ts';
import { GUEST_IP, SLIRP_DNS_IP } from './netns.ts';
import { HOST_LOOPBACK_IP } from './policy.ts';

/**
 * The shell script (POSIX `sh`) that links a box to its gateway `name`, run by host root in the
 * host's namespaces with the box's network namespace file (`/proc/<pid>/ns/net` or a namespace bind
 * mount) as `$1`, either as `sh -c <script> sh <netns>` or sourced (`.`) by a shell that set `$1`.
 * Four processes, no shell of its own: `nsenter` into the box's namespace running `ip -batch` (a veth
 * pair, `eth0` there and `veth0` made in the gateway namespace; the box's address and its default
 * route via the gateway, accepted before the peer is up since the gateway is on `eth0`'s prefix), then
 * `nsenter` into the gateway running `ip -batch` (the gateway's addresses, `veth0` up). Each `ip`
 * start costs about 3 ms here, its netlink requests well under 1 ms; `ip -n` would also make a mount
 * namespace and mount a sysfs (≈ 1.5 ms more here, more with every mount of the host). ICMP datagram
 * sockets for the box's groups (`ping` without `NET_RAW`) are the runtime's: the engine's OCI config
 * sets `net.ipv4.ping_group_range` (engine.ts). Exits non-zero (`set -e`) with the failing command's
 * stderr.
 */
export function linkScript(name: string): string {
  return [
    'set -e',
    `nsenter --net="$1" ip -batch - <<'EOF'`,
    `link add eth0 mtu ${MTU} type veth peer name veth0 mtu ${MTU} netns ${name}`,
    `addr add ${GUEST_IP}/24 dev eth0`,
    'link set eth0 up',
    `route add default via ${HOST_LOOPBACK_IP}`,
    'EOF',
    `nsenter --net=${join(NETNS_DIR, name)} ip -batch - <<'EOF'`,
    `addr add ${HOST_LOOPBACK_IP}/24 dev veth0`,
    `addr add ${SLIRP_DNS_IP}/32 dev veth0`,
    'link set veth0 up',
    'EOF',
    '',
  ].join('\n');
}

/**
 * Links the box to its gateway `name` (`linkScript`, in one `sh` run).
 * `box`: the box init's host pid, or its network namespace file.
 * @throws Error `linking the box to <name> failed (<exit code>): <stderr>`.
 */
export function linkBox(name: string, box: number | string): Promise<void> {
  const netns = typeof box === 'number' ? `/proc/${box}/ns/net` : box;
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', linkScript(name), 'sh', netns], { stdio: ['ignore', 'ignore', 'pipe'] });
    const err: Buffer[] = [];
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve();
      else
        reject(
          new Error(`linking the box to ${name} failed (${code}): ${Buffer.concat(err).toString().trim()}`),
        );
    });
  });
}
