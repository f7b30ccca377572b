/**
 * `sandbox serve` as an E2B server (issue 29), driven by the unmodified `e2b` SDK from npm against a
 * RestServer started here (`apiUrl`/`sandboxUrl` = the server, as `E2B_API_URL`/`E2B_SANDBOX_URL` set them):
 * lifecycle (create, list with metadata, info, timeout, pause/connect, kill; the sandbox is a box of
 * `/v1/boxes`), commands (foreground, background + kill, stdin, pty with resize, non-zero exit,
 * env, cwd, user), files (text and bytes, list, makeDir, rename, remove, exists, getInfo, watchDir,
 * signed URLs), bad input (unknown sandbox, bad key, malformed Connect message, paused sandbox), a dropped
 * Start stream reattached with Connect, Host-based routing, and HTTP and WebSocket relays to other
 * ports of the box.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { CommandExitError, FileType, NotFoundError, Sandbox, type SandboxOpts } from 'e2b';
import WebSocket from 'ws';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { cleanupAll, ensureRegistry, testRuntime } from './runtime-helpers.ts';

const API_KEY = `e2b_${'0123456789abcdef'.repeat(2)}01234567`;
const DOMAIN = 'e2b.test';

let server: RestServer;
let opts: SandboxOpts;

before(async () => {
  ensureRegistry();
  server = await startRestServer({
    runtime: testRuntime(),
    port: 0,
    apiKey: API_KEY,
    e2b: { domain: DOMAIN },
  });
  opts = { apiKey: API_KEY, apiUrl: server.url, sandboxUrl: server.url, requestTimeoutMs: 120_000 };
});

after(async () => {
  await server?.close();
  await cleanupAll();
});

/** A raw request to the server with `headers` (Host included); status and body text. */
function raw(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: Buffer | string,
): Promise<{ status: number; text: string }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * A WebSocket echo server for the box (Python standard library only, as the `base` template has no
 * WebSocket package): answers the RFC 6455 handshake and echoes each text frame as `echo <path>: <text>`.
 */
const WS_ECHO_SERVER = `
import base64, hashlib, socketserver, struct, sys
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode()
        path = line.split(" ")[1]
        headers = {}
        while True:
            h = self.rfile.readline().decode().strip()
            if not h:
                break
            k, v = h.split(":", 1)
            headers[k.strip().lower()] = v.strip()
        if headers.get("upgrade", "").lower() != "websocket":
            self.wfile.write(b"HTTP/1.1 400 Bad Request\\r\\nContent-Length: 0\\r\\n\\r\\n")
            return
        accept = base64.b64encode(hashlib.sha1(headers["sec-websocket-key"].encode() + GUID).digest())
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\n\\r\\n")
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode, size = head[0] & 15, head[1] & 127
            if size == 126:
                size = struct.unpack(">H", self.rfile.read(2))[0]
            elif size == 127:
                size = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(size)))
            if opcode == 8:
                self.wfile.write(b"\\x88\\x00")
                return
            out = ("echo " + path + ": ").encode() + data
            n = len(out)
            self.wfile.write(bytes([0x81, n]) if n < 126 else bytes([0x81, 126]) + struct.pack(">H", n) if n < 65536 else bytes([0x81, 127]) + struct.pack(">Q", n))
            self.wfile.write(out)
            self.wfile.flush()
class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
Server(("127.0.0.1", int(sys.argv[1])), Echo).serve_forever()
`;

/**
 * Opens a WebSocket to `url` with `headers`, sends `messages` one at a time (each after the previous
 * echo) and resolves with the answers. Rejects with `status` set when the upgrade is refused.
 */
function wsEcho(url: string, headers: Record<string, string>, messages: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    const answers: string[] = [];
    const next = () => {
      const message = messages[answers.length];
      if (message === undefined) socket.close();
      else socket.send(message);
    };
    socket.on('open', next);
    socket.on('message', (data) => {
      answers.push(String(data));
      next();
    });
    socket.on('close', () => resolve(answers));
    socket.on('unexpected-response', (_req, res) => {
      reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode }));
      res.resume();
      socket.terminate();
    });
    socket.on('error', reject);
  });
}

describe('e2b SDK against sandbox serve', { timeout: 600_000 }, () => {
  let sbx: Sandbox;

  before(async () => {
    sbx = await Sandbox.create('base', {
      ...opts,
      metadata: { suite: 'e2b-sdk', run: String(process.pid) },
      envs: { FROM_CREATE: 'yes' },
    });
  });

  it('creates a sandbox that is a box of /v1/boxes, lists it by metadata, and reports its info', async () => {
    const boxes = await fetch(`${server.url}/v1/boxes`, { headers: { authorization: `Bearer ${API_KEY}` } });
    const body = (await boxes.json()) as { boxes?: { name?: string }[] } | { name?: string }[];
    const list = Array.isArray(body) ? body : (body.boxes ?? []);
    assert.ok(
      list.some((b) => b.name === sbx.sandboxId),
      'the sandbox is a box of /v1/boxes',
    );

    const page = await Sandbox.list({
      ...opts,
      query: { metadata: { suite: 'e2b-sdk' }, state: ['running'] },
    }).nextItems();
    assert.deepEqual(
      page.map((s) => s.sandboxId),
      [sbx.sandboxId],
    );
    const none = await Sandbox.list({ ...opts, query: { metadata: { suite: 'other' } } }).nextItems();
    assert.equal(none.length, 0);

    const info = await sbx.getInfo();
    assert.equal(info.templateId, 'base');
    assert.equal(info.state, 'running');
    assert.equal(info.metadata.run, String(process.pid));
    const left = info.endAt.getTime() - Date.now();
    assert.ok(left > 200_000 && left <= 300_000, `default timeout 300 s (${left} ms left)`);
    assert.equal(await sbx.isRunning(), true);
  });

  it('sets the timeout, which connect never shortens', async () => {
    await sbx.setTimeout(600_000);
    const longer = (await sbx.getInfo()).endAt.getTime();
    await Sandbox.connect(sbx.sandboxId, { ...opts, timeoutMs: 60_000 });
    assert.equal((await sbx.getInfo()).endAt.getTime(), longer);
  });

  it('runs commands: output, env, cwd, user, non-zero exit', async () => {
    const out = await sbx.commands.run('echo hello; echo oops >&2; echo "$FROM_CREATE $EXTRA"', {
      envs: { EXTRA: 'x' },
    });
    assert.equal(out.exitCode, 0);
    assert.equal(out.stdout, 'hello\nyes x\n');
    assert.equal(out.stderr, 'oops\n');
    assert.equal((await sbx.commands.run('pwd')).stdout, '/home/user\n');
    assert.equal((await sbx.commands.run('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
    assert.equal((await sbx.commands.run('whoami')).stdout, 'user\n');
    assert.equal((await sbx.commands.run('whoami', { user: 'root' })).stdout, 'root\n');
    const chunks: string[] = [];
    await sbx.commands.run('printf a; printf b', { onStdout: (d) => void chunks.push(d) });
    assert.equal(chunks.join(''), 'ab');
    await assert.rejects(sbx.commands.run('echo bad >&2; exit 3'), (error: unknown) => {
      assert.ok(error instanceof CommandExitError);
      assert.equal(error.exitCode, 3);
      assert.equal(error.stderr, 'bad\n');
      return true;
    });
  });

  it('runs background commands: real pids, list, stdin, kill, reattach after a dropped stream', async () => {
    const cat = await sbx.commands.run('cat', { background: true, stdin: true });
    assert.ok((await sbx.commands.list()).some((p) => p.pid === cat.pid));
    await sbx.commands.sendStdin(cat.pid, 'typed\n');
    await sbx.commands.closeStdin(cat.pid);
    const done = await cat.wait();
    assert.equal(done.stdout, 'typed\n');

    const sleeper = await sbx.commands.run('sleep 600', { background: true });
    // Its pid is its own in the box: /proc/<pid> there is that command, and the shell's $$ the same.
    const cmdline = await sbx.commands.run(`tr '\\0' ' ' < /proc/${sleeper.pid}/cmdline`);
    assert.match(cmdline.stdout, /sleep 600/);
    const self = await sbx.commands.run('echo $$', { background: true });
    assert.equal((await self.wait()).stdout, `${self.pid}\n`);
    await sleeper.disconnect();
    const again = await sbx.commands.connect(sleeper.pid);
    assert.equal(await sbx.commands.kill(sleeper.pid), true);
    await assert.rejects(
      again.wait(),
      (error: unknown) => error instanceof CommandExitError && error.exitCode !== 0,
    );
    assert.ok(!(await sbx.commands.list()).some((p) => p.pid === sleeper.pid));
    assert.equal(await sbx.commands.kill(sleeper.pid), false);
  });

  it('runs a pty, resizes it and types into it', async () => {
    const seen: string[] = [];
    const pty = await sbx.pty.create({
      cols: 80,
      rows: 24,
      onData: (d) => void seen.push(Buffer.from(d).toString('utf8')),
    });
    await sbx.pty.resize(pty.pid, { cols: 120, rows: 40 });
    await sbx.pty.sendInput(pty.pid, new TextEncoder().encode('stty size; exit\n'));
    await pty.wait().catch(() => {});
    assert.match(seen.join(''), /40 120/);
  });

  it('reads and writes files, lists, makes, renames, removes and watches', async () => {
    await sbx.files.write('notes/a.txt', 'text one');
    assert.equal(await sbx.files.read('/home/user/notes/a.txt'), 'text one');
    const bytes = new Uint8Array([0, 1, 2, 250, 255]);
    await sbx.files.write('/tmp/bin.dat', bytes.buffer);
    assert.deepEqual(await sbx.files.read('/tmp/bin.dat', { format: 'bytes' }), bytes);
    const info = await sbx.files.getInfo('notes/a.txt');
    assert.equal(info.type, FileType.FILE);
    assert.equal(info.size, 8);
    assert.equal(info.owner, 'user');
    assert.equal(await sbx.files.makeDir('notes/sub'), true);
    assert.equal(await sbx.files.makeDir('notes/sub'), false);
    const listed = await sbx.files.list('notes');
    assert.deepEqual(listed.map((e) => e.name).sort(), ['a.txt', 'sub']);
    const deep = await sbx.files.list('notes', { depth: 2 });
    assert.ok(deep.some((e) => e.name === 'sub' && e.type === FileType.DIR));
    const moved = await sbx.files.rename('notes/a.txt', 'notes/b.txt');
    assert.equal(moved.path, '/home/user/notes/b.txt');
    assert.equal(await sbx.files.exists('notes/a.txt'), false);
    await sbx.files.remove('notes/b.txt');
    assert.equal(await sbx.files.exists('notes/b.txt'), false);
    await assert.rejects(sbx.files.read('notes/missing.txt'), NotFoundError);
    await assert.rejects(sbx.files.write('/tmp/meta.txt', 'x', { metadata: { k: 'v' } }), /metadata/);
    assert.equal(await sbx.files.exists('/tmp/meta.txt'), false);

    const events: string[] = [];
    const watch = await sbx.files.watchDir('notes', (e) => void events.push(`${e.type}:${e.name}`));
    await sbx.files.write('notes/w.txt', 'x');
    for (let i = 0; i < 300 && !events.some((e) => e.endsWith(':w.txt')); i++)
      await new Promise((r) => setTimeout(r, 50));
    await watch.stop();
    assert.ok(
      events.some((e) => e.endsWith(':w.txt')),
      `watch events: ${events.join(',')}`,
    );
  });

  it('serves signed upload and download URLs and refuses a wrong signature', async () => {
    const up = await sbx.uploadUrl('/tmp/signed.txt', { useSignatureExpiration: 60 });
    const form = new FormData();
    form.append('file', new Blob(['signed body']), '/tmp/signed.txt');
    assert.equal((await fetch(up, { method: 'POST', body: form })).status, 200);
    const down = await sbx.downloadUrl('/tmp/signed.txt');
    const got = await fetch(down);
    assert.equal(got.status, 200);
    assert.equal(await got.text(), 'signed body');
    const forged = new URL(down);
    forged.searchParams.set('signature', 'v1_AAAA');
    assert.equal((await fetch(forged)).status, 401);
  });

  it('routes by Host <port>-<sandboxId>.<domain>', async () => {
    const host = `49983-${sbx.sandboxId}.${DOMAIN}`;
    assert.equal((await raw('GET', '/health', { host })).status, 204);
    const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    const listed = await raw(
      'POST',
      '/process.Process/List',
      { host, 'content-type': 'application/json', 'x-access-token': token },
      '{}',
    );
    assert.equal(listed.status, 200);
    assert.ok('processes' in JSON.parse(listed.text) || listed.text === '{}');
    assert.equal((await raw('GET', '/health', { host: `49983-inosuch.${DOMAIN}` })).status, 502);
  });

  it('relays HTTP to another port of the sandbox, by headers and by Host', async () => {
    await sbx.files.write('/tmp/site/index.html', 'served from the box');
    await sbx.commands.run('cd /tmp/site && exec python3 -m http.server 8000', { background: true });
    const headers = { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '8000' };
    let got = await raw('GET', '/index.html', headers);
    // Up to 30 s for the box's Python server to listen (slow to start on a loaded machine).
    for (const end = Date.now() + 30_000; got.status !== 200 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 100));
      got = await raw('GET', '/index.html', headers);
    }
    assert.equal(got.status, 200);
    assert.equal(got.text, 'served from the box');
    assert.equal(sbx.getHost(8000), `8000-${sbx.sandboxId}.${DOMAIN}`);
    const byHost = await raw('GET', '/index.html', { host: sbx.getHost(8000) });
    assert.equal(byHost.text, 'served from the box');
    const closed = await raw('GET', '/', { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '8001' });
    assert.equal(closed.status, 502);
  });

  it('relays a WebSocket to another port of the sandbox, by headers and by Host', async () => {
    await sbx.files.write('/tmp/ws/echo.py', WS_ECHO_SERVER);
    await sbx.commands.run('exec python3 /tmp/ws/echo.py 8765', { background: true });
    const wsUrl = server.url.replace(/^http/, 'ws');
    const byHeaders = { 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '8765' };
    let answer = await wsEcho(`${wsUrl}/echo`, byHeaders, ['hello']).catch((e: Error) => e);
    // Up to 30 s for the box's Python server to listen (slow to start on a loaded machine).
    for (const end = Date.now() + 30_000; answer instanceof Error && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 100));
      answer = await wsEcho(`${wsUrl}/echo`, byHeaders, ['hello']).catch((e: Error) => e);
    }
    assert.deepEqual(answer, ['echo /echo: hello']);
    const big = 'x'.repeat(200_000);
    assert.deepEqual(await wsEcho(`${wsUrl}/big`, { host: sbx.getHost(8765) }, ['one', big, 'three']), [
      'echo /big: one',
      `echo /big: ${big}`,
      'echo /big: three',
    ]);
    // Nothing listens on 8766; envd's port takes no upgrade; an unknown sandbox is 404.
    const status = (headers: Record<string, string>) =>
      wsEcho(`${wsUrl}/`, headers, []).then(
        () => 101,
        (e: Error & { status?: number }) => e.status,
      );
    assert.equal(await status({ 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '8766' }), 502);
    assert.equal(await status({ 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983' }), 404);
    assert.equal(await status({ 'e2b-sandbox-id': 'inosuch', 'e2b-sandbox-port': '8765' }), 404);
    assert.equal(await status({ host: `8765-inosuch.${DOMAIN}` }), 404);
  });

  it('answers bad input with E2B errors and leaves the sandbox working', async () => {
    await assert.rejects(Sandbox.connect('inosuchsandbox', opts), NotFoundError);
    const bad = await fetch(`${server.url}/v2/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': 'e2b_00' },
      body: '{}',
    });
    assert.equal(bad.status, 401);
    assert.equal(((await bad.json()) as { code: number }).code, 401);
    const unknown = await fetch(`${server.url}/v2/sandboxes`, {
      method: 'POST',
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'no-such-template' }),
    });
    assert.equal(unknown.status, 400);
    assert.match(((await unknown.json()) as { message: string }).message, /no-such-template/);
    const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    const headers = {
      'e2b-sandbox-id': sbx.sandboxId,
      'e2b-sandbox-port': '49983',
      'content-type': 'application/json',
    };
    const malformed = await raw(
      'POST',
      '/process.Process/SendSignal',
      { ...headers, 'x-access-token': token },
      '{"process":',
    );
    assert.equal(malformed.status, 400);
    assert.equal(JSON.parse(malformed.text).code, 'invalid_argument');
    const noToken = await raw('POST', '/process.Process/List', headers, '{}');
    assert.equal(noToken.status, 401);
    assert.equal((await sbx.commands.run('echo alive')).stdout, 'alive\n');
  });

  it('pauses (commands refused with 409, health 502) and connect resumes', async () => {
    assert.equal(await sbx.pause(), true);
    assert.equal(await sbx.pause(), false);
    assert.equal((await sbx.getInfo()).state, 'paused');
    const host = `49983-${sbx.sandboxId}.${DOMAIN}`;
    assert.equal((await raw('GET', '/health', { host })).status, 502);
    const token = (sbx as unknown as { envdAccessToken: string }).envdAccessToken;
    const refused = await raw(
      'POST',
      '/process.Process/List',
      { host, 'content-type': 'application/json', 'x-access-token': token },
      '{}',
    );
    assert.equal(refused.status, 409);
    const again = await Sandbox.connect(sbx.sandboxId, opts);
    assert.equal((await again.getInfo()).state, 'running');
    assert.equal((await again.commands.run('echo back')).stdout, 'back\n');
  });

  it('kills the sandbox: gone from E2B and from /v1/boxes', async () => {
    const id = sbx.sandboxId;
    assert.equal(await sbx.kill(), true);
    assert.equal(await Sandbox.kill(id, opts), false);
    await assert.rejects(Sandbox.getInfo(id, opts), NotFoundError);
    const boxes = await fetch(`${server.url}/v1/boxes`, { headers: { authorization: `Bearer ${API_KEY}` } });
    assert.ok(!(await boxes.text()).includes(id));
  });
});
