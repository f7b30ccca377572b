/**
 * Box-side probes of the network escape tests (network-gateway.test.ts for the container tier,
 * gvisor-network.test.ts for the gVisor tier), aimed at the host listeners of network-listeners.ts:
 *  - `addHostAddresses`: two TEST-NET-3 addresses (`HOST_A`, `HOST_B`) on a veth pair the test makes
 *    (both ends on the host), A to be named in `allowNet` by a control case, B never;
 *  - `trySockets`: ordinary TCP connects and UDP datagrams from an unprivileged python in the box;
 *  - `sendFrames`: hand-made IPv4 TCP SYNs and UDP datagrams in Ethernet frames sent on `eth0` of a
 *    network namespace with host root (python through `nsenter`), addressed to the gateway's MAC,
 *    from the box's own address and spoofed as the gateway's;
 *  - `useGatewayArena`: the hooks that set up and remove those addresses, the listeners, a runtime and
 *    a host snapshot for one test file, and `assertOpenPolicyHolds`, the open-policy case of both tiers.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JsBox, JsRuntime } from '../../src/index.ts';
import { cleanupAll, ensureRegistry, run, tempHome, testRuntime } from '../runtime-helpers.ts';
import { type HostSnapshot, snapshotHost } from './helpers.ts';
import { type HostListeners, hostListeners } from './network-listeners.ts';

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

/** Every host destination an open policy must keep a box from: the host loopback three ways and both host addresses. */
export const HOST_TARGETS: readonly string[] = ['10.0.2.2', '198.18.0.2', '127.0.0.1', HOST_A, HOST_B];

/** The fixtures of a gateway escape test file, filled in by the `before` hook of {@link useGatewayArena}. */
export interface GatewayArena {
  /** A runtime on `home` with the test registries. */
  runtime: JsRuntime;
  /** The TCP and UDP listeners on every host address. */
  listeners: HostListeners;
  /** The test file's temporary home directory. */
  home: string;
  /** The host as it was before the first case. */
  hostBefore: HostSnapshot;
  /** {@link trySockets} aimed at the arena's listeners. */
  trySockets: (box: JsBox, targets: readonly string[]) => Promise<Record<string, string>>;
}

/**
 * Registers the file-level hooks of a gateway escape test: before, the host addresses on the veth pair
 * `veth` ({@link addHostAddresses}), a fresh home (`homePrefix`) with a runtime, the host listeners and
 * a host snapshot; after, the pair, the listeners and every box and home removed. Both hooks do nothing
 * when `skip` is a reason.
 * @returns the arena, whose fields are set once the `before` hook has run.
 */
export function useGatewayArena(options: {
  veth: string;
  homePrefix: string;
  skip?: string | false;
}): GatewayArena {
  const arena = {
    trySockets: (box, targets) => trySockets(box, [...targets], arena.listeners.port),
  } as GatewayArena;
  let removeHostAddresses: (() => void) | undefined;
  before(async () => {
    if (options.skip) return;
    ensureRegistry();
    removeHostAddresses = addHostAddresses(options.veth);
    arena.home = tempHome(options.homePrefix);
    arena.runtime = testRuntime(arena.home);
    arena.listeners = await hostListeners();
    arena.hostBefore = snapshotHost();
  });
  after(async () => {
    if (options.skip) return;
    removeHostAddresses?.();
    await arena.listeners?.close();
    await cleanupAll();
  });
  return arena;
}

/**
 * The open-policy case: neither ordinary sockets of `box` nor the frames `sendFrames` sends from its
 * side reach any of {@link HOST_TARGETS} (the listeners saw nothing; `framesWhat` names the frames in
 * the failure message).
 */
export async function assertOpenPolicyHolds(
  arena: GatewayArena,
  box: JsBox,
  sendFrames: (box: JsBox, targets: string[]) => Promise<void>,
  framesWhat: string,
): Promise<void> {
  const got = await arena.trySockets(box, HOST_TARGETS);
  for (const dst of HOST_TARGETS) assert.notEqual(got[dst], 'connected', dst);
  arena.listeners.assertUntouched('ordinary sockets');
  await sendFrames(box, [...HOST_TARGETS]);
  arena.listeners.assertUntouched(framesWhat);
}
