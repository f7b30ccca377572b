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
 * host; removed afterwards); a TCP and a UDP listener on every host address count what arrives. The
 * probes (sockets, frames, addresses) are network-probes.ts's, shared with network-gateway.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { JsBox } from '../../src/index.ts';
import { GVISOR_SKIP } from '../runtime-helpers.ts';
import { assertHostUntouched } from './helpers.ts';
import {
  assertOpenPolicyHolds,
  HOST_A,
  HOST_B,
  ip,
  sendFrames as sendFramesFrom,
  useGatewayArena,
} from './network-probes.ts';

const skip = GVISOR_SKIP;
const PYTHON = 'python:slim';
const arena = useGatewayArena({
  veth: `sbxgvn${process.pid % 100000}`,
  homePrefix: 'sandbox-escape-gvnet-',
  skip,
});

async function pythonBox(allowNet: string[] = []): Promise<JsBox> {
  return arena.runtime.create({
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
  await sendFramesFrom([`--net=/proc/${pid}/ns/net`], targets, arena.listeners.port, gw);
}

describe('gVisor boxes: the gateway cannot be gone around by the box or by its Sentry', { skip }, () => {
  test('open policy: no socket or hand-made frame reaches the host loopback or host addresses', async () => {
    await assertOpenPolicyHolds(
      arena,
      await pythonBox(),
      sendFrames,
      'hand-made frames from the Sentry’s namespace',
    );
  });

  test('allowNet naming one host address: it is reached, the other and the host loopback are not', async () => {
    const box = await pythonBox([HOST_A]);
    const got = await arena.trySockets(box, [HOST_A]);
    assert.equal(got[HOST_A], 'connected', 'control: the named address is reachable');
    assert.ok(
      arena.listeners.tcp() >= 1 && arena.listeners.udp() >= 1,
      'control: the listeners saw the named address',
    );
    arena.listeners.reset();
    const other = await arena.trySockets(box, [HOST_B, '10.0.2.2', '198.18.0.2']);
    for (const dst of [HOST_B, '10.0.2.2', '198.18.0.2']) assert.notEqual(other[dst], 'connected', dst);
    arena.listeners.assertUntouched('sockets towards what allowNet does not name');
    // Control for the frames: the same frames to the named address do arrive.
    await sendFrames(box, [HOST_A]);
    assert.ok(
      arena.listeners.tcp() >= 1 && arena.listeners.udp() >= 1,
      'control: hand-made frames to the named address',
    );
    arena.listeners.reset();
    await sendFrames(box, [HOST_B, '10.0.2.2', '198.18.0.2', '127.0.0.1']);
    arena.listeners.assertUntouched('hand-made frames towards what allowNet does not name');
  });

  test('the host is untouched after every case (files, mounts, listeners, processes)', () => {
    assertHostUntouched(arena.hostBefore, { allowMountsUnder: [arena.home] });
  });
});
