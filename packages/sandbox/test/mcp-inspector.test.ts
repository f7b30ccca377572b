/**
 * The MCP Inspector's command-line mode (`mcp-inspector --cli`, a client nobody here wrote) against
 * `sandbox mcp` over stdio: it lists the tools and calls them — a structured result, a tool error, and a
 * box created in one session and gone when that session (the Inspector's process) ends.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { JsRuntime } from '../src/index.ts';
import { CORE_TOOLS, localMcpArgs, sandboxNodeArgs } from './mcp-helpers.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome } from './runtime-helpers.ts';

const run = promisify(execFile);
const packageDir = join(import.meta.dirname, '..');
const inspector = join(packageDir, '..', '..', 'node_modules', '.bin', 'mcp-inspector');

describe('MCP Inspector CLI against sandbox mcp', () => {
  let home: string;

  /** Runs the Inspector CLI with `args` against a `sandbox mcp` on `home`; returns its parsed JSON output. */
  // biome-ignore lint/suspicious/noExplicitAny: the Inspector's JSON output is inspected field by field
  async function inspect(...args: string[]): Promise<any> {
    const server = [process.execPath, ...sandboxNodeArgs(localMcpArgs(home))];
    const { stdout } = await run(inspector, ['--cli', ...server, ...args], {
      env: { ...process.env, SANDBOX_URL: '' },
      maxBuffer: 16 * 1024 * 1024,
    });
    return JSON.parse(stdout.slice(stdout.indexOf('{')));
  }

  before(() => {
    ensureRegistry();
    home = tempHome('sandbox-mcp-inspector-');
  });

  after(async () => {
    await cleanupAll();
  });

  it('lists every tool with its input schema', async () => {
    const { tools } = await inspect('--method', 'tools/list');
    const names = tools.map((t: { name: string }) => t.name);
    for (const name of CORE_TOOLS) assert.ok(names.includes(name), name);
    assert.ok(tools.every((t: { inputSchema?: { type?: string } }) => t.inputSchema?.type === 'object'));
  });

  it('calls tools: structured results, tool errors, and a box removed when the session ends', async () => {
    const listed = await inspect('--method', 'tools/call', '--tool-name', 'list_boxes');
    assert.deepEqual(listed.structuredContent, { boxes: [] });
    const missing = await inspect(
      '--method',
      'tools/call',
      '--tool-name',
      'box_info',
      '--tool-arg',
      'box=nope',
    );
    assert.equal(missing.isError, true);
    assert.match(missing.content[0].text, /^not_found: /);
    const created = await inspect(
      '--method',
      'tools/call',
      '--tool-name',
      'create_box',
      '--tool-arg',
      `image=${BUSYBOX}`,
      'memory_mib=128',
    );
    assert.equal(created.isError, undefined, JSON.stringify(created));
    assert.equal(created.structuredContent.running, true);
    const runtime = new JsRuntime({ homeDir: home });
    assert.equal(await runtime.getInfo(created.structuredContent.id), null);
  });
});
