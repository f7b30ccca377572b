/**
 * Spare gateways (`src/network/spares.ts`): the network helper of a home keeps gateway namespaces with
 * slirp4netns running ready, and a box registering takes one. Real boxes (busybox), the real helper.
 * Shown: a box's gateway name links to a spare the helper had ready, whose slirp4netns is the helper's
 * child (the creating process started none), and the box resolves names through it at its first exec;
 * the pool is refilled; a box with an `allowNet` policy that takes a spare (made with the open ruleset)
 * is refused, from its first exec on, a destination that ruleset would have let through (a server in a
 * network namespace of the test, routed from the host through a veth pair); an open-policy box on a
 * spare made before the host got an address is refused that address; a non-detached box's gateway and the spare's slirp4netns go after its creator is SIGKILLed; a SIGKILLed
 * helper's spares are ended by the helper the restart loop runs next, and those of a helper whose
 * restart loop was killed too by the helper a runtime's resume starts.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { JsBox, JsRuntime } from '../src/index.ts';
// internal: locates the network helper of the home and its spares (what this file is about)
import { callHelper, helperDir, helperPid, resumeHelper } from '../src/network/helper-client.ts';
// internal: the spare records the helper writes
import type { SpareRecord } from '../src/network/spares.ts';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  run,
  runtimeChild,
  seededHome,
  testRuntime,
} from './runtime-helpers.ts';

const skip = process.getuid?.() !== 0 ? 'needs root' : false;
/** An address given to the host's loopback interface during one test only (TEST-NET-3). */
const LATE_IP = '203.0.113.77';
/** The host side of the veth pair to the outside namespace, and that namespace's server address. */
const HOST_SIDE_IP = '203.0.113.1';
const OUTSIDE_IP = '203.0.113.2';
const veth = `sbxsp${process.pid % 100000}`;
let added = false;

let home = '';
let runtime: JsRuntime;
/** The outside namespace's server (answers `reached`) and its port. */
let server: ChildProcess;
let port = 0;
/** A host server on every address (answers `host`) and its port. */
let hostServer: Server;
let hostPort = 0;
let holder: ChildProcess;
let keeper: JsBox;

/** The helper directory of the test home. */
function dir(): string {
  return helperDir(join(home, 'engine', 'net'));
}

/** The spares the helper of `helper` (default: the test home's) has made (their records). */
function ready(helper = dir()): SpareRecord[] {
  const spares = join(helper, 'spares');
  if (!existsSync(spares)) return [];
  const out: SpareRecord[] = [];
  for (const file of readdirSync(spares)) {
    if (!file.endsWith('.json')) continue;
    try {
      const record = JSON.parse(readFileSync(join(spares, file), 'utf8')) as SpareRecord;
      if (record.slirp !== '') out.push(record);
    } catch {}
  }
  return out;
}

/** Waits (bounded: a hang fails the test) until `check` holds. */
async function until(what: string, check: () => boolean, boundMs = 30_000): Promise<void> {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > boundMs) assert.fail(`timed out waiting: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** True while `identity` (`pid:starttime`) is a running process. */
function runs(identity: string): boolean {
  const [pid, start] = identity.split(':');
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] !== 'Z' && fields[19] === start;
  } catch {
    return false;
  }
}

/** Parent pid of `pid`. */
function ppid(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** Whether anything is mounted at `/run/netns/<name>`. */
function mounted(name: string): boolean {
  return readFileSync('/proc/self/mountinfo', 'utf8').includes(` /run/netns/${name} `);
}

/** The spare box `id`'s gateway name links to, or null when it is no link. */
function spareOf(id: string): string | null {
  const link = join('/run/netns', `sbx-${id}`);
  return lstatSync(link).isSymbolicLink() ? readlinkSync(link) : null;
}

before(async () => {
  if (skip) return;
  ensureRegistry();
  home = seededHome('sandbox-spares-');
  runtime = testRuntime(home);
  hostServer = createServer((socket) => socket.end('host\n'));
  await new Promise<void>((resolve) => hostServer.listen(0, '0.0.0.0', () => resolve()));
  hostPort = (hostServer.address() as { port: number }).port;
  // A network namespace outside the host's addresses ("outside"): a veth pair, the host side at
  // HOST_SIDE_IP (a host address, made before the spares), a server at OUTSIDE_IP (no host address).
  holder = spawn('unshare', ['--net', '--', 'sleep', '600'], { stdio: 'ignore' });
  const ns = `/proc/${holder.pid}/ns/net`;
  await until('the outside namespace exists', () => {
    try {
      return readlinkSync(ns) !== readlinkSync('/proc/self/ns/net');
    } catch {
      return false;
    }
  });
  const ip = (args: string[], netns?: string) => {
    const r = netns
      ? spawnSync('nsenter', [`--net=${netns}`, 'ip', ...args], { encoding: 'utf8' })
      : spawnSync('ip', args, { encoding: 'utf8' });
    assert.equal(r.status, 0, `ip ${args.join(' ')}: ${r.stderr}`);
  };
  ip(['link', 'add', veth, 'type', 'veth', 'peer', 'name', `${veth}p`]);
  ip(['link', 'set', `${veth}p`, 'netns', String(holder.pid)]);
  ip(['addr', 'add', `${HOST_SIDE_IP}/30`, 'dev', veth]);
  ip(['link', 'set', veth, 'up']);
  ip(['addr', 'add', `${OUTSIDE_IP}/30`, 'dev', `${veth}p`], ns);
  ip(['link', 'set', `${veth}p`, 'up'], ns);
  server = spawn(
    'nsenter',
    [
      `--net=${ns}`,
      process.execPath,
      '-e',
      `require('node:net').createServer((s) => s.end('reached\\n')).listen(0, '${OUTSIDE_IP}', function () { console.log(this.address().port); })`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  port = await new Promise<number>((resolve) => {
    server.stdout?.once('data', (chunk: Buffer) => resolve(Number(String(chunk).trim())));
  });
  // A box for the whole file keeps the home's helper (which then makes its spares) running.
  keeper = await runtime.create({ image: BUSYBOX, network: { mode: 'enabled' } });
});

after(async () => {
  if (skip) return;
  if (added) spawnSync('ip', ['addr', 'del', `${LATE_IP}/32`, 'dev', 'lo']);
  server?.kill('SIGKILL');
  holder?.kill('SIGKILL');
  spawnSync('ip', ['link', 'del', veth]);
  hostServer?.close();
  await cleanupAll();
});

test('a box takes a spare made by the helper; the pool is refilled', { skip }, async () => {
  await until('two spares ready', () => ready().length === 2);
  const before = ready();
  const box = await runtime.create({ image: BUSYBOX, network: { mode: 'enabled' } });
  const spare = spareOf(box.id);
  assert.ok(spare, 'the gateway name is a link to a spare');
  const taken = before.find((s) => s.name === spare);
  assert.ok(taken, `${spare} was one of the ready spares`);
  assert.ok(mounted(spare), 'the spare namespace is mounted');
  // slirp4netns is the helper's child: this process started nothing for the box's host side.
  const slirp = Number(taken.slirp.split(':')[0]);
  assert.equal(ppid(slirp), helperPid(dir()));
  assert.match(readFileSync(`/proc/${slirp}/cmdline`, 'utf8'), /^slirp4netns\0/);
  const persisted = JSON.parse(readFileSync(join(home, 'engine', 'net', `${box.id}.json`), 'utf8'));
  assert.equal(persisted.slirpPid, slirp);
  // The box's first exec resolves through the spare's resolver and gateway (forwarding on).
  const lookup = await run(box, 'nslookup', ['host.sandbox.internal']);
  assert.match(lookup.stdout, /Server:\s+10\.0\.2\.3/);
  await until('the pool refilled', () => ready().length === 2 && !ready().some((s) => s.name === spare));
  await runtime.remove(box.id, true);
  await until('the taken spare ended', () => !existsSync(`/run/netns/${spare}`) && !runs(taken.slirp));
  assert.equal(existsSync(`/run/netns/sbx-${box.id}`), false);
  assert.equal(mounted(spare), false);
});

test('a box with allowNet on a spare is refused what the open ruleset would let through, from its first exec', {
  skip,
}, async () => {
  await until('two spares ready', () => ready().length === 2);
  // The outside server is no host address: the open ruleset the spares were made with forwards to it.
  const open = await runtime.create({ image: BUSYBOX, network: { mode: 'enabled' } });
  assert.ok(spareOf(open.id), 'the open box took a spare');
  const reached = await run(open, 'sh', ['-c', `nc -w 3 ${OUTSIDE_IP} ${port} </dev/null`]);
  assert.equal(reached.stdout, 'reached', 'the condition under test: the open ruleset forwards there');
  await runtime.remove(open.id, true);

  await until('two spares ready', () => ready().length === 2);
  const hostIp = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .find((a) => a.family === 'IPv4' && !a.internal && a.address !== HOST_SIDE_IP)?.address;
  assert.ok(hostIp, 'the host has a non-loopback IPv4 address');
  const box = await runtime.create({ image: BUSYBOX, network: { mode: 'enabled', allowNet: [hostIp] } });
  assert.ok(spareOf(box.id), 'the restricted box took a spare');
  const refused = await run(box, 'sh', ['-c', `nc -w 3 ${OUTSIDE_IP} ${port} </dev/null; echo rc=$?`]);
  assert.doesNotMatch(refused.stdout, /reached/);
  const allowed = await run(box, 'sh', ['-c', `nc -w 3 ${hostIp} ${hostPort} </dev/null`]);
  assert.equal(allowed.stdout, 'host', 'what the policy names is reached');
  await runtime.remove(box.id, true);
});

test('an open box on a spare made before the host got an address is refused that address', {
  skip,
}, async () => {
  await until('two spares ready', () => ready().length === 2);
  const r = spawnSync('ip', ['addr', 'add', `${LATE_IP}/32`, 'dev', 'lo'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  added = true;
  const box = await runtime.create({ image: BUSYBOX, network: { mode: 'enabled' } });
  assert.ok(spareOf(box.id), 'the box took a spare made before');
  const refused = await run(box, 'sh', ['-c', `nc -w 3 ${LATE_IP} ${hostPort} </dev/null; echo rc=$?`]);
  assert.doesNotMatch(refused.stdout, /host/, 'a host address is no destination of the open policy');
  await runtime.remove(box.id, true);
});

test("a non-detached box's gateway and slirp4netns go after its creator is SIGKILLed", { skip }, async () => {
  await until('two spares ready', () => ready().length === 2);
  const before = ready();
  const child = runtimeChild(
    home,
    `const box = await runtime.create({ image: ${JSON.stringify(BUSYBOX)}, network: { mode: 'enabled' } });
     console.log(box.id); console.log('READY');
     await new Promise(() => {});`,
  );
  const id = await child.ready;
  const spare = spareOf(id);
  const taken = before.find((s) => s.name === spare);
  assert.ok(taken, 'the box took a spare');
  assert.ok(runs(taken.slirp));
  await child.kill();
  await until('gateway name, spare namespace and slirp4netns gone', () => {
    let link = true;
    try {
      lstatSync(`/run/netns/sbx-${id}`);
    } catch {
      link = false;
    }
    return !link && !existsSync(`/run/netns/${spare}`) && !mounted(spare!) && !runs(taken.slirp);
  });
});

test("a SIGKILLed helper's spares are ended by the next helper", { skip }, async () => {
  const box = keeper;
  await until('two spares ready', () => ready().length === 2);
  const old = ready();
  const pid = helperPid(dir());
  assert.ok(pid);
  process.kill(pid, 'SIGKILL');
  await until('the old spares ended, new ones ready', () => {
    const now = ready();
    return (
      old.every((s) => !runs(s.slirp) && !existsSync(`/run/netns/${s.name}`) && !mounted(s.name)) &&
      now.length === 2 &&
      now.every((s) => !old.some((o) => o.name === s.name))
    );
  });
  assert.notEqual(helperPid(dir()), pid);
  // The box's own network is untouched by the helper's restart.
  const lookup = await run(box, 'nslookup', ['host.sandbox.internal']);
  assert.match(lookup.stdout, /Server:\s+10\.0\.2\.3/);
});

test("a helper loop killed as a whole: a runtime's resume ends the spares it left", { skip }, async () => {
  // A helper of its own (no box): started by a request, it makes its spares.
  const own = helperDir(mkdtempSync('/tmp/sbx-nsp-'));
  await callHelper(own, { op: 'ping' });
  // Both made (slirp4netns recorded): no spare is being made, so no process of one is starting.
  await until('two spares ready', () => ready(own).length === 2);
  const old = ready(own);
  // The restart loop (flock, sh) and the helper, all SIGKILLed (not the spares' slirp4netns, whose
  // command line names the directory too): nothing ends the spares.
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(own) && !cmdline.startsWith('slirp4netns\0'))
        process.kill(Number(entry), 'SIGKILL');
    } catch {}
  }
  // Gone when its lock is free (a `sleep` the loop ran between restarts may hold it a moment longer).
  await until(
    'the helper and its loop are gone',
    () => helperPid(own) === null && spawnSync('flock', ['-n', join(own, 'lock'), 'true']).status === 0,
  );
  assert.ok(
    old.every((s) => runs(s.slirp) && mounted(s.name)),
    'the spares outlive their helper',
  );
  resumeHelper(own);
  await until('the left spares ended', () =>
    old.every((s) => !runs(s.slirp) && !existsSync(`/run/netns/${s.name}`) && !mounted(s.name)),
  );
});
