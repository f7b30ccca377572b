/**
 * What only the REST runtime has (issue 10): the spec's REST rules (rejection 4 and port publication
 * refused before any request leaves, `startedAt`/`publishedPorts` from the server record), the wire
 * format (snake_case, error bodies, OpenAPI), authentication (API key, JWT permissions, loopback only),
 * the exec WebSocket (dropped connection mid-exec, one client at a time, bounded backlog), 20 concurrent
 * executions through one server, and tunnels over HTTP CONNECT.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { WebSocket } from 'ws';
import {
  BoxError,
  type JsBox,
  type JsNetworkHandle,
  JsRuntime,
  type RestExecution,
  SimpleBox,
} from '../src/index.ts';
// internal: restOptionsFrom is tested as a unit
import { restOptionsFrom } from '../src/rest/client.ts';
// internal: the REST process handle is tested as a unit
import { RemoteProcess } from '../src/rest/process.ts';
import { RestServer, startRestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, run, tempHome, testRuntime } from './runtime-helpers.ts';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const API_KEY = 'test-key-0123456789abcdef';

/** Raw JSON request against the server; returns status, headers and the parsed body. */
async function raw(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected field by field
): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(url + path, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null, headers: response.headers };
}

interface Frames {
  binary: Buffer[];
  text: { type: string; [key: string]: unknown }[];
}

/**
 * Opens a raw attach WebSocket, collecting its frames from the first one; resolves with the HTTP status of a
 * refused upgrade, or the socket and a promise of every frame until it closes.
 */
function attach(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<number | { socket: WebSocket; frames: Promise<Frames> }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`, { headers });
    const collected: Frames = { binary: [], text: [] };
    socket.on('message', (data: Buffer, isBinary) => {
      if (isBinary) collected.binary.push(data);
      else collected.text.push(JSON.parse(data.toString()));
    });
    const frames = new Promise<Frames>((done) => socket.once('close', () => done(collected)));
    socket.once('open', () => resolve({ socket, frames }));
    socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.once('error', reject);
  });
}

async function waitExited(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ exit_code: number }> {
  for (;;) {
    const status = await raw(url, 'GET', path, undefined, headers);
    if (status.body.status === 'exited') return status.body;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let home: string;
let local: JsRuntime;
let server: RestServer;
let rest: JsRuntime;
let box: JsBox;

before(async () => {
  ensureRegistry();
  home = tempHome('sandbox-rest-srv-');
  local = testRuntime(home);
  server = await startRestServer({ runtime: local, port: 0, backlogBytes: 1000 });
  rest = new JsRuntime({ url: server.url });
  box = await rest.create({ image: BUSYBOX }, 'rest-main');
});

after(async () => {
  await server.close();
  await cleanupAll();
});

describe('REST rules of spec 002', () => {
  it('refuses host bind mounts, rootfsPath and port publication before any request leaves', async () => {
    let requests = 0;
    const counter = createServer((_req, res) => {
      requests++;
      res.end('{}');
    });
    await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
    const runtime = new JsRuntime({ url: `http://127.0.0.1:${(counter.address() as AddressInfo).port}` });
    const cases: [unknown, string][] = [
      [{ image: BUSYBOX, volumes: [{ hostPath: '/etc', guestPath: '/host' }] }, 'volumes[0].hostPath'],
      [{ rootfsPath: '/srv/rootfs' }, 'rootfsPath'],
      [{ image: BUSYBOX, ports: [{ guestPort: 80 }] }, 'ports'],
    ];
    for (const [options, field] of cases) {
      await assert.rejects(
        runtime.create(options as never),
        (error: unknown) =>
          error instanceof BoxError && error.field === field && /REST runtime/.test(error.message),
        field,
      );
    }
    assert.equal(requests, 0);
    counter.close();
    // The server refuses them too (a client that skips the SDK), with the field named.
    const hostBind = await raw(server.url, 'POST', '/v1/boxes', {
      image: BUSYBOX,
      volumes: [{ host_path: '/etc', guest_path: '/host' }],
    });
    assert.equal(hostBind.status, 400);
    assert.equal(hostBind.body.error.field, 'volumes[0].hostPath');
    const ports = await raw(server.url, 'POST', '/v1/boxes', { image: BUSYBOX, ports: [{ guest_port: 80 }] });
    assert.equal(ports.status, 400);
    assert.equal(ports.body.error.field, 'ports');
  });

  it('startedAt and publishedPorts come from the current server record', async () => {
    const info = await box.info();
    assert.match(info.startedAt!, RFC3339);
    assert.deepEqual(info.network?.publishedPorts, []);
    // A box the server did not create (made by a local runtime on the same homeDir): publications unknown.
    const other = await local.create({ image: BUSYBOX }, 'rest-local-made');
    const seen = await rest.getInfo('rest-local-made');
    assert.equal(seen?.network?.publishedPorts, null);
    assert.equal(seen?.startedAt, (await other.info()).startedAt);
    await other.stop();
    const stopped = await rest.getInfo('rest-local-made');
    assert.equal(stopped?.state.running, false);
    const restart = await raw(server.url, 'POST', '/v1/boxes/rest-local-made/start');
    assert.equal(restart.status, 200);
    assert.equal(restart.body.state.running, true);
    await other.stop();
    const running = await raw(server.url, 'POST', '/v1/boxes/rest-main/start');
    assert.equal(running.status, 200);
    assert.equal(running.body.state.running, true);
    await rest.remove('rest-local-made');
  });

  it('chooses REST from url, or SANDBOX_URL without homeDir; credentials from options, then env', () => {
    const env = {
      SANDBOX_URL: 'http://127.0.0.1:9/',
      SANDBOX_API_KEY: 'env-key',
      SANDBOX_ACCESS_TOKEN: 'env-token',
    };
    assert.deepEqual(restOptionsFrom({}, env), {
      url: 'http://127.0.0.1:9',
      apiKey: 'env-key',
      accessToken: 'env-token',
    });
    assert.equal(restOptionsFrom({ homeDir: '/tmp/x' }, env), null, 'an explicit homeDir means local');
    assert.equal(restOptionsFrom({}, {}), null);
    assert.deepEqual(restOptionsFrom({ url: 'https://sandbox.test', apiKey: 'mine' }, env), {
      url: 'https://sandbox.test',
      apiKey: 'mine',
      accessToken: 'env-token',
    });
    assert.throws(
      () => restOptionsFrom({ url: 'http://x:1', homeDir: '/tmp' }, {}),
      (e: unknown) => e instanceof BoxError && e.field === 'homeDir',
    );
    assert.throws(
      () => restOptionsFrom({ url: 'localhost:8100' }, {}),
      (e: unknown) => e instanceof BoxError && e.field === 'url',
    );
    assert.throws(
      () => restOptionsFrom({ url: 'http://x:1', apiKey: '' }, {}),
      (e: unknown) => e instanceof BoxError && e.field === 'apiKey',
    );
    const remote = new JsRuntime({ url: 'http://127.0.0.1:9' });
    assert.equal(remote.url, 'http://127.0.0.1:9');
    assert.equal(local.url, null);
  });

  it('an unreachable server is a BoxError naming the URL', async () => {
    const runtime = new JsRuntime({ url: 'http://127.0.0.1:9' });
    await assert.rejects(
      runtime.listInfo(),
      (e: unknown) =>
        e instanceof BoxError && /cannot reach the REST runtime at http:\/\/127\.0\.0\.1:9/.test(e.message),
    );
  });

  it('SimpleBox accepts a REST runtime; images are listed from the server', async () => {
    await using simple = new SimpleBox({ image: BUSYBOX, runtime: rest });
    assert.equal((await simple.exec('echo', 'over rest')).stdout, 'over rest\n');
    // The server's store is listed; host layer directories stay on the server.
    assert.ok(
      (await rest.images.list()).some((image) => image.reference.endsWith('/library/busybox:latest')),
    );
    await assert.rejects(
      rest.images.get(BUSYBOX),
      (e: unknown) => e instanceof BoxError && e.code === 'unsupported',
    );
    assert.throws(
      () => new JsRuntime({ url: 'ftp://x' }),
      (e: unknown) => e instanceof BoxError && e.field === 'url',
    );
  });
});

describe('wire format', () => {
  it('snake_case JSON, error bodies with message/type/code, no 500 for client mistakes, OpenAPI', async () => {
    const info = await raw(server.url, 'GET', '/v1/boxes/rest-main');
    assert.equal(info.status, 200);
    assert.equal(info.body.memory_mib, 512);
    assert.ok('created_at' in info.body && 'published_ports' in info.body.network);
    const missing = await raw(server.url, 'GET', '/v1/boxes/no-such-box');
    assert.equal(missing.status, 404);
    assert.deepEqual(Object.keys(missing.body.error).sort(), ['code', 'message', 'type']);
    assert.match(missing.body.error.message, /no-such-box/);
    const cases: [string, string, unknown, number, string?][] = [
      ['POST', '/v1/boxes', '{not json', 400],
      ['POST', '/v1/boxes', { image: BUSYBOX, colour: 'red' }, 400, 'colour'],
      ['POST', '/v1/boxes', { image: BUSYBOX, memory_mib: 'lots' }, 400, 'memoryMib'],
      [
        'POST',
        '/v1/boxes',
        { image: BUSYBOX, health_check: { start_period: -1 } },
        400,
        'healthCheck.startPeriod',
      ],
      ['POST', '/v1/boxes', { image: BUSYBOX, cmd: 'sleep 1' }, 400, 'cmd'],
      ['POST', '/v1/images/pull', {}, 400, 'reference'],
      ['POST', '/v1/images/pull', { reference: '127.0.0.1:5000/library/no-such-image:1' }, 422],
      ['DELETE', '/v1/images?reference=127.0.0.1:5000/library/never-pulled:1', undefined, 404],
      ['POST', '/v1/boxes/rest-main/executions', { cmd: '' }, 400, 'cmd'],
      ['POST', '/v1/boxes/rest-main/executions', { cmd: 'true', tty: 'yes' }, 400, 'tty'],
      ['DELETE', '/v1/boxes/rest-main?force=maybe', undefined, 400, 'force'],
      ['POST', '/v1/boxes/rest-main/stop?timeout=soon', undefined, 400, 'timeout'],
      ['DELETE', '/v1/boxes/rest-main', undefined, 409],
      ['POST', '/v1/boxes/rest-main/tunnels', { port: 70000 }, 400, 'port'],
      ['GET', '/v1/boxes/rest-main/executions/01ARZ3NDEKTSV4RRFFQ69G5FAV', undefined, 404],
      ['GET', '/v1/nothing-here', undefined, 404],
      ['GET', '/v1/executions/stream', undefined, 426],
    ];
    for (const [method, path, body, status, field] of cases) {
      const r = await raw(server.url, method, path, body);
      assert.equal(r.status, status, `${method} ${path}`);
      assert.equal(typeof r.body.error.message, 'string');
      assert.equal(typeof r.body.error.type, 'string');
      assert.equal(typeof r.body.error.code, 'string');
      if (field) assert.equal(r.body.error.field, field, `${method} ${path}`);
    }
    const volume = await rest.volumes.create('rest-vol');
    assert.equal(volume.name, 'rest-vol');
    assert.ok((await rest.volumes.list()).some((v) => v.id === volume.id));
    assert.deepEqual(await rest.volumes.get(volume.id), volume);
    await rest.volumes.remove('rest-vol');
    assert.equal(await rest.volumes.get('rest-vol'), null);
    const doc = await raw(server.url, 'GET', '/v1/openapi.json');
    assert.equal(doc.body.openapi, '3.1.0');
    for (const path of [
      '/v1/boxes',
      '/v1/boxes/{box}/executions/{execution}/attach',
      '/v1/executions/stream',
      '/v1/volumes/{volume}',
      '/v1/boxes/{box}/tunnels',
      '/v1/boxes/{box}/files/content',
      '/v1/boxes/{box}/files/watch',
      '/v1/images/pull',
      '/v1/images',
      '/metrics',
    ]) {
      assert.ok(doc.body.paths[path], path);
    }
    // Every documented HTTP operation is a route of the server (WebSocket and CONNECT ones included).
    for (const [path, item] of Object.entries(doc.body.paths as Record<string, Record<string, unknown>>)) {
      for (const method of ['get', 'put', 'post', 'delete']) {
        if (!item[method]) continue;
        const url = path.replace(/\{(\w+)\}/g, ':$1');
        assert.ok(
          server.app.hasRoute({ method: method.toUpperCase() as 'GET', url }) ||
            /attach|stream|tunnels\//.test(path),
          `${method} ${path}`,
        );
      }
    }
  });
});

describe('exec WebSocket', { timeout: 60_000 }, () => {
  it('a WebSocket dropped mid-exec reconnects and loses no output', async () => {
    const execution = (await box.exec('sh', [
      '-c',
      'for i in $(seq 1 40); do echo line$i; echo err$i >&2; sleep 0.01; done',
    ])) as RestExecution;
    const stdout = await execution.stdout();
    const lines: string[] = [];
    for (let i = 0; i < 5; i++) lines.push((await stdout.next())!);
    execution.transport.dropConnection();
    for (let line = await stdout.next(); line !== null; line = await stdout.next()) lines.push(line);
    assert.deepEqual(
      lines,
      Array.from({ length: 40 }, (_, i) => `line${i + 1}`),
    );
    assert.deepEqual(await execution.wait(), { exitCode: 0 });
    const stderr = await execution.stderr();
    let errors = 0;
    while ((await stderr.next()) !== null) errors++;
    assert.equal(errors, 40);
  });

  it('one attached client at a time: a second attach gets 409', async () => {
    const execution = await box.exec('sleep', ['30']);
    const id = await execution.id();
    let status: Awaited<ReturnType<typeof attach>> = 0;
    // The SDK's own socket may still be opening: a second client is refused once it is attached.
    for (let i = 0; i < 250 && status !== 409; i++) {
      status = await attach(server.url, `/v1/boxes/rest-main/executions/${id}/attach`);
      if (typeof status !== 'number') {
        status.socket.terminate();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    assert.equal(status, 409);
    await execution.kill();
    assert.equal((await execution.wait()).exitCode, 137);
  });

  it('a client attaching late gets a bounded backlog and is told how much was dropped', async () => {
    const started = await raw(server.url, 'POST', '/v1/boxes/rest-main/executions', {
      cmd: 'sh',
      args: ['-c', 'head -c 5000 /dev/zero | tr "\\0" a; echo; echo end'],
    });
    assert.equal(started.status, 201);
    const path = `/v1/boxes/rest-main/executions/${started.body.id}`;
    assert.equal((await waitExited(server.url, path)).exit_code, 0);
    const attached = await attach(server.url, `${path}/attach?offset=0`);
    assert.ok(typeof attached !== 'number');
    const { binary, text } = await attached.frames;
    assert.deepEqual(text[0], { type: 'backlog_truncated', dropped_bytes: 5005 - 1000 });
    const payload = Buffer.concat(binary.map((frame) => frame.subarray(1)));
    assert.equal(payload.length, 1000);
    assert.ok(payload.toString().endsWith('aaa\nend\n'));
    assert.ok(binary.every((frame) => frame[0] === 1));
    assert.equal(text.at(-1)?.type, 'exit');
    assert.equal(text.at(-1)?.exit_code, 0);
  });

  it('stdin, signals and EOF through raw frames', async () => {
    const started = await raw(server.url, 'POST', '/v1/boxes/rest-main/executions', {
      cmd: 'sh',
      args: ['-c', 'trap "echo got-term; exit 7" TERM; cat; while true; do sleep 0.05; done'],
    });
    const path = `/v1/boxes/rest-main/executions/${started.body.id}`;
    const attached = await attach(server.url, `${path}/attach`);
    assert.ok(typeof attached !== 'number');
    const { socket, frames } = attached;
    // `cat` echoing the input shows the shell has set its trap: TERM is sent after that.
    const echoed = new Promise<void>((resolve) => {
      let seen = '';
      const onMessage = (data: Buffer, isBinary: boolean) => {
        if (isBinary) seen += data.subarray(1).toString();
        if (!seen.includes('hello\n')) return;
        socket.off('message', onMessage);
        resolve();
      };
      socket.on('message', onMessage);
    });
    socket.send(Buffer.concat([Buffer.of(0), Buffer.from('hello\n')]));
    socket.send(JSON.stringify({ type: 'stdin_eof' }));
    const bad = await raw(server.url, 'POST', `${path}/signal`, { signal: 'SIGNOPE' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.field, 'signal');
    await echoed;
    socket.send(JSON.stringify({ type: 'signal', signal: 'TERM' }));
    const { binary, text } = await frames;
    const out = Buffer.concat(binary.map((frame) => frame.subarray(1))).toString();
    assert.equal(out, 'hello\ngot-term\n');
    assert.equal(text.at(-1)?.exit_code, 7);
  });

  it('a start request too large for the upgrade header goes in the first frame', async () => {
    const big = 'x'.repeat(20000);
    assert.deepEqual(await run(box, 'sh', ['-c', 'printf "%s" "$1" | wc -c', 'sh', big]), {
      exitCode: 0,
      stdout: '20000',
      stderr: '',
    });
    // A start frame that is not a start request is refused with the error body, and nothing runs.
    const attached = await attach(server.url, '/v1/boxes/rest-main/executions/attach');
    assert.ok(typeof attached !== 'number');
    attached.socket.send(JSON.stringify({ type: 'start', cmd: 'true', colour: 'red' }));
    const { text } = await attached.frames;
    assert.equal(text[0]?.type, 'error');
    assert.equal((text[0]!.error as { field: string }).field, 'colour');
  });

  it('the per-execution endpoint still starts and streams a command (start request in the upgrade header)', async () => {
    const executionsUrl = `${server.url.replace(/^http/, 'ws')}/v1/boxes/rest-main/executions`;
    const process = new RemoteProcess(
      {
        executionsUrl,
        headers: {},
        signal: () => Promise.reject(new Error('unused')),
        resize: () => Promise.reject(new Error('unused')),
      },
      { cmd: 'sh', args: ['-c', 'read x; echo got-$x; exit 4'], env: [], tty: false },
    );
    const id = await process.ready;
    assert.equal((await raw(server.url, 'GET', `/v1/boxes/rest-main/executions/${id}`)).body.attached, true);
    process.stdin.end('per-exec\n');
    const chunks: Buffer[] = [];
    process.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    assert.equal(await process.exited, 4);
    assert.equal(Buffer.concat(chunks).toString(), 'got-per-exec\n');
  });

  it('20 concurrent executions through one server', async () => {
    const before = await box.metrics();
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        run(box, 'sh', ['-c', `echo exec-${i}; echo err-${i} >&2; exit ${i % 3}`]),
      ),
    );
    results.forEach((r, i) => {
      assert.deepEqual(r, { exitCode: i % 3, stdout: `exec-${i}`, stderr: `err-${i}` });
    });
    const after = await box.metrics();
    assert.equal(after.commandsExecutedTotal, before.commandsExecutedTotal + 20);
    assert.equal(after.execErrorsTotal, before.execErrorsTotal + 13);
  });
});

/** A multiplexed binary frame: channel byte, stream number (uint32 BE), bytes. */
function muxFrame(channel: number, stream: number, data: string): Buffer {
  const head = Buffer.alloc(5);
  head[0] = channel;
  head.writeUInt32BE(stream, 1);
  return Buffer.concat([head, Buffer.from(data)]);
}

describe('multiplexed exec stream', { timeout: 60_000 }, () => {
  it('many executions over one WebSocket: the SDK upgrades once for 30 execs', async () => {
    let upgrades = 0;
    const count = () => upgrades++;
    server.app.server.on('upgrade', count);
    try {
      const runtime = new JsRuntime({ url: server.url });
      const target = (await runtime.get('rest-main'))!;
      for (let round = 0; round < 3; round++) {
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            run(target, 'sh', ['-c', `echo r${round}-${i}; exit ${i % 4}`]),
          ),
        );
        results.forEach((r, i) => {
          assert.deepEqual(r, { exitCode: i % 4, stdout: `r${round}-${i}`, stderr: '' });
        });
      }
      assert.equal(upgrades, 1);
    } finally {
      server.app.server.off('upgrade', count);
    }
  });

  it("one stream's failure does not affect another; stdin, EOF and exit per stream; 409 for a second client", async () => {
    const attached = await attach(server.url, '/v1/executions/stream');
    assert.ok(typeof attached !== 'number');
    const { socket, frames } = attached;
    const text: { type: string; stream: number; [key: string]: unknown }[] = [];
    const bytes = new Map<number, string>();
    const waiters: [(m: (typeof text)[number]) => boolean, () => void][] = [];
    socket.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        const stream = data.readUInt32BE(1);
        assert.equal(data[0], 1, 'stdout channel byte first');
        bytes.set(stream, (bytes.get(stream) ?? '') + data.subarray(5).toString());
        return;
      }
      const message = JSON.parse(data.toString());
      text.push(message);
      for (const waiter of waiters.filter(([match]) => match(message))) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter[1]();
      }
    });
    const next = (type: string, stream: number) =>
      new Promise<(typeof text)[number]>((resolve) => {
        const found = text.find((m) => m.type === type && m.stream === stream);
        if (found) resolve(found);
        else
          waiters.push([
            (m) => m.type === type && m.stream === stream,
            () => resolve(text.find((m) => m.type === type && m.stream === stream)!),
          ]);
      });
    const start = (stream: number, request: Record<string, unknown>) =>
      socket.send(JSON.stringify({ type: 'start', stream, ...request }));
    start(1, { box: 'rest-main', cmd: 'sh', args: ['-c', 'cat; echo done'] });
    start(2, { box: 'rest-main', cmd: 'true', colour: 'red' });
    start(3, { box: 'no-such-box', cmd: 'true' });
    start(4, { box: 'rest-main', cmd: 'sh', args: ['-c', 'exit 3'] });
    const started = await next('started', 1);
    assert.match(started.id as string, /^[0-9A-Z]{26}$/);
    start(1, { box: 'rest-main', cmd: 'true' });
    const bad = await next('error', 2);
    assert.equal(bad.status, 400);
    assert.equal((bad.error as { field: string }).field, 'colour');
    assert.equal((await next('error', 3)).status, 404);
    assert.equal((await next('error', 1)).status, 400, 'a stream number in use is refused');
    assert.equal((await next('exit', 4)).exit_code, 3);
    // The execution attached through the stream counts as attached: a second client gets 409.
    assert.equal(await attach(server.url, `/v1/boxes/rest-main/executions/${started.id}/attach`), 409);
    socket.send(muxFrame(0, 1, 'hello\n'));
    socket.send(JSON.stringify({ type: 'stdin_eof', stream: 1 }));
    const exit = await next('exit', 1);
    assert.equal(exit.exit_code, 0);
    assert.equal(bytes.get(1), 'hello\ndone\n');
    assert.equal(exit.offset, Buffer.byteLength('hello\ndone\n'));
    assert.equal(socket.readyState, WebSocket.OPEN, 'the connection stays open after an exit');
    socket.close();
    await frames;
  });

  it('a dropped stream connection: every execution on it reattaches and loses no output; the next exec reconnects', async () => {
    const runtime = new JsRuntime({ url: server.url });
    const target = (await runtime.get('rest-main'))!;
    const executions = await Promise.all(
      [0, 1, 2].map(
        (n) =>
          target.exec('sh', [
            '-c',
            `for i in $(seq 1 30); do echo ${n}-$i; sleep 0.01; done; exit ${n}`,
          ]) as Promise<RestExecution>,
      ),
    );
    const outputs = await Promise.all(
      executions.map(async (execution, n) => {
        const stdout = await execution.stdout();
        const lines: string[] = [];
        for (let i = 0; i < 3; i++) lines.push((await stdout.next())!);
        if (n === 0) execution.transport.dropConnection();
        for (let line = await stdout.next(); line !== null; line = await stdout.next()) lines.push(line);
        return { lines, exit: await execution.wait() };
      }),
    );
    outputs.forEach(({ lines, exit }, n) => {
      assert.deepEqual(
        lines,
        Array.from({ length: 30 }, (_, i) => `${n}-${i + 1}`),
      );
      assert.deepEqual(exit, { exitCode: n });
    });
    assert.deepEqual(await run(target, 'echo', ['after-drop']), {
      exitCode: 0,
      stdout: 'after-drop',
      stderr: '',
    });
  });
});

describe('tunnels over HTTP CONNECT', () => {
  it('connect() and forward() reach a server in the box; tunnels are one-shot', async () => {
    const web = await box.exec('sh', [
      '-c',
      'mkdir -p /www && echo hello-tunnel > /www/t.txt && exec httpd -f -p 8080 -h /www',
    ]);
    const network = (box as JsBox & { network: JsNetworkHandle }).network;
    let body = '';
    for (let attempt = 0; attempt < 200 && !body.includes('hello-tunnel'); attempt++) {
      const tunnel = await network.tunnel(8080);
      assert.match(tunnel.uri()!, /\/v1\/tunnels\/[0-9A-Z]{26}$/);
      const connection = await tunnel.connect().catch(() => null);
      await assert.rejects(tunnel.connect(), /one-shot/);
      if (!connection) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        continue;
      }
      await connection.write('GET /t.txt HTTP/1.0\r\n\r\n');
      // Read up to the body (the box side's EOF reaches a local tunnel only when its stream process ends).
      body = '';
      while (!body.includes('hello-tunnel')) {
        const chunk = await connection.read();
        if (chunk.length === 0) break;
        body += chunk;
      }
      await connection.close();
      await assert.rejects(connection.write('late'), /closed/);
    }
    assert.match(body, /200 OK[\s\S]*hello-tunnel/);
    const forwarder = await (await network.tunnel(8080)).forward({ type: 'tcp', port: 0 });
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`http://${forwarder.localAddr()}/t.txt`);
      assert.equal(await response.text(), 'hello-tunnel\n');
    }
    await forwarder.close();
    await forwarder.close();
    const reused = await raw(server.url, 'POST', '/v1/boxes/rest-main/tunnels', { port: 8080 });
    assert.equal(reused.status, 201);
    await web.kill();
  });
});

describe('authentication', () => {
  let keyed: RestServer;

  before(async () => {
    keyed = await startRestServer({ runtime: local, port: 0, apiKey: API_KEY });
  });
  after(() => keyed.close());

  it('API key: missing or wrong is 401 with WWW-Authenticate; the right one works (HTTP, WebSocket, CONNECT)', async () => {
    const none = await raw(keyed.url, 'GET', '/v1/boxes');
    assert.equal(none.status, 401);
    assert.equal(none.body.error.type, 'authentication_error');
    assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer/);
    const wrong = new JsRuntime({ url: keyed.url, apiKey: 'wrong-key' });
    await assert.rejects(
      wrong.listInfo(),
      (e: unknown) => e instanceof BoxError && /invalid API key/.test(e.message),
    );
    const right = new JsRuntime({ url: keyed.url, apiKey: API_KEY });
    assert.ok((await right.listInfo()).some((i) => i.name === 'rest-main'));
    const execution = await (await right.get('rest-main'))!.exec('echo', ['keyed']);
    assert.equal(await (await execution.stdout()).next(), 'keyed');
    assert.equal(
      await attach(keyed.url, `/v1/boxes/rest-main/executions/${await execution.id()}/attach`),
      401,
    );
    assert.equal(await attach(keyed.url, '/v1/executions/stream'), 401);
    assert.equal(
      await attach(keyed.url, '/v1/executions/stream', { authorization: 'Bearer wrong-key' }),
      401,
    );
    const tunnel = await raw(
      keyed.url,
      'POST',
      '/v1/boxes/rest-main/tunnels',
      { port: 8080 },
      { authorization: `Bearer ${API_KEY}` },
    );
    assert.equal(tunnel.status, 201);
    const connectStatus = await new Promise<number>((resolve) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port: new URL(keyed.url).port,
        method: 'CONNECT',
        path: tunnel.body.connect_path,
      });
      req.on('connect', (res, socket) => {
        socket.destroy();
        resolve(res.statusCode ?? 0);
      });
      req.end();
    });
    assert.equal(connectStatus, 401);
    const doc = await raw(keyed.url, 'GET', '/v1/openapi.json');
    assert.equal(doc.status, 200, 'the OpenAPI document is public');
  });

  it('refuses a non-loopback address without credentials', () => {
    assert.throws(
      () => new RestServer({ runtime: local, host: '0.0.0.0', port: 0 }),
      /refusing to listen on 0\.0\.0\.0 without an API key/,
    );
    assert.throws(() => new RestServer({ runtime: local, apiKey: '' }), /apiKey/);
  });

  it('JWT access tokens of the auth service: verified via JWKS, permission codes enforced', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
    const jwks: Server = createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
    const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
    const tokenServer = await startRestServer({
      runtime: local,
      port: 0,
      jwt: { jwksUrl, issuer: 'https://auth.test', audience: 'sandbox' },
    });
    const token = (claims: Record<string, unknown>, key = privateKey) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' })
        .setIssuer('https://auth.test')
        .setAudience('sandbox')
        .setSubject('user-1')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(key);
    try {
      // Three tokens of one tenant with different permissions.
      const writer = new JsRuntime({
        url: tokenServer.url,
        accessToken: await token({
          permissions: ['sandbox.boxes.read', 'sandbox.boxes.write'],
          tenant: 'jwt-team',
        }),
      });
      await writer.create({ image: BUSYBOX }, 'jwt-box');
      const reader = new JsRuntime({
        url: tokenServer.url,
        accessToken: await token({ scope: 'openid sandbox.boxes.read', tenant: 'jwt-team' }),
      });
      assert.deepEqual(
        (await reader.listInfo()).map((i) => i.name),
        ['jwt-box'],
      );
      await assert.rejects(
        reader.create({ image: BUSYBOX }),
        (e: unknown) => e instanceof BoxError && /lacks the permission sandbox.boxes.write/.test(e.message),
      );
      const readerBox = (await reader.get('jwt-box'))!;
      await assert.rejects(readerBox.exec('true'), /sandbox.exec/);
      const runner = new JsRuntime({
        url: tokenServer.url,
        accessToken: await token({ permissions: ['sandbox.boxes.read', 'sandbox.exec'], tenant: 'jwt-team' }),
      });
      assert.equal((await run((await runner.get('jwt-box'))!, 'echo', ['jwt'])).stdout, 'jwt');
      await writer.remove('jwt-box', true);
      const other = await generateKeyPair('ES256');
      const forged = new JsRuntime({
        url: tokenServer.url,
        accessToken: await token({ scope: 'sandbox.boxes.read' }, other.privateKey),
      });
      await assert.rejects(forged.listInfo(), /invalid access token/);
      const expired = await new SignJWT({ scope: 'sandbox.boxes.read' })
        .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
        .setIssuer('https://auth.test')
        .setAudience('sandbox')
        .setSubject('user-1')
        .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
        .sign(privateKey);
      const late = await raw(tokenServer.url, 'GET', '/v1/boxes', undefined, {
        authorization: `Bearer ${expired}`,
      });
      assert.equal(late.status, 401);
      assert.equal(late.body.error.code, 'invalid_token');
    } finally {
      await tokenServer.close();
      jwks.close();
    }
  });
});

describe('sandbox serve', () => {
  it('serves the runtime on loopback without a key, refuses 0.0.0.0 without one, stops on SIGTERM', async () => {
    const bin = new URL('../bin/sandbox.ts', import.meta.url).pathname;
    const child = spawn(process.execPath, [bin, '--home', home, 'serve', '--port', '0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, SANDBOX_API_KEY: '', SANDBOX_URL: 'http://127.0.0.1:1' },
    });
    let log = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        log += chunk.toString();
        const match = /REST runtime on (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(log);
        if (match) resolve(match[1]!);
      });
      child.once('exit', () => reject(new Error(log)));
    });
    const config = await raw(url, 'GET', '/v1/config');
    assert.equal(config.body.auth, 'loopback');
    assert.ok((await new JsRuntime({ url }).listInfo()).some((i) => i.name === 'rest-main'));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0);
    const refused = spawn(
      process.execPath,
      [bin, '--home', home, 'serve', '--host', '0.0.0.0', '--port', '0'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, SANDBOX_API_KEY: '' },
      },
    );
    let err = '';
    refused.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => refused.once('exit', (c) => resolve(c)));
    assert.equal(code, 125);
    assert.match(err, /refusing to listen on 0\.0\.0\.0 without an API key/);
  });
});
