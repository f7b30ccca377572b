/**
 * The REST client's downloads (`Connection.download`, `rest/download-client.ts`) against a real
 * `node:http` server on loopback: bodies arrive byte-identical whether sent with a length, chunked, or
 * delimited by the end of the connection, through one reused buffer (every chunk is a view of the same
 * memory, none larger than it); error answers become the server's `BoxError`; a connection dropped
 * mid-body and a failing sink reject, never resolve with a short file.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { BoxError } from '../src/index.ts';
// internal: the REST connection is driven directly to test downloads
import { Connection } from '../src/rest/connection.ts';
// internal: the download buffer bound is checked
import { DOWNLOAD_BUFFER_BYTES } from '../src/rest/download-client.ts';

const BODY = randomBytes(5 * 1024 * 1024 + 123);
let server: Server;
let url: string;
const seenAuth: (string | undefined)[] = [];

/** Writes `data` in pieces of `piece` bytes, waiting for drain. */
async function writeAll(res: ServerResponse, data: Buffer, piece: number): Promise<void> {
  for (let at = 0; at < data.length; at += piece) {
    if (!res.write(data.subarray(at, at + piece))) await new Promise((r) => res.once('drain', r));
  }
}

const routes: Record<string, (req: IncomingMessage, res: ServerResponse) => Promise<void> | void> = {
  '/length': async (_req, res) => {
    res.writeHead(200, { 'content-length': String(BODY.length) });
    await writeAll(res, BODY, 1 << 20);
    res.end();
  },
  '/chunked': async (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    await writeAll(res, BODY, 70_001);
    res.end();
  },
  '/until-close': async (req, res) => {
    // HTTP/1.0-style body: no length, no chunking; it ends with the connection.
    const socket = req.socket;
    socket.write('HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n');
    for (let at = 0; at < BODY.length; at += 1 << 20) {
      if (!socket.write(BODY.subarray(at, at + (1 << 20)))) await new Promise((r) => socket.once('drain', r));
    }
    socket.end();
    res.detachSocket(socket);
  },
  '/missing': (_req, res) => {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        error: { type: 'not_found_error', code: 'not_found', message: "no such file '/x'", field: 'path' },
      }),
    );
  },
  '/dropped': async (req, res) => {
    res.writeHead(200, { 'content-length': String(BODY.length) });
    await writeAll(res, BODY.subarray(0, 1 << 20), 1 << 20);
    req.socket.destroy();
  },
};

before(async () => {
  server = createServer((req, res) => {
    seenAuth.push(req.headers.authorization);
    void routes[req.url ?? '']?.(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address() as { port: number };
  url = `http://127.0.0.1:${address.port}`;
});

after(() => server.close());

/** Downloads `path` into memory, recording the chunks' sizes and the buffers they are views of. */
async function download(
  path: string,
): Promise<{ body: Buffer; sizes: number[]; buffers: Set<ArrayBufferLike> }> {
  const conn = new Connection({ url, apiKey: 'k-123' });
  const parts: Buffer[] = [];
  const sizes: number[] = [];
  const buffers = new Set<ArrayBufferLike>();
  await conn.download(path, async (chunk) => {
    buffers.add(chunk.buffer);
    sizes.push(chunk.length);
    parts.push(Buffer.from(chunk)); // a copy: the chunk's memory is read into again
    await new Promise((r) => setImmediate(r));
  });
  return { body: Buffer.concat(parts), sizes, buffers };
}

describe('REST client downloads through one reused buffer', () => {
  for (const path of ['/length', '/chunked', '/until-close']) {
    it(`${path}: the body arrives byte-identical, every chunk a view of the same buffer`, async () => {
      const { body, sizes, buffers } = await download(path);
      assert.equal(body.length, BODY.length);
      assert.ok(body.equals(BODY), 'the body differs from what the server sent');
      assert.equal(buffers.size, 1, `chunks came in ${buffers.size} buffers`);
      assert.ok(Math.max(...sizes) <= DOWNLOAD_BUFFER_BYTES);
      assert.equal(seenAuth.at(-1), 'Bearer k-123');
    });
  }

  it('an error answer becomes the server BoxError (code, field, message)', async () => {
    await assert.rejects(
      download('/missing'),
      (e: unknown) =>
        e instanceof BoxError &&
        e.code === 'not_found' &&
        e.field === 'path' &&
        /no such file/.test(e.message),
    );
  });

  it('a connection dropped mid-body rejects with unavailable', async () => {
    await assert.rejects(
      download('/dropped'),
      (e: unknown) => e instanceof BoxError && e.code === 'unavailable',
    );
  });

  it('a sink that fails rejects the download with its error', async () => {
    const conn = new Connection({ url });
    const failure = new Error('disk full');
    await assert.rejects(
      conn.download('/length', async () => {
        throw failure;
      }),
      (e: unknown) => e === failure,
    );
  });

  it('an unreachable server rejects with unavailable naming the URL', async () => {
    const conn = new Connection({ url: 'http://127.0.0.1:1' });
    await assert.rejects(
      conn.download('/length', async () => {}),
      (e: unknown) => e instanceof BoxError && e.code === 'unavailable' && e.message.includes('127.0.0.1:1'),
    );
  });
});
