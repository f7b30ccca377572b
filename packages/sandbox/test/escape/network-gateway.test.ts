/**
 * Escape suite, the box's gateway (python:slim boxes from the local registry): the network policy is
 * enforced outside the box's namespace, so neither ordinary sockets of the box nor packets and
 * Ethernet frames made by hand inside its namespace reach the host's loopback (through `10.0.2.2`,
 * through slirp4netns's `198.18.0.2`, or as `127.0.0.1`), the host's own addresses, or addresses
 * outside `allowNet`.
 *
 * The frames are sent with host root inside the box's namespaces (`nsenter --net --mount --pid` running
 * the box's own python, with no seccomp profile and every capability): the worst a box could do in
 * its own network namespace. The host addresses are two TEST-NET-3 addresses the test puts on a
 * veth pair of its own, both ends on the host (removed afterwards). A TCP and a UDP listener on every host address
 * count what arrives; each case asserts they received nothing, and control cases show the same
 * frames do arrive when `allowNet` names the destination, so a leak would be seen.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JsRuntime } from '../../src/js-runtime.ts';
import type { JsBox } from '../../src/runtime/box.ts';
import { cleanupAll, ensureRegistry, run, tempHome, testRuntime } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostSnapshot, snapshotHost } from './helpers.ts';
import { type HostListeners, hostListeners } from './network-listeners.ts';

const PYTHON = 'python:slim';
const DUMMY = `sbxesc${process.pid % 100000}`; // a veth pair (the dummy driver may be absent)
const octet = 10 + (process.pid % 200);
/** Host addresses made by the test: A is named in allowNet by one case, B never. */
const HOST_A = `203.0.113.${octet}`;
const HOST_B = `203.0.113.${octet + 1}`;

/** Python sending hand-made IPv4 TCP SYNs and UDP datagrams in Ethernet frames out of eth0. */
const FRAMES = `
import json, socket, struct, sys, time
targets, port = json.loads(sys.argv[1]), int(sys.argv[2])
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
# Resolve the gateway's MAC: any packet to 10.0.2.2 makes the kernel ARP for it.
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('10.0.2.2', 9))
gw = None
for _ in range(50):
    for line in open('/proc/net/arp').read().splitlines()[1:]:
        f = line.split()
        if f[0] == '10.0.2.2' and f[3] != '00:00:00:00:00:00': gw = f[3]
    if gw: break
    time.sleep(0.05)
mine = open('/sys/class/net/eth0/address').read().strip()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(('eth0', 0))
eth = bytes.fromhex(gw.replace(':', '')) + bytes.fromhex(mine.replace(':', '')) + b'\\x08\\x00'
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

let runtime: JsRuntime;
let listeners: HostListeners;
let home = '';
let hostBefore: HostSnapshot;

function ip(args: string[]): void {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
}

async function pythonBox(allowNet: string[] = []): Promise<JsBox> {
  return runtime.create({ image: PYTHON, memoryMib: 256, network: { mode: 'enabled', allowNet } });
}

/** Sends the hand-made frames from inside the box's namespaces with host root (see module comment). */
async function sendFrames(box: JsBox, targets: string[]): Promise<void> {
  const pid = (await box.info()).state.pid;
  assert.ok(pid, 'box init pid');
  const r = spawnSync(
    'nsenter',
    [
      `--target=${pid}`,
      '--net',
      '--mount',
      '--pid',
      '--',
      'python3',
      '-c',
      FRAMES,
      JSON.stringify(targets),
      String(listeners.port),
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  const sent = JSON.parse(r.stdout) as { gateway_mac: string; frames: number };
  assert.match(sent.gateway_mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
  assert.equal(sent.frames, targets.length * 4);
  // slirp4netns turns what reaches it into host sockets at once; give it a moment before counting.
  await sleep(1000);
}

/** Ordinary TCP connects and UDP datagrams from an unprivileged process of the box. */
async function trySockets(box: JsBox, targets: string[]): Promise<Record<string, string>> {
  const r = await run(box, 'python3', ['-c', SOCKETS, JSON.stringify(targets), String(listeners.port)]);
  assert.equal(r.exitCode, 0, r.stderr);
  await sleep(500);
  return JSON.parse(r.stdout);
}

const HOST_TARGETS = ['10.0.2.2', '198.18.0.2', '127.0.0.1', HOST_A, HOST_B];

before(async () => {
  ensureRegistry();
  ip(['link', 'add', DUMMY, 'type', 'veth', 'peer', 'name', `${DUMMY}p`]);
  ip(['link', 'set', `${DUMMY}p`, 'up']);
  ip(['addr', 'add', `${HOST_A}/32`, 'dev', DUMMY]);
  ip(['addr', 'add', `${HOST_B}/32`, 'dev', DUMMY]);
  ip(['link', 'set', DUMMY, 'up']);
  home = tempHome('sandbox-escape-gw-');
  runtime = testRuntime(home);
  listeners = await hostListeners();
  hostBefore = snapshotHost();
});
after(async () => {
  spawnSync('ip', ['link', 'del', DUMMY]);
  await listeners?.close();
  await cleanupAll();
});

describe('the gateway cannot be gone around', () => {
  test('open policy: no socket or hand-made frame reaches the host loopback or host addresses', async () => {
    const box = await pythonBox();
    const got = await trySockets(box, HOST_TARGETS);
    for (const dst of HOST_TARGETS) assert.notEqual(got[dst], 'connected', dst);
    listeners.assertUntouched('ordinary sockets');
    await sendFrames(box, HOST_TARGETS);
    listeners.assertUntouched('hand-made frames');
  });

  test("allowNet ['127.0.0.1']: the box's own loopback only; 10.0.2.2 and frames reach nothing", async () => {
    const box = await pythonBox(['127.0.0.1']);
    const got = await trySockets(box, HOST_TARGETS);
    for (const dst of HOST_TARGETS) assert.notEqual(got[dst], 'connected', dst);
    await sendFrames(box, HOST_TARGETS);
    listeners.assertUntouched();
  });

  test('allowNet naming one host address: it is reached, the other is not, by socket or frame', async () => {
    const box = await pythonBox([HOST_A]);
    const got = await trySockets(box, [HOST_A]);
    assert.equal(got[HOST_A], 'connected', 'control: the named host address is reachable');
    assert.ok(listeners.tcp() >= 1 && listeners.udp() >= 1, 'control: the listeners saw the named address');
    listeners.reset();
    const other = await trySockets(box, [HOST_B, '10.0.2.2', '198.18.0.2']);
    assert.notEqual(other[HOST_B], 'connected');
    await sendFrames(box, [HOST_B, '10.0.2.2', '198.18.0.2', '127.0.0.1']);
    listeners.assertUntouched('sockets and frames towards what allowNet does not name');
  });

  test('control: with host.sandbox.internal named, the same frames to 10.0.2.2 do arrive', async () => {
    const box = await pythonBox(['host.sandbox.internal']);
    await sendFrames(box, ['10.0.2.2']);
    assert.ok(listeners.tcp() >= 1, 'a hand-made SYN to 10.0.2.2 reached the host loopback listener');
    assert.ok(listeners.udp() >= 1, 'a hand-made datagram to 10.0.2.2 reached the host loopback listener');
    listeners.reset();
    // Naming the host loopback names neither slirp4netns's side of it nor the host's other addresses.
    await sendFrames(box, ['198.18.0.2', HOST_A, HOST_B]);
    listeners.assertUntouched();
  });

  test('the host is untouched after every case (files, mounts, listeners, processes)', () => {
    assertHostUntouched(hostBefore, { allowMountsUnder: [home] });
  });
});
