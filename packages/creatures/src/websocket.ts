/**
 * GraphQL over WebSocket on `/graphql`: the `graphql-transport-ws` protocol
 * (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md) served by the `graphql-ws` library on
 * a `ws` server that shares the HTTP server's port (an HTTP/1.1 `Upgrade` of `/graphql`). Apollo Client's
 * `GraphQLWsLink`, urql's `subscriptionExchange` with a graphql-ws client and graphql-ws's own client
 * speak it, for subscriptions, queries and mutations.
 *
 * Every operation goes through the same checks as over HTTP: persisted queries and the allow-list
 * (`PersistedQueries`, registrations counted per client address), the parse limits
 * (`parse-limits.ts`), graphql-js validation with the depth limit, the introspection switch and the
 * variable-position rule, and the cost limit with the operation's coerced variables. Unexpected resolver
 * errors are masked as over HTTP. Per connection: the `connection_init` message must arrive within
 * {@link WebSocketOptions.connectionInitTimeoutMs} (else close code 4408), a message may be at most
 * {@link WebSocketOptions.maxMessageBytes} (else close code 1009), and at most
 * {@link WebSocketOptions.maxOperations} operations may be in flight (a further `subscribe` gets an
 * `error` message with code `TOO_MANY_OPERATIONS`). A browser's upgrade must come from the server's own
 * origin or one of the CORS origins (else `403`). Subscriptions are fed by the store's change events,
 * which with PostgreSQL carry every instance's changes.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  execute as graphqlExecute,
  subscribe as graphqlSubscribe,
  type ValidationRule,
} from 'graphql';
import { handleProtocols } from 'graphql-ws';
import { useServer as serveGraphQLWs } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import { checkCost, type KnownListSizes } from './cost.ts';
import { type CreatureErrorCode, creatureError } from './errors.ts';
import type { PersistedQueries } from './http/persisted.ts';
import type { QueryLimits } from './limits.ts';
import { maskUnexpectedErrors } from './mask.ts';
import { checkDocument, coerceVariables } from './operation-checks.ts';
import { type ChangeSource, subscriptionRoot } from './subscriptions.ts';

/** Options of {@link attachGraphQLWs}. */
export interface WebSocketOptions {
  /** The HTTP server whose `upgrade` requests of `/graphql` become WebSocket connections. */
  httpServer: Server;
  /** The executable schema, with its `Subscription` type. */
  schema: GraphQLSchema;
  /** The change feed of the subscriptions. */
  events: ChangeSource;
  /** The resolvers' context value. */
  context: unknown;
  /** Persisted queries and the allow-list, shared with HTTP. */
  persisted: PersistedQueries;
  /** Depth and cost limits. */
  limits: QueryLimits;
  /** Validation rules (graphql-js's, the depth limit, the introspection switch; not the cost rule). */
  rules: readonly ValidationRule[];
  /** List sizes of the current data, for the cost model. */
  known: () => KnownListSizes;
  /** Keep graphql-js's "Did you mean …?" hints. */
  suggestions: boolean;
  /** Replace messages of unexpected errors by "Internal server error". */
  maskErrors: boolean;
  /** Called with each unexpected error. */
  onUnexpectedError?: (err: unknown) => void;
  /** Largest message in bytes (the HTTP body limit); a larger one closes the connection with 1009. */
  maxMessageBytes: number;
  /** Most operations in flight on one connection (default 100). */
  maxOperations?: number;
  /** Most open connections (default 1000); more upgrades get `503`. */
  maxConnections?: number;
  /** How long a connection may wait before its `connection_init`, in ms (default 3000). */
  connectionInitTimeoutMs?: number;
  /** Origins allowed besides the server's own: a list, or `'*'` for any (the CORS origins). */
  corsOrigins: readonly string[] | '*';
}

/** The WebSocket transport of one server. */
export interface WebSocketTransport {
  /** Open WebSocket connections now. */
  readonly open: number;
  /** Closes every connection (code 1001, "Going away") and stops accepting upgrades. */
  close(): Promise<void>;
}

/** Whether a browser's `Origin` may open a WebSocket: the server's own (same host) or a CORS origin. */
function originAllowed(req: IncomingMessage, cors: readonly string[] | '*'): boolean {
  const origin = req.headers.origin;
  if (origin === undefined || cors === '*' || cors.includes(origin)) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

function refuseUpgrade(
  socket: Duplex,
  status: number,
  reason: string,
  message: string,
  code?: CreatureErrorCode,
): void {
  const body = JSON.stringify({ errors: [code ? { message, extensions: { code } } : { message }] });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * Serves GraphQL over WebSocket (`graphql-transport-ws`) on `/graphql` of `options.httpServer` (see the
 * module comment). Upgrades of other paths get `404`.
 */
export function attachGraphQLWs(options: WebSocketOptions): WebSocketTransport {
  const maxOperations = options.maxOperations ?? 100;
  const maxConnections = options.maxConnections ?? 1000;
  const { schema, limits, persisted } = options;
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: options.maxMessageBytes,
    handleProtocols: (protocols) => handleProtocols(protocols),
  });
  const subscribeRoot = subscriptionRoot(options.events);

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    if ((q < 0 ? url : url.slice(0, q)) !== '/graphql') {
      refuseUpgrade(socket, 404, 'Not Found', `No WebSocket endpoint at ${url}; use /graphql`);
      return;
    }
    if (!originAllowed(req, options.corsOrigins)) {
      refuseUpgrade(socket, 403, 'Forbidden', `Origin ${req.headers.origin} may not open a WebSocket here`);
      return;
    }
    if (wss.clients.size >= maxConnections) {
      refuseUpgrade(
        socket,
        503,
        'Service Unavailable',
        `Too many WebSocket connections (limit ${maxConnections})`,
        'SERVICE_UNAVAILABLE',
      );
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      wss.emit('connection', ws, req);
      // A protocol error of the client (a message over `maxPayload`, an invalid frame) makes `ws` close
      // the connection with its code (1009, 1002); graphql-ws's listener would log it to the console
      // and close with 1011 instead.
      ws.removeAllListeners('error');
      ws.on('error', () => {});
    });
  };
  options.httpServer.on('upgrade', onUpgrade);

  const refuse = (message: string, code: CreatureErrorCode): readonly GraphQLError[] => [
    creatureError(message, code),
  ];

  const server = serveGraphQLWs(
    {
      schema,
      connectionInitWaitTimeout: options.connectionInitTimeoutMs ?? 3000,
      onSubscribe(ctx, _id, payload) {
        if (Object.keys(ctx.subscriptions).length > maxOperations) {
          return refuse(
            `Too many operations in flight on this connection (limit ${maxOperations})`,
            'TOO_MANY_OPERATIONS',
          );
        }
        // graphql-ws's clients always send a `query` string: an empty one names no text (a persisted query).
        const { query: sent, ...rest } = payload as unknown as Record<string, unknown>;
        const resolved = persisted.resolve(
          sent === '' ? rest : { ...rest, query: sent },
          ctx.extra.request.socket.remoteAddress,
        );
        if ('error' in resolved) return refuse(resolved.error.message, resolved.error.code);
        const query = resolved.params.query;
        if (typeof query !== 'string') return refuse('Missing query', 'BAD_REQUEST');
        const checked = checkDocument(schema, query, options.rules, options.suggestions);
        if (checked.errors) return checked.errors;
        const { document } = checked;
        const operationName = payload.operationName ?? undefined;
        const operation = getOperationAST(document, operationName);
        if (!operation) return refuse('Unable to identify the operation to run', 'BAD_REQUEST');
        const coerced = coerceVariables(schema, operation, payload.variables ?? {}, options.suggestions);
        if (coerced.errors) return coerced.errors;
        const tooCostly = checkCost(schema, document, operation, coerced.coerced, limits, options.known());
        if (tooCostly) return [tooCostly];
        const args: ExecutionArgs = {
          schema,
          document,
          operationName,
          variableValues: payload.variables ?? undefined,
          contextValue: options.context,
        };
        if (operation.operation === 'subscription') args.rootValue = subscribeRoot;
        return args;
      },
      execute: (args) => graphqlExecute(args),
      subscribe: (args) => graphqlSubscribe(args),
      onNext: (_ctx, _id, _payload, _args, result) =>
        maskUnexpectedErrors(result as ExecutionResult, options.maskErrors, options.onUnexpectedError),
    },
    wss,
  );

  return {
    get open() {
      return wss.clients.size;
    },
    async close() {
      options.httpServer.off('upgrade', onUpgrade);
      // Closes every client with 1001 "Going away" and the ws server.
      await server.dispose();
    },
  };
}
