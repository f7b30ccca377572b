/**
 * The MCP server over Streamable HTTP at `/mcp` on `sandbox serve`, driven by the SDK's own `Client` and
 * `StreamableHTTPClientTransport`: authentication required, tools listed with valid schemas, boxes made
 * through MCP owned by the caller's tenant (another tenant neither sees them nor reaches the session),
 * session limits as tool errors, a preview URL, and ending the session removing its boxes; and
 * `sandbox mcp --url` serving the same node's boxes over stdio as the API key's tenant.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { JsRuntime } from '../src/index.ts';
import type { RestServer } from '../src/rest/server.ts';
import { checkToolSchemas, connectHttp, connectStdio, ok, toolError } from './mcp-helpers.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { api, createKey, startTenantServer } from './tenants-helpers.ts';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const ACCEPT = { accept: 'application/json, text/event-stream' };

describe('MCP over Streamable HTTP at /mcp', () => {
  let server: RestServer;
  let runtime: JsRuntime;
  let url: string;
  let alpha: { client: Client; transport: StreamableHTTPClientTransport };
  let beta: { client: Client; transport: StreamableHTTPClientTransport };
  let alphaKey: string;
  let betaKey: string;

  before(async () => {
    ensureRegistry();
    ({ server, runtime, url } = await startTenantServer({ mcp: { maxBoxes: 1, hostPaths: ['/'] } }));
    alphaKey = (await createKey(url, 'alpha')).key;
    betaKey = (await createKey(url, 'beta')).key;
    alpha = await connectHttp(url, alphaKey);
    beta = await connectHttp(url, betaKey);
  });

  after(async () => {
    await alpha?.client.close().catch(() => {});
    await beta?.client.close().catch(() => {});
    await server?.close();
    await cleanupAll();
  });

  it('refuses requests without a valid credential, and requests without a session', async () => {
    assert.equal((await api(url, 'POST', '/mcp', null, INITIALIZE, ACCEPT)).status, 401);
    assert.equal((await api(url, 'POST', '/mcp', 'wrong-key', INITIALIZE, ACCEPT)).status, 401);
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    assert.equal((await api(url, 'POST', '/mcp', alphaKey, list, ACCEPT)).status, 400);
  });

  it('lists every tool with valid schemas and never offers host transfers over HTTP', async () => {
    const schemas = await checkToolSchemas(alpha.client);
    assert.equal(schemas.has('upload_from_host'), false);
    assert.equal(schemas.has('download_to_host'), false);
  });

  it("creates a box for the caller's tenant that another tenant cannot see nor reach", async () => {
    const box = await ok(alpha.client, 'create_box', { image: BUSYBOX, memory_mib: 128 });
    const run = await ok(alpha.client, 'exec', {
      box: box.id,
      cmd: 'sh',
      args: ['-c', 'echo hi > /f; cat /f'],
    });
    assert.equal(run.stdout.text, 'hi\n');
    // Over the REST API the box is alpha's.
    const listed = await api(url, 'GET', '/v1/boxes', alphaKey);
    assert.ok(JSON.stringify(listed.body).includes(box.id));
    assert.ok(!JSON.stringify((await api(url, 'GET', '/v1/boxes', betaKey)).body).includes(box.id));
    // Beta's MCP session does not find it, and cannot change it.
    assert.match(await toolError(beta.client, 'box_info', { box: box.id }), /^not_found: /);
    assert.match(await toolError(beta.client, 'remove_box', { box: box.id }), /^not_found: /);
    assert.match(
      await toolError(beta.client, 'write_file', { box: box.id, path: '/f', content: 'x' }),
      /^not_found: /,
    );
    const betaList = await ok(beta.client, 'list_boxes');
    assert.deepEqual(betaList.boxes, []);
    const untouched = await ok(alpha.client, 'exec', { box: box.id, cmd: 'cat', args: ['/f'] });
    assert.equal(untouched.stdout.text, 'hi\n');
    // Beta cannot use alpha's session id either.
    const list = { jsonrpc: '2.0', id: 3, method: 'tools/list' };
    const stolen = await api(url, 'POST', '/mcp', betaKey, list, {
      ...ACCEPT,
      'mcp-session-id': alpha.transport.sessionId ?? '',
      'mcp-protocol-version': '2025-06-18',
    });
    assert.equal(stolen.status, 404);
    // The session limit (1 box) answers as a tool error.
    assert.match(await toolError(alpha.client, 'create_box', { image: BUSYBOX }), /^quota_exceeded: .*boxes/);
    const preview = await ok(alpha.client, 'preview_url', {
      box: box.id,
      port: 8080,
      expires_in_seconds: 60,
    });
    assert.match(preview.url, /^http:\/\/127\.0\.0\.1:\d+\/preview\//);
  });

  it('serves a remote runtime over stdio with sandbox mcp --url, as the key holder', async () => {
    const { client: remote } = await connectStdio(
      ['mcp', '--url', url, '--api-key', betaKey],
      'mcp-remote-test',
    );
    const box = await ok(remote, 'create_box', { image: BUSYBOX, memory_mib: 128 });
    const run = await ok(remote, 'exec', { box: box.id, cmd: 'echo', args: ['remote'] });
    assert.equal(run.stdout.text, 'remote\n');
    // A desktop's forwarders would run here, away from the node's boxes.
    assert.match(
      await toolError(remote, 'create_box', { kind: 'computer' }),
      /^unsupported: .*\(field kind\)/,
    );
    assert.ok(JSON.stringify((await api(url, 'GET', '/v1/boxes', betaKey)).body).includes(box.id));
    await remote.close();
    assert.equal(await runtime.getInfo(box.id), null);
  });

  it("ends the session on DELETE and removes the session's boxes", async () => {
    const boxes = await ok(alpha.client, 'list_boxes');
    const ids = boxes.boxes.map((b: { id: string }) => b.id);
    assert.equal(ids.length, 1);
    await alpha.transport.terminateSession();
    await alpha.client.close();
    for (const id of ids) assert.equal(await runtime.getInfo(id), null);
    const list = { jsonrpc: '2.0', id: 4, method: 'tools/list' };
    const gone = await api(url, 'POST', '/mcp', alphaKey, list, {
      ...ACCEPT,
      'mcp-session-id': alpha.transport.sessionId ?? 'x',
    });
    assert.equal(gone.status, 404);
  });
});
