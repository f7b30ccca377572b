/**
 * The engine's fast path (`Engine.fast`, `engine.ts`): valid, error-free queries answered without
 * graphql-http — parameters read once, the cached document, operation and plan, the answer written as
 * JSON bytes by the query plan (`plan.ts`) or as text by graphql-jit.
 *
 * A JSON POST body comes as bytes; what it asks for (its document entry, operation, variables, and for an
 * operation without variable definitions the coerced, empty variables) is kept per exact body in a
 * {@link BytesKeyedCache}, so a repeated body is neither decoded nor JSON-parsed nor hashed as text
 * again. For an operation without variables the body also keeps the data version its cost was found
 * within the limit at, and its plan: while the data is unchanged a repeated body skips the cost check
 * (whose estimate depends only on the document and the data) and the plan look-up. Nothing of the data
 * or the answer is kept: every request resolves the fields over the store and writes the answer.
 */
import type {
  DocumentNode,
  ExecutionResult,
  GraphQLError,
  GraphQLSchema,
  OperationDefinitionNode,
} from 'graphql';
import { type CompiledQuery, isCompiledQuery } from 'graphql-jit';
import { BytesKeyedCache } from './bytes-cache.ts';
import { usesIncrementalDelivery } from './incremental.ts';
import { coerceVariables } from './operation-checks.ts';
import type { Plan } from './plan.ts';

/** A complete answer of the fast path: always status 200. */
export interface FastAnswer {
  /**
   * The JSON answer: UTF-8 bytes from a query plan, text from graphql-jit; with `latin1` true, a query
   * plan's UTF-8 bytes as a latin1 string (one character per byte).
   */
  body: string | Buffer;
  /** `body` is a string of latin1 characters standing for the answer's bytes (write it with `'latin1'`). */
  latin1: boolean;
  contentType: string;
  /** A query that completed without errors (its answer may be cached). */
  cacheable: true;
}

/**
 * Answers a well-formed, valid query without errors: `method` GET (parameters from `url`) or POST with a
 * JSON body (`body`: its UTF-8 bytes, or its text). With `latin1Text`, a query plan's answer up to 16 KiB
 * comes as latin1 text of its bytes ({@link FastAnswer.latin1}). Returns `undefined` for anything else — malformed
 * requests, persisted-query fields, invalid or too costly documents, `@defer`/`@stream`, mutations,
 * results with errors — which the caller then hands to the full handler.
 */
export type FastPath = (
  method: string,
  url: string,
  body: string | Uint8Array,
  accept: string | undefined,
  latin1Text?: boolean,
) => FastAnswer | undefined | Promise<FastAnswer | undefined>;

/** A parsed and validated document with its per-operation caches (`engine.ts`). */
export interface PreparedDocument {
  document?: DocumentNode;
  errors?: readonly unknown[];
}

/** What {@link createFastPath} needs of the engine. */
export interface FastPathDeps<E extends PreparedDocument> {
  schema: GraphQLSchema;
  /** The resolvers' context value. */
  context: unknown;
  /** False in allow-list mode (every request then goes through the full handler). */
  automatic: boolean;
  /** The response media type for an `Accept` value, or null when graphql-http would answer 406. */
  contentTypeFor(accept: string | undefined): string | null;
  /** The store's data version: it changes with every write (cost estimates hold for one version). */
  version(): number;
  /** The cached document entry of a query text. */
  prepare(query: string): E;
  operationOf(entry: E, operationName: string | null | undefined): OperationDefinitionNode | null;
  /** The engine's cost check: the `QUERY_TOO_COSTLY` error when the operation is over the limit. */
  costErrorOf(
    entry: E,
    operation: OperationDefinitionNode,
    key: string,
    variables: Record<string, unknown> | undefined,
  ): GraphQLError | undefined;
  planOf(entry: E, operation: OperationDefinitionNode, key: string): Plan | null;
  compiledOf(
    document: DocumentNode,
    operationName: string | null | undefined,
  ): CompiledQuery | ExecutionResult;
}

/** A request the fast path may answer: a valid query operation and its variables as sent. */
interface FastRequest<E> {
  entry: E;
  operation: OperationDefinitionNode;
  operationName: string | undefined;
  /** `operationName ?? ''`: the key of the per-operation caches. */
  key: string;
  /** The variables as sent (graphql-jit coerces them itself). */
  variables: Record<string, unknown>;
  /** The coerced variables when the operation defines none (shared, never written to). */
  coerced: Record<string, unknown> | undefined;
  /**
   * For an operation without variables: the data version at which its cost was last found within the
   * limit (-1: not yet), and its plan then. While the version holds, a repeated body skips the cost
   * check and the plan look-up (neither depends on anything but the document and the data).
   */
  checkedAt: number;
  plan: Plan | null;
}

const NO_VARIABLES: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;
/** Most JSON bodies whose parsed request is kept. */
const REQUEST_CACHE_SIZE = 1000;
/** Longest JSON body whose parsed request is kept, in bytes. */
const REQUEST_CACHE_KEY_BYTES = 16 * 1024;
/** Most bytes of kept bodies and their parsed requests. */
const REQUEST_CACHE_BYTES = 8 * 1024 * 1024;
/**
 * Estimated bytes of one parsed request besides its body's copy (its variables come from a body of at
 * most 16 KiB; the document is the engine's, counted there).
 */
const REQUEST_ENTRY_BYTES = 1024;

/** Creates the fast path over the engine's caches. */
export function createFastPath<E extends PreparedDocument>(deps: FastPathDeps<E>): FastPath {
  const { schema, context } = deps;
  const requests = new BytesKeyedCache<FastRequest<E> | null>({
    max: REQUEST_CACHE_SIZE,
    maxKeyBytes: REQUEST_CACHE_KEY_BYTES,
    maxBytes: REQUEST_CACHE_BYTES,
    sizeOf: () => REQUEST_ENTRY_BYTES,
  });

  /** The request the parameters ask for, or null when the fast path does not answer it. */
  const requestOf = (params: unknown): FastRequest<E> | null => {
    if (typeof params !== 'object' || params === null || Array.isArray(params)) return null;
    const { query, variables, operationName, extensions, documentId } = params as Record<string, unknown>;
    if (typeof query !== 'string' || extensions != null || documentId !== undefined) return null;
    if (variables != null && (typeof variables !== 'object' || Array.isArray(variables))) return null;
    if (operationName != null && typeof operationName !== 'string') return null;
    // `@defer`/`@stream` (even in a string) go to the incremental executor's route.
    if (usesIncrementalDelivery(query)) return null;
    const entry = deps.prepare(query);
    if (entry.errors) return null;
    const operation = deps.operationOf(entry, operationName as string | undefined);
    if (operation?.operation !== 'query') return null;
    return {
      entry,
      operation,
      operationName: (operationName as string | null | undefined) ?? undefined,
      key: (operationName as string | null | undefined) ?? '',
      variables: (variables ?? {}) as Record<string, unknown>,
      coerced: operation.variableDefinitions?.length ? undefined : NO_VARIABLES,
      checkedAt: -1,
      plan: null,
    };
  };

  const jsonParams = (text: string): unknown => {
    try {
      return JSON.parse(text);
    } catch {
      return undefined;
    }
  };

  const searchParams = (url: string): unknown => {
    const q = url.indexOf('?');
    const search = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    if (search.has('extensions') || search.has('documentId')) return undefined;
    const params: Record<string, unknown> = {
      query: search.get('query'),
      operationName: search.get('operationName') || undefined,
    };
    const raw = search.get('variables');
    if (raw) {
      params.variables = jsonParams(raw);
      if (params.variables === undefined) return undefined;
    }
    return params;
  };

  const run = (request: FastRequest<E>, contentType: string, latin1Text: boolean) => {
    const { entry, operation, key } = request;
    let coerced = request.coerced;
    let plan: Plan | null;
    const version = deps.version();
    if (coerced !== undefined && request.checkedAt === version) plan = request.plan;
    else {
      if (coerced === undefined) {
        const result = coerceVariables(schema, operation, request.variables);
        if (result.errors) return undefined;
        coerced = result.coerced;
      }
      if (deps.costErrorOf(entry, operation, key, coerced)) return undefined;
      plan = deps.planOf(entry, operation, key);
      if (request.coerced !== undefined) {
        request.checkedAt = version;
        request.plan = plan;
      }
    }
    if (plan) {
      try {
        if (!latin1Text)
          return {
            body: plan(undefined, context, coerced),
            latin1: false,
            contentType,
            cacheable: true,
          } as FastAnswer;
        const body = plan.text(undefined, context, coerced);
        return { body, latin1: typeof body === 'string', contentType, cacheable: true } as FastAnswer;
      } catch {
        // PlanBailout: the answer holds an error; graphql-jit below reports it the standard way.
      }
    }
    const compiled = deps.compiledOf(entry.document as DocumentNode, request.operationName);
    if (!isCompiledQuery(compiled)) return undefined;
    const finish = (result: ExecutionResult): FastAnswer | undefined =>
      result.errors
        ? undefined
        : { body: compiled.stringify(result), latin1: false, contentType, cacheable: true };
    const result = compiled.query(undefined, context, request.variables);
    return result instanceof Promise ? result.then(finish) : finish(result as ExecutionResult);
  };

  return (method, url, body, accept, latin1Text = false) => {
    const contentType = deps.contentTypeFor(accept);
    if (contentType === null || !deps.automatic) return undefined;
    let request: FastRequest<E> | null | undefined;
    if (typeof body !== 'string') {
      if (method !== 'POST') return undefined;
      request = requests.get(body);
      if (request === undefined) {
        request = requestOf(jsonParams(Buffer.from(body.buffer, body.byteOffset, body.length).toString()));
        requests.set(body, request);
      }
    } else if (method === 'POST') request = requestOf(jsonParams(body));
    else if (method === 'GET') request = requestOf(searchParams(url));
    else return undefined;
    return request === null ? undefined : run(request, contentType, latin1Text);
  };
}
