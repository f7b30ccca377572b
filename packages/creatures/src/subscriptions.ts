/**
 * GraphQL subscriptions for the creature server, streamed over Server-Sent Events on the same `/graphql`
 * endpoint as queries and mutations (spec 000, "Clients send every query and every mutation to the single
 * endpoint `/graphql`").
 *
 * Protocol: GraphQL over Server-Sent Events (https://github.com/enisdenjo/graphql-sse/blob/master/PROTOCOL.md),
 * "distinct connections mode": the client sends one `GET` or `POST /graphql` with `Accept: text/event-stream`;
 * the response is a `text/event-stream` of `next` events (each one a GraphQL execution result) closed by a
 * `complete` event. The "single connection mode" (stream reservations with `PUT`) is not offered.
 *
 * The change feed is the store's `events` emitter ({@link ChangeSource}): every committed write emits one
 * {@link ChangeEvent}; every open subscription whose filter matches receives it once.
 */
import { type EventEmitter, on } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type ExecutionArgs,
  type ExecutionResult,
  extendSchema,
  GraphQLError,
  type GraphQLSchema,
  execute as graphqlExecute,
  subscribe as graphqlSubscribe,
  parse,
  specifiedRules,
  type ValidationRule,
  validate,
} from 'graphql';
import { createHandler, print, type Request as SseRequest } from 'graphql-sse';
import { withCode } from './errors.ts';
import { answerTooLarge, readBody, sendError } from './http/respond.ts';
import { maskUnexpectedErrors } from './mask.ts';
import { parseWithLimits } from './parse-limits.ts';
import type { ChangeEvent, Creature, Message } from './store.ts';

/**
 * SDL of the subscription part of the schema. It extends the schema of `schema.ts` (it refers to the
 * `Creature` and `Message` types defined there); {@link withSubscriptions} adds it, as the server does.
 */
export const subscriptionTypeDefs = /* GraphQL */ `
"What happened to the object of a change event."
enum ChangeKind {
  "The object was created by a mutation."
  CREATED
  "The object was changed by a mutation."
  UPDATED
  "The object was deleted by a mutation."
  DELETED
}

"A creature was created, changed or deleted."
type CreatureChange {
  kind: ChangeKind!
  "The creature's id (\`001\`..)."
  id: ID!
  "The creature's name (as it was, for a deletion)."
  name: String!
  "The creature as it is now; null when it was deleted."
  creature: Creature
}

"A message was created or changed."
type MessageChange {
  kind: ChangeKind!
  message: Message!
}

"Live change feeds, delivered over Server-Sent Events on \`/graphql\` (GraphQL over SSE protocol)."
type Subscription {
  "Every creature change; with \`id\`, only changes of that creature."
  creatureChanged(id: ID): CreatureChange!
  "Every message change; with \`id\`, only changes of that message."
  messageChanged(id: ID): MessageChange!
}
`;

/** What happened to the object of a change event (`enum ChangeKind` of {@link subscriptionTypeDefs}). */
export const ChangeKind = { CREATED: 'CREATED', UPDATED: 'UPDATED', DELETED: 'DELETED' } as const;
/** One of the values of {@link ChangeKind}. */
export type ChangeKind = (typeof ChangeKind)[keyof typeof ChangeKind];

/**
 * The server's change feed: the store's `events`, which emit `'change'` with a {@link ChangeEvent} after
 * every committed write (see `Store.events`).
 */
export type ChangeSource = EventEmitter<{ change: [ChangeEvent] }>;

/** Payload of `Subscription.creatureChanged` (`type CreatureChange`). */
interface CreatureChange {
  kind: ChangeKind;
  id: string;
  name: string;
  creature: Creature | null;
}

/** Payload of `Subscription.messageChanged` (`type MessageChange`). */
interface MessageChange {
  kind: ChangeKind;
  message: Message;
}

/** Maps a store event to the `Subscription` payload of its entity. */
function toPayload(
  event: ChangeEvent,
): { creatureChanged: CreatureChange } | { messageChanged: MessageChange } {
  const kind = event.kind.toUpperCase() as ChangeKind;
  if (event.entity === 'message') return { messageChanged: { kind, message: event.value } };
  return {
    creatureChanged: {
      kind,
      id: event.id,
      name: event.value.name,
      creature: event.kind === 'deleted' ? null : event.value,
    },
  };
}

/**
 * Adds {@link subscriptionTypeDefs} to an executable schema as its subscription root, keeping its resolvers
 * (graphql-js `extendSchema`). A schema that already has a `Subscription` root (its SDL includes
 * {@link subscriptionTypeDefs}) is returned as it is. Throws if the schema lacks `Creature` or `Message`.
 */
export function withSubscriptions(schema: GraphQLSchema): GraphQLSchema {
  if (schema.getSubscriptionType()) return schema;
  return extendSchema(schema, parse(`${subscriptionTypeDefs}\nextend schema { subscription: Subscription }`));
}

/**
 * Root value of the `Subscription` type: each field returns an async iterator of payloads (graphql-js
 * `subscribe` resolves root fields from the root value). The iterator unsubscribes from `events` when the
 * client goes away (`return()` removes the listener).
 */
export function subscriptionRoot(
  events: ChangeSource,
): Record<string, (args: { id?: string | null }) => unknown> {
  return {
    creatureChanged: ({ id }) =>
      feed(events, (event) => event.entity === 'creature' && (id == null || event.id === id)),
    messageChanged: ({ id }) =>
      feed(events, (event) => event.entity === 'message' && (id == null || event.id === id)),
  };
}

/**
 * A filtered, mapped view of the emitter's events. Deliberately not an async generator: a generator cannot be
 * returned while it awaits the next event, so a client that goes away would keep its listener until the next
 * change; here `return()` ends the underlying `on()` iterator at once, which removes the listener.
 */
function feed(
  events: ChangeSource,
  keep: (event: ChangeEvent) => boolean,
): AsyncIterableIterator<Record<string, unknown>> {
  const source = on(events as EventEmitter, 'change');
  const iterator: AsyncIterableIterator<Record<string, unknown>> = {
    async next() {
      for (;;) {
        const step = await source.next();
        if (step.done) return { done: true, value: undefined };
        const [event] = step.value as [ChangeEvent];
        if (keep(event)) return { done: false, value: toPayload(event) };
      }
    },
    async return() {
      await source.return?.();
      return { done: true, value: undefined };
    },
    async throw(error: unknown) {
      await source.return?.();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

/** Options of {@link createSubscriptionHandler}. */
export interface SubscriptionHandlerOptions {
  /** The server's schema; it must contain the types of {@link subscriptionTypeDefs} ({@link withSubscriptions}). */
  schema: GraphQLSchema;
  /** The server's change feed (the store's `events`). */
  events: ChangeSource;
  /** Validation rules (default graphql-js `specifiedRules`; pass the server's depth and cost limits too). */
  validationRules?: readonly ValidationRule[];
  /**
   * Executor for queries and mutations sent over SSE (the protocol allows them; each gives one `next` event).
   * Defaults to graphql-js `execute` with `rootValue`.
   */
  execute?: (args: ExecutionArgs) => ExecutionResult | Promise<ExecutionResult>;
  /** Root value for queries and mutations (the server's resolvers named after the `Query`/`Mutation` fields). */
  rootValue?: unknown;
  /** Builds the GraphQL context value of one request. */
  context?: (req: IncomingMessage) => unknown;
  /** Largest accepted request body in bytes (default 1 MiB); larger bodies get `413`. */
  maxBodyBytes?: number;
  /** Most event streams open at once (default 1000); more get `503` with a GraphQL error. */
  maxStreams?: number;
  /** Replace messages of unexpected (non-GraphQL) errors by "Internal server error" (default true). */
  maskErrors?: boolean;
  /** Called with each unexpected error (for logging). */
  onUnexpectedError?: (err: unknown) => void;
  /** Keep graphql-js's "Did you mean …?" hints in validation errors (default true). */
  suggestions?: boolean;
}

/** The request handler of {@link createSubscriptionHandler}, plus shutdown. */
export interface EventStreamHandler {
  /**
   * Handles one request; resolves when its response (or event stream) has ended. `body` is the request
   * body when the caller has already read it (within the body limit).
   */
  (req: IncomingMessage, res: ServerResponse, body?: string): Promise<void>;
  /** Event streams open now. */
  readonly open: number;
  /**
   * Ends every open event stream with a `complete` event and answers later requests with `503`, for a
   * graceful shutdown: a server's `close()` would otherwise wait for streams that never end.
   */
  close(): void;
}

/**
 * Handles one GraphQL-over-SSE request: `(req, res) => Promise<void>`, resolving when the stream ends. Route
 * only requests for which {@link isEventStreamRequest} is true to it. Answers `413` for a body over
 * `maxBodyBytes`, `415` for a POST that is not JSON, `400` for a malformed request or invalid document,
 * `405` for a mutation over GET, `503` when `maxStreams` streams are already open; never throws for a
 * client's mistake.
 */
export function createSubscriptionHandler(options: SubscriptionHandlerOptions): EventStreamHandler {
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const maxStreams = options.maxStreams ?? 1000;
  const subscribeRoot = subscriptionRoot(options.events);
  const execute = options.execute ?? ((args: ExecutionArgs) => graphqlExecute(args));
  const maskErrors = options.maskErrors ?? true;
  const streams = new Set<AsyncGenerator<string, void, undefined>>();
  let closing = false;

  const handler = createHandler<IncomingMessage, undefined, Record<string, unknown>>({
    schema: options.schema,
    context: (req) => (options.context ? options.context(req.raw) : {}) as Record<string, unknown>,
    // Parsed within the parse limits (`parse-limits.ts`); graphql-sse validates what this returns.
    onSubscribe: (req, params) => {
      if (typeof params.query !== 'string') return;
      try {
        return {
          schema: options.schema,
          document: parseWithLimits(params.query),
          operationName: params.operationName,
          variableValues: params.variables,
          contextValue: (options.context ? options.context(req.raw) : {}) as Record<string, unknown>,
        };
      } catch (err) {
        if (!(err instanceof GraphQLError)) throw err;
        const body = JSON.stringify({ errors: [withCode(err, 'GRAPHQL_PARSE_FAILED').toJSON()] });
        return [
          body,
          {
            status: 400,
            statusText: 'Bad Request',
            headers: { 'content-type': 'application/json; charset=utf-8' },
          },
        ];
      }
    },
    validate: (schema, document) =>
      validate(schema, document, options.validationRules ?? specifiedRules).map((error) =>
        withCode(error, 'GRAPHQL_VALIDATION_FAILED', options.suggestions ?? true),
      ),
    execute: (args) => execute({ ...args, rootValue: options.rootValue }),
    subscribe: (args) => graphqlSubscribe({ ...args, rootValue: subscribeRoot }),
    // Distinct connections mode only: without a stream token, `PUT` reservations are never created.
    authenticate: () => null,
    onNext: (_ctx, _req, result) =>
      maskUnexpectedErrors(result as ExecutionResult, maskErrors, options.onUnexpectedError),
  });

  async function handleEventStream(
    req: IncomingMessage,
    res: ServerResponse,
    preread?: string,
  ): Promise<void> {
    if (closing) {
      return sendError(res, 503, 'The server is shutting down', {}, 'SERVICE_UNAVAILABLE');
    }
    if (streams.size >= maxStreams) {
      return sendError(
        res,
        503,
        `Too many open event streams (limit ${maxStreams})`,
        {},
        'SERVICE_UNAVAILABLE',
      );
    }
    let body: string | Record<string, unknown> | null = null;
    if (req.method === 'POST') {
      const read =
        preread ??
        (await new Promise<Buffer | undefined>((resolve) => readBody(req, maxBodyBytes, resolve)))?.toString(
          'utf8',
        );
      if (read === undefined) {
        return answerTooLarge(res, `Request body is larger than the limit of ${maxBodyBytes} bytes`);
      }
      body = read;
      if (isJsonContentType(req.headers['content-type'])) {
        try {
          body = JSON.parse(read) as Record<string, unknown>;
        } catch {
          return sendError(res, 400, 'Request body is not valid JSON', {}, 'BAD_REQUEST');
        }
        if (typeof body !== 'object' || body === null || Array.isArray(body)) {
          return sendError(res, 400, 'Request body must be a JSON object', {}, 'BAD_REQUEST');
        }
      }
    }
    const request: SseRequest<IncomingMessage, undefined> = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      headers: {
        get(key: string) {
          const header = req.headers[key.toLowerCase()];
          return Array.isArray(header) ? header.join('\n') : header;
        },
      },
      body,
      raw: req,
      context: undefined,
    };
    const [responseBody, init] = await handler(request);
    res.writeHead(init.status, init.statusText, init.headers as Record<string, string>);
    if (!responseBody || typeof responseBody === 'string') {
      await new Promise<void>((resolve) => res.end(responseBody ?? undefined, () => resolve()));
      return;
    }
    streams.add(responseBody);
    const stop = () => void responseBody.return(undefined);
    res.once('close', stop);
    try {
      res.flushHeaders();
      for await (const chunk of responseBody) {
        if (!res.writable) break;
        const ok = await new Promise<boolean>((resolve) => res.write(chunk, (err) => resolve(!err)));
        if (!ok) break;
      }
    } finally {
      streams.delete(responseBody);
      res.off('close', stop);
      await responseBody.return(undefined);
      // Ended by close(): say so with the protocol's `complete` event, so the client does not retry.
      if (closing && res.writable) res.write(print({ event: 'complete', data: null }));
      if (!res.writableEnded) await new Promise<void>((resolve) => res.end(() => resolve()));
    }
  }

  Object.defineProperty(handleEventStream, 'open', { get: () => streams.size, enumerable: true });
  return Object.assign(handleEventStream as typeof handleEventStream & { readonly open: number }, {
    close() {
      closing = true;
      for (const stream of streams) void stream.return(undefined);
    },
  });
}

/**
 * True when a request asks for an event stream (`Accept: text/event-stream`, as graphql-sse clients send),
 * i.e. it belongs to {@link createSubscriptionHandler} rather than to the plain GraphQL-over-HTTP handler.
 */
export function isEventStreamRequest(req: IncomingMessage): boolean {
  // graphql-sse matches this exact value; anything else is a plain GraphQL-over-HTTP request.
  return req.headers.accept === 'text/event-stream';
}

function isJsonContentType(value: string | undefined): boolean {
  return value?.toLowerCase().includes('application/json') ?? false;
}
