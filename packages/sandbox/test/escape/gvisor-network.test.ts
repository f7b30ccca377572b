/**
 * Escape suite, network of gVisor boxes (python:slim from the local registry). The Sentry drives the
 * box's `eth0` through packet sockets runsc opened for it in the box's network namespace, so nothing
 * in that namespace can filter what it sends: the policy lives in the gateway namespace on the far
 * side of the veth link (network/gateway.ts). These cases show that the box's ordinary sockets, and
 * hand-made Ethernet frames sent on `eth0` of the Sentry's namespace with host root (what a Sentry
 * taken over by the box could do with those packet sockets, and more), reach neither the host's
 * loopback (through `10.0.2.2`, slirp4netns's `198.18.0.2`, or `127.0.0.1`), nor the host's own
 * addresses, nor addresses outside `allowNet`; a control case shows the same frames arrive where
 * `allowNet` names the destination, so a leak would be seen.
 *
 * The host addresses are two TEST-NET-3 addresses on a veth pair the test makes (both ends on the
 * host; removed afterwards); a TCP and a UDP listener on every host address count what arrives.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { findExecutable } from '../../src/engine/engine.ts';
import type { JsRuntime } from '../../src/js-runtime.ts';
import type { JsBox } from '../../src/runtime/box.ts';
import { cleanupAll, ensureRegistry, run, tempHome, testRuntime } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostSnapshot, snapshotHost } from './helpers.ts';
import { type HostListeners, hostListeners } from './network-listeners.ts';

const skip = findExecutable('runsc') ? false : 'runsc is not installed';
const PYTHON = 'python:slim';
const VETH = `sbxgvn${process.pid % 100000}`;
const octet = 10 + (process.pid % 200);
/** Host addresses made by the test: A is named in allowNet by one case, B never. */
const HOST_A = `203.0.113.${octet}`;
const HOST_B = `203.0.113.${octet + 1}`;
const HOST_TARGETS = ['10.0.2.2', '198.18.0.2', '127.0.0.1', HOST_A, HOST_B];

/**
 * Host python sending IPv4 TCP SYNs and UDP datagrams in hand-made Ethernet frames out of `eth0` of
 * the namespace it runs in, to the gateway's MAC (argv: targets JSON, port, gateway MAC).
 */
const FRAMES = `
import fcntl, json, socket, struct, sys
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
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(('eth0', 0))
mine = fcntl.ioctl(s.fileno(), 0x8927, struct.pack('256s', b'eth0'))[18:24]
eth = bytes.fromhex(gw.replace(':', '')) + mine + b'\\x08\\x00'
sent = 0
for i, dst in enumerate(targets):
    for src in ('10.0.2.100', '10.0.2.2'):
        s.send(eth + ip(src, dst, 6, syn(src, dst, 40000 + i)))
        s.send(eth + ip(src, dst, 17, udp(src, dst, 41000 + i)))
        sent += 2
print(sent)
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

function ip(args: string[]): string {
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function pythonBox(allowNet: string[] = []): Promise<JsBox> {
  return runtime.create({
    image: PYTHON,
    memoryMib: 256,
    isolation: 'gvisor',
    network: { mode: 'enabled', allowNet },
  });
}

/** Sends the hand-made frames on `eth0` of the Sentry's network namespace, as host root. */
async function sendFrames(box: JsBox, targets: string[]): Promise<void> {
  const pid = (await box.info()).state.pid;
  assert.ok(pid, 'the Sentry pid');
  const gw = /link\/ether ([0-9a-f:]{17})/.exec(ip(['-n', `sbx-${box.id}`, 'link', 'show', 'veth0']))?.[1];
  assert.ok(gw, "the gateway's MAC");
  const r = spawnSync(
    'nsenter',
    [
      `--net=/proc/${pid}/ns/net`,
      '--',
      'python3',
      '-c',
      FRAMES,
      JSON.stringify(targets),
      String(listeners.port),
      gw,
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  assert.equal(Number(r.stdout), targets.length * 4);
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

before(async () => {
  if (skip) return;
  ensureRegistry();
  ip(['link', 'add', VETH, 'type', 'veth', 'peer', 'name', `${VETH}p`]);
  ip(['link', 'set', `${VETH}p`, 'up']);
  ip(['addr', 'add', `${HOST_A}/32`, 'dev', VETH]);
  ip(['addr', 'add', `${HOST_B}/32`, 'dev', VETH]);
  ip(['link', 'set', VETH, 'up']);
  home = tempHome('sandbox-escape-gvnet-');
  runtime = testRuntime(home);
  listeners = await hostListeners();
  hostBefore = snapshotHost();
});
after(async () => {
  if (skip) return;
  spawnSync('ip', ['link', 'del', VETH]);
  await listeners?.close();
  await cleanupAll();
});

describe('gVisor boxes: the gateway cannot be gone around by the box or by its Sentry', { skip }, () => {
  test('open policy: no socket or hand-made frame reaches the host loopback or host addresses', async () => {
    const box = await pythonBox();
    const got = await trySockets(box, HOST_TARGETS);
    for (const dst of HOST_TARGETS) assert.notEqual(got[dst], 'connected', dst);
    listeners.assertUntouched('ordinary sockets');
    await sendFrames(box, HOST_TARGETS);
    listeners.assertUntouched('hand-made frames from the Sentry’s namespace');
  });

  test('allowNet naming one host address: it is reached, the other and the host loopback are not', async () => {
    const box = await pythonBox([HOST_A]);
    const got = await trySockets(box, [HOST_A]);
    assert.equal(got[HOST_A], 'connected', 'control: the named address is reachable');
    assert.ok(listeners.tcp() >= 1 && listeners.udp() >= 1, 'control: the listeners saw the named address');
    listeners.reset();
    const other = await trySockets(box, [HOST_B, '10.0.2.2', '198.18.0.2']);
    for (const dst of [HOST_B, '10.0.2.2', '198.18.0.2']) assert.notEqual(other[dst], 'connected', dst);
    listeners.assertUntouched('sockets towards what allowNet does not name');
    // Control for the frames: the same frames to the named address do arrive.
    await sendFrames(box, [HOST_A]);
    assert.ok(listeners.tcp() >= 1 && listeners.udp() >= 1, 'control: hand-made frames to the named address');
    listeners.reset();
    await sendFrames(box, [HOST_B, '10.0.2.2', '198.18.0.2', '127.0.0.1']);
    listeners.assertUntouched('hand-made frames towards what allowNet does not name');
  });

  test('the host is untouched after every case (files, mounts, listeners, processes)', () => {
    assertHostUntouched(hostBefore, { allowMountsUnder: [home] });
  });
});
