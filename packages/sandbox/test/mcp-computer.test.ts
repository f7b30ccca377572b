/**
 * Computer use through `sandbox mcp` over stdio (issue 30): `create_box` with kind `computer` starts a
 * desktop box (the desktop image of test:setup, from the shared store `<cache>/test-home-desktop`), its
 * screenshot is 1024×768 PNG image content, a click into the terminal and typed keys run a command there
 * (its file appears in the box) and the next screenshot differs; a browser box opens a page, screenshots it
 * and gives its CDP endpoint; the end of the session removes both boxes.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { cacheDir } from '../scripts/offline-images.ts';
// internal: pngSize reads a screenshot's dimensions
import { pngSize } from '../src/boxes/computer.ts';
import { JsRuntime } from '../src/index.ts';
import { call, clickTypeAndSeeChange, connectStdio, localMcpArgs, ok, toolError } from './mcp-helpers.ts';

const packageDir = join(import.meta.dirname, '..');
const home = join(cacheDir(), 'test-home-desktop');

describe('computer use through sandbox mcp', () => {
  let client: Client;
  let box: string;

  before(async () => {
    execFileSync(
      process.execPath,
      [join(packageDir, 'scripts', 'registry.ts'), '--quiet', '--images', 'desktop,chromium'],
      {
        stdio: ['ignore', 'inherit', 'inherit'],
        timeout: 900_000,
      },
    );
    ({ client } = await connectStdio(localMcpArgs(home), 'mcp-computer-test'));
  });

  after(async () => {
    await client?.close().catch(() => {});
  });

  it('lists the computer tools', async () => {
    const names = (await client.listTools()).tools.map((t) => t.name);
    for (const name of [
      'screenshot',
      'click',
      'double_click',
      'drag',
      'type_text',
      'key',
      'scroll',
      'cursor_position',
    ]) {
      assert.ok(names.includes(name), name);
    }
  });

  it('takes a 1024x768 screenshot, clicks and types into the terminal and sees the change', async () => {
    const created = await ok(client, 'create_box', { kind: 'computer' });
    box = created.id;
    assert.equal(created.running, true);
    await clickTypeAndSeeChange(client, box, 'typed-through-mcp');
    await ok(client, 'scroll', { box, x: 200, y: 120, direction: 'up', amount: 2 });
    assert.match(await toolError(client, 'click', { box: 'no-such-box', x: 1, y: 1 }), /^not_found: /);
  });

  let browser: string;

  it('opens a page in a browser box, screenshots it and gives its CDP endpoint', async () => {
    const created = await ok(client, 'create_box', { kind: 'browser' });
    browser = created.id;
    const page = await ok(client, 'navigate', {
      box: browser,
      url: 'data:text/html,<title>mcp-page</title><h1 style="font-size:80px">hello</h1>',
    });
    assert.equal(page.title, 'mcp-page');
    const shot = await call(client, 'screenshot', { box: browser });
    assert.ok(!shot.isError, JSON.stringify(shot.content));
    const image = shot.content.find((c) => c.type === 'image');
    assert.ok(image && image.type === 'image' && image.mimeType === 'image/png');
    assert.ok(pngSize(Buffer.from(image.data, 'base64'))[0] > 0);
    const { endpoint } = await ok(client, 'cdp_endpoint', { box: browser });
    const version = (await (await fetch(`${endpoint}/json/version`)).json()) as { Browser: string };
    assert.match(version.Browser, /Chrome/);
    assert.match(
      await toolError(client, 'navigate', { box, url: 'https://example.com/' }),
      /not a browser box/,
    );
  });

  it('removes the computer and browser boxes when the session ends', async () => {
    await client.close();
    const runtime = new JsRuntime({ homeDir: home });
    assert.equal(await runtime.getInfo(box), null);
    assert.equal(await runtime.getInfo(browser), null);
  });
});
