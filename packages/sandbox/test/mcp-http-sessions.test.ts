/**
 * MCP sessions over Streamable HTTP at `/mcp`, with the limits set small through `RestServerOptions.mcp`:
 * the per-tenant and total session caps (429 for one more, room again after a DELETE), a session without
 * requests ending after `sessionIdleMs` with its boxes removed (while a long call keeps its session), the
 * image pull of a `create_box` on an image the node does not hold reported as several progress
 * notifications, and output far larger than a tool result may carry coming back shortened and marked.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import type { JsRuntime } from '../src/index.ts';
import type { RestServer } from '../src/rest/server.ts';
import { connectHttp, ok } from './mcp-helpers.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';
import { api, createKey, startTenantServer } from './tenants-helpers.ts';

const IDLE_MS = 1500;

/** Resolves once `check` holds, polling every 100 ms (at most 30 s). */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('MCP sessions over Streamable HTTP', () => {
  let server: RestServer;
  let runtime: JsRuntime;
  let url: string;
  let alphaKey: string;
  let betaKey: string;
  let gammaKey: string;
  const open: Client[] = [];

  before(async () => {
    ensureRegistry();
    // A node on a fresh home: no image is stored yet.
    ({ server, runtime, url } = await startTenantServer({
      runtime: testRuntime(tempHome('sandbox-mcp-sessions-')),
      mcp: {
        maxSessionsPerTenant: 2,
        maxSessions: 3,
        sessionIdleMs: IDLE_MS,
        maxOutputBytes: 1024,
        maxKeptBytes: 64 * 1024,
      },
    }));
    alphaKey = (await createKey(url, 'alpha')).key;
    betaKey = (await createKey(url, 'beta')).key;
    gammaKey = (await createKey(url, 'gamma')).key;
  });

  after(async () => {
    for (const client of open) await client.close().catch(() => {});
    await server?.close();
    await cleanupAll();
  });

  it('reports the pull of an image the node does not hold as several progress notifications', async () => {
    assert.equal(await runtime.images.get(BUSYBOX), null, 'the image is not stored yet');
    const { client } = await connectHttp(url, alphaKey);
    open.push(client);
    const seen: Progress[] = [];
    const created = await client.callTool(
      { name: 'create_box', arguments: { image: BUSYBOX, memory_mib: 128 } },
      undefined,
      { onprogress: (p) => seen.push(p) },
    );
    assert.ok(!created.isError, JSON.stringify(created.content));
    assert.ok(seen.length >= 4, `several notifications: ${JSON.stringify(seen)}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]!.progress > seen[i - 1]!.progress, 'increasing');
    const pulls = seen.filter((p) => p.message?.startsWith(`pulling ${BUSYBOX}`));
    assert.ok(pulls.length >= 2, JSON.stringify(seen));
    assert.ok(
      pulls.some(
        (p) =>
          /downloading|unpacking|done/.test(p.message ?? '') && /\d+ of \d+ layers/.test(p.message ?? ''),
      ),
      JSON.stringify(pulls),
    );
    const last = seen.at(-1)!;
    assert.equal(last.message, 'box started');
    assert.equal(last.total, last.progress);
    assert.ok(await runtime.images.get(BUSYBOX), 'the image is stored now');
  });

  it('shortens and marks output far larger than a tool result may carry, and keeps serving', async () => {
    const client = open[0]!;
    const { boxes } = await ok(client, 'list_boxes');
    const box = boxes[0].id;
    const run = await ok(client, 'exec', {
      box,
      cmd: 'sh',
      args: ['-c', "head -c 3000000 /dev/zero | tr '\\0' a; echo done >&2"],
    });
    assert.equal(run.exit_code, 0);
    assert.equal(run.stdout.truncated, true);
    assert.equal(run.stdout.total_bytes, 3_000_000);
    assert.match(
      run.stdout.text,
      /^a{1024}\n\[output truncated: 3000000 bytes written, the first 1024 shown; the first 65536 bytes are in \/tmp\/mcp-output\/[0-9a-f]+\.stdout/,
    );
    assert.equal(run.stderr.truncated, false);
    assert.equal(run.stderr.text, 'done\n');
    const kept = await ok(client, 'exec', { box, cmd: 'wc', args: ['-c', run.stdout.full_output_path] });
    assert.match(kept.stdout.text, /^65536 /);
    const next = await ok(client, 'exec', { box, cmd: 'echo', args: ['still here'] });
    assert.equal(next.stdout.text, 'still here\n');
  });

  it('caps sessions per tenant and in all, and has room again once one ends', async () => {
    const second = await connectHttp(url, alphaKey);
    open.push(second.client);
    await assert.rejects(connectHttp(url, alphaKey), /429|too many MCP sessions \(at most 2 per tenant\)/);
    const beta = await connectHttp(url, betaKey);
    open.push(beta.client);
    await assert.rejects(connectHttp(url, gammaKey), /429|too many MCP sessions \(at most 3 in all\)/);
    // The refused clients left no session behind: after one DELETE, gamma gets one.
    await beta.transport.terminateSession();
    await beta.client.close();
    const gamma = await connectHttp(url, gammaKey);
    open.push(gamma.client);
    assert.ok((await gamma.client.listTools()).tools.length > 0);
    await gamma.transport.terminateSession();
    await gamma.client.close();
    await second.transport.terminateSession();
    await second.client.close();
  });

  it('keeps a session through a call longer than the idle time, then ends it once idle', async () => {
    const { client, transport } = await connectHttp(url, betaKey);
    open.push(client);
    const box = await ok(client, 'create_box', { image: BUSYBOX, memory_mib: 128 });
    // A call that runs past the idle time keeps its session.
    const slow = await ok(client, 'exec', {
      box: box.id,
      cmd: 'sleep',
      args: [String((IDLE_MS * 2) / 1000)],
    });
    assert.equal(slow.exit_code, 0);
    assert.equal((await ok(client, 'box_info', { box: box.id })).running, true);
    // Without requests, the session ends and its box is removed.
    await until(async () => (await runtime.getInfo(box.id)) === null, 'the idle session to end');
    const list = { jsonrpc: '2.0', id: 9, method: 'tools/list' };
    const gone = await api(url, 'POST', '/mcp', betaKey, list, {
      accept: 'application/json, text/event-stream',
      'mcp-session-id': transport.sessionId ?? 'x',
      'mcp-protocol-version': '2025-06-18',
    });
    assert.equal(gone.status, 404);
  });
});
