/**
 * The REST runtime client (`new JsRuntime({ url })`) when the server closes a kept-alive connection as a
 * request arrives on it. A real `RestServer` sits behind a `node:http` front that, when told, closes the
 * client's reused connection at its next request without answering: either before passing the request
 * on (the server never sees it, as when a server closes an idle socket just as the request is sent) or
 * after the server carried it out (the answer never comes back). A read (GET) is sent once more on a new
 * connection and succeeds, once only; a write (POST) fails with `unavailable` and is never sent twice:
 * the server holds at most one volume from it.
 */
import assert from 'node:assert/strict';
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type Server,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { BoxError, JsRuntime, type RestServer, startRestServer } from '../src/index.ts';
import { cleanupAll, tempHome, testRuntime } from './runtime-helpers.ts';

/**
 * What the front does with a request on a connection that already carried one: `pass` it on; `drop`
 * the connection without passing it on, or `carry-out` (pass it on, then drop the connection instead
 * of answering), each once; `drop-all` every request, reused connection or not, until told otherwise.
 */
type Mode = 'pass' | 'drop' | 'carry-out' | 'drop-all';

let server: RestServer;
let front: Server;
let client: JsRuntime;
let mode: Mode = 'pass';
/** Requests as they reach the front: method, path and whether on a reused connection. */
const arrivals: string[] = [];
const requestsOn = new WeakMap<Socket, number>();

/** Passes a request on to the REST server; resolves with its whole answer. */
function forward(
  req: IncomingMessage,
  body: Buffer,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  const { host: _host, connection: _connection, ...headers } = req.headers;
  return new Promise((resolve, reject) => {
    const upstream = request(`${server.url}${req.url}`, { method: req.method, headers }, (answer) => {
      answer.toArray().then(
        (chunks) =>
          resolve({
            status: answer.statusCode ?? 502,
            headers: answer.headers,
            body: Buffer.concat(chunks),
          }),
        reject,
      );
    });
    upstream.on('error', reject);
    upstream.end(body);
  });
}

before(async () => {
  server = await startRestServer({ runtime: testRuntime(tempHome('sandbox-keepalive-')), port: 0 });
  front = createServer(async (req, res) => {
    const seen = requestsOn.get(req.socket) ?? 0;
    requestsOn.set(req.socket, seen + 1);
    const reused = seen > 0;
    arrivals.push(`${req.method} ${req.url}${reused ? ' reused' : ' new'}`);
    const body = Buffer.concat(await req.toArray());
    if (mode === 'drop-all' || (reused && mode === 'drop')) {
      if (mode === 'drop') mode = 'pass';
      req.socket.destroy();
      return;
    }
    const answer = await forward(req, body);
    if (reused && mode === 'carry-out') {
      mode = 'pass';
      req.socket.destroy();
      return;
    }
    const { 'transfer-encoding': _te, connection: _c, 'keep-alive': _ka, ...headers } = answer.headers;
    res.writeHead(answer.status, headers).end(answer.body);
  });
  // Idle connections stay open on the front's side: only the test closes them.
  front.keepAliveTimeout = 600_000;
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  client = new JsRuntime({ url: `http://127.0.0.1:${(front.address() as AddressInfo).port}` });
});

after(async () => {
  front.closeAllConnections();
  await new Promise((resolve) => front.close(resolve));
  await server.close();
  await cleanupAll();
});

/** Makes sure the client holds a kept-alive connection to the front (one answered request on it). */
async function warm(): Promise<void> {
  mode = 'pass';
  await client.volumes.list();
  arrivals.length = 0;
}

/** The names of the server's volumes. */
async function volumeNames(): Promise<string[]> {
  return (await client.volumes.list()).map((v) => v.name ?? `(unnamed ${v.id})`).sort();
}

const unavailable = (e: unknown) => {
  assert.ok(e instanceof BoxError, String(e));
  assert.equal(e.code, 'unavailable');
  return true;
};

describe('REST client on a kept-alive connection the server closes', () => {
  it('a GET dropped on a reused connection is sent once more on a new one and answers', async () => {
    await client.volumes.create('kept');
    await warm();
    mode = 'drop';
    assert.deepEqual(await volumeNames(), ['kept']);
    assert.deepEqual(arrivals, ['GET /v1/volumes reused', 'GET /v1/volumes new']);
  });

  it('a GET the server answered but whose answer was lost is read again (reads are safe to repeat)', async () => {
    await warm();
    mode = 'carry-out';
    assert.equal((await client.volumes.get('kept'))?.name, 'kept');
    assert.deepEqual(arrivals, ['GET /v1/volumes/kept reused', 'GET /v1/volumes/kept new']);
  });

  it('a GET is sent at most twice: a second failure is the caller’s unavailable error', async () => {
    await warm();
    mode = 'drop-all';
    await assert.rejects(client.volumes.list(), unavailable);
    assert.deepEqual(arrivals, ['GET /v1/volumes reused', 'GET /v1/volumes new']);
    mode = 'pass';
  });

  it('a POST dropped before the server saw it fails with unavailable and is not sent again', async () => {
    await warm();
    mode = 'drop';
    await assert.rejects(client.volumes.create('never'), unavailable);
    assert.deepEqual(arrivals, ['POST /v1/volumes reused']);
    assert.deepEqual(await volumeNames(), ['kept'], 'the server made no volume');
  });

  it('a POST the server carried out before the connection closed is not repeated: one volume', async () => {
    await warm();
    mode = 'carry-out';
    await assert.rejects(client.volumes.create('once'), unavailable);
    assert.deepEqual(arrivals, ['POST /v1/volumes reused']);
    assert.deepEqual(await volumeNames(), ['kept', 'once'], 'exactly one volume from the one POST');
  });
});
