/**
 * Networking through the public API (`JsRuntime.create`, `JsBox.info`, `box.network`, `SimpleBox`):
 * published ports in `JsBoxInfo.network` (spec 002 rules for new and reattached handles), tunnels, and
 * secrets substituted by the per-box HTTPS proxy while the box only ever sees placeholders. The HTTPS
 * test server listens on the host's loopback with a certificate of a test CA.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as httpsServer, type Server } from 'node:https';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BoxError, type JsRuntime, SimpleBox } from '../src/index.ts';
import { testPki } from './helpers/pki.ts';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  run,
  runtimeChild,
  seededHome,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

function processGone(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('slirp4netns');
  } catch {
    return true;
  }
}

let runtime: JsRuntime;
let home = '';
const pki = testPki();

before(() => {
  ensureRegistry();
  home = seededHome('sandbox-net-');
  // The secrets proxy runs in the network helper, which the first network box of this home starts with
  // this process's environment: it verifies upstream servers against the system roots and this CA.
  const caFile = join(home, 'test-ca.pem');
  writeFileSync(caFile, pki.caPem);
  process.env.NODE_EXTRA_CA_CERTS = caFile;
  runtime = testRuntime(home);
});
after(cleanupAll);

describe('ports and info()', () => {
  test('publishedPorts: concrete for the creating handle, null for a reattached one, [] once stopped', async () => {
    const box = await runtime.create({
      image: BUSYBOX,
      ports: [{ guestPort: 8080 }, { guestPort: 9090, hostIp: '127.0.0.1' }],
    });
    const info = await box.info();
    const ports = info.network!.publishedPorts!;
    assert.equal(ports.length, 2);
    assert.equal(ports[0]!.hostIp, '0.0.0.0');
    assert.equal(ports[0]!.protocol, 'tcp');
    assert.ok(ports.every((p) => Number.isInteger(p.hostPort) && p.hostPort > 0));
    assert.deepEqual(info.network!.outbound, { mode: 'enabled', allowNet: [] });
    assert.equal(info.network!.mode, 'enabled');
    await run(box, 'sh', ['-c', 'mkdir /w && echo published > /w/index.html && httpd -p 8080 -h /w']);
    const res = await fetch(`http://127.0.0.1:${ports[0]!.hostPort}/`);
    assert.equal(await res.text(), 'published\n');

    const again = await runtime.get(box.id);
    assert.equal((await again!.info()).network!.publishedPorts, null);
    assert.equal((await runtime.getInfo(box.id))!.network!.publishedPorts, null);
    await box.stop();
    assert.deepEqual((await box.info()).network!.publishedPorts, []);
    await runtime.remove(box.id);
  });

  test('metrics count established TCP connections and refused attempts in the box', async () => {
    const box = await runtime.create({ image: BUSYBOX });
    await run(box, 'sh', ['-c', '(nc -ll -p 7000 -e cat &) ; sleep 0.2']);
    const before = await box.metrics();
    assert.equal(typeof before.networkTcpErrors, 'number');
    const refused = await run(box, 'sh', ['-c', 'nc -w 2 10.0.2.2 9 </dev/null; echo rc=$?']);
    assert.match(refused.stdout + refused.stderr, /refused/i);
    const conn = await (await box.network.tunnel(7000)).connect();
    await conn.write('x\n');
    assert.equal((await conn.read()).toString(), 'x\n');
    const during = await box.metrics();
    assert.ok(during.networkTcpErrors! > before.networkTcpErrors!, 'the refused connect is counted');
    assert.ok(during.networkTcpConnections! >= 1, 'the tunnel connection is established');
    await conn.close();
    await runtime.remove(box.id, true);
  });

  test('creation rejects bad allowNet entries and UDP ports, naming the field; nothing is left', async () => {
    await assert.rejects(
      runtime.create({
        image: BUSYBOX,
        network: { mode: 'enabled', allowNet: ['ok.example', '300.1.1.1/8'] },
      }),
      (e: BoxError) => e instanceof BoxError && e.field === 'network.allowNet[1]',
    );
    await assert.rejects(
      runtime.create({ image: BUSYBOX, ports: [{ guestPort: 53, protocol: 'udp' }] }),
      (e: BoxError) => e.field === 'ports[0].protocol',
    );
    await assert.rejects(
      runtime.create({ image: BUSYBOX, secrets: [{ name: 'A=B', value: 'v' }] }),
      (e: BoxError) => e.field === 'secrets[0].name',
    );
    await assert.rejects(
      runtime.create({ image: BUSYBOX, secrets: [{ name: 'K', value: 'v', placeholder: '' }] }),
      (e: BoxError) => e.field === 'secrets[0].placeholder',
    );
    assert.deepEqual(readdirSync(join(home, 'boxes')), []);
  });
});

describe('across processes', () => {
  test('a detached box keeps its published port after its creator is killed; a non-detached one loses it', async () => {
    const procHome = tempHome('sandbox-netp-');
    const body = (detach: boolean) => `
      const box = await runtime.create({ image: '${BUSYBOX}', detach: ${detach}, ports: [{ guestPort: 8080, hostIp: '127.0.0.1' }] });
      const ex = await box.exec('sh', ['-c', 'mkdir /w && echo ${detach ? 'kept' : 'gone'} > /w/index.html && httpd -p 8080 -h /w']);
      await ex.wait();
      const info = await box.info();
      process.stdout.write(JSON.stringify({ id: box.id, port: info.network.publishedPorts[0].hostPort }) + 'READY');
      setInterval(() => {}, 1000);`;
    const netDir = join(procHome, 'engine', 'net');
    for (const detach of [true, false]) {
      const proc = runtimeChild(procHome, body(detach));
      const { id, port } = JSON.parse(await proc.ready) as { id: string; port: number };
      const slirpPid = (JSON.parse(readFileSync(join(netDir, `${id}.json`), 'utf8')) as { slirpPid: number })
        .slirpPid;
      assert.equal(await (await fetch(`http://127.0.0.1:${port}/`)).text(), `${detach ? 'kept' : 'gone'}\n`);
      await proc.kill();
      if (detach) {
        assert.equal(await (await fetch(`http://127.0.0.1:${port}/`)).text(), 'kept\n');
        assert.equal(processGone(slirpPid), false);
      } else {
        for (let i = 0; i < 600 && !processGone(slirpPid); i++) await new Promise((r) => setTimeout(r, 25));
        assert.equal(processGone(slirpPid), true, 'slirp4netns exits with the parent of a non-detached box');
        await assert.rejects(fetch(`http://127.0.0.1:${port}/`));
      }
      // Another process's runtime tears the box down, slirp4netns and its state included.
      await testRuntime(procHome).remove(id, true);
      assert.equal(processGone(slirpPid), true);
      assert.deepEqual(
        readdirSync(netDir).filter((f) => f.startsWith(id)),
        [],
      );
    }
  });
});

describe('tunnels through the box handle', () => {
  test('JsBox.network and SimpleBox.network tunnel to a box port', async () => {
    const box = new SimpleBox({ image: BUSYBOX, runtime, network: { mode: 'disabled' } });
    try {
      await box.exec('sh', '-c', '(nc -ll -p 7000 -e tr a-z A-Z &) ; sleep 0.2');
      const conn = await (await box.network.tunnel(7000)).connect();
      await conn.write('simple box\n');
      let got = '';
      while (!got.includes('\n')) got += (await conn.read()).toString();
      assert.equal(got, 'SIMPLE BOX\n');
      await conn.close();
      const handle = await runtime.get(await box.getId());
      const second = await (await handle!.network.tunnel(7000)).connect();
      await second.write('reattached\n');
      got = '';
      while (!got.includes('\n')) got += (await second.read()).toString();
      assert.equal(got, 'REATTACHED\n');
      await second.close();
    } finally {
      await box.stop();
    }
    await assert.rejects((await runtime.create({ image: BUSYBOX })).network.tunnel(70000), /port/);
  });
});

describe('secrets', () => {
  let server: Server;
  let port = 0;
  const API_KEY = 'sk-live-9f8e7d6c5b4a-real-value';
  const TOKEN = 'tok-real-0123456789';

  before(async () => {
    server = httpsServer({ key: pki.keyPem, cert: pki.certPem }, async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          url: req.url,
          auth: req.headers.authorization,
          body: Buffer.concat(chunks).toString(),
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as { port: number }).port;
  });
  after(() => server?.close());

  test('placeholders are replaced in URL, headers and body of HTTPS requests; the box never holds the values', async () => {
    const box = await runtime.create({
      image: 'python:slim',
      network: { mode: 'enabled', allowNet: ['host.sandbox.internal'] },
      secrets: [
        { name: 'API_KEY', value: API_KEY, hosts: ['host.sandbox.internal'] },
        { name: 'TOKEN', value: TOKEN, placeholder: 'TOKEN_PLACEHOLDER' },
      ],
    });
    const script = [
      'import json, os, urllib.request',
      'key = os.environ["API_KEY"]; tok = os.environ["TOKEN"]',
      `req = urllib.request.Request(f"https://host.sandbox.internal:${port}/echo?t={tok}",`,
      '  data=json.dumps({"key": key}).encode(), headers={"Authorization": f"Bearer {key}"})',
      'print(urllib.request.urlopen(req, timeout=20).read().decode())',
    ].join('\n');
    const result = await run(box, 'python3', ['-c', script]);
    assert.equal(result.exitCode, 0, result.stderr);
    const echoed = JSON.parse(result.stdout) as { url: string; auth: string; body: string };
    assert.equal(echoed.url, `/echo?t=${TOKEN}`);
    assert.equal(echoed.auth, `Bearer ${API_KEY}`);
    assert.deepEqual(JSON.parse(echoed.body), { key: API_KEY });

    const env = await run(box, 'env');
    assert.match(env.stdout, /^API_KEY=<SECRET:API_KEY>$/m);
    assert.match(env.stdout, /^TOKEN=TOKEN_PLACEHOLDER$/m);
    const search = await run(box, 'sh', [
      '-c',
      `grep -rlsF -e '${API_KEY}' -e '${TOKEN}' /etc /root /tmp /proc/1/environ /proc/self/environ; echo done`,
    ]);
    assert.equal(search.stdout.trim(), 'done');
    const ca = await run(box, 'cat', ['/etc/ssl/certs/sandbox-ca.pem']);
    assert.match(ca.stdout, /BEGIN CERTIFICATE/);
    assert.doesNotMatch(ca.stdout, /PRIVATE KEY/);
    const info = JSON.stringify(await box.info());
    assert.ok(!info.includes(API_KEY) && !info.includes(TOKEN));
    for (const file of readdirSync(home).filter((f) => f.startsWith('state.db'))) {
      const bytes = readFileSync(join(home, file)).toString('latin1');
      assert.ok(!bytes.includes(API_KEY) && !bytes.includes(TOKEN), `${file} holds no secret value`);
    }
    await runtime.remove(box.id, true);
  });

  test('an HTTPS host outside allowNet is refused by the proxy, placeholder unsent', async () => {
    const box = await runtime.create({
      image: 'python:slim',
      network: { mode: 'enabled', allowNet: ['*.example.test'] },
      secrets: [{ name: 'API_KEY', value: API_KEY }],
    });
    const script = [
      'import urllib.request',
      'try:',
      `  urllib.request.urlopen("https://host.sandbox.internal:${port}/", timeout=20); print("reached")`,
      'except Exception as e:',
      '  print("refused", e)',
    ].join('\n');
    const result = await run(box, 'python3', ['-c', script]);
    assert.match(result.stdout, /refused.*403/);
    await runtime.remove(box.id, true);
  });
});
