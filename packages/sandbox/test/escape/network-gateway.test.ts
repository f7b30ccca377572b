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
 * frames do arrive when `allowNet` names the destination, so a leak would be seen. The probes
 * (sockets, frames, addresses) are network-probes.ts's, shared with gvisor-network.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsBox } from '../../src/index.ts';
import { assertHostUntouched } from './helpers.ts';
import {
  assertOpenPolicyHolds,
  HOST_A,
  HOST_B,
  HOST_TARGETS,
  sendFrames as sendFramesFrom,
  useGatewayArena,
} from './network-probes.ts';

const PYTHON = 'python:slim';
// A veth pair (the dummy driver may be absent).
const arena = useGatewayArena({ veth: `sbxesc${process.pid % 100000}`, homePrefix: 'sandbox-escape-gw-' });

async function pythonBox(allowNet: string[] = []): Promise<JsBox> {
  return arena.runtime.create({ image: PYTHON, memoryMib: 256, network: { mode: 'enabled', allowNet } });
}

/** Sends the hand-made frames from inside the box's namespaces with host root (see module comment). */
async function sendFrames(box: JsBox, targets: string[]): Promise<void> {
  const pid = (await box.info()).state.pid;
  assert.ok(pid, 'box init pid');
  await sendFramesFrom([`--target=${pid}`, '--net', '--mount', '--pid'], targets, arena.listeners.port);
}

describe('the gateway cannot be gone around', () => {
  test('open policy: no socket or hand-made frame reaches the host loopback or host addresses', async () => {
    await assertOpenPolicyHolds(arena, await pythonBox(), sendFrames, 'hand-made frames');
  });

  test("allowNet ['127.0.0.1']: the box's own loopback only; 10.0.2.2 and frames reach nothing", async () => {
    const box = await pythonBox(['127.0.0.1']);
    const got = await arena.trySockets(box, HOST_TARGETS);
    for (const dst of HOST_TARGETS) assert.notEqual(got[dst], 'connected', dst);
    await sendFrames(box, [...HOST_TARGETS]);
    arena.listeners.assertUntouched();
  });

  test('allowNet naming one host address: it is reached, the other is not, by socket or frame', async () => {
    const box = await pythonBox([HOST_A]);
    const got = await arena.trySockets(box, [HOST_A]);
    assert.equal(got[HOST_A], 'connected', 'control: the named host address is reachable');
    assert.ok(
      arena.listeners.tcp() >= 1 && arena.listeners.udp() >= 1,
      'control: the listeners saw the named address',
    );
    arena.listeners.reset();
    const other = await arena.trySockets(box, [HOST_B, '10.0.2.2', '198.18.0.2']);
    assert.notEqual(other[HOST_B], 'connected');
    await sendFrames(box, [HOST_B, '10.0.2.2', '198.18.0.2', '127.0.0.1']);
    arena.listeners.assertUntouched('sockets and frames towards what allowNet does not name');
  });

  test('control: with host.sandbox.internal named, the same frames to 10.0.2.2 do arrive', async () => {
    const box = await pythonBox(['host.sandbox.internal']);
    await sendFrames(box, ['10.0.2.2']);
    assert.ok(arena.listeners.tcp() >= 1, 'a hand-made SYN to 10.0.2.2 reached the host loopback listener');
    assert.ok(
      arena.listeners.udp() >= 1,
      'a hand-made datagram to 10.0.2.2 reached the host loopback listener',
    );
    arena.listeners.reset();
    // Naming the host loopback names neither slirp4netns's side of it nor the host's other addresses.
    await sendFrames(box, ['198.18.0.2', HOST_A, HOST_B]);
    arena.listeners.assertUntouched();
  });

  test('the host is untouched after every case (files, mounts, listeners, processes)', () => {
    assertHostUntouched(arena.hostBefore, { allowMountsUnder: [arena.home] });
  });
});
