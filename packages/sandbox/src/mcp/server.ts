/**
 * The MCP server of the sandbox: one `McpServer` (official `@modelcontextprotocol/sdk`) per
 * MCP session, with the box, command, file and code tools over a {@link BoxProvider}. Transports:
 * stdio (`stdio.ts`, `sandbox mcp`) and Streamable HTTP (`http.ts`, `/mcp` on `sandbox serve`).
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import pkg from '@seed/sandbox/package.json' with { type: 'json' };
import { type McpConfig, mcpConfig } from './config.ts';
import type { BoxProvider } from './provider.ts';
import { McpSession, type ToolLogger } from './session.ts';
import { boxTools } from './tools-boxes.ts';
import { browserTools } from './tools-browser.ts';
import { codeTools } from './tools-code.ts';
import { computerTools } from './tools-computer.ts';
import { execTools } from './tools-exec.ts';
import { fileTools } from './tools-files.ts';

export { type McpConfig, mcpConfig } from './config.ts';
export { type BoxProvider, contextProvider, runtimeProvider } from './provider.ts';
export type { ToolLogEntry, ToolLogger } from './session.ts';

/** Guidance sent to clients at initialization (MCP `instructions`). */
const INSTRUCTIONS =
  'Sandbox boxes are isolated Linux containers for running untrusted code. Start with create_box ' +
  "(kind 'code' for stateful Python through run_code), then use exec, the file tools and run_code with the " +
  'returned box id. Boxes have no network unless allowed, and are removed when the session ends unless ' +
  'created with persist.';

/** A logger writing one JSON line per tool call to stderr (never arguments nor output). */
export const stderrLogger: ToolLogger = (entry) => {
  process.stderr.write(`${JSON.stringify({ mcp_tool_call: entry })}\n`);
};

/** An MCP server and the session it serves. */
export interface SandboxMcp {
  server: McpServer;
  session: McpSession;
}

/**
 * A new MCP server with every tool, serving one session over `provider`.
 * @param config operator configuration (checked by {@link mcpConfig}).
 * @throws BoxError `invalid_option` for a bad `config`.
 */
export function createSandboxMcp(
  provider: BoxProvider,
  config: Partial<McpConfig> = {},
  log: ToolLogger = stderrLogger,
): SandboxMcp {
  const session = new McpSession(provider, mcpConfig(config), log);
  const server = new McpServer(
    { name: 'seed-sandbox', title: 'Seed sandbox', version: pkg.version },
    { instructions: INSTRUCTIONS, capabilities: { tools: {}, logging: {} } },
  );
  boxTools(server, session);
  execTools(server, session);
  fileTools(server, session);
  codeTools(server, session);
  computerTools(server, session);
  browserTools(server, session);
  const closeServer = server.close.bind(server);
  server.server.onclose = () => void session.close();
  server.close = async () => {
    await session.close();
    await closeServer();
  };
  return { server, session };
}
