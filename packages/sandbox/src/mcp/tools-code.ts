/**
 * Code tools: `run_code` on the stateful Jupyter contexts of a Python box
 * (`box.interpreter`, src/interpreter/): variables survive between calls, charts come back as MCP image
 * content, text results and logs as text; `create_context` and `reset_context`. Cancelling a call
 * interrupts the kernel.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import type { ExecutionResult } from '../interpreter/types.ts';
import { shorten } from './output.ts';
import type { McpSession } from './session.ts';
import { defineTool, progress, type ToolContent } from './tool.ts';

const boxArg = z.string().min(1).describe('box id or name (a box with Python and Jupyter, e.g. kind code)');
const contextArg = z.string().min(1).describe('context id from create_context; default the default context');

/** Image formats of results, as MIME types. */
const IMAGES = [
  ['png', 'image/png'],
  ['jpeg', 'image/jpeg'],
] as const;

/** Registers the code tools. */
export function codeTools(server: McpServer, session: McpSession): void {
  defineTool(server, session, {
    name: 'run_code',
    title: 'Run Python code (stateful)',
    description:
      'Runs code in a stateful Python (Jupyter) context of the box: variables, imports and definitions stay ' +
      'for the next run_code call. The value of the last expression is the result; matplotlib figures come ' +
      'back as images. An exception is reported in error (with traceback), not as a failed call.',
    input: {
      box: boxArg,
      code: z
        .string()
        .min(1)
        .max(1024 * 1024),
      context: contextArg.optional(),
      timeout_seconds: z
        .number()
        .positive()
        .max(3600)
        .optional()
        .describe('interrupt the code after this long'),
    },
    output: {
      text: z.string().nullable().describe('text of the main result'),
      results: z.array(z.object({ formats: z.array(z.string()), text: z.string().nullable() })),
      stdout: z.string(),
      stderr: z.string(),
      error: z.object({ name: z.string(), value: z.string(), traceback: z.string() }).nullable(),
      execution_count: z.number().nullable(),
      truncated: z.boolean(),
    },
    async run(args, extra) {
      const box = await session.box(args.box);
      let lines = 0;
      const execution = await box.interpreter.execute(args.code, {
        ...(args.context ? { context: args.context } : {}),
        ...(args.timeout_seconds ? { timeoutMs: args.timeout_seconds * 1000 } : {}),
        signal: extra.signal,
        onStdout: () => void progress(extra, ++lines, 'output'),
      });
      const limit = session.config.maxOutputBytes;
      let truncated = false;
      const cut = (text: string) => {
        const s = shorten(text, limit);
        truncated ||= s.truncated;
        return s.truncated ? `${s.text}\n[truncated: ${s.totalBytes} bytes]` : s.text;
      };
      const content: ToolContent = [];
      for (const result of execution.results) content.push(...imagesOf(result));
      return {
        result: {
          text: execution.text === undefined ? null : cut(execution.text),
          results: execution.results.map((r) => ({
            formats: Object.keys(r).filter((k) => k !== 'isMainResult' && k !== 'extra'),
            text: r.text === undefined ? null : cut(r.text),
          })),
          stdout: cut(execution.logs.stdout.join('')),
          stderr: cut(execution.logs.stderr.join('')),
          error: execution.error
            ? {
                name: execution.error.name,
                value: execution.error.value,
                traceback: cut(execution.error.traceback),
              }
            : null,
          execution_count: execution.executionCount,
          truncated,
        },
        content,
      };
    },
  });

  defineTool(server, session, {
    name: 'create_context',
    title: 'New code context',
    description:
      'Creates a separate stateful code context (its own variables) in the box; pass its id as context to run_code.',
    input: {
      box: boxArg,
      language: z.enum(['python']).default('python'),
      cwd: z
        .string()
        .regex(/^\//, 'must be an absolute path')
        .optional()
        .describe('working directory; default /home/user or /root'),
    },
    output: { context: z.string(), language: z.string(), cwd: z.string() },
    async run(args) {
      const box = await session.box(args.box);
      const ctx = await box.interpreter.createContext({
        language: args.language,
        ...(args.cwd ? { cwd: args.cwd } : {}),
      });
      return { result: { context: ctx.id, language: ctx.language, cwd: ctx.cwd } };
    },
  });

  defineTool(server, session, {
    name: 'reset_context',
    title: 'Reset a code context',
    description: 'Restarts a code context: all its variables and imports are cleared.',
    input: { box: boxArg, context: contextArg },
    output: { context: z.string(), reset: z.boolean() },
    destructive: true,
    async run(args) {
      const box = await session.box(args.box);
      await box.interpreter.restartContext(args.context);
      return { result: { context: args.context, reset: true } };
    },
  });
}

/** Image content of a result's PNG or JPEG. */
function imagesOf(result: ExecutionResult): ToolContent {
  const content: ToolContent = [];
  for (const [key, mimeType] of IMAGES) {
    const data = result[key];
    if (typeof data === 'string') content.push({ type: 'image', data, mimeType });
  }
  return content;
}
