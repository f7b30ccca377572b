/**
 * Escape suite, secrets proxy: every spelling of the host's loopback, unspecified, link-local and own
 * addresses in `CONNECT` and absolute-form `GET` is refused with 403, and a dual-stack listener on the
 * host (every address, port chosen by the kernel) receives no connection at all. The proxy is the one
 * a box reaches at `10.0.2.2:3128`; it is driven here directly from the host over its loopback port.
 */
import assert from 'node:assert/strict';
import { createServer, type Server, connect as tcpConnect } from 'node:net';
import { after, before, describe, test } from 'node:test';
// internal: the host's own addresses the proxy must refuse
import { hostIpv4Addresses } from '../../src/network/destinations.ts';
// internal: the secrets proxy is tested as a unit
import { parseAllowNet, type SecretsProxy, startSecretsProxy } from '../../src/network/index.ts';
import { assertHostUntouched, type HostSnapshot, snapshotHost } from './helpers.ts';

/** A listener on every host address (IPv4 and IPv6) that counts the connections it accepts. */
interface CountingListener {
  port: number;
  accepted: () => number;
  close: () => Promise<void>;
}

async function countingListener(): Promise<CountingListener> {
  let accepted = 0;
  const server: Server = createServer((socket) => {
    accepted++;
    socket.end('host listener reached\n');
  });
  await new Promise<void>((resolve) => server.listen({ port: 0, host: '::', ipv6Only: false }, resolve));
  return {
    port: (server.address() as { port: number }).port,
    accepted: () => accepted,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** Sends one raw request to the proxy and returns everything it answers until it closes (5 s at most). */
function ask(proxyPort: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect(proxyPort, '127.0.0.1');
    let data = '';
    socket.setTimeout(5000, () => socket.destroy());
    socket.on('data', (c) => {
      data += c;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(data));
    socket.write(request); // no half-close: the proxy answers, then closes
  });
}

/** Loopback, unspecified and embedded-IPv4 spellings of the host (`PORT` is replaced). */
const LOOPBACK_SPELLINGS = [
  '127.0.0.1',
  '127.1',
  '127.0.0.2',
  '2130706433',
  '0x7f000001',
  '0x7f.1',
  '0177.0.0.1',
  '017700000001',
  'localhost',
  'LOCALHOST.',
  '0.0.0.0',
  '0',
  '[::1]',
  '[0:0:0:0:0:0:0:1]',
  '[::]',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[::FFFF:7F00:0001]',
  '[0:0:0:0:0:ffff:7f00:1]',
  '[::ffff:0.0.0.0]',
  '[::127.0.0.1]',
  '[64:ff9b::7f00:1]',
  '[2002:7f00:1::1]',
  '10.0.2.2',
  'host.sandbox.internal',
];

let listener: CountingListener;
let hostBefore: HostSnapshot;
const proxies: SecretsProxy[] = [];

async function proxy(allowNet: string[], lookup?: Parameters<typeof startSecretsProxy>[0]['lookup']) {
  // A secret for one unrelated host: CONNECT to anything else is a plain tunnel, dialled at once.
  const secrets = [{ name: 'K', value: 'real', hosts: ['api.example.test'], placeholder: '<SECRET:K>' }];
  const p = await startSecretsProxy({
    policy: parseAllowNet(allowNet),
    secrets,
    ...(lookup ? { lookup } : {}),
  });
  proxies.push(p);
  return p;
}

before(async () => {
  listener = await countingListener();
  hostBefore = snapshotHost();
});
after(async () => {
  for (const p of proxies) await p.close();
  await listener.close();
});

describe('secrets proxy: the host is not a destination', () => {
  test('CONNECT and absolute-form GET to every loopback spelling get 403; the host listener sees nothing', async () => {
    const p = await proxy([]);
    for (const host of LOOPBACK_SPELLINGS) {
      const connect = await ask(p.port, `CONNECT ${host}:${listener.port} HTTP/1.1\r\nHost: x\r\n\r\n`);
      assert.match(connect, /^HTTP\/1\.1 403/, `CONNECT ${host}`);
      const get = await ask(
        p.port,
        `GET http://${host}:${listener.port}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      // WHATWG URL parsing rejects a few raw spellings (400); every other one must be refused (403).
      assert.match(get, /^HTTP\/1\.1 (403|400)/, `GET ${host}`);
      assert.equal(listener.accepted(), 0, `host listener reached through ${host}`);
    }
  });

  test("the host's own non-loopback addresses and link-local are refused; the listener sees nothing", async () => {
    const p = await proxy([]);
    const own = hostIpv4Addresses().filter((a) => !a.startsWith('127.'));
    for (const host of [...own, ...own.map((a) => `[::ffff:${a}]`), '169.254.169.254', '[fe80::1]']) {
      const reply = await ask(p.port, `CONNECT ${host}:${listener.port} HTTP/1.1\r\n\r\n`);
      assert.match(reply, /^HTTP\/1\.1 403/, `CONNECT ${host}`);
    }
    assert.equal(listener.accepted(), 0);
  });

  test('listing loopback or a wide CIDR in allowNet does not open the host', async () => {
    const p = await proxy(['127.0.0.1', '::1', '0.0.0.0/0', '10.0.2.0/24', 'localhost']);
    for (const host of ['127.0.0.1', '[::ffff:7f00:1]', 'localhost', '10.0.2.2', '0.0.0.0']) {
      const reply = await ask(p.port, `CONNECT ${host}:${listener.port} HTTP/1.1\r\n\r\n`);
      assert.match(reply, /^HTTP\/1\.1 403/, `CONNECT ${host}`);
    }
    assert.equal(listener.accepted(), 0);
  });

  test('a listed name that resolves to loopback or a host address is refused (no DNS rebinding)', async () => {
    const own = hostIpv4Addresses();
    const rebinding = async () => [
      { address: '::ffff:127.0.0.1', family: 6 },
      ...own.map((address) => ({ address, family: 4 })),
      { address: '169.254.1.1', family: 4 },
    ];
    const p = await proxy(['rebind.example.test'], rebinding);
    const reply = await ask(p.port, `CONNECT rebind.example.test:${listener.port} HTTP/1.1\r\n\r\n`);
    assert.match(reply, /^HTTP\/1\.1 403/);
    assert.equal(listener.accepted(), 0);
  });

  test('control: naming the host loopback (host.sandbox.internal) does reach the listener', async () => {
    const p = await proxy(['host.sandbox.internal']);
    const reply = await ask(p.port, `CONNECT host.sandbox.internal:${listener.port} HTTP/1.1\r\n\r\n`);
    assert.match(reply, /^HTTP\/1\.1 200/);
    assert.match(reply, /host listener reached/);
    assert.equal(listener.accepted(), 1);
    // Naming the host's loopback does not name other spellings of the host's addresses.
    const other = await ask(p.port, `CONNECT [::ffff:7f00:1]:${listener.port} HTTP/1.1\r\n\r\n`);
    assert.match(other, /^HTTP\/1\.1 403/);
    assert.equal(listener.accepted(), 1);
  });

  test('the host is untouched after every case (files, mounts, listeners, processes)', () => {
    assertHostUntouched(hostBefore);
  });
});
