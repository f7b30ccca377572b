/**
 * Incremental delivery (`@defer` and `@stream`, GraphQL incremental delivery RFC as implemented by
 * graphql-js 17: an initial result `{ data, pending: [{ id, path }], hasNext }`, then results
 * `{ incremental: [{ id, data | items, subPath? }], completed: [{ id }], pending?, hasNext }`; Apollo's
 * "incremental v0.2" spec).
 *
 * The server's engine stays on graphql-js 16 (graphql-http, graphql-jit and Mercurius need it); only
 * operations that use `@defer`/`@stream` are parsed, validated and run here by graphql-js 17
 * (`graphql17`, an npm alias of graphql@17), over a second build of the same SDL and resolvers with the
 * two directives added. A text is parsed once, by graphql-js 17, within the engine's parse limits;
 * the depth and cost limits are the engine's (`limits.ts`, `cost.ts`), run on that document (the cost
 * model counts deferred fields like any others). Unexpected errors are masked by `mask.ts`, as on
 * every other transport.
 */
import type { GraphQLSchema as Schema16 } from 'graphql';
import {
  buildSchema,
  type DocumentNode,
  type ExecutionResult,
  experimentalExecuteIncrementally,
  type FormattedExecutionResult,
  type FragmentDefinitionNode,
  GraphQLDeferDirective,
  GraphQLError,
  GraphQLSchema,
  GraphQLStreamDirective,
  getOperationAST,
  Kind,
  type OperationDefinitionNode,
  parse,
  specifiedDirectives,
  specifiedRules,
  validate,
  visit,
} from 'graphql17';
import { checkCost, listSizesOf } from './cost.ts';
import type { CreatureErrorCode } from './errors.ts';
import { checkDepth, type QueryLimits } from './limits.ts';
import { maskedJson } from './mask.ts';
import { checkDocument, DEFAULT_PARSE_LIMITS } from './parse-limits.ts';
import { attachResolvers, type ResolverContext } from './schema.ts';
import type { Store } from './store.ts';

/** Whether a query text uses `@defer` or `@stream` (and so belongs to {@link createIncrementalExecutor}). */
export function usesIncrementalDelivery(query: string): boolean {
  return query.includes('@defer') || query.includes('@stream');
}

/** One JSON payload of an incremental response, in order; the last one has `hasNext: false`. */
export type IncrementalPayload = Record<string, unknown> & { hasNext?: boolean };

/** What {@link IncrementalExecutor} answers. */
export type IncrementalOutcome =
  /** A request error (unparsable, invalid, too costly, bad variables): answer it as a whole with this status. */
  | { kind: 'error'; status: number; body: FormattedExecutionResult }
  /** A single result (nothing was deferred after all): answer it as plain JSON. */
  | { kind: 'single'; body: FormattedExecutionResult }
  /** A stream of payloads: write each as it comes; `return()` stops the execution. */
  | { kind: 'stream'; payloads: AsyncGenerator<IncrementalPayload, void, void> };

/** Options of {@link createIncrementalExecutor}. */
export interface IncrementalOptions {
  /** The SDL of the schema (without the subscription part). */
  typeDefs: string;
  /** The resolvers, keyed by type then field (`schema.ts`). */
  resolvers: Record<string, Record<string, unknown>>;
  /** The engine's schema (graphql-js 16): the cost model looks fields up in it by name. */
  schema16: Schema16;
  store: Store;
  limits: QueryLimits;
  /** Replace messages of unexpected errors by "Internal server error". */
  maskErrors: boolean;
  /** Called with each unexpected error. */
  onUnexpectedError?: (err: unknown) => void;
}

/** Runs `@defer`/`@stream` operations: `(query, variables, operationName) => outcome`. */
export type IncrementalExecutor = (
  query: string,
  variables: Record<string, unknown> | undefined,
  operationName: string | undefined,
  method: string,
) => Promise<IncrementalOutcome>;

/**
 * Builds the graphql-js 17 schema (SDL, resolvers, `@defer`, `@stream`) and returns the executor.
 * Throws if a resolver names a type or field the SDL lacks.
 */
export function createIncrementalExecutor(options: IncrementalOptions): IncrementalExecutor {
  const built = buildSchema(options.typeDefs);
  attachResolvers(built, options.resolvers);
  const schema = new GraphQLSchema({
    ...built.toConfig(),
    directives: [...specifiedDirectives, GraphQLDeferDirective, GraphQLStreamDirective],
  });
  const context: ResolverContext = { store: options.store };
  const { limits } = options;

  const format = (error: GraphQLError) => maskedJson(error, options.maskErrors, options.onUnexpectedError);
  const formatResult = <T extends { errors?: readonly GraphQLError[] }>(result: T) =>
    result.errors ? { ...result, errors: result.errors.map(format) } : result;
  const requestError = (
    status: number,
    errors: readonly GraphQLError[],
    code: CreatureErrorCode,
  ): IncrementalOutcome => ({
    kind: 'error',
    status,
    body: {
      errors: errors.map((e) => {
        const json = e.toJSON();
        return { ...json, extensions: { ...json.extensions, code: json.extensions?.code ?? code } };
      }),
    },
  });

  return async (query, variables, operationName, method) => {
    let document: ReturnType<typeof parse>;
    try {
      checkDocument(query);
      document = parse(query, { maxTokens: DEFAULT_PARSE_LIMITS.maxTokens });
    } catch (err) {
      return requestError(400, [err as GraphQLError], 'GRAPHQL_PARSE_FAILED');
    }
    const errors = validate(schema, document, specifiedRules);
    if (errors.length > 0) return requestError(400, errors, 'GRAPHQL_VALIDATION_FAILED');
    const tooDeep = checkDepth(document, limits.maxDepth);
    if (tooDeep.length > 0) {
      return { kind: 'error', status: 400, body: { errors: tooDeep.map((e) => e.toJSON()) } };
    }
    const operation = getOperationAST(document, operationName);
    if (!operation) {
      return requestError(400, [new GraphQLError('Unable to detect the operation to run')], 'BAD_REQUEST');
    }
    if (operation.operation !== 'query' && method === 'GET') {
      return requestError(
        405,
        [new GraphQLError(`Cannot run a ${operation.operation} over GET`)],
        'BAD_REQUEST',
      );
    }
    const tooCostly = checkCost(
      options.schema16,
      document,
      operation,
      variables,
      limits,
      listSizesOf(options.store.listCreatures()),
    );
    if (tooCostly) return { kind: 'error', status: 400, body: { errors: [tooCostly.toJSON()] } };
    const badCount = negativeInitialCount(document, operation, variables);
    if (badCount) return requestError(400, [badCount], 'BAD_USER_INPUT');
    const result = await experimentalExecuteIncrementally({
      schema,
      document,
      variableValues: variables,
      operationName,
      contextValue: context,
    });
    if (!('initialResult' in result)) {
      const single = result as ExecutionResult;
      if (!('data' in single) && single.errors) return requestError(400, single.errors, 'BAD_USER_INPUT');
      return { kind: 'single', body: formatResult(single) as FormattedExecutionResult };
    }
    const { initialResult, subsequentResults } = result;
    async function* payloads(): AsyncGenerator<IncrementalPayload, void, void> {
      try {
        yield formatResult(initialResult) as unknown as IncrementalPayload;
        for await (const next of subsequentResults) {
          yield {
            ...next,
            ...(next.incremental ? { incremental: next.incremental.map((r) => formatResult(r)) } : {}),
            ...(next.completed ? { completed: next.completed.map((r) => formatResult(r)) } : {}),
          } as IncrementalPayload;
        }
      } finally {
        await subsequentResults.return?.();
      }
    }
    return { kind: 'stream', payloads: payloads() };
  };
}

/**
 * The error for a `@stream(initialCount:)` below 0 in `operation` or a fragment it spreads (directly
 * or through other fragments) in `document` (a literal, or a variable's value in `variables`), or
 * undefined when every such `initialCount` is 0 or more (incremental delivery RFC: `initialCount`
 * "must be a non-negative integer"). Each fragment is read once.
 */
function negativeInitialCount(
  document: DocumentNode,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown> | undefined,
): GraphQLError | undefined {
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const pending: (OperationDefinitionNode | FragmentDefinitionNode)[] = [operation];
  const spread = new Set<string>();
  let found: GraphQLError | undefined;
  for (let node = pending.pop(); node && !found; node = pending.pop()) {
    visit(node, {
      FragmentSpread(spreadNode) {
        const name = spreadNode.name.value;
        const fragment = fragments.get(name);
        if (fragment && !spread.has(name)) {
          spread.add(name);
          pending.push(fragment);
        }
      },
      Directive(directive) {
        if (found || directive.name.value !== 'stream') return;
        const arg = directive.arguments?.find((a) => a.name.value === 'initialCount');
        if (!arg) return;
        const value =
          arg.value.kind === Kind.INT
            ? Number(arg.value.value)
            : arg.value.kind === Kind.VARIABLE
              ? variables?.[arg.value.name.value]
              : undefined;
        if (typeof value === 'number' && value < 0) {
          found = new GraphQLError(`@stream(initialCount:) must be 0 or more, got ${value}`, {
            nodes: [arg],
            extensions: { code: 'BAD_USER_INPUT', argument: 'initialCount' },
          });
        }
      },
    });
  }
  return found;
}
