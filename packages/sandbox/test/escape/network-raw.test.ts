/**
 * Escape suite, raw sockets (python:slim boxes from the local registry): a default box has no
 * `NET_RAW` and cannot open `AF_PACKET`, `SOCK_RAW` or `SOCK_PACKET` sockets; a box given `NET_RAW`
 * gets raw IP sockets back but still no `AF_PACKET` (seccomp). The host is checked to be untouched:
 * UDP and TCP listeners the test opens on every host address (loopback included) receive nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
// internal: the default seccomp profile is inspected
import { defaultSeccompProfile } from '../../src/engine/seccomp.ts';
import type { JsBox, JsRuntime } from '../../src/index.ts';
import { cleanupAll, ensureRegistry, run, tempHome, testRuntime } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostSnapshot, snapshotHost } from './helpers.ts';
import { type HostListeners, hostListeners } from './network-listeners.ts';

const PYTHON = 'python:slim';

/** Python that tries each kind of socket and prints `{ kind: 'ok' | errno }` as JSON. */
const SOCKET_PROBE = `
import json, socket
out = {}
def probe(name, *args):
    try:
        socket.socket(*args).close(); out[name] = 'ok'
    except OSError as e:
        out[name] = e.errno
probe('packet_raw', socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
probe('packet_dgram', socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
probe('inet_raw', socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
probe('inet_raw_flags', socket.AF_INET, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, socket.IPPROTO_TCP)
probe('inet6_raw', socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
probe('sock_packet', socket.AF_INET, 10, socket.htons(3))
probe('icmp_dgram', socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
probe('tcp', socket.AF_INET, socket.SOCK_STREAM)
probe('udp', socket.AF_INET, socket.SOCK_DGRAM)
print(json.dumps(out))
`;

const EPERM = 1;
let runtime: JsRuntime;
let listeners: HostListeners;
let home = '';
let hostBefore: HostSnapshot;
const boxes: JsBox[] = [];

async function pythonBox(options: Parameters<JsRuntime['create']>[0] = {}): Promise<JsBox> {
  const box = await runtime.create({ image: PYTHON, memoryMib: 256, ...options });
  boxes.push(box);
  return box;
}

async function probeSockets(box: JsBox): Promise<Record<string, number | 'ok'>> {
  const r = await run(box, 'python3', ['-c', SOCKET_PROBE]);
  assert.equal(r.exitCode, 0, r.stderr);
  return JSON.parse(r.stdout);
}

before(async () => {
  ensureRegistry();
  home = tempHome('sandbox-escape-raw-');
  runtime = testRuntime(home);
  listeners = await hostListeners();
  hostBefore = snapshotHost();
});
after(async () => {
  await listeners?.close();
  await cleanupAll();
});

describe('raw sockets in the box', () => {
  test('the seccomp profile refuses AF_PACKET/AF_XDP always, SOCK_RAW unless NET_RAW', () => {
    const socketRules = (caps: string[]) =>
      defaultSeccompProfile(caps).syscalls.filter((r) => r.names.includes('socket'));
    const families = (caps: string[]) => socketRules(caps).map((r) => r.args![0]!.value);
    assert.deepEqual(new Set(families(['CAP_CHOWN'])), new Set([17, 44, 2, 10]));
    const rawRules = (caps: string[]) => socketRules(caps).filter((r) => r.args![1]?.valueTwo === 3);
    assert.equal(rawRules(['CAP_CHOWN']).length, 2);
    assert.equal(rawRules(['CAP_NET_RAW']).length, 0);
    assert.ok(families(['CAP_NET_RAW']).includes(17), 'AF_PACKET stays refused with NET_RAW');
  });

  test('a default box: no NET_RAW, no packet or raw sockets; ordinary sockets work; host untouched', async () => {
    const box = await pythonBox();
    const status = await run(box, 'grep', ['CapEff', '/proc/self/status']);
    const eff = BigInt(`0x${status.stdout.split(/\s+/)[1]}`);
    assert.equal((eff >> 13n) & 1n, 0n, 'CAP_NET_RAW not effective');
    const got = await probeSockets(box);
    for (const kind of [
      'packet_raw',
      'packet_dgram',
      'inet_raw',
      'inet_raw_flags',
      'inet6_raw',
      'sock_packet',
    ]) {
      assert.equal(got[kind], EPERM, kind);
    }
    assert.equal(got.tcp, 'ok');
    assert.equal(got.udp, 'ok');
    assert.equal(got.icmp_dgram, 'ok', 'ICMP datagram sockets (ping without NET_RAW) are open to the box');
    listeners.assertUntouched();
  });

  test('NET_RAW added: raw IP sockets open, AF_PACKET and SOCK_PACKET stay refused (seccomp)', async () => {
    const box = await pythonBox({ advanced: { capabilities: { add: ['NET_RAW'], drop: [] } } });
    const got = await probeSockets(box);
    assert.equal(got.inet_raw, 'ok');
    assert.equal(got.inet_raw_flags, 'ok');
    assert.equal(got.inet6_raw, 'ok');
    assert.equal(got.packet_raw, EPERM);
    assert.equal(got.packet_dgram, EPERM);
    assert.equal(got.sock_packet, EPERM);
    listeners.assertUntouched();
  });

  test('the host is untouched after every case (files, mounts, listeners, processes)', () => {
    assertHostUntouched(hostBefore, { allowMountsUnder: [home] });
  });
});
