/**
 * The container tier links a box's network while crun sets the box up: the script the
 * `networkLinkScript` hook gives runs from crun's `createRuntime` hook with the box's own network
 * namespace as `$1` (what it makes there is in the box, never on the host), `networkSetup` gets its
 * outcome as `ctx.linked` before `start` resolves, and a failing script or a refused gate fails the
 * start with nothing of the box left on the host (process, mount, runtime state). The network code's
 * own link (box-link.ts `linkScript`, from the hook; `linkBox` for runc and gVisor) gives the box
 * `eth0` with its address and default route and the gateway its addresses, and the box's groups may
 * open ICMP datagram sockets (`ping` without `NET_RAW`). Real boxes on a busybox layer; the hook tests
 * run with crun only (runc links the box from the network hook instead).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
// internal: the engine's network hooks are tested as a unit
import {
  createEngine,
  type EngineNetworkContext,
  makeBusyboxRootfs,
  mountsUnder,
  type OciEngine,
} from '../src/engine/index.ts';
// internal: the link script and the gateway namespace are tested as units
import { linkBox, linkScript } from '../src/network/box-link.ts';
// internal: a real gateway namespace for the link to reach
import { createGatewayNamespace, NETNS_DIR, removeGatewayNamespace } from '../src/network/gateway.ts';
import { execSh, specFactory } from './helpers/engine.ts';

const tmp = mkdtempSync(join(tmpdir(), 'net-link-'));
const rootfs = makeBusyboxRootfs(join(tmp, 'layer0'));
const spec = specFactory(tmp, rootfs, 'nlink', { network: { mode: 'enabled', allowNet: [] } });
/** What each box's link hook gives the engine, by box id (a missing id: no script). */
const scripts = new Map<string, { ready: Promise<void>; script: string }>();
/** Box ids the engine asked a link script for. */
const asked: string[] = [];
/** The `linked` outcome each `networkSetup` saw, by box id. */
const seen = new Map<string, 'none' | 'ok' | string>();
let engine: OciEngine;

before(async () => {
  engine = await createEngine({
    stateRoot: join(tmp, 'state'),
    networkLinkScript: (id) => {
      asked.push(id);
      return scripts.get(id);
    },
    networkSetup: async (ctx: EngineNetworkContext) => {
      if (!ctx.linked) {
        seen.set(ctx.id, 'none');
        return;
      }
      try {
        await ctx.linked;
        seen.set(ctx.id, 'ok');
      } catch (error) {
        seen.set(ctx.id, (error as Error).message);
        throw error;
      }
    },
  });
});

after(async () => {
  for (const b of await engine.list()) await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id));
  rmSync(tmp, { recursive: true, force: true });
});

const skip = () => (engine.name === 'crun' ? false : 'the createRuntime hook is used with crun only');

/** Host processes whose environment names box `id` (its supervisor). */
function processesOf(id: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').includes(`SB_ID=${id}`)) out.push(+name);
    } catch {}
  }
  return out;
}

/** Asserts that nothing of box `id` is left on the host after a failed start. */
async function assertGone(id: string, boxDir: string): Promise<void> {
  assert.deepEqual(mountsUnder(boxDir), [], 'no mount under the box directory');
  assert.deepEqual(processesOf(id), [], 'no supervisor of the box');
  assert.notEqual((await engine.state(id)).status, 'running');
  assert.equal(existsSync(join(tmp, 'state', 'crun', id)), false, 'crun keeps no state of the box');
}

test('the link script runs in the box network namespace before start resolves', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const s = spec();
  const device = `lk${process.pid % 100000}`;
  scripts.set(s.id, {
    ready: Promise.resolve(),
    script: `nsenter --net="$1" ip link add ${device} type veth peer name ${device}p\n`,
  });
  await engine.start(s);
  assert.equal(seen.get(s.id), 'ok');
  const inBox = await execSh(engine, s.id, 'cat /proc/net/dev');
  assert.equal(inBox.code, 0, inBox.stderr);
  assert.match(inBox.stdout, new RegExp(`\\b${device}:`), 'the device is in the box');
  const onHost = spawnSync('ip', ['link', 'show', device], { encoding: 'utf8' });
  assert.notEqual(onHost.status, 0, 'the device is not on the host');
  await engine.remove(s.id, s.boxDir);
});

test('a failing link script fails the start and leaves nothing of the box', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const s = spec();
  scripts.set(s.id, { ready: Promise.resolve(), script: 'echo broken link >&2\nexit 3\n' });
  await assert.rejects(engine.start(s), /network setup failed: .*broken link/);
  assert.match(seen.get(s.id) ?? '', /broken link/);
  await assertGone(s.id, s.boxDir);
});

test('a refused gate fails the start before the box runs', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const s = spec();
  scripts.set(s.id, { ready: Promise.reject(new Error('gateway refused')), script: 'exit 0\n' });
  await assert.rejects(engine.start(s), /network setup failed: gateway refused/);
  assert.equal(seen.has(s.id), false, 'the network hook never ran');
  await assertGone(s.id, s.boxDir);
});

test('without a script (or with the network off) the network hook links the box itself', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const on = spec();
  await engine.start(on);
  assert.equal(seen.get(on.id), 'none');
  const off = spec({ network: { mode: 'disabled', allowNet: [] } });
  await engine.start(off);
  assert.equal(asked.includes(off.id), false, 'no script is asked for a box without network');
  assert.equal(seen.get(off.id), 'none');
  await engine.remove(on.id, on.boxDir);
  await engine.remove(off.id, off.boxDir);
});

/** Output of `cmd` in the network namespace file `ns` (host root). */
function inNs(ns: string, ...cmd: string[]): string {
  const r = spawnSync('nsenter', [`--net=${ns}`, '--', ...cmd], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

/**
 * Perl that sends one ICMP echo request to 10.0.2.2 through an ICMP datagram socket (`ping` without
 * `NET_RAW`; the kernel fills the identifier and checksum) and prints `reply` when the echo reply
 * comes back within 5 s, else the error.
 */
const ICMP_DGRAM_PING = `
socket(my $s, 2, 2, 1) or die "socket: $!\\n";
my $to = pack('S n C4 x8', 2, 0, 10, 0, 2, 2);
send($s, pack('C C n n n', 8, 0, 0, 0, 1) . 'seed', 0, $to) or die "send: $!\\n";
local $SIG{ALRM} = sub { die "no reply\\n" }; alarm 5;
recv($s, my $buf, 64, 0); print unpack('C', $buf) == 0 ? "reply\\n" : "type " . unpack('C', $buf) . "\\n";
`;

/**
 * Asserts that box `id` (init `pid`) is linked to the gateway namespace `gateway`: `eth0`
 * 10.0.2.100/24 up with the default route via 10.0.2.2, the gateway's `veth0` 10.0.2.2/24 and
 * 10.0.2.3/32 up, nothing of the link on the host, ICMP datagram sockets open to every group of the
 * box (`ping_group_range` 0-65535 in its user namespace) and an echo to the gateway answered through
 * one, sent by a process with the box root's host ids and no capability at all.
 */
async function assertLinked(id: string, pid: number, gateway: string): Promise<void> {
  const addr = await execSh(engine, id, 'ip -o -4 addr show dev eth0; ip route; ip -o link show eth0');
  assert.equal(addr.code, 0, addr.stderr);
  assert.match(addr.stdout, /inet 10\.0\.2\.100\/24/);
  assert.match(addr.stdout, /^default via 10\.0\.2\.2 dev eth0/m);
  assert.match(addr.stdout, /<[^>]*\bUP\b[^>]*>/);
  const gw = inNs(join(NETNS_DIR, gateway), 'ip', '-o', '-4', 'addr', 'show', 'dev', 'veth0');
  assert.match(gw, /inet 10\.0\.2\.2\/24/);
  assert.match(gw, /inet 10\.0\.2\.3\/32/);
  assert.notEqual(spawnSync('ip', ['link', 'show', 'veth0']).status, 0, 'no veth0 on the host');
  const range = await execSh(engine, id, 'cat /proc/sys/net/ipv4/ping_group_range');
  assert.deepEqual(range.stdout.trim().split(/\s+/), ['0', '65535']);
  const [, hostUid] = readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/);
  const [, hostGid] = readFileSync(`/proc/${pid}/gid_map`, 'utf8').trim().split(/\s+/);
  const asBoxRoot = [`--reuid=${hostUid}`, `--regid=${hostGid}`, '--clear-groups', '--inh-caps=-all'];
  assert.equal(
    inNs(`/proc/${pid}/ns/net`, 'setpriv', ...asBoxRoot, 'perl', '-e', ICMP_DGRAM_PING).trim(),
    'reply',
  );
}

test('the network link script (box-link.ts) run by the hook links the box to its gateway', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const gateway = `nlink-${randomBytes(3).toString('hex')}`;
  await createGatewayNamespace(gateway);
  t.after(() => removeGatewayNamespace(gateway));
  const s = spec();
  scripts.set(s.id, { ready: Promise.resolve(), script: linkScript(gateway) });
  const { pid } = await engine.start(s);
  assert.equal(seen.get(s.id), 'ok');
  await assertLinked(s.id, pid, gateway);
  await engine.remove(s.id, s.boxDir);
});

test('linkBox links a running box (runc, gVisor) to its gateway with the same script', async () => {
  const gateway = `nlink-${randomBytes(3).toString('hex')}`;
  await createGatewayNamespace(gateway);
  try {
    const s = spec();
    const { pid } = await engine.start(s);
    await linkBox(gateway, pid);
    await assertLinked(s.id, pid, gateway);
    await assert.rejects(linkBox(gateway, pid), /linking the box to nlink-.* failed \(\d+\): .*File exists/);
    await engine.remove(s.id, s.boxDir);
  } finally {
    await removeGatewayNamespace(gateway);
  }
});
