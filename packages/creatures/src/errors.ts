/**
 * The stable error codes of the creature server: every error it answers carries one as `extensions.code`
 * (GraphQL over HTTP, WebSocket and SSE alike). {@link CREATURE_ERRORS} is the one table of the codes, each
 * with its HTTP status and when it is raised; the README's "Errors" section shows the same table (a test
 * keeps them equal). Statuses come from the code and the transport's rules, never from a message's text.
 *
 * The status is the one of a request error answered as `application/graphql-response+json` (GraphQL over
 * HTTP §6.4.2). Answered as `application/json` (§6.4.1), a GraphQL request error (parse, validation, limits,
 * variables, persisted queries) has 200, while a malformed HTTP request keeps its 4xx; a field error (an
 * answer with `data`) has 200 with either media type.
 */

import { GraphQLError } from 'graphql';

/** One code's row: `status` (null: sent only as a WebSocket `error` message) and when it is raised. */
export interface CreatureErrorInfo {
  readonly status: number | null;
  readonly when: string;
}

/** Every code with its status and cause, in the order of the README's table. */
export const CREATURE_ERRORS = {
  GRAPHQL_PARSE_FAILED: { status: 400, when: 'the query text does not parse' },
  GRAPHQL_VALIDATION_FAILED: { status: 400, when: 'the document fails a GraphQL validation rule' },
  BAD_USER_INPUT: {
    status: 400,
    when: 'a variable does not fit its type; as a field error (200), an argument value the data rules refuse',
  },
  BAD_REQUEST: {
    status: 400,
    when: 'a malformed GraphQL-over-HTTP request (no query, parameters of the wrong type, no operation to run); 405 for a mutation over GET',
  },
  NOT_FOUND: { status: 200, when: 'field error: a mutation names a record that does not exist' },
  INTROSPECTION_DISABLED: { status: 400, when: '`__schema` or `__type` queried while introspection is off' },
  QUERY_TOO_LARGE: { status: 400, when: 'the query text is over its length or token limit' },
  QUERY_TOO_NESTED: { status: 400, when: 'the query text nests brackets deeper than the parse limit' },
  QUERY_TOO_DEEP: { status: 400, when: 'an operation selects deeper than `maxDepth`' },
  QUERY_TOO_COSTLY: {
    status: 400,
    when: 'the estimated cost is over `maxCost` (`extensions.cost`, `maxCost`, `field`)',
  },
  PERSISTED_QUERY_NOT_SUPPORTED: {
    status: 400,
    when: 'a persisted query while automatic persisted queries are off',
  },
  PERSISTED_QUERY_NOT_FOUND: {
    status: 400,
    when: 'a persisted-query hash the server does not hold (the client sends the text)',
  },
  PERSISTED_QUERY_HASH_MISMATCH: { status: 400, when: 'the sent text does not hash to the sent SHA-256' },
  PERSISTED_QUERY_NOT_IN_LIST: { status: 400, when: 'a query outside the allow list of trusted documents' },
  CSRF_PREFLIGHT_REQUIRED: {
    status: 400,
    when: 'a POST a browser may send cross-site without a preflight, without `GraphQL-Require-Preflight`',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    when: 'a POST body that is neither JSON nor `application/graphql` in UTF-8',
  },
  PAYLOAD_TOO_LARGE: { status: 413, when: 'a request body over its byte limit (the connection is closed)' },
  BATCHING_NOT_ENABLED: { status: 400, when: 'an array body while batching is off' },
  BATCH_TOO_LARGE: { status: 400, when: 'a batch of no operation or of more than `maxBatch`' },
  INCREMENTAL_DELIVERY_NOT_ACCEPTED: {
    status: 406,
    when: '`@defer`/`@stream` without `Accept: multipart/mixed` or `text/event-stream`',
  },
  TOO_MANY_OPERATIONS: {
    status: null,
    when: 'WebSocket: more operations in flight on one connection than allowed',
  },
  SERVICE_UNAVAILABLE: {
    status: 503,
    when: 'the server is shutting down, or more event streams or WebSocket connections are open than allowed',
  },
  INTERNAL_SERVER_ERROR: {
    status: 500,
    when: 'an unexpected fault (logged; the message is generic); as a field error (200), a resolver failure',
  },
} as const satisfies Record<string, CreatureErrorInfo>;

/** A stable error code of the creature server (`extensions.code`); see {@link CREATURE_ERRORS}. */
export type CreatureErrorCode = keyof typeof CREATURE_ERRORS;

/**
 * A `GraphQLError` with `extensions.code` set to `code`, plus any further `extensions` (such as the
 * `argument` a message names).
 */
export function creatureError(
  message: string,
  code: CreatureErrorCode,
  extensions?: Record<string, unknown>,
): GraphQLError {
  return new GraphQLError(message, { extensions: { ...extensions, code } });
}

/** A client mistake: a `GraphQLError` with code `BAD_USER_INPUT`; `message` names the field and the rule. */
export function badUserInput(message: string): GraphQLError {
  return creatureError(message, 'BAD_USER_INPUT');
}

/** A `GraphQLError` with code `NOT_FOUND` (a mutation names a record that does not exist). */
export function notFound(message: string): GraphQLError {
  return creatureError(message, 'NOT_FOUND');
}

/**
 * A copy of `error` with `extensions.code` set to `code` unless it has one, and without graphql-js's
 * "Did you mean …?" hint when `suggestions` is false (`error` itself when neither changes it).
 */
export function withCode(error: GraphQLError, code: CreatureErrorCode, suggestions = true): GraphQLError {
  const message = suggestions ? error.message : error.message.replace(/ ?Did you mean [^?]*\?/g, '');
  if (error.extensions.code !== undefined && message === error.message) return error;
  return new GraphQLError(message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: { ...error.extensions, code: error.extensions.code ?? code },
  });
}
