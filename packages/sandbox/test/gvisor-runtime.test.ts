/**
 * The gVisor isolation tier through `JsRuntime`: the `isolation` option (runtime default and per
 * box), `JsBoxInfo.isolation` (tier and platform), exec streams, `tty` commands, network modes
 * (`disabled`, `enabled`, `allowNet`), published ports, tunnels, metrics and managed volumes.
 * Skipped only when runsc is not installed (`npm run test:setup -w @seed/sandbox` installs it).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, get, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { BoxError, JsRuntime } from '../src/index.ts';
import { startRestServer } from '../src/rest/server.ts';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  GVISOR_SKIP,
  REGISTRIES,
  run,
  seededHome,
  tempHome,
} from './runtime-helpers.ts';

const skip = GVISOR_SKIP;

let runtime: JsRuntime;
let server: Server;
let hostPort = 0;

before(async () => {
  if (skip) return;
  // ptrace explicitly: the KVM probe is covered by gvisor.test.ts.
  process.env.SEED_SANDBOX_GVISOR_PLATFORM = 'ptrace';
  ensureRegistry();
  runtime = new JsRuntime({
    homeDir: seededHome('sandbox-gv-'),
    imageRegistries: REGISTRIES,
    isolation: 'gvisor',
  });
  server = createServer((_req, res) => res.end('from host\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  hostPort = (server.address() as { port: number }).port;
});

after(async () => {
  server?.close();
  await cleanupAll();
});

/** GET http://127.0.0.1:<port>/ on a fresh connection (no keep-alive reuse); the body, or null on a socket error. */
function httpGet(port: number): Promise<string | null> {
  return new Promise((resolve) => {
    const req = get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c;
      });
      res.on('end', () => resolve(body));
      res.on('error', () => resolve(null));
    });
    req.on('error', () => resolve(null));
  });
}

describe('isolation option', { skip }, () => {
  test('the runtime default applies, a box may override it, and info() reports tier and platform', async () => {
    const gv = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    const ct = await runtime.create({
      image: BUSYBOX,
      network: { mode: 'disabled' },
      isolation: 'container',
    });
    assert.deepEqual((await gv.info()).isolation, { tier: 'gvisor', platform: 'ptrace' });
    assert.deepEqual((await ct.info()).isolation, { tier: 'container' });
    assert.deepEqual((await runtime.getInfo(gv.id))!.isolation, { tier: 'gvisor', platform: 'ptrace' });
    const kernel = await run(gv, 'dmesg');
    assert.match(kernel.stdout, /gVisor/);
    assert.doesNotMatch((await run(ct, 'cat', ['/proc/version'])).stdout, /4\.4\.0 #1 SMP Sun Jan 10/);
    await runtime.remove(gv.id, true);
    await runtime.remove(ct.id, true);
  });

  test('a REST runtime passes isolation through: the server creates a gVisor box and reports it', async () => {
    const server = await startRestServer({ runtime, port: 0 });
    try {
      const rest = new JsRuntime({ url: server.url });
      const box = await rest.create({ image: BUSYBOX, network: { mode: 'disabled' }, isolation: 'gvisor' });
      assert.deepEqual((await box.info()).isolation, { tier: 'gvisor', platform: 'ptrace' });
      assert.match((await run(box, 'dmesg')).stdout, /gVisor/);
      await rest.remove(box.id, true);
    } finally {
      await server.close();
    }
  });

  test('invalid isolation values are rejected naming the field', async () => {
    await assert.rejects(
      runtime.create({ image: BUSYBOX, isolation: 'vm' as never }),
      (e: BoxError) => e instanceof BoxError && e.field === 'isolation',
    );
    assert.throws(
      () => new JsRuntime({ homeDir: tempHome(), isolation: 'firecracker' as never }),
      /invalid runtime option isolation/,
    );
  });
});

describe('gVisor boxes through the runtime', { skip }, () => {
  test('exec streams and exit codes; tty; files; metrics', async () => {
    const box = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    const r = await run(box, 'sh', ['-c', 'echo out; echo err >&2; exit 4']);
    assert.deepEqual(r, { exitCode: 4, stdout: 'out', stderr: 'err' });
    const tty = await run(box, 'sh', ['-c', 'test -t 0 && echo is-a-tty'], undefined, true);
    assert.deepEqual(tty, { exitCode: 0, stdout: 'is-a-tty\r', stderr: '' });
    assert.match(await box.files.read('/etc/passwd'), /^root:/);
    const metrics = await box.metrics();
    assert.ok((metrics.memoryBytes ?? 0) > 0);
    assert.ok(metrics.commandsExecutedTotal >= 1);
    await runtime.remove(box.id, true);
  });

  test('network disabled: only lo; enabled with allowNet: the listed host is reached, others refused; netstack holds the address of eth0', async () => {
    const off = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    const offTry = await run(off, 'sh', ['-c', `nc -w 2 10.0.2.2 ${hostPort} </dev/null; echo rc=$?`]);
    assert.match(offTry.stdout, /rc=1/);
    await runtime.remove(off.id, true);

    const allowed = await runtime.create({
      image: BUSYBOX,
      network: { mode: 'enabled', allowNet: ['10.0.2.2'] },
    });
    const get = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 3 10.0.2.2 ${hostPort}`;
    const ok = await run(allowed, 'sh', ['-c', get]);
    assert.match(ok.stdout, /from host/, ok.stderr);
    const denied = await run(allowed, 'sh', ['-c', `nc -w 2 192.0.2.1 80 </dev/null; echo rc=$?`]);
    assert.match(denied.stdout + denied.stderr, /rc=1/);
    // netstack owns the box's address: eth0 has it inside the box, the host side of eth0 (in the
    // namespace the Sentry holds) has none left, and the engine's namespace file is unmounted.
    const inside = await run(allowed, 'ip', ['-4', 'addr', 'show', 'eth0']);
    assert.match(inside.stdout, /inet 10\.0\.2\.100\/24/, inside.stderr);
    const info = await allowed.info();
    const hostSide = spawnSync(
      'nsenter',
      [`--net=/proc/${info.state.pid}/ns/net`, 'ip', '-4', '-o', 'addr', 'show', 'eth0'],
      {
        encoding: 'utf8',
      },
    );
    assert.equal(hostSide.status, 0, hostSide.stderr);
    assert.equal(hostSide.stdout, '', 'no IPv4 address on the host side of eth0');
    assert.ok(!readFileSync('/proc/self/mountinfo', 'utf8').includes(`${allowed.id}/bundle/netns`));
    await runtime.remove(allowed.id, true);

    const open = await runtime.create({ image: BUSYBOX });
    const loop = await run(open, 'sh', ['-c', `${get}; echo rc=$?`]);
    assert.doesNotMatch(loop.stdout, /from host/, 'the host loopback stays closed without allowNet');
    await runtime.remove(open.id, true);
  });

  test('published ports, tunnels and the box itself reach a server in the box', async () => {
    // The server is Python's http.server: busybox httpd under gVisor's ptrace platform resets about half
    // of its connections when the host is busy (seen here with two CPU-bound processes beside it, while
    // http.server in the same box and busybox httpd in a container box answer all of them).
    const box = await runtime.create({
      image: 'python:slim',
      ports: [{ guestPort: 8080, hostIp: '127.0.0.1' }],
    });
    const port = (await box.info()).network!.publishedPorts![0]!.hostPort;
    const serve =
      'mkdir /w && echo in-gvisor > /w/index.html && cd /w && (python3 -m http.server 8080 >/dev/null 2>&1 &)';
    const bound = [
      'import socket, time',
      'for _ in range(400):',
      '    try:',
      "        socket.create_connection(('127.0.0.1', 8080), 1).close()",
      '        break',
      '    except OSError:',
      '        time.sleep(0.05)',
      'else:',
      '    raise SystemExit(1)',
    ].join('\n');
    assert.equal(
      (await run(box, 'sh', ['-c', `${serve} && python3 -c "${bound}"`])).exitCode,
      0,
      'the server listens',
    );
    const request = 'GET / HTTP/1.0\r\n\r\n';
    const fetchInBox =
      "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8080/').read().decode(), end='')";
    for (let round = 0; round < 3; round++) {
      assert.equal(await httpGet(port), 'in-gvisor\n', `published port, round ${round}`);
      const conn = await (await box.network.tunnel(8080)).connect();
      await conn.write(request);
      let reply = '';
      for (let chunk = await conn.read(); chunk.length > 0; chunk = await conn.read()) reply += chunk;
      await conn.close();
      assert.match(reply, /^HTTP\/1\.[01] 200[\s\S]*\r\n\r\nin-gvisor\n$/, `tunnel, round ${round}`);
      const local = await run(box, 'python3', ['-c', fetchInBox]);
      assert.equal(local.stdout, 'in-gvisor', 'the box reaches itself on 127.0.0.1');
    }
    await runtime.remove(box.id, true);
  });

  test('a managed volume outlives its gVisor box and is seen by a container box', async () => {
    const a = await runtime.create({
      image: BUSYBOX,
      network: { mode: 'disabled' },
      volumes: [{ managedVolume: 'gv-data', guestPath: '/data' }],
    });
    assert.equal((await run(a, 'sh', ['-c', 'echo kept > /data/f'])).exitCode, 0);
    await runtime.remove(a.id, true);
    const b = await runtime.create({
      image: BUSYBOX,
      isolation: 'container',
      network: { mode: 'disabled' },
      volumes: [{ managedVolume: 'gv-data', guestPath: '/data' }],
    });
    assert.equal((await run(b, 'cat', ['/data/f'])).stdout, 'kept');
    await runtime.remove(b.id, true);
  });
});
