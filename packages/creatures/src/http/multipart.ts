/**
 * Streaming answers on `/graphql` beside graphql-sse's subscriptions:
 *
 * - Incremental delivery (`@defer`/`@stream`) as `multipart/mixed` (RFC 2046 §5.1 multipart with
 *   boundary `-`, one `application/json` part per payload, closed by `-----`; Apollo's "incremental v0.2"
 *   spec, `incrementalSpec=v0.2`, or the older `deferSpec=20220824` when the client asks for it) or as
 *   Server-Sent Events (`event: next` per payload, then
 *   `event: complete`, as graphql-sse's distinct connections mode).
 * - Apollo Client's multipart HTTP subscriptions (Apollo "multipart subscriptions" protocol,
 *   `subscriptionSpec=1.0`): boundary `graphql`, each event as `{"payload": <execution result>}`, a `{}`
 *   heartbeat part every {@link HEARTBEAT_MS} ms, and the closing boundary when the stream ends.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type ExecutionResult,
  GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  subscribe,
  type ValidationRule,
} from 'graphql';
import type { CreatureErrorCode } from '../errors.ts';
import type { IncrementalPayload } from '../incremental.ts';
import { maskUnexpectedErrors } from '../mask.ts';
import { checkDocument } from '../operation-checks.ts';
import { type ChangeSource, subscriptionRoot } from '../subscriptions.ts';

/** Interval of the heartbeat parts of a multipart subscription, in ms. */
export const HEARTBEAT_MS = 5000;

async function pump(
  res: ServerResponse,
  payloads: AsyncGenerator<IncrementalPayload, void, void>,
  write: (payload: IncrementalPayload) => string,
): Promise<void> {
  const stop = () => void payloads.return(undefined);
  res.once('close', stop);
  try {
    for await (const payload of payloads) {
      if (!res.writable) break;
      res.write(write(payload));
    }
  } finally {
    res.off('close', stop);
  }
}

/**
 * Writes incremental payloads as `multipart/mixed; boundary="-"`, labelled with the format they are in:
 * `incrementalSpec=v0.2` (graphql-js 17's, the default) or `deferSpec=20220824` (`defer-20220824.ts`).
 */
export async function writeIncrementalMultipart(
  res: ServerResponse,
  payloads: AsyncGenerator<IncrementalPayload, void, void>,
  spec: 'incrementalSpec=v0.2' | 'deferSpec=20220824' = 'incrementalSpec=v0.2',
): Promise<void> {
  res.writeHead(200, {
    'content-type': `multipart/mixed; boundary="-"; ${spec}`,
    'cache-control': 'no-store',
  });
  res.flushHeaders();
  await pump(
    res,
    payloads,
    (p) => `\r\n---\r\ncontent-type: application/json; charset=utf-8\r\n\r\n${JSON.stringify(p)}`,
  );
  if (!res.writableEnded) res.end('\r\n-----\r\n');
}

/** Writes incremental payloads as Server-Sent Events: `next` per payload, then `complete`. */
export async function writeIncrementalSse(
  res: ServerResponse,
  payloads: AsyncGenerator<IncrementalPayload, void, void>,
): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  res.flushHeaders();
  await pump(res, payloads, (p) => `event: next\ndata: ${JSON.stringify(p)}\n\n`);
  if (!res.writableEnded) res.end('event: complete\ndata:\n\n');
}

/** Options of {@link createMultipartSubscriptions}. */
export interface MultipartSubscriptionOptions {
  schema: GraphQLSchema;
  events: ChangeSource;
  /** The server's validation rules (depth and cost limits included). */
  rules: readonly ValidationRule[];
  context: unknown;
  /** Replace messages of unexpected errors by "Internal server error" (`mask.ts`). */
  maskErrors: boolean;
  /** Called with each unexpected error of an event's execution. */
  onUnexpectedError?: (err: unknown) => void;
}

/** Handles one multipart subscription request with its parameters; `close()` ends every open stream. */
export interface MultipartSubscriptions {
  (
    req: IncomingMessage,
    res: ServerResponse,
    params: { query: string; variables?: Record<string, unknown>; operationName?: string },
  ): Promise<void>;
  close(): void;
}

/** Whether an `Accept` header asks for Apollo's multipart subscriptions. */
export function wantsMultipartSubscription(accept: string | undefined): boolean {
  return accept?.includes('multipart/mixed') === true && accept.includes('subscriptionSpec=1.0');
}

/**
 * Creates the multipart subscription handler. A request that is not a valid subscription is answered
 * `400` with a JSON GraphQL error (codes `GRAPHQL_PARSE_FAILED`, `GRAPHQL_VALIDATION_FAILED`,
 * `BAD_REQUEST`); errors of one event travel in its payload, masked like any other.
 */
export function createMultipartSubscriptions(options: MultipartSubscriptionOptions): MultipartSubscriptions {
  const open = new Set<AsyncGenerator<ExecutionResult> | AsyncIterableIterator<ExecutionResult>>();
  const refuse = (res: ServerResponse, error: GraphQLError, code: CreatureErrorCode) => {
    const json = error.toJSON();
    const body = JSON.stringify({
      errors: [{ ...json, extensions: { ...json.extensions, code: json.extensions?.code ?? code } }],
    });
    res.writeHead(400, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
  };
  const mask = (result: ExecutionResult): ExecutionResult =>
    maskUnexpectedErrors(result, options.maskErrors, options.onUnexpectedError) ?? result;

  const handler = async (
    _req: IncomingMessage,
    res: ServerResponse,
    params: { query: string; variables?: Record<string, unknown>; operationName?: string },
  ) => {
    const checked = checkDocument(options.schema, params.query, options.rules);
    if (checked.errors) return refuse(res, checked.errors[0]!, 'GRAPHQL_VALIDATION_FAILED');
    const { document } = checked;
    if (getOperationAST(document, params.operationName)?.operation !== 'subscription') {
      return refuse(
        res,
        new GraphQLError('multipart/mixed with subscriptionSpec=1.0 is for subscriptions'),
        'BAD_REQUEST',
      );
    }
    const result = await subscribe({
      schema: options.schema,
      document,
      variableValues: params.variables,
      operationName: params.operationName,
      contextValue: options.context,
      rootValue: subscriptionRoot(options.events),
    });
    if (!(Symbol.asyncIterator in result)) {
      return refuse(
        res,
        (result as ExecutionResult).errors?.[0] ?? new GraphQLError('subscription failed'),
        'BAD_REQUEST',
      );
    }
    const stream = result as AsyncGenerator<ExecutionResult>;
    open.add(stream);
    const part = (json: string) =>
      `\r\n--graphql\r\ncontent-type: application/json; charset=utf-8\r\n\r\n${json}`;
    res.writeHead(200, {
      'content-type': 'multipart/mixed; boundary="graphql"; subscriptionSpec="1.0"',
      'cache-control': 'no-store',
    });
    res.write(part('{}'));
    const heartbeat = setInterval(() => res.write(part('{}')), HEARTBEAT_MS);
    const stop = () => void stream.return?.(undefined);
    res.once('close', stop);
    try {
      for await (const event of stream) {
        if (!res.writable) break;
        res.write(part(JSON.stringify({ payload: mask(event) })));
      }
    } finally {
      clearInterval(heartbeat);
      res.off('close', stop);
      open.delete(stream);
      if (!res.writableEnded) res.end('\r\n--graphql--\r\n');
    }
  };
  return Object.assign(handler, {
    close() {
      for (const stream of open) void stream.return?.(undefined);
    },
  });
}
