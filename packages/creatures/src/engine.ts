/**
 * The GraphQL execution engine behind `/graphql`: GraphQL-over-HTTP request handling by `graphql-http`
 * (spec-compliant status codes and media types), with an LRU cache of parsed and validated documents,
 * queries compiled by `graphql-jit`, early variable coercion (so a coercion failure is a request error,
 * GraphQL-over-HTTP §"Variable coercion failure" → 400 with `application/graphql-response+json`), the
 * per-request cost check (`cost.ts`), error codes on every request error, and masking of unexpected
 * resolver errors. `Engine.fast` (`engine-fast.ts`) answers valid, error-free queries without
 * graphql-http, through query plans (`plan.ts`) or graphql-jit; everything else goes through the full
 * handler.
 */
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  execute as graphqlExecute,
  type OperationDefinitionNode,
} from 'graphql';
import { createHandler, type Handler, type Request } from 'graphql-http';
import { type CompiledQuery, compileQuery, isCompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import { type CostEstimate, estimateCost, type KnownListSizes, listSizesOf, tooCostly } from './cost.ts';
import { createFastPath, type FastPath } from './engine-fast.ts';
import { createParamsParser } from './http/params.ts';
import { PersistedQueries } from './http/persisted.ts';
import { DEFAULT_LIMITS, type QueryLimits, validationRules } from './limits.ts';
import { DEFAULT_CONNECTION_PAGE } from './listing.ts';
import { maskError } from './mask.ts';
import { checkDocument, coerceVariables } from './operation-checks.ts';
import { DEFAULT_PARSE_LIMITS, type ParseLimits } from './parse-limits.ts';
import { compilePlan, type Plan } from './plan.ts';
import type { ResolverContext } from './schema.ts';
import type { Store } from './store.ts';

/** Per-request state shared between the HTTP layer and the engine. */
export interface RequestState {
  /** Set by the engine when the response may be cached: a query that completed without errors. */
  cacheable: boolean;
}

/** Options of {@link createEngine}. */
export interface EngineOptions {
  schema: GraphQLSchema;
  store: Store;
  /** Depth and cost limits (defaults: {@link DEFAULT_LIMITS}). */
  limits?: Partial<QueryLimits>;
  /** Replace messages of unexpected (non-GraphQL) errors by "Internal server error". */
  maskErrors: boolean;
  /** Called with each unexpected error (for logging). */
  onUnexpectedError?: (err: unknown) => void;
  /** Most distinct documents kept parsed, validated and compiled (default 1000). */
  documentCacheSize?: number;
  /**
   * Most bytes of the document cache, estimated as {@link DOCUMENT_BYTES_PER_CHARACTER} per character of
   * query text plus {@link DOCUMENT_ENTRY_BYTES} per entry (default 64 MiB).
   */
  documentCacheBytes?: number;
  /** Limits checked before a document is parsed (default {@link DEFAULT_PARSE_LIMITS}). */
  parseLimits?: ParseLimits;
  /** Automatic persisted queries and the allow-list (default: APQ on, no allow-list). */
  persisted?: PersistedQueries;
  /** Answer `__schema`/`__type` (default true; false refuses them with `INTROSPECTION_DISABLED`). */
  introspection?: boolean;
  /** Keep graphql-js's "Did you mean …?" hints in error messages (default true). */
  suggestions?: boolean;
}

interface DocumentEntry {
  document?: DocumentNode;
  errors?: readonly GraphQLError[];
  compiled: Map<string, CompiledQuery | ExecutionResult>;
  operations: Map<string, OperationDefinitionNode | null>;
  /** Plan per operation name; null when the operation has none (see `plan.ts`). */
  plans: Map<string, Plan | null>;
  /** Cost per operation name, for estimates that used no variable, with the store version they hold for. */
  costs: Map<string, { version: number; estimate: CostEstimate }>;
  /** Field selections per operation name, fragments expanded ({@link CostEstimate.fields}). */
  fields: Map<string, number>;
}

/**
 * Most field selections (fragments expanded, {@link CostEstimate.fields}) of an operation that is
 * compiled into generated code (a query plan, a graphql-jit function). V8 compiles generated code in one
 * piece on the event loop: a function for 250 aliased fields took 50-150 ms to compile and first run.
 * Larger operations run on graphql-js's `execute`, which compiles nothing.
 */
export const MAX_COMPILED_FIELDS = 128;

/**
 * Estimated bytes of a cached document per character of its text: graphql-js's syntax tree with
 * locations was measured at about 76 bytes per character of an alias-heavy query, and the compiled
 * graphql-jit function and query plan add to it.
 */
export const DOCUMENT_BYTES_PER_CHARACTER = 100;
/** Estimated bytes of a cached document entry besides its text's share (maps, a small plan). */
export const DOCUMENT_ENTRY_BYTES = 4096;

const GRAPHQL_RESPONSE = 'application/graphql-response+json; charset=utf-8';
const JSON_RESPONSE = 'application/json; charset=utf-8';

/** The `Accept` header of a graphql-http request (comma-joined when repeated), or null. */
function acceptOf(headers: Request<unknown, RequestState>['headers']): string | null {
  if (typeof headers.get === 'function') return headers.get('accept');
  const value = (headers as Record<string, string | string[] | undefined>).accept;
  return Array.isArray(value) ? value.join(',') : (value ?? null);
}

/**
 * The response media type (with charset) graphql-http picks for an `Accept` header value (GraphQL over
 * HTTP §"Accept"): the first acceptable part wins; `undefined` when no part is acceptable (graphql-http
 * then answers 406).
 */
function negotiated(accept: string | null): string | undefined {
  for (const part of (accept || '*/*').replace(/\s/g, '').toLowerCase().split(',')) {
    const [mediaType, ...params] = part.split(';');
    const charset = params.find((p) => p.includes('charset=')) || 'charset=utf-8';
    if (mediaType === 'application/graphql-response+json' && charset === 'charset=utf-8')
      return GRAPHQL_RESPONSE;
    if (
      (mediaType === 'application/json' || mediaType === 'application/*' || mediaType === '*/*') &&
      (charset === 'charset=utf-8' || charset === 'charset=utf8')
    ) {
      return JSON_RESPONSE;
    }
  }
  return undefined;
}

/** Whether graphql-http accepts an `Accept` header value (else it answers 406). */
function acceptable(accept: string | null): boolean {
  return negotiated(accept) !== undefined;
}

/**
 * The response media type for an `Accept` header value, as graphql-http negotiates it (GraphQL over HTTP
 * §"Accept"), with its charset: `application/graphql-response+json; charset=utf-8` or
 * `application/json; charset=utf-8` (also the fallback).
 */
export function negotiate(accept: string | null): string {
  return negotiated(accept) ?? JSON_RESPONSE;
}

/**
 * The engine: a `graphql-http` handler whose request context is a {@link RequestState}, plus `fast`, the
 * same request handling cut short for the common case.
 */
export type Engine = Handler<unknown, RequestState> & {
  /**
   * Answers a well-formed, valid query without errors (GET, or POST `application/json` given as its
   * bytes or text) without going through graphql-http (`engine-fast.ts`). Returns `undefined` for
   * anything else (malformed requests, persisted-query fields, invalid or too costly documents,
   * mutations, results with errors), which the caller then hands to the full handler; that handler gives
   * the same answer the fast path would have given where both apply.
   */
  fast: FastPath;
};

/**
 * Creates the engine. Parse/validation results are cached per query text (LRU), compiled queries per
 * document and operation name. Validation runs graphql-js's specified rules plus depth and cost limits.
 */
export function createEngine(options: EngineOptions): Engine {
  const { schema, store, maskErrors } = options;
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const rules = validationRules(limits, { cost: false, introspection: options.introspection ?? true });
  const suggestions = options.suggestions ?? true;
  let sizes: { version: number; known: KnownListSizes } | undefined;
  const knownSizes = () => {
    if (sizes?.version !== store.version) {
      let known: KnownListSizes;
      try {
        known = listSizesOf(store.listCreatures());
      } catch {
        // A failing store shows up when the operation runs (as a masked error); estimate without it.
        known = new Map([['Query.creatures', { max: limits.allListSize, mean: limits.allListSize }]]);
      }
      sizes = { version: store.version, known };
    }
    return sizes.known;
  };
  const costOf = (
    entry: DocumentEntry,
    operation: OperationDefinitionNode,
    key: string,
    variables: Record<string, unknown> | undefined,
  ): CostEstimate => {
    const cached = entry.costs.get(key);
    if (cached && cached.version === store.version) return cached.estimate;
    const estimate = estimateCost(schema, entry.document as DocumentNode, operation, variables, {
      defaultListSize: limits.defaultListSize,
      defaultPageSize: DEFAULT_CONNECTION_PAGE,
      known: knownSizes(),
    });
    if (!estimate.usesVariables) entry.costs.set(key, { version: store.version, estimate });
    entry.fields.set(key, estimate.fields);
    return estimate;
  };
  /** The cost check ({@link tooCostly}) of an operation with its (cached) estimate. */
  const costErrorOf = (
    entry: DocumentEntry,
    operation: OperationDefinitionNode,
    key: string,
    variables: Record<string, unknown> | undefined,
  ): GraphQLError | undefined =>
    tooCostly(costOf(entry, operation, key, variables), limits.maxCost, operation);
  /** {@link CostEstimate.fields} of an operation, from its cost estimate when one was made. */
  const fieldsOf = (entry: DocumentEntry, operationName: string | null | undefined): number => {
    const key = operationName ?? '';
    let fields = entry.fields.get(key);
    if (fields === undefined) {
      const operation = operationOf(entry, operationName);
      fields = operation ? costOf(entry, operation, key, undefined).fields : 0;
      entry.fields.set(key, fields);
    }
    return fields;
  };
  const documents = new LRUCache<string, DocumentEntry>({
    max: options.documentCacheSize ?? 1000,
    maxSize: options.documentCacheBytes ?? 64 * 1024 * 1024,
    sizeCalculation: (_entry, query) => DOCUMENT_ENTRY_BYTES + query.length * DOCUMENT_BYTES_PER_CHARACTER,
  });
  const parseLimits = options.parseLimits ?? DEFAULT_PARSE_LIMITS;
  const entries = new WeakMap<DocumentNode, DocumentEntry>();
  const context: ResolverContext = { store };

  const prepare = (query: string): DocumentEntry => {
    let entry = documents.get(query);
    if (entry) return entry;
    entry = {
      compiled: new Map(),
      operations: new Map(),
      costs: new Map(),
      plans: new Map(),
      fields: new Map(),
    };
    const checked = checkDocument(schema, query, rules, suggestions, parseLimits);
    if (checked.errors) entry.errors = checked.errors;
    else {
      entry.document = checked.document;
      entries.set(checked.document, entry);
    }
    documents.set(query, entry);
    return entry;
  };

  const operationOf = (entry: DocumentEntry, operationName: string | null | undefined) => {
    const key = operationName ?? '';
    const known = entry.operations.get(key);
    if (known !== undefined) return known;
    const operation = getOperationAST(entry.document as DocumentNode, operationName) ?? null;
    entry.operations.set(key, operation);
    return operation;
  };

  const compiledOf = (document: DocumentNode, operationName: string | null | undefined) => {
    const entry = entries.get(document);
    const key = operationName ?? '';
    let compiled = entry?.compiled.get(key);
    if (!compiled) {
      compiled =
        entry && fieldsOf(entry, operationName) > MAX_COMPILED_FIELDS
          ? interpreted(document, operationName)
          : compileQuery(schema, document, operationName ?? undefined, { customJSONSerializer: true });
      entry?.compiled.set(key, compiled);
    }
    return compiled;
  };

  /** graphql-js's `execute` in the shape of a graphql-jit compiled query, for operations too large to compile. */
  const interpreted = (document: DocumentNode, operationName: string | null | undefined): CompiledQuery => ({
    query: (rootValue, contextValue, variableValues) =>
      graphqlExecute({ schema, document, rootValue, contextValue, variableValues, operationName }),
    stringify: JSON.stringify,
  });

  const execute = (args: ExecutionArgs) => {
    const compiled = compiledOf(args.document, args.operationName);
    if (!isCompiledQuery(compiled)) return compiled;
    return compiled.query(args.rootValue, args.contextValue, args.variableValues ?? {});
  };

  const planOf = (entry: DocumentEntry, operation: OperationDefinitionNode, key: string): Plan | null => {
    let plan = entry.plans.get(key);
    if (plan === undefined) {
      plan =
        fieldsOf(entry, key || undefined) > MAX_COMPILED_FIELDS
          ? null
          : (compilePlan(schema, entry.document as DocumentNode, operation) ?? null);
      entry.plans.set(key, plan);
    }
    return plan;
  };
  const accepts = new Map<string, string | null>();
  const contentTypeFor = (accept: string | undefined): string | null => {
    const key = accept ?? '';
    let type = accepts.get(key);
    if (type === undefined) {
      type = acceptable(accept ?? null) ? negotiate(accept ?? null) : null;
      if (accepts.size < 100) accepts.set(key, type);
    }
    return type;
  };
  const fast = createFastPath({
    schema,
    context,
    automatic: options.persisted === undefined || !options.persisted.allowListMode,
    version: () => store.version,
    contentTypeFor,
    prepare,
    operationOf,
    costErrorOf,
    planOf,
    compiledOf,
  });

  const handler = createHandler<unknown, RequestState, ResolverContext>({
    schema,
    parseRequestParams: createParamsParser(options.persisted ?? new PersistedQueries(), negotiate),
    onSubscribe(_req, params) {
      const entry = prepare(params.query);
      if (entry.errors) return entry.errors;
      const document = entry.document as DocumentNode;
      const operation = operationOf(entry, params.operationName);
      let variables: Record<string, unknown> | undefined;
      if (operation?.variableDefinitions?.length) {
        const coerced = coerceVariables(schema, operation, params.variables ?? {}, suggestions);
        if (coerced.errors) return [...coerced.errors];
        variables = coerced.coerced;
      }
      if (operation) {
        const error = costErrorOf(entry, operation, params.operationName ?? '', variables);
        if (error) return [error];
      }
      return {
        schema,
        document,
        operationName: params.operationName,
        variableValues: params.variables,
        contextValue: context,
      };
    },
    execute: execute as typeof import('graphql').execute,
    onOperation(req, args, result) {
      // Results with errors go through graphql-http's response (and formatError's masking).
      if ('errors' in result && result.errors) return;
      const entry = entries.get(args.document);
      if (!entry) return;
      if (operationOf(entry, args.operationName)?.operation === 'query') req.context.cacheable = true;
      // A successful result is serialized by the query's compiled serializer.
      const compiled = compiledOf(args.document, args.operationName);
      const body = isCompiledQuery(compiled) ? compiled.stringify(result) : JSON.stringify(result);
      return [
        body,
        { status: 200, statusText: 'OK', headers: { 'content-type': negotiate(acceptOf(req.headers)) } },
      ];
    },
    formatError(err) {
      return err instanceof GraphQLError ? maskError(err, maskErrors, options.onUnexpectedError) : err;
    },
  });
  return Object.assign(handler, { fast });
}
