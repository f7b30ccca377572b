/**
 * `sandbox mcp`: the MCP server over stdio, on the local runtime or on a remote one
 * (`--url`, `--api-key` or `$SANDBOX_URL` / `$SANDBOX_API_KEY`). `--config <file>` reads the operator's
 * limits (JSON of `McpConfig`: maxBoxes, maxCpus, maxMemoryMib, maxLifetimeSeconds, allowNet,
 * hostPaths, maxOutputBytes, maxKeptBytes, maxCommands). Logs go to stderr; stdout carries the protocol.
 */
import { readFileSync } from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import { JsRuntime } from '../js-runtime.ts';
import type { McpConfig } from '../mcp/config.ts';

/** How the program builds its local runtime (global `--home`, `--registry`). */
export interface McpCommandDeps {
  runtime(command: Command): JsRuntime;
}

/** Reads an MCP configuration file. @throws InvalidArgumentError when it is not a JSON object. */
export function readMcpConfig(path: string): Partial<McpConfig> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new InvalidArgumentError(`--config ${path}: ${(error as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new InvalidArgumentError(`--config ${path}: must hold a JSON object`);
  }
  return parsed as Partial<McpConfig>;
}

/** Adds `sandbox mcp` to `program`. */
export function addMcpCommand(program: Command, deps: McpCommandDeps): void {
  program
    .command('mcp')
    .description('serve the sandbox to AI agents over MCP (stdio): boxes, commands, files, stateful code')
    .option('--url <url>', 'use the boxes of a sandbox serve server (default $SANDBOX_URL, else local)')
    .option('--api-key <key>', 'API key of that server (default $SANDBOX_API_KEY)')
    .option('--config <file>', 'operator limits and policies (JSON; see the README, "MCP server")')
    .action(async (opts: { url?: string; apiKey?: string; config?: string }, command: Command) => {
      const { serveStdio } = await import('../mcp/stdio.ts');
      const { runtimeProvider } = await import('../mcp/provider.ts');
      const url = opts.url ?? (process.env.SANDBOX_URL || undefined);
      const apiKey = opts.apiKey ?? (process.env.SANDBOX_API_KEY || undefined);
      const runtime = url ? new JsRuntime({ url, ...(apiKey ? { apiKey } : {}) }) : deps.runtime(command);
      const config = opts.config ? readMcpConfig(opts.config) : {};
      await serveStdio(runtimeProvider(runtime), config);
      runtime.close();
    });
}
