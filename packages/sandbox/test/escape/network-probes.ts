/**
 * Box-side probes of the network escape tests (network-gateway.test.ts for the container tier,
 * gvisor-network.test.ts for the gVisor tier), aimed at the host listeners of network-listeners.ts:
 *  - `addHostAddresses`: two TEST-NET-3 addresses (`HOST_A`, `HOST_B`) on a veth pair the test makes
 *    (both ends on the host), A to be named in `allowNet` by a control case, B never;
 *  - `trySockets`: ordinary TCP connects and UDP datagrams from an unprivileged python in the box;
 *  - `sendFrames`: hand-made IPv4 TCP SYNs and UDP datagrams in Ethernet frames sent on `eth0` of a
 *    network namespace with host root (python through `nsenter`), addressed to the gateway's MAC,
 *    from the box's own address and spoofed as the gateway's.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JsBox } from '../../src/index.ts';
import { run } from '../runtime-helpers.ts';

/**
 * Python sending the frames (argv: targets JSON, port, gateway MAC or '' to resolve it by ARP for
 * `10.0.2.2` in the namespace it runs in); prints `{"gateway_mac": …, "frames": n}`.
 */
const FRAMES = `
import fcntl, json, socket, struct, sys, time
targets, port, gw = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def csum(b):
    if len(b) % 2: b += b'\\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
def ip(src, dst, proto, payload):
    h = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(payload), 0x4242, 0, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack('!H', csum(h)) + h[12:] + payload
def l4(src, dst, proto, segment, at):
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack('!BBH', 0, proto, len(segment))
    c = csum(pseudo + segment) or 0xffff
    return segment[:at] + struct.pack('!H', c) + segment[at + 2:]
def syn(src, dst, sport):
    return l4(src, dst, 6, struct.pack('!HHLLBBHHH', sport, port, 4242, 0, 5 << 4, 0x02, 65535, 0, 0), 16)
def udp(src, dst, sport):
    data = b'hand-made datagram'
    return l4(src, dst, 17, struct.pack('!HHHH', sport, port, 8 + len(data), 0) + data, 6)
if not gw:
    # Any packet to 10.0.2.2 makes the kernel ARP for the gateway.
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('10.0.2.2', 9))
    for _ in range(50):
        for line in open('/proc/net/arp').read().splitlines()[1:]:
            f = line.split()
            if f[0] == '10.0.2.2' and f[3] != '00:00:00:00:00:00': gw = f[3]
        if gw: break
        time.sleep(0.05)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(('eth0', 0))
mine = fcntl.ioctl(s.fileno(), 0x8927, struct.pack('256s', b'eth0'))[18:24]  # SIOCGIFHWADDR
eth = bytes.fromhex(gw.replace(':', '')) + mine + b'\\x08\\x00'
sent = 0
for i, dst in enumerate(targets):
    for src in ('10.0.2.100', '10.0.2.2'):
        s.send(eth + ip(src, dst, 6, syn(src, dst, 40000 + i)))
        s.send(eth + ip(src, dst, 17, udp(src, dst, 41000 + i)))
        sent += 2
print(json.dumps({'gateway_mac': gw, 'frames': sent}))
`;

/** Python in the box (no privileges) trying TCP and UDP to each target; prints what happened. */
const SOCKETS = `
import json, socket, sys
targets, port = json.loads(sys.argv[1]), int(sys.argv[2])
out = {}
for dst in targets:
    c = socket.socket(); c.settimeout(3)
    try:
        c.connect((dst, port)); out[dst] = 'connected'
    except OSError as e:
        out[dst] = type(e).__name__
    finally:
        c.close()
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'ordinary datagram', (dst, port))
print(json.dumps(out))
`;

/**
 * Runs `ip <args>` on the host.
 * @returns its stdout. @throws Error with its stderr when it fails.
 */
export function ip(args: string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const octet = 10 + (process.pid % 200);
/** The host address a control case names in `allowNet` (TEST-NET-3, from this process's pid). */
export const HOST_A = `203.0.113.${octet}`;
/** The host address no case names. */
export const HOST_B = `203.0.113.${octet + 1}`;

/**
 * Makes the veth pair `<name>`/`<name>p` (both ends on the host, up) with `HOST_A` and `HOST_B`
 * (`/32`) on `<name>`.
 * @returns a function deleting the pair and with it both addresses (idempotent).
 * @throws Error when `ip` fails (the name must be at most 15 characters and not in use).
 */
export function addHostAddresses(name: string): () => void {
  ip(['link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`]);
  ip(['link', 'set', `${name}p`, 'up']);
  ip(['addr', 'add', `${HOST_A}/32`, 'dev', name]);
  ip(['addr', 'add', `${HOST_B}/32`, 'dev', name]);
  ip(['link', 'set', name, 'up']);
  return () => void spawnSync('ip', ['link', 'del', name]);
}

/**
 * Ordinary TCP connects (3 s timeout) and UDP datagrams from an unprivileged python of the box to
 * each target on `port`, then half a second for the datagrams to land.
 * @returns per target `connected` or the Python exception name of the failed connect.
 */
export async function trySockets(
  box: JsBox,
  targets: string[],
  port: number,
): Promise<Record<string, string>> {
  const r = await run(box, 'python3', ['-c', SOCKETS, JSON.stringify(targets), String(port)]);
  assert.equal(r.exitCode, 0, r.stderr);
  await sleep(500);
  return JSON.parse(r.stdout);
}

/**
 * Sends the hand-made frames to each target on `port` with host python run as
 * `nsenter <nsenterArgs> -- python3` (host root in the namespaces those arguments name), then waits
 * a second: slirp4netns turns what reaches it into host sockets at once. `gatewayMac` is the
 * gateway's MAC, or undefined to have the script resolve it by ARP in that namespace.
 * @throws AssertionError when the script fails, no gateway MAC was found, or not every frame was sent.
 */
export async function sendFrames(
  nsenterArgs: string[],
  targets: string[],
  port: number,
  gatewayMac?: string,
): Promise<void> {
  const r = spawnSync(
    'nsenter',
    [...nsenterArgs, '--', 'python3', '-c', FRAMES, JSON.stringify(targets), String(port), gatewayMac ?? ''],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  const sent = JSON.parse(r.stdout) as { gateway_mac: string | null; frames: number };
  assert.match(sent.gateway_mac ?? '', /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/, "the gateway's MAC");
  assert.equal(sent.frames, targets.length * 4);
  await sleep(1000);
}
