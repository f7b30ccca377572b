/**
 * The E2B control plane and envd wire beyond what the SDK suite drives (issue 29): the older paths
 * (`POST /sandboxes`, `GET /sandboxes`), list paging newest first with `X-Next-Token`, a configured
 * template (`--template tiny=busybox:latest`), tenants (a tenant's sandbox is not found by another and
 * stays untouched), a timeout that removes the sandbox, snapshots, create from a snapshot and fork, and
 * envd over the binary protobuf codec with `@connectrpc/connect-node` (StreamInput, selecting by tag,
 * SendSignal, Update refused without a pty; killing the sandbox ends the open Start stream).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
// internal: the envd process protocol messages are built directly
import { Process, Signal, StreamInputRequestSchema } from '../src/e2b/gen/process/process_pb.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { cleanupAll, ensureRegistry, testRuntime } from './runtime-helpers.ts';

const API_KEY = `e2b_${'a1'.repeat(20)}`;
let server: RestServer;
let jwks: Server;
let tokenOf: (tenant: string) => Promise<string>;

before(async () => {
  ensureRegistry();
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  tokenOf = (tenant) =>
    new SignJWT({ tenant, scope: 'sandbox.boxes.read sandbox.boxes.write sandbox.exec' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setSubject(`user-${tenant}`)
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(privateKey);
  server = await startRestServer({
    runtime: testRuntime(),
    port: 0,
    apiKey: API_KEY,
    jwt: { jwksUrl: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json` },
    e2b: { templates: { tiny: 'busybox:latest' } },
  });
});

after(async () => {
  await server?.close();
  jwks?.close();
  await cleanupAll();
});

/** A JSON request to the control plane; status, headers and parsed body. */
async function call(
  method: string,
  path: string,
  body?: unknown,
  auth: Record<string, string> = { 'x-api-key': API_KEY },
  // biome-ignore lint/suspicious/noExplicitAny: bodies are inspected field by field
): Promise<{ status: number; headers: Headers; body: any }> {
  const response = await fetch(server.url + path, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : null };
}

describe('E2B control plane', { timeout: 300_000 }, () => {
  it('creates through the older POST /sandboxes and lists through GET /sandboxes', async () => {
    const made = await call('POST', '/sandboxes', { templateID: 'tiny', metadata: { path: 'v1' } });
    assert.equal(made.status, 201);
    assert.equal(made.body.templateID, 'tiny');
    assert.match(made.body.envdVersion, /^0\.6\./);
    assert.equal(typeof made.body.envdAccessToken, 'string');
    const listed = await call('GET', '/sandboxes');
    assert.ok(listed.body.some((s: { sandboxID: string }) => s.sandboxID === made.body.sandboxID));
    assert.equal((await call('DELETE', `/sandboxes/${made.body.sandboxID}`)).status, 204);
    assert.equal((await call('DELETE', `/sandboxes/${made.body.sandboxID}`)).status, 404);
  });

  it('pages the list newest first with X-Next-Token', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      ids.push(
        (await call('POST', '/v2/sandboxes', { templateID: 'tiny', metadata: { page: 'yes' } })).body
          .sandboxID,
      );
    }
    const first = await call('GET', '/v2/sandboxes?metadata=page%3Dyes&limit=2');
    assert.deepEqual(
      first.body.map((s: { sandboxID: string }) => s.sandboxID),
      [ids[2], ids[1]],
    );
    const token = first.headers.get('x-next-token');
    assert.ok(token);
    const second = await call('GET', `/v2/sandboxes?metadata=page%3Dyes&limit=2&nextToken=${token}`);
    assert.deepEqual(
      second.body.map((s: { sandboxID: string }) => s.sandboxID),
      [ids[0]],
    );
    assert.equal(second.headers.get('x-next-token'), null);
    assert.equal((await call('GET', '/v2/sandboxes?limit=0')).status, 400);
    assert.equal((await call('GET', '/v2/sandboxes?state=sleeping')).status, 400);
    for (const id of ids) await call('DELETE', `/sandboxes/${id}`);
  });

  it('refuses bad bodies with 400 naming the field', async () => {
    const bad = await call('POST', '/v2/sandboxes', { templateID: 'tiny', timeout: -1 });
    assert.equal(bad.status, 400);
    assert.deepEqual(Object.keys(bad.body).sort(), ['code', 'message']);
    assert.match(bad.body.message, /timeout/);
    assert.match(
      (await call('POST', '/v2/sandboxes', { templateID: 'tiny', metadata: { a: 1 } })).body.message,
      /metadata/,
    );
    assert.equal((await call('POST', '/v2/sandboxes', [1, 2])).status, 400);
    assert.equal((await call('POST', '/sandboxes/inothere/timeout', { timeout: 10 })).status, 404);
  });

  it('keeps tenants apart: another tenant gets 404 and the sandbox stays untouched', async () => {
    const alice = { authorization: `Bearer ${await tokenOf('alice')}` };
    const bob = { authorization: `Bearer ${await tokenOf('bob')}` };
    const made = await call('POST', '/v2/sandboxes', { templateID: 'tiny' }, alice);
    assert.equal(made.status, 201);
    const id = made.body.sandboxID;
    assert.equal((await call('GET', `/sandboxes/${id}`, undefined, bob)).status, 404);
    assert.equal((await call('DELETE', `/sandboxes/${id}`, undefined, bob)).status, 404);
    assert.equal((await call('POST', `/sandboxes/${id}/pause`, undefined, bob)).status, 404);
    assert.ok(
      !(await call('GET', '/v2/sandboxes', undefined, bob)).body.some(
        (s: { sandboxID: string }) => s.sandboxID === id,
      ),
    );
    const still = await call('GET', `/sandboxes/${id}`, undefined, alice);
    assert.equal(still.status, 200);
    assert.equal(still.body.state, 'running');
    assert.equal((await call('DELETE', `/sandboxes/${id}`, undefined, alice)).status, 204);
  });

  it('removes a sandbox when its timeout ends', async () => {
    const id = (await call('POST', '/v2/sandboxes', { templateID: 'tiny' })).body.sandboxID;
    assert.equal((await call('POST', `/sandboxes/${id}/timeout`, { timeout: 1 })).status, 204);
    let status = 200;
    for (let i = 0; i < 100 && status === 200; i++) {
      await new Promise((r) => setTimeout(r, 200));
      status = (await call('GET', `/sandboxes/${id}`)).status;
    }
    assert.equal(status, 404);
  });

  it('snapshots a sandbox, creates from the snapshot, forks, and deletes the snapshot', async () => {
    const source = (await call('POST', '/v2/sandboxes', { templateID: 'tiny' })).body;
    const envd = envdClient(source.sandboxID, source.envdAccessToken);
    await runToEnd(envd, ['sh', '-c', 'echo kept > /marker']);
    const snap = await call('POST', `/sandboxes/${source.sandboxID}/snapshots`, {});
    assert.equal(snap.status, 201);
    const snapshotId = snap.body.snapshotID;
    assert.ok(
      (await call('GET', '/snapshots')).body.some((s: { snapshotID: string }) => s.snapshotID === snapshotId),
    );
    await runToEnd(envd, ['sh', '-c', 'echo changed > /marker']);
    const restored = (await call('POST', '/v2/sandboxes', { templateID: snapshotId })).body;
    assert.equal(
      await runToEnd(envdClient(restored.sandboxID, restored.envdAccessToken), ['cat', '/marker']),
      'kept\n',
    );
    const forks = await call('POST', `/sandboxes/${source.sandboxID}/fork`, { count: 1 });
    assert.equal(forks.status, 200);
    const fork = forks.body[0].sandbox;
    assert.equal(
      await runToEnd(envdClient(fork.sandboxID, fork.envdAccessToken), ['cat', '/marker']),
      'changed\n',
    );
    assert.equal((await call('DELETE', `/templates/${snapshotId}`)).status, 204);
    assert.equal((await call('DELETE', `/templates/${snapshotId}`)).status, 404);
    for (const id of [source.sandboxID, restored.sandboxID, fork.sandboxID])
      await call('DELETE', `/sandboxes/${id}`);
  });
});

/** A binary-protobuf Connect client of a sandbox's envd, acting as root. */
function envdClient(sandboxId: string, token: string) {
  const transport = createConnectTransport({
    baseUrl: server.url,
    httpVersion: '1.1',
    useBinaryFormat: true,
    interceptors: [
      (next) => (req) => {
        req.header.set('e2b-sandbox-id', sandboxId);
        req.header.set('e2b-sandbox-port', '49983');
        req.header.set('x-access-token', token);
        req.header.set('authorization', `Basic ${Buffer.from('root:').toString('base64')}`);
        return next(req);
      },
    ],
  });
  return createClient(Process, transport);
}

/** Runs `argv` to its end over Start; its stdout, or throws with the exit code. */
async function runToEnd(client: ReturnType<typeof envdClient>, argv: string[]): Promise<string> {
  let out = '';
  for await (const { event } of client.start({ process: { cmd: argv[0]!, args: argv.slice(1) } })) {
    const e = event?.event;
    if (e?.case === 'data' && e.value.output.case === 'stdout')
      out += Buffer.from(e.value.output.value).toString();
    if (e?.case === 'end' && e.value.exitCode !== 0)
      throw new Error(`${argv.join(' ')} exited ${e.value.exitCode}`);
  }
  return out;
}

describe('envd over the binary protobuf codec', { timeout: 300_000 }, () => {
  let sandbox: { sandboxID: string; envdAccessToken: string };
  let client: ReturnType<typeof envdClient>;

  before(async () => {
    sandbox = (await call('POST', '/v2/sandboxes', { templateID: 'tiny' })).body;
    client = envdClient(sandbox.sandboxID, sandbox.envdAccessToken);
  });

  it('streams input to a tagged process, signals it, and refuses a resize without a pty', async () => {
    const stream = client.start({ process: { cmd: 'cat' }, tag: 'feeder', stdin: true });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    assert.equal(first.value?.event?.event.case, 'start');
    async function* input() {
      yield create(StreamInputRequestSchema, {
        event: { case: 'start', value: { process: { selector: { case: 'tag', value: 'feeder' } } } },
      });
      yield create(StreamInputRequestSchema, {
        event: {
          case: 'data',
          value: { input: { input: { case: 'stdin', value: Buffer.from('through a stream\n') } } },
        },
      });
    }
    await client.streamInput(input());
    let echoed = '';
    while (!echoed.includes('\n')) {
      const next = await iterator.next();
      const e = next.value?.event?.event;
      if (e?.case === 'data' && e.value.output.case === 'stdout')
        echoed += Buffer.from(e.value.output.value).toString();
    }
    assert.equal(echoed, 'through a stream\n');
    const listed = await client.list({});
    assert.ok(listed.processes.some((p) => p.tag === 'feeder'));
    await assert.rejects(
      client.update({
        process: { selector: { case: 'tag', value: 'feeder' } },
        pty: { size: { cols: 10, rows: 10 } },
      }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.FailedPrecondition,
    );
    await client.sendSignal({
      process: { selector: { case: 'tag', value: 'feeder' } },
      signal: Signal.SIGTERM,
    });
    let end: { exitCode: number; exited: boolean } | undefined;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      const e = next.value.event?.event;
      if (e?.case === 'end') end = e.value;
    }
    assert.equal(end?.exited, false);
    await assert.rejects(
      client.sendSignal({ process: { selector: { case: 'tag', value: 'feeder' } }, signal: Signal.SIGTERM }),
      (e: unknown) => e instanceof ConnectError && e.code === Code.NotFound,
    );
  });

  it('ends an open Start stream when the sandbox is killed', async () => {
    const stream = client.start({ process: { cmd: 'sleep', args: ['600'] } });
    const iterator = stream[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).value?.event?.event.case, 'start');
    assert.equal((await call('DELETE', `/sandboxes/${sandbox.sandboxID}`)).status, 204);
    let ended = false;
    try {
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        if (next.value.event?.event.case === 'end') ended = true;
      }
      ended = true;
    } catch (error) {
      ended = error instanceof ConnectError;
    }
    assert.ok(ended, 'the stream ended');
    const health = await fetch(`${server.url}/health`, { headers: { 'e2b-sandbox-id': sandbox.sandboxID } });
    assert.equal(health.status, 502);
  });
});
