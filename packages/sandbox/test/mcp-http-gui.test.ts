/**
 * Computer and browser boxes through `/mcp` over Streamable HTTP on a `sandbox serve` node running the
 * local runtime (the desktop and chromium images of test:setup, from the shared store
 * `<cache>/test-home-desktop`), driven by the SDK's `Client`: a computer box is the caller's tenant box
 * (another tenant does not see it), its screenshot is 1024×768 PNG image content, a click and typed keys
 * run a command in its terminal and the next screenshot differs; a browser box opens a page and screenshots
 * it; a box created with `lifetime_seconds` is removed when that passes; the end of the session removes
 * the others.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { cacheDir } from '../scripts/offline-images.ts';
// internal: pngSize reads a screenshot's dimensions
import { pngSize } from '../src/boxes/computer.ts';
import { JsRuntime } from '../src/index.ts';
import type { RestServer } from '../src/rest/server.ts';
import { clickTypeAndSeeChange, connectHttp, ok, screenshot } from './mcp-helpers.ts';
import { cleanupAll, REGISTRIES, tempHome } from './runtime-helpers.ts';
import { api, createKey, startTenantServer } from './tenants-helpers.ts';

const packageDir = join(import.meta.dirname, '..');
const home = join(cacheDir(), 'test-home-desktop');

describe('computer and browser boxes through /mcp on sandbox serve', () => {
  let server: RestServer;
  let runtime: JsRuntime;
  let url: string;
  let alphaKey: string;
  let betaKey: string;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  const made: string[] = [];

  before(async () => {
    execFileSync(
      process.execPath,
      [join(packageDir, 'scripts', 'registry.ts'), '--quiet', '--images', 'desktop,chromium'],
      { stdio: ['ignore', 'inherit', 'inherit'], timeout: 900_000 },
    );
    runtime = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
    ({ server, url } = await startTenantServer({ runtime, stateDir: tempHome('sandbox-mcp-gui-') }));
    alphaKey = (await createKey(url, 'alpha')).key;
    betaKey = (await createKey(url, 'beta')).key;
    ({ client, transport } = await connectHttp(url, alphaKey, 'mcp-http-gui-test'));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await server?.close();
    for (const id of made) await runtime?.remove(id, true).catch(() => {});
    await cleanupAll();
  });

  it("drives a computer box of the caller's tenant: screenshot, click, type, changed screenshot", async () => {
    const notes: string[] = [];
    const result = await client.callTool({ name: 'create_box', arguments: { kind: 'computer' } }, undefined, {
      onprogress: (p) => notes.push(p.message ?? ''),
    });
    assert.ok(!result.isError, JSON.stringify(result.content));
    // biome-ignore lint/suspicious/noExplicitAny: test access to the tool's structured result
    const created = result.structuredContent as any;
    const box = created.id;
    // The desktop image is stored already: its pull is reported done at once.
    assert.match(notes[0] ?? '', /^starting a computer box from /);
    assert.ok(
      notes.some((n) => /^pulling .*desktop.*: done, \d+ of \d+ layers/.test(n)),
      JSON.stringify(notes),
    );
    assert.equal(notes.at(-1), 'box started');
    made.push(box);
    assert.equal(created.running, true);
    assert.equal(created.session_box, true);
    const listed = (key: string) => api(url, 'GET', '/v1/boxes', key).then((r) => JSON.stringify(r.body));
    assert.ok((await listed(alphaKey)).includes(box));
    assert.ok(!(await listed(betaKey)).includes(box), 'another tenant does not see it');
    await clickTypeAndSeeChange(client, box, 'typed-over-http');
  });

  it('opens a page in a browser box and screenshots it', async () => {
    const created = await ok(client, 'create_box', { kind: 'browser' });
    made.push(created.id);
    const page = await ok(client, 'navigate', {
      box: created.id,
      url: 'data:text/html,<title>mcp-http-page</title><h1>hello</h1>',
    });
    assert.equal(page.title, 'mcp-http-page');
    const shot = await screenshot(client, created.id);
    assert.ok(pngSize(shot)[0] > 0);
  });

  it('removes a computer box when its lifetime passes', async () => {
    const created = await ok(client, 'create_box', { kind: 'computer', lifetime_seconds: 1 });
    made.push(created.id);
    let gone = false;
    for (let i = 0; i < 300 && !gone; i++) {
      gone = (await runtime.getInfo(created.id)) === null;
      if (!gone) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(gone, 'the box is removed by its lifetime');
  });

  it('removes the boxes when the session ends', async () => {
    assert.equal(made.length, 3);
    await transport.terminateSession();
    await client.close();
    for (const id of made) assert.equal(await runtime.getInfo(id), null, `box ${id} is gone`);
    const listed = JSON.stringify((await api(url, 'GET', '/v1/boxes', alphaKey)).body);
    for (const id of made) assert.ok(!listed.includes(id), `box ${id} is not listed for its tenant`);
  });
});
