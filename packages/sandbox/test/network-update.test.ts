/**
 * `box.network.update({ allowNet })` on running boxes (local runtime, real boxes, python:slim): the new
 * policy applies at once both ways (newly allowed destinations connect, removed ones are refused by name
 * and by address), established connections to a destination no longer allowed are cut (by the host's
 * loopback through its DNAT, and by the host's own address), a refused update changes nothing, the
 * record keeps the policy, another box keeps its own, and the host's ruleset is untouched. The servers
 * listen on the host: an echo server and an HTTP server on every interface.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer as httpServer, type Server } from 'node:http';
import { type Server as NetServer, createServer as netServer, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { BoxError, type JsBox, type JsRuntime } from '../src/index.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, run, testRuntime } from './runtime-helpers.ts';

const IMAGE = 'python:slim';
const HOST_IP = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;

let runtime: JsRuntime;
let web: Server;
let echo: NetServer;
let webPort = 0;
let echoPort = 0;
const echoSockets = new Set<Socket>();

/** The host's nftables ruleset (the boxes' rules live in their gateway namespaces, never here). */
function hostRuleset(): string {
  const r = spawnSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
  return `${r.status}\n${r.stdout}`;
}
let rulesetBefore = '';

before(async () => {
  ensureRegistry();
  assert.ok(HOST_IP, 'the host has a non-loopback IPv4 address');
  rulesetBefore = hostRuleset();
  runtime = testRuntime();
  web = httpServer((req, res) => res.end(`hi ${req.url}`));
  await new Promise<void>((r) => web.listen(0, '0.0.0.0', () => r()));
  webPort = (web.address() as { port: number }).port;
  echo = netServer((socket) => {
    echoSockets.add(socket);
    socket.on('close', () => echoSockets.delete(socket));
    socket.on('error', () => {});
    socket.pipe(socket);
  });
  await new Promise<void>((r) => echo.listen(0, '0.0.0.0', () => r()));
  echoPort = (echo.address() as { port: number }).port;
});

after(async () => {
  await cleanupAll();
  for (const s of echoSockets) s.destroy();
  web?.close();
  echo?.close();
});

/** `hi /<path>` or `ERR …` for a direct GET from the box, by name and by the host's own address. */
async function reach(box: JsBox): Promise<{ byName: string; byHostIp: string; byLoopbackIp: string }> {
  const script = `
import json, urllib.request
o = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def get(url):
    try:
        return o.open(url, timeout=4).read().decode()
    except Exception as e:
        return "ERR " + type(e).__name__ + " " + str(e)
print(json.dumps({
    "byName": get("http://host.sandbox.internal:${webPort}/name"),
    "byHostIp": get("http://${HOST_IP}:${webPort}/ip"),
    "byLoopbackIp": get("http://10.0.2.2:${webPort}/loopback"),
}))`;
  const result = await run(box, 'python3', ['-c', script]);
  assert.equal(result.exitCode, 0, result.stderr);
  return JSON.parse(result.stdout);
}

/**
 * Holds a TCP connection from the box to the echo server at `host`, sending a byte every 100 ms, until
 * it breaks (or `seconds` pass): the returned promise resolves to what the box printed (`cut` or `alive`).
 * `opened` resolves once the echo server holds one more connection.
 */
async function holdConnection(
  box: JsBox,
  host: string,
  via: 'direct' | 'proxy' = 'direct',
  seconds = 20,
): Promise<{ opened: Promise<void>; result: Promise<string> }> {
  const before = echoSockets.size;
  const connect =
    via === 'direct'
      ? `s = socket.create_connection(("${host}", ${echoPort}), timeout=3)`
      : [
          's = socket.create_connection(("10.0.2.2", 3128), timeout=3)',
          `s.sendall(b"CONNECT ${host}:${echoPort} HTTP/1.1\\r\\n\\r\\n")`,
          'head = b""',
          'while b"\\r\\n\\r\\n" not in head: head += s.recv(1)',
          'assert b" 200 " in head, head',
        ].join('\n');
  const script = `
import socket, sys, time
${connect}
end = time.time() + ${seconds}
try:
    while time.time() < end:
        s.sendall(b"x")
        if s.recv(1) != b"x":
            raise ConnectionError("closed")
        time.sleep(0.1)
    print("alive")
except Exception as e:
    print("cut", type(e).__name__)`;
  const result = run(box, 'python3', ['-c', script]).then((r) => r.stdout.trim());
  const opened = (async () => {
    for (const end = Date.now() + 15_000; echoSockets.size <= before; ) {
      if (Date.now() > end) assert.fail('the box did not connect to the echo server');
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return { opened, result };
}

describe('box.network.update', () => {
  let box: JsBox;
  let other: JsBox;

  before(async () => {
    const network = { mode: 'enabled' as const, allowNet: ['host.sandbox.internal'] };
    [box, other] = await Promise.all([
      runtime.create({ image: IMAGE, network }),
      runtime.create({ image: IMAGE, network }),
    ]);
  });

  test('newly allowed connects, removed is refused, the established connection to it is cut', async () => {
    const start = await reach(box);
    assert.equal(start.byName, 'hi /name');
    assert.equal(start.byLoopbackIp, 'hi /loopback');
    assert.match(start.byHostIp, /^ERR /);

    const held = await holdConnection(box, 'host.sandbox.internal');
    await held.opened;
    const inForce = await box.network.update({ allowNet: [HOST_IP!] });
    assert.deepEqual(inForce, { allowNet: [HOST_IP] });
    assert.match(await held.result, /^cut /, 'the connection to the host loopback is cut');

    const after = await reach(box);
    assert.equal(after.byHostIp, 'hi /ip', 'the newly allowed address connects');
    assert.match(after.byName, /^ERR /, 'the removed name no longer resolves');
    assert.match(after.byLoopbackIp, /^ERR .*(refused|reset)/i, 'the removed destination is refused');
    assert.deepEqual((await box.info()).network!.allowNet, [HOST_IP]);
    assert.deepEqual((await runtime.getInfo(box.id))!.network!.outbound.allowNet, [HOST_IP]);

    const unaffected = await reach(other);
    assert.equal(unaffected.byName, 'hi /name', 'the other box keeps its policy');
    assert.match(unaffected.byHostIp, /^ERR /, 'and its refusals');
  });

  test('an established connection to an address no longer allowed is cut; [] opens all but the host', async () => {
    const held = await holdConnection(box, HOST_IP!);
    await held.opened;
    await box.network.update({ allowNet: ['host.sandbox.internal'] });
    assert.match(await held.result, /^cut /, 'the connection to the host address is cut');
    const back = await reach(box);
    assert.equal(back.byName, 'hi /name');
    assert.match(back.byHostIp, /^ERR /);

    await box.network.update({ allowNet: [] });
    const open = await reach(box);
    assert.match(open.byLoopbackIp, /^ERR /, 'full access never includes the host loopback');
    assert.match(open.byHostIp, /^ERR /, 'nor the host own addresses');
  });

  test('a refused update names the rule and changes nothing; a box without network is a conflict', async () => {
    await box.network.update({ allowNet: ['host.sandbox.internal'] });
    await assert.rejects(
      box.network.update({ allowNet: ['host.sandbox.internal', 'not a rule'] }),
      (e: unknown) =>
        e instanceof BoxError && e.code === 'invalid_option' && e.field === 'network.allowNet[1]',
    );
    await assert.rejects(
      box.network.update({ allowNet: 'host.sandbox.internal' } as never),
      (e: unknown) => e instanceof BoxError && e.field === 'allowNet',
    );
    assert.equal((await reach(box)).byName, 'hi /name');
    assert.deepEqual((await box.info()).network!.allowNet, ['host.sandbox.internal']);

    const offline = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled', allowNet: [] } });
    await assert.rejects(
      offline.network.update({ allowNet: [] }),
      (e: unknown) => e instanceof BoxError && e.code === 'conflict',
    );
    await runtime.remove(offline.id, true);
  });

  test('a stopped box keeps the new policy for its next start', async () => {
    await box.stop();
    await box.network.update({ allowNet: [HOST_IP!] });
    await box.start();
    const restarted = await reach(box);
    assert.equal(restarted.byHostIp, 'hi /ip');
    assert.match(restarted.byName, /^ERR /);
  });

  test('a tunnel through the secrets proxy to a destination no longer allowed is closed by the proxy', async () => {
    const proxied = await runtime.create({
      image: IMAGE,
      network: { mode: 'enabled', allowNet: ['host.sandbox.internal'] },
      secrets: [{ name: 'K', value: 'v-not-for-this-host', hosts: ['only.example.test'] }],
    });
    const held = await holdConnection(proxied, 'host.sandbox.internal', 'proxy');
    await held.opened;
    await proxied.network.update({ allowNet: [HOST_IP!] });
    assert.match(await held.result, /^cut /, 'the proxy closes the tunnel');
    const fresh = await holdConnection(proxied, HOST_IP!, 'proxy', 5);
    await fresh.opened;
    await proxied.network.update({ allowNet: [HOST_IP!, 'host.sandbox.internal'] });
    assert.match(await fresh.result, /^alive/, 'a tunnel still allowed stays open');
    await runtime.remove(proxied.id, true);
  });

  test('a gVisor box changes its policy the same way', async () => {
    const sentry = await runtime.create({
      image: IMAGE,
      isolation: 'gvisor',
      network: { mode: 'enabled', allowNet: ['host.sandbox.internal'] },
    });
    const start = await reach(sentry);
    assert.equal(start.byName, 'hi /name');
    assert.match(start.byHostIp, /^ERR /);
    await sentry.network.update({ allowNet: [HOST_IP!] });
    const after = await reach(sentry);
    assert.equal(after.byHostIp, 'hi /ip');
    assert.match(after.byName, /^ERR /);
    assert.match(after.byLoopbackIp, /^ERR /);
    await runtime.remove(sentry.id, true);
  });

  test('the host ruleset is untouched', () => {
    assert.equal(hostRuleset(), rulesetBefore);
  });
});
