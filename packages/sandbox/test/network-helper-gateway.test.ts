/**
 * The network helper makes a box's gateway namespace and loads its ruleset (`src/network/helper.ts`
 * "Gateways"): the process creating a box spawns nothing for it but slirp4netns. Driven through the
 * real helper of a temporary state directory (its own process, started on demand), without a box:
 * `register` with `gateway: true` answers once the namespace exists (an nsfs mount in `/run/netns`);
 * `ready` answers once the ruleset (DNS to the box's resolver, forwarding on) is loaded; an `update`
 * sent before `ready` is applied after the registration's ruleset, never overwritten by it; `ready`
 * for an unknown box and a malformed `gateway` field are refused with their codes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { BoxError } from '../src/index.ts';
// internal: the gateway namespace's name, path and removal (what teardown uses)
import { gatewayName, NETNS_DIR, removeGatewayNamespace } from '../src/network/gateway.ts';
// internal: drives the helper's control socket directly, without a box
import { callHelper, helperDir } from '../src/network/helper-client.ts';

const skip = process.getuid?.() !== 0 ? 'needs root' : false;
const stateDir = mkdtempSync('/tmp/sbx-nhg-');
const dir = helperDir(stateDir);
const ids: string[] = [];

function newId(): string {
  const id = `nhg${randomBytes(6).toString('hex')}`;
  ids.push(id);
  return id;
}

/** Whether `path` is a mount point of this process's mount namespace. */
function mounted(path: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .some((line) => line.split(' ')[4] === path);
}

/** Runs `args` inside box `id`'s gateway namespace; returns stdout. */
function inGateway(id: string, args: string[]): string {
  const r = spawnSync('nsenter', [`--net=${join(NETNS_DIR, gatewayName(id))}`, '--', ...args], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout;
}

after(async () => {
  for (const id of ids) {
    await callHelper(dir, { op: 'remove', id }, { start: false, timeoutMs: 5000 }).catch(() => {});
    await removeGatewayNamespace(gatewayName(id));
  }
  rmSync(stateDir, { recursive: true, force: true });
});

test('register with gateway makes the namespace; ready answers once its ruleset is loaded', {
  skip,
}, async () => {
  const id = newId();
  const registered = await callHelper(dir, { op: 'register', id, allowNet: [], secrets: [], gateway: true });
  // The gateway name, or the spare gateway it links to (helper.ts "Gateways"), is the nsfs mount.
  const ns = realpathSync(join(NETNS_DIR, gatewayName(id)));
  assert.ok(mounted(ns), 'the gateway namespace is bind-mounted when register answers');
  assert.equal(typeof registered.dnsPort, 'number');
  await callHelper(dir, { op: 'ready', id });
  const rules = inGateway(id, ['nft', 'list', 'table', 'inet', 'sandbox']);
  assert.match(rules, new RegExp(`dnat ip to 198\\.18\\.0\\.2:${registered.dnsPort}\\b`));
  assert.equal(inGateway(id, ['cat', '/proc/sys/net/ipv4/ip_forward']).trim(), '1');
  // The gateway is the helper's, in the host's mount namespace: teardown from this process removes it.
  await callHelper(dir, { op: 'remove', id });
  await removeGatewayNamespace(gatewayName(id));
  assert.ok(!mounted(ns) && !existsSync(ns), 'nothing left in /run/netns');
  assert.equal(existsSync(join(NETNS_DIR, gatewayName(id))), false);
});

test('an update sent before ready is applied after the registration ruleset', { skip }, async () => {
  const id = newId();
  await callHelper(dir, { op: 'register', id, allowNet: [], secrets: [], gateway: true });
  const [updated] = await Promise.all([
    callHelper(dir, { op: 'update', id, allowNet: ['192.0.2.0/24'] }),
    callHelper(dir, { op: 'ready', id }),
  ]);
  assert.deepEqual(updated.allowNet, ['192.0.2.0/24']);
  await callHelper(dir, { op: 'ready', id });
  const rules = inGateway(id, ['nft', 'list', 'set', 'inet', 'sandbox', 'nets']);
  assert.match(rules, /192\.0\.2\.0\/24/, 'the updated policy is the one in force');
});

test('ready for an unknown box and a malformed gateway field are refused', { skip }, async () => {
  await assert.rejects(
    callHelper(dir, { op: 'ready', id: 'nhg-unknown' }),
    (e: unknown) => e instanceof BoxError && e.code === 'not_found',
  );
  const answer = await new Promise<string>((resolve, reject) => {
    const socket = connect(join(dir, 'sock'));
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => {
      data += c;
    });
    socket.on('error', reject);
    socket.on('end', () => resolve(data));
    socket.on('connect', () =>
      socket.write(
        `${JSON.stringify({ op: 'register', id: 'nhgbad', allowNet: [], secrets: [], gateway: 'yes' })}\n`,
      ),
    );
  });
  const parsed = JSON.parse(answer) as { ok: boolean; code: string; field: string };
  assert.deepEqual([parsed.ok, parsed.code, parsed.field], [false, 'invalid_option', 'gateway']);
  assert.ok(!existsSync(join(NETNS_DIR, gatewayName('nhgbad'))), 'no gateway made for a refused request');
});
