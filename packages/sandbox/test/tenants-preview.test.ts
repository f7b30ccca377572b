/**
 * Signed preview URLs and restarts of the shared service: a box's HTTP server and WebSocket server are
 * reached through `sandbox serve` without an API key (path form and Host form `<port>-<boxId>.<domain>`
 * with its cookie), a URL for one box never reaches another, a revoked or expired URL is 404; after the
 * server restarts over the same state, ownership, keys and preview URLs still hold.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import type { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { api, createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

const DOMAIN = 'preview.test';
/** A one-message WebSocket server for `nc -ll -e`: the handshake, then a text frame `hello`. */
const WS_SCRIPT = `#!/bin/sh
key=''
while IFS= read -r line; do
  line=$(printf '%s' "$line" | tr -d '\\r')
  [ -z "$line" ] && break
  case "$line" in [Ss]ec-[Ww]eb[Ss]ocket-[Kk]ey:*) key=$(printf '%s' "\${line#*:}" | tr -d ' ');; esac
done
accept=$(printf '%s' "\${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11" | sha1sum | cut -d' ' -f1 | xxd -r -p | base64)
printf 'HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: %s\\r\\n\\r\\n' "$accept"
printf '\\201\\005hello'
sleep 30
`;

let server: RestServer;
let runtime: JsRuntime;
let url: string;
let keyA: string;
let keyB: string;
let boxA: string;
let boxB: string;

/** A GET with an explicit Host header (fetch does not let it be set); answers status, headers, body. */
function get(target: string, host: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = httpRequest(target, { headers: { host, ...headers } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.once('error', reject);
      req.end();
    },
  );
}

/**
 * Polls `probe` until it returns true (a server in a box starting);
 * fails after 30 s (a loaded machine is slow).
 */
async function until(probe: () => Promise<boolean>, what: string): Promise<void> {
  for (const end = Date.now() + 30_000; Date.now() < end; ) {
    if (await probe().catch(() => false)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`${what} never happened`);
}

/** Opens a WebSocket (no credential) and resolves with its first message, or the refused status. */
function firstMessage(wsUrl: string): Promise<string | number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl);
    socket.once('message', (data) => {
      resolve(data.toString());
      socket.terminate();
    });
    socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.once('error', reject);
  });
}

async function startServers(box: string, key: string): Promise<void> {
  for (const [path, content] of [
    ['/www/index.html', `hello preview ${box}`],
    ['/ws.sh', WS_SCRIPT],
  ] as const) {
    const put = await api(
      url,
      'PUT',
      `/v1/boxes/${box}/files/content?path=${path}&mode=493`,
      key,
      Buffer.from(content),
    );
    assert.equal(put.status, 201, JSON.stringify(put.body));
  }
  for (const cmd of [
    ['httpd', '-p', '8080', '-h', '/www'],
    ['sh', '-c', 'nc -ll -p 9000 -e /ws.sh >/dev/null 2>&1 &'],
  ]) {
    const started = await api(url, 'POST', `/v1/boxes/${box}/executions`, key, {
      cmd: cmd[0],
      args: cmd.slice(1),
    });
    assert.equal(started.status, 201, JSON.stringify(started.body));
  }
}

before(async () => {
  ensureRegistry();
  ({ server, runtime, url } = await startTenantServer({ previewDomain: DOMAIN }));
  keyA = (await createKey(url, 'tenant-a')).key;
  keyB = (await createKey(url, 'tenant-b')).key;
  boxA = (await api(url, 'POST', '/v1/boxes', keyA, { image: BUSYBOX })).body.id;
  boxB = (await api(url, 'POST', '/v1/boxes', keyB, { image: BUSYBOX })).body.id;
  await startServers(boxA, keyA);
  await startServers(boxB, keyB);
});

after(async () => {
  await server?.close();
  await cleanupAll();
});

describe('preview URLs', { timeout: 120_000 }, () => {
  it('HTTP and WebSocket without an API key, Host form with its cookie; one box never reaches another', async () => {
    const http = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, { port: 8080 });
    assert.equal(http.status, 201, JSON.stringify(http.body));
    const { token, url: link } = http.body;
    assert.match(token, /^pv_/);
    assert.equal(link, `http://${http.body.port}-${boxA.toLowerCase()}.${DOMAIN}/?preview_token=${token}`);
    const path = `${url}/preview/${token}/`;
    await until(async () => (await fetch(path)).status === 200, 'httpd in box A answering');
    assert.equal(await (await fetch(path)).text(), `hello preview ${boxA}`);
    // Host form: the token in the query sets the cookie; the cookie alone then works.
    const hostA = `8080-${boxA.toLowerCase()}.${DOMAIN}`;
    const first = await get(`${url}/?preview_token=${token}`, hostA);
    assert.equal(first.status, 200);
    assert.equal(first.body, `hello preview ${boxA}`);
    const cookie = String((first.headers['set-cookie'] as string[])[0]).split(';')[0]!;
    assert.equal((await get(`${url}/index.html`, hostA, { cookie })).body, `hello preview ${boxA}`);
    // Box A's token on box B's host (or another port) reaches nothing.
    assert.equal(
      (await get(`${url}/?preview_token=${token}`, `8080-${boxB.toLowerCase()}.${DOMAIN}`)).status,
      404,
    );
    assert.equal(
      (await get(`${url}/?preview_token=${token}`, `9000-${boxA.toLowerCase()}.${DOMAIN}`)).status,
      404,
    );
    assert.equal((await get(`${url}/`, hostA)).status, 404);
    // Tenant B cannot mint one for A's box; B's own reaches B's box only.
    assert.equal((await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyB, { port: 8080 })).status, 404);
    const b = await api(url, 'POST', `/v1/boxes/${boxB}/previews`, keyB, { port: 8080 });
    await until(
      async () => (await fetch(`${url}/preview/${b.body.token}/`)).status === 200,
      'httpd in box B',
    );
    assert.equal(await (await fetch(`${url}/preview/${b.body.token}/`)).text(), `hello preview ${boxB}`);

    const ws = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, { port: 9000 });
    const wsPath = `${url.replace(/^http/, 'ws')}/preview/${ws.body.token}/`;
    let message: string | number = 0;
    await until(async () => {
      message = await firstMessage(wsPath);
      return message === 'hello';
    }, 'the WebSocket server in box A answering');
    assert.equal(message, 'hello');
  });

  it('a revoked or expired URL is 404 (HTTP and WebSocket)', async () => {
    const issued = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, { port: 8080 });
    const path = `${url}/preview/${issued.body.token}/`;
    await until(async () => (await fetch(path)).status === 200, 'the preview answering');
    const listed = await api(url, 'GET', `/v1/boxes/${boxA}/previews`, keyA);
    assert.ok(
      listed.body.some(
        (p: { id: string; token?: string }) => p.id === issued.body.id && p.token === undefined,
      ),
    );
    assert.equal(
      (await api(url, 'DELETE', `/v1/boxes/${boxA}/previews/${issued.body.id}`, keyB)).status,
      404,
    );
    assert.equal(
      (await api(url, 'DELETE', `/v1/boxes/${boxA}/previews/${issued.body.id}`, keyA)).status,
      204,
    );
    assert.equal((await fetch(path)).status, 404);
    const ws = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, {
      port: 9000,
      expires_in_ms: 1500,
    });
    const wsPath = `${url.replace(/^http/, 'ws')}/preview/${ws.body.token}/`;
    await until(async () => (await firstMessage(wsPath)) === 404, 'the short-lived preview expiring');
    // Malformed or unknown tokens are 404, never a server error.
    for (const token of ['%zz', 'pv_short', `pv_${'A'.repeat(43)}`]) {
      assert.equal((await fetch(`${url}/preview/${token}/x`)).status, 404, token);
    }
    const bad = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, { port: 70000 });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.field, 'port');
  });

  it('a restart keeps ownership, keys, usage and preview URLs', async () => {
    const kept = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, { port: 8080 });
    const usageBefore = (await api(url, 'GET', '/v1/usage', keyA)).body;
    await server.close();
    server = await startRestServer({ runtime, port: 0, apiKey: OPERATOR_KEY, previewDomain: DOMAIN });
    url = server.url;
    assert.deepEqual(
      (await api(url, 'GET', '/v1/boxes', keyA)).body.map((b: { id: string }) => b.id),
      [boxA],
    );
    assert.equal((await api(url, 'GET', `/v1/boxes/${boxA}`, keyB)).status, 404);
    assert.deepEqual((await api(url, 'GET', '/v1/usage', keyA)).body, usageBefore);
    const path = `${url}/preview/${kept.body.token}/`;
    await until(async () => (await fetch(path)).status === 200, 'the preview answering after the restart');
    assert.equal(await (await fetch(path)).text(), `hello preview ${boxA}`);
  });
});
