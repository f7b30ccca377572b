/**
 * `sandbox mcp` over stdio: what desktop agents start. One session per process; it ends
 * (its boxes removed unless persisted) when the client closes stdin or the process gets SIGINT/SIGTERM.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { McpConfig } from './config.ts';
import type { BoxProvider } from './provider.ts';
import { createSandboxMcp, stderrLogger } from './server.ts';
import type { ToolLogger } from './session.ts';

/**
 * Serves one MCP session on this process's stdin/stdout until the client goes away or a signal comes;
 * then removes the session's boxes and resolves.
 */
export async function serveStdio(
  provider: BoxProvider,
  config: Partial<McpConfig> = {},
  log: ToolLogger = stderrLogger,
): Promise<void> {
  const { server, session } = createSandboxMcp(provider, config, log);
  const transport = new StdioServerTransport();
  let signals = 0;
  const ended = new Promise<void>((resolve) => {
    process.stdin.once('end', () => resolve());
    // The first signal ends the session (its boxes are removed); a second one exits at once.
    const onSignal = () => {
      signals += 1;
      if (signals > 1) process.exit(130);
      resolve();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
  await server.connect(transport);
  await ended;
  await session.close();
  await server.close().catch(() => {});
}
