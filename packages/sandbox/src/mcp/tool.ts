/**
 * Registration of one MCP tool: the handler's result becomes structured content
 * (with its JSON as text for clients that read text only), a thrown error becomes an MCP tool error
 * (`isError`, the `BoxError` code and message; the server keeps running), and every call is logged with
 * tool, box, outcome and duration.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import { BoxError } from '../errors.ts';
import type { McpSession, ToolLogEntry } from './session.ts';

/** What a tool handler gets besides its arguments. */
export type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Extra content of a result (images, long text) beside its structured part. */
export type ToolContent = CallToolResult['content'];

/** A handler's answer: the structured result and optional extra content. */
export interface ToolAnswer<O> {
  result: O;
  content?: ToolContent;
}

/** A tool definition. */
export interface ToolSpec<I extends z.ZodRawShape, O extends z.ZodRawShape> {
  name: string;
  title: string;
  description: string;
  input: I;
  output: O;
  /** True for tools that change nothing (MCP `readOnlyHint`). */
  readOnly?: boolean;
  /** True for tools that remove or overwrite (MCP `destructiveHint`). */
  destructive?: boolean;
  run(args: z.infer<z.ZodObject<I>>, extra: ToolExtra): Promise<ToolAnswer<z.infer<z.ZodObject<O>>>>;
}

/** The stable code of an error (a `BoxError` code, `cancelled` for an aborted call, else `internal`). */
export function codeOf(error: unknown, signal?: AbortSignal): string {
  if (signal?.aborted) return 'cancelled';
  if (error instanceof BoxError) return error.code;
  return 'internal';
}

/** Registers `spec` on `server` for `session`. */
export function defineTool<I extends z.ZodRawShape, O extends z.ZodRawShape>(
  server: McpServer,
  session: McpSession,
  spec: ToolSpec<I, O>,
): void {
  const handler = async (args: z.infer<z.ZodObject<I>>, extra: ToolExtra): Promise<CallToolResult> => {
    const started = performance.now();
    const box =
      typeof (args as { box?: unknown }).box === 'string' ? (args as { box: string }).box : undefined;
    // The log line is written after the answer has gone out (a write to a stderr pipe the client reads
    // would otherwise delay it).
    const done = (outcome: 'ok' | 'error' | 'cancelled', code?: string) => {
      const entry: ToolLogEntry = {
        session: session.id,
        tool: spec.name,
        ...(box !== undefined ? { box } : {}),
        outcome,
        ...(code ? { code } : {}),
        durationMs: Math.round((performance.now() - started) * 100) / 100,
      };
      setImmediate(() => session.log(entry));
    };
    try {
      const answer = await spec.run(args, extra);
      done('ok');
      const structured = answer.result as Record<string, unknown>;
      return {
        content: [{ type: 'text', text: JSON.stringify(structured) }, ...(answer.content ?? [])],
        structuredContent: structured,
      };
    } catch (error) {
      const code = codeOf(error, extra.signal);
      done(code === 'cancelled' ? 'cancelled' : 'error', code);
      const message = error instanceof Error ? error.message : String(error);
      const field = error instanceof BoxError && error.field ? ` (field ${error.field})` : '';
      return { isError: true, content: [{ type: 'text', text: `${code}: ${message}${field}` }] };
    }
  };
  server.registerTool(
    spec.name,
    {
      title: spec.title,
      description: spec.description,
      inputSchema: spec.input,
      outputSchema: spec.output,
      annotations: {
        title: spec.title,
        readOnlyHint: spec.readOnly ?? false,
        destructiveHint: spec.destructive ?? false,
        openWorldHint: false,
      },
    },
    // The SDK infers the callback from the schemas; the cast keeps one generic handler.
    handler as never,
  );
}

/** Sends a progress notification when the caller asked for them (a `progressToken` in `_meta`). */
export async function progress(
  extra: ToolExtra,
  value: number,
  message: string,
  total?: number,
): Promise<void> {
  const token = extra._meta?.progressToken;
  if (token === undefined) return;
  await extra
    .sendNotification({
      method: 'notifications/progress',
      params: { progressToken: token, progress: value, ...(total !== undefined ? { total } : {}), message },
    })
    .catch(() => {});
}

/** Sends progress notifications of one call (see {@link progressReporter}). */
export interface ProgressReporter {
  /**
   * Notifies `value` (raised to above the last value sent, as MCP requires progress to increase) of
   * `total`, unless one was sent less than the reporter's interval ago and `force` is not set.
   */
  update(value: number, message: string, total?: number, force?: boolean): void;
  /** The last value sent (0 before any). */
  readonly last: number;
}

/**
 * A {@link ProgressReporter} for the call of `extra`: at most one notification per `intervalMs` (ms),
 * except forced ones; nothing is sent when the caller gave no `progressToken`.
 */
export function progressReporter(extra: ToolExtra, intervalMs = 100): ProgressReporter {
  let last = 0;
  let sentAt = Number.NEGATIVE_INFINITY;
  return {
    update(value, message, total, force = false) {
      const now = performance.now();
      if (!force && now - sentAt < intervalMs) return;
      sentAt = now;
      last = Math.max(value, last + 1);
      void progress(extra, last, message, total === undefined ? undefined : Math.max(total, last));
    },
    get last() {
      return last;
    },
  };
}
