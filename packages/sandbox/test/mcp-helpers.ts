/**
 * Shared helpers of the MCP tests: calling a tool and reading its structured result, the tool names
 * every transport must list, and checking every listed schema with ajv (JSON Schema 2020-12 and draft-07).
 */
import assert from 'node:assert/strict';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';

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
