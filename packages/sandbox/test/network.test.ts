/**
 * Networking of local boxes (spec 002 `NetworkSpec`, `JsPortSpec`, tunnels) driven through the engine
 * with the `BoxNetworking` hooks: real boxes (busybox rootfs), real slirp4netns, real servers on the
 * host's loopback. All traffic goes to 127.0.0.1 or into the boxes' own namespaces.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer as httpServer, type Server } from 'node:http';
import { connect, createConnection, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
// internal: the network manager is tested under the engine, without the runtime
import { createEngine, makeBusyboxRootfs, type OciEngine } from '../src/engine/index.ts';
import { BoxError } from '../src/index.ts';
// internal: the network manager is tested as a unit
import {
  BoxNetworking,
  LocalNetworkHandle,
  type PortRequest,
  parseAllowNet,
  type SecretRule,
} from '../src/network/index.ts';
import { specFactory } from './helpers/engine.ts';

const tmp = mkdtempSync('/tmp/net-test-');
const rootfs = makeBusyboxRootfs(join(tmp, 'layer0'));
const net = new BoxNetworking({ stateDir: join(tmp, 'net') });
let engine: OciEngine;
let hostServer: Server;
let hostPort = 0;
const boxSpec = specFactory(tmp, rootfs, 'net');
const started: { id: string; boxDir: string }[] = [];

async function startBox(
  options: {
    mode?: 'enabled' | 'disabled';
    allowNet?: string[];
    ports?: PortRequest[];
    secrets?: SecretRule[];
  } = {},
): Promise<string> {
  const spec = boxSpec({ network: { mode: options.mode ?? 'enabled', allowNet: options.allowNet ?? [] } });
  const { id, boxDir } = spec;
  net.prepare(id, { ports: options.ports ?? [], secrets: options.secrets ?? [], detach: true });
  started.push({ id, boxDir });
  await engine.start(spec);
  return id;
}

async function sh(id: string, script: string): Promise<{ code: number; out: string }> {
  const p = await engine.exec(id, { cmd: 'sh', args: ['-c', script], env: [] });
  let out = '';
  p.stdout.on('data', (c: Buffer) => {
    out += c;
  });
  p.stderr.on('data', (c: Buffer) => {
    out += c;
  });
  const code = await p.exited;
  await new Promise((r) => setImmediate(r));
  return { code, out };
}

/** An HTTP/1.0 GET from inside the box with busybox nc; prints the response, then `rc=<nc exit>`. */
function httpGet(host: string, port: number, path = '/'): string {
  return `printf 'GET ${path} HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n' | nc -w 5 ${host} ${port} 2>&1; echo rc=$?`;
}

before(async () => {
  engine = await createEngine({ stateRoot: join(tmp, 'state'), ...net.hooks() });
  hostServer = httpServer((req, res) => res.end(`host says hi to ${req.url}\n`));
  await new Promise<void>((r) => hostServer.listen(0, '127.0.0.1', () => r()));
  hostPort = (hostServer.address() as { port: number }).port;
});

after(async () => {
  for (const { id, boxDir } of started) {
    await engine.stop(id, 0).catch(() => {});
    await engine.remove(id, boxDir).catch(() => {});
  }
  hostServer?.close();
  const left = readdirSync(join(tmp, 'net')).filter((f) => f.endsWith('.json'));
  const gateways = started.filter(({ id }) => existsSync(`/run/netns/sbx-${id}`));
  rmSync(tmp, { recursive: true, force: true });
  assert.deepEqual(left, [], 'network state of every box is torn down');
  assert.deepEqual(gateways, [], 'no gateway namespace is left');
});

/** Writes `text` and a newline on `socket`; resolves with what comes back up to the first newline (then closes it). */
function askLine(socket: Socket, text: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let data = '';
    socket.on('data', (c) => {
      data += c;
      if (data.includes('\n')) {
        socket.destroy();
        resolve(data);
      }
    });
    socket.on('error', reject);
    socket.on('close', () => reject(new Error(`closed after '${data}'`)));
    socket.write(`${text}\n`);
  });
}

describe('network modes', () => {
  test("mode 'disabled': only lo, no eth0", async () => {
    const id = await startBox({ mode: 'disabled' });
    const { out } = await sh(id, 'ls /sys/class/net');
    assert.deepEqual(out.trim().split(/\s+/), ['lo']);
    assert.deepEqual(net.publishedPorts(id), []);
  });

  test("mode 'enabled': eth0 via slirp4netns; the host loopback is refused at once unless listed", async () => {
    const id = await startBox();
    const { out } = await sh(id, 'ls /sys/class/net; ip -4 addr show eth0; cat /etc/resolv.conf');
    assert.match(out, /eth0/);
    assert.match(out, /inet 10\.0\.2\.100\/24/);
    assert.match(out, /nameserver 10\.0\.2\.3/);
    const blocked = await sh(id, httpGet('10.0.2.2', hostPort));
    assert.doesNotMatch(blocked.out, /host says hi/);
    assert.match(blocked.out, /refused/i);
  });
});

describe('allowNet', () => {
  test('a listed name resolves and connects; its resolved IP is admitted', async () => {
    const id = await startBox({ allowNet: ['host.sandbox.internal'] });
    const byName = await sh(id, httpGet('host.sandbox.internal', hostPort, '/by-name'));
    assert.match(byName.out, /host says hi to \/by-name/);
    const byIp = await sh(id, httpGet('10.0.2.2', hostPort, '/by-ip'));
    assert.match(byIp.out, /host says hi to \/by-ip/);
  });

  test('an unlisted name gets NXDOMAIN; an unlisted IP is refused (fast, no hang)', async () => {
    const id = await startBox({ allowNet: ['*.example.test'] });
    const name = await sh(id, 'nslookup -type=A host.sandbox.internal 2>&1; echo rc=$?');
    assert.match(name.out, /NXDOMAIN/);
    const ip = await sh(id, httpGet('10.0.2.2', hostPort));
    assert.doesNotMatch(ip.out, /host says hi/);
    assert.match(ip.out, /refused/i);
  });

  test('a `*.` wildcard admits subdomains', async () => {
    const id = await startBox({ allowNet: ['*.sandbox.internal'] });
    const { out } = await sh(id, httpGet('host.sandbox.internal', hostPort, '/wild'));
    assert.match(out, /host says hi to \/wild/);
  });

  test('an exact IP rule admits the host loopback without DNS; a wider CIDR does not', async () => {
    for (const rule of ['10.0.2.2', '10.0.2.2/32']) {
      const id = await startBox({ allowNet: [rule] });
      const { out } = await sh(id, httpGet('10.0.2.2', hostPort, `/${rule}`));
      assert.match(out, new RegExp(`host says hi to /${rule.replaceAll('.', '\\.')}`));
    }
    const id = await startBox({ allowNet: ['10.0.2.0/24'] });
    const { out } = await sh(id, httpGet('10.0.2.2', hostPort, '/wide'));
    assert.doesNotMatch(out, /host says hi/);
    assert.match(out, /refused/i);
  });

  test('full access with secrets: the host loopback stays closed by name, by IP and through the proxy', async () => {
    const secrets = [{ name: 'K', value: 'real-value', hosts: [], placeholder: '<SECRET:K>' }];
    const id = await startBox({ secrets });
    const byName = await sh(id, httpGet('host.sandbox.internal', hostPort));
    assert.doesNotMatch(byName.out, /host says hi/);
    assert.match(byName.out, /bad address/i, 'the name does not resolve unless allowNet names it');
    const byIp = await sh(id, httpGet('10.0.2.2', hostPort));
    assert.doesNotMatch(byIp.out, /host says hi/);
    assert.match(byIp.out, /refused/i);
    const viaProxy = await sh(
      id,
      `printf 'CONNECT host.sandbox.internal:${hostPort} HTTP/1.1\\r\\n\\r\\n' | nc -w 5 10.0.2.2 3128`,
    );
    assert.match(viaProxy.out, /403/);
    const plain = await sh(
      id,
      `printf 'GET http://127.0.0.1:${hostPort}/ HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' | nc -w 5 10.0.2.2 3128`,
    );
    assert.match(plain.out, /403/);
    assert.doesNotMatch(plain.out, /host says hi/);
  });

  test('bad rules are rejected naming the entry', () => {
    assert.throws(
      () => parseAllowNet(['ok.example', 'bad host']),
      (e: BoxError) => e.field === 'network.allowNet[1]',
    );
    assert.throws(() => parseAllowNet(['10.0.0.0/33']), /CIDR/);
    assert.throws(() => parseAllowNet(['*.']), /wildcard/);
  });
});

/** Starts busybox httpd serving `/www<port>/index.html` with `text` on `port` in the box. */
async function serveInBox(id: string, port: number, text: string): Promise<void> {
  const r = await sh(
    id,
    `mkdir -p /www${port} && echo '${text}' > /www${port}/index.html && httpd -p ${port} -h /www${port} && echo ok`,
  );
  assert.match(r.out, /ok/);
}

describe('ports', () => {
  test('auto-assigned and fixed host ports are real listeners serving the box', async () => {
    const fixed = await new Promise<number>((resolve) => {
      const s = httpServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const id = await startBox({
      ports: [
        { guestPort: 8080, protocol: 'tcp', hostIp: '127.0.0.1' },
        { guestPort: 8081, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: fixed },
      ],
    });
    const published = net.publishedPorts(id)!;
    assert.equal(published.length, 2);
    assert.ok(published[0]!.hostPort > 0);
    assert.deepEqual(published[1], {
      guestPort: 8081,
      hostIp: '127.0.0.1',
      hostPort: fixed,
      protocol: 'tcp',
    });
    await serveInBox(id, 8080, 'box page one');
    await serveInBox(id, 8081, 'box page two');
    assert.equal(await (await fetch(`http://127.0.0.1:${published[0]!.hostPort}/`)).text(), 'box page one\n');
    assert.equal(await (await fetch(`http://127.0.0.1:${fixed}/`)).text(), 'box page two\n');
  });

  test('default hostIp 0.0.0.0 listens on every interface', async () => {
    const id = await startBox({ ports: [{ guestPort: 80, protocol: 'tcp', hostIp: '0.0.0.0' }] });
    const [p] = net.publishedPorts(id)!;
    assert.equal(p!.hostIp, '0.0.0.0');
    await serveInBox(id, 80, 'any interface');
    assert.equal(await (await fetch(`http://127.0.0.1:${p!.hostPort}/`)).text(), 'any interface\n');
  });

  test('a host port already in use fails the start naming ports[i].hostPort; nothing is left', async () => {
    const busy = httpServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const taken = (busy.address() as { port: number }).port;
    try {
      await assert.rejects(
        startBox({ ports: [{ guestPort: 80, protocol: 'tcp', hostIp: '127.0.0.1', hostPort: taken }] }),
        /ports\[0\]\.hostPort/,
      );
      const { id } = started.at(-1)!;
      assert.equal((await engine.state(id)).status === 'running', false);
      assert.equal(net.publishedPorts(id), null);
    } finally {
      busy.close();
    }
  });

  test('ports stop listening when the box stops', async () => {
    const id = await startBox({ ports: [{ guestPort: 80, protocol: 'tcp', hostIp: '127.0.0.1' }] });
    const [p] = net.publishedPorts(id)!;
    await engine.stop(id, 0);
    await assert.rejects(
      new Promise((resolve, reject) => {
        const s = createConnection(p!.hostPort, '127.0.0.1', () => resolve(s.end()));
        s.on('error', reject);
      }),
      /ECONNREFUSED/,
    );
  });
});

describe('tunnels', () => {
  let id = '';
  let network: LocalNetworkHandle;
  before(async () => {
    id = await startBox({ mode: 'disabled' });
    network = new LocalNetworkHandle(async () => {
      const state = await engine.state(id);
      if (state.status !== 'running' || !state.pid)
        throw new BoxError(`box ${id} is not running`, { code: 'conflict' });
      return state.pid;
    });
    // An echo server on the box's loopback: every connection gets its bytes back upper-cased.
    await sh(id, '(nc -ll -p 7000 -e tr a-z A-Z &) ; sleep 0.2; echo up');
  });

  test('connect() carries bytes both ways; uri() is null; a tunnel is one-shot', async () => {
    const tunnel = await network.tunnel(7000);
    assert.equal(tunnel.uri(), null);
    const conn = await tunnel.connect();
    await conn.write('hello box\n');
    let got = '';
    while (!got.includes('\n')) got += (await conn.read(4)).toString();
    assert.equal(got, 'HELLO BOX\n');
    await conn.close();
    await conn.close();
    await assert.rejects(conn.write('x'), /closed/);
    await assert.rejects(tunnel.connect(), /one-shot/);
  });

  test('connect() sees the end of the stream as soon as the box side closes', {
    timeout: 15_000,
  }, async () => {
    // A server that answers and closes (HTTP/1.0 style): read() must return the empty end-of-stream buffer
    // right away, not after socat's half-close grace period (60 s), which the test timeout would catch.
    await sh(id, '(echo answer-and-close > /tmp/once; nc -l -p 7001 < /tmp/once &) ; sleep 0.2; echo up');
    const conn = await (await network.tunnel(7001)).connect();
    let got = '';
    for (let chunk = await conn.read(); chunk.length > 0; chunk = await conn.read()) got += chunk.toString();
    assert.equal(got, 'answer-and-close\n');
    await conn.close();
  });

  test('connect() to a port nobody listens on fails with a clear error', async () => {
    await assert.rejects((await network.tunnel(7999)).connect(), /refused/);
    await assert.rejects(network.tunnel(0), (e: BoxError) => e.field === 'port');
  });

  test('forward() on tcp serves several clients at once, each with a fresh tunnel', async () => {
    const forwarder = await (await network.tunnel(7000)).forward({ type: 'tcp', port: 0 });
    const [host, port] = forwarder.localAddr().split(':');
    assert.equal(host, '127.0.0.1');
    const talk = (text: string) => askLine(connect(Number(port), '127.0.0.1'), text);
    const replies = await Promise.all(['one', 'two', 'three', 'four'].map(talk));
    assert.deepEqual(replies, ['ONE\n', 'TWO\n', 'THREE\n', 'FOUR\n']);
    let waited = false;
    const waiting = forwarder.wait().then(() => {
      waited = true;
    });
    await forwarder.close();
    await forwarder.close();
    await waiting;
    assert.equal(waited, true);
  });

  test('forward() on a unix socket', async () => {
    const path = join(tmp, `fwd-${process.pid}.sock`);
    const forwarder = await (await network.tunnel(7000)).forward({ type: 'unix', path });
    assert.equal(forwarder.localAddr(), path);
    const reply = await askLine(connect(path), 'via unix');
    assert.equal(reply, 'VIA UNIX\n');
    await forwarder.close();
  });
});
