/**
 * Shared helpers of the MCP tests: starting `sandbox mcp` over stdio or connecting over HTTP, calling a
 * tool and reading its structured result, the tool names every transport must list, and checking every
 * listed schema with ajv (JSON Schema 2020-12 and draft-07).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
// internal: pngSize reads a screenshot's dimensions
import { pngSize } from '../src/boxes/computer.ts';
import { REGISTRIES } from './runtime-helpers.ts';

const SANDBOX_BIN = join(import.meta.dirname, '..', 'bin', 'sandbox.ts');

/** Tools every MCP server of the sandbox lists. */
export const CORE_TOOLS = [
  'create_box',
  'list_boxes',
  'box_info',
  'stop_box',
  'remove_box',
  'snapshot_box',
  'restore_box',
  'preview_url',
  'exec',
  'start_command',
  'read_output',
  'send_input',
  'kill_command',
  'read_file',
  'write_file',
  'list_files',
  'make_dir',
  'move',
  'remove',
  'run_code',
  'create_context',
  'reset_context',
];

/** Calls `name` and returns the whole result. */
export async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  options: Parameters<Client['callTool']>[2] = {},
): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, options)) as CallToolResult;
}

/** Calls `name`, asserts it succeeded and returns its structured content. */
// biome-ignore lint/suspicious/noExplicitAny: test access to the tool's structured result
export async function ok(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const result = await call(client, name, args);
  assert.ok(!result.isError, `${name} failed: ${JSON.stringify(result.content)}`);
  assert.ok(result.structuredContent, `${name} has no structured content`);
  return result.structuredContent;
}

/** Calls `name`, asserts it failed as a tool error and returns its message. */
export async function toolError(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<string> {
  const result = await call(client, name, args);
  assert.equal(result.isError, true, `${name} should fail: ${JSON.stringify(result.content)}`);
  const first = result.content[0];
  assert.ok(first && first.type === 'text');
  return first.text;
}

/**
 * Lists the tools, checks that every core tool is there with a description, and compiles every input and
 * output schema with ajv (strict about unknown keywords off: MCP schemas carry annotations).
 */
export async function checkToolSchemas(
  client: Client,
): Promise<Map<string, { input: object; output?: object }>> {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const name of CORE_TOOLS) assert.ok(names.includes(name), `tool ${name} is listed`);
  const ajv2020 = new Ajv2020({ strict: false });
  const ajv7 = new Ajv({ strict: false });
  const schemas = new Map<string, { input: object; output?: object }>();
  for (const tool of tools) {
    assert.ok((tool.description ?? '').length > 20, `${tool.name} has a description`);
    for (const schema of [tool.inputSchema, tool.outputSchema]) {
      if (!schema) continue;
      assert.equal(schema.type, 'object');
      const dialect = (schema as { $schema?: string }).$schema ?? '';
      const ajv = dialect.includes('draft-07') ? ajv7 : ajv2020;
      const { $schema: _, ...rest } = schema as Record<string, unknown>;
      ajv.compile(rest);
    }
    assert.ok(tool.outputSchema, `${tool.name} declares its structured output`);
    schemas.set(tool.name, { input: tool.inputSchema, output: tool.outputSchema });
  }
  return schemas;
}

/**
 * The `sandbox` command's arguments for `sandbox mcp` on the runtime at `home` with the local test
 * registry, followed by `extra` (e.g. `--config <file>`).
 */
export function localMcpArgs(home: string, ...extra: string[]): string[] {
  return ['--home', home, '--registry', `http://${REGISTRIES[0]!.host}`, 'mcp', ...extra];
}

/** The Node arguments that run the `sandbox` command from source with `args`. */
export function sandboxNodeArgs(args: string[]): string[] {
  return ['--conditions=seed-source', SANDBOX_BIN, ...args];
}

/**
 * An SDK client (named `name`) connected over stdio to a `sandbox` process started with `args` (with
 * `SANDBOX_URL` unset). Its stderr goes to `onStderr` when given and is dropped otherwise.
 */
export async function connectStdio(
  args: string[],
  name: string,
  onStderr?: (text: string) => void,
): Promise<{ client: Client; transport: StdioClientTransport }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: sandboxNodeArgs(args),
    stderr: onStderr ? 'pipe' : 'ignore',
    env: { ...process.env, SANDBOX_URL: '' } as Record<string, string>,
  });
  if (onStderr) transport.stderr?.on('data', (chunk: Buffer) => onStderr(chunk.toString()));
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** An SDK client (named `name`) connected to `/mcp` of the server at `url` with the API key `key`. */
export async function connectHttp(
  url: string,
  key: string,
  name = 'mcp-http-test',
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  const client = new Client({ name, version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

/** The PNG of a `screenshot` call, asserting image content of type image/png. */
export async function screenshot(client: Client, box: string): Promise<Buffer> {
  const result = await call(client, 'screenshot', { box });
  assert.ok(!result.isError, JSON.stringify(result.content));
  const image = result.content.find((c) => c.type === 'image');
  assert.ok(image && image.type === 'image');
  assert.equal(image.mimeType, 'image/png');
  return Buffer.from(image.data, 'base64');
}

/**
 * On a computer box: a 1024x768 screenshot, a click into the terminal (at +40+40, 80x24 cells), typing
 * `echo <marker> > /tmp/typed` and Return; asserts the command ran in the box and the next screenshot differs.
 */
export async function clickTypeAndSeeChange(client: Client, box: string, marker: string): Promise<void> {
  const before = await screenshot(client, box);
  assert.deepEqual(pngSize(before), [1024, 768]);
  await ok(client, 'click', { box, x: 200, y: 120 });
  assert.deepEqual(await ok(client, 'cursor_position', { box }), { x: 200, y: 120 });
  await ok(client, 'type_text', { box, text: `echo ${marker} > /tmp/typed; seq 1 30` });
  await ok(client, 'key', { box, keys: 'Return' });
  let typed = '';
  // Up to 30 s: the xterm's shell runs the typed line slowly on a loaded machine.
  for (const end = Date.now() + 30_000; typed === '' && Date.now() < end; ) {
    const r = await ok(client, 'exec', { box, cmd: 'cat', args: ['/tmp/typed'] });
    typed = r.exit_code === 0 ? r.stdout.text : '';
    if (typed === '') await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.equal(typed, `${marker}\n`);
  const afterShot = await screenshot(client, box);
  assert.deepEqual(pngSize(afterShot), [1024, 768]);
  assert.notDeepEqual(afterShot, before, 'the next screenshot shows the change');
}
