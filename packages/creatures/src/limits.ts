/**
 * Query depth and cost limits as GraphQL validation rules (GraphQL spec §6 "Validation": extra rules
 * run beside the specified ones). A document over a limit is answered with one clear GraphQL error
 * (code `QUERY_TOO_DEEP` / `QUERY_TOO_COSTLY`) and is never executed. The depth measure and the cost
 * model read a document of either graphql-js major (`ast-shape.ts`), so incremental delivery checks its
 * graphql-js 17 parse with the same code ({@link checkDepth}, `checkCost`).
 */
import {
  type ASTVisitor,
  GraphQLError,
  type OperationDefinitionNode,
  specifiedRules,
  type ValidationContext,
  type ValidationRule,
  VariablesInAllowedPositionRule,
} from 'graphql';
import {
  type DocumentShape,
  errorAt,
  fragmentsOf,
  isOperation,
  type OperationShape,
  type SelectionSetShape,
} from './ast-shape.ts';
import { checkCost, type KnownListSizes } from './cost.ts';
import { VariablesFitPositionsRule } from './variable-positions.ts';

/** Limits applied to every operation. */
export interface QueryLimits {
  /** Deepest field nesting allowed outside introspection (`{ a { b } }` has depth 2). */
  maxDepth: number;
  /** Highest estimated cost allowed (see `cost.ts`): each value of the answer counts 1. */
  maxCost: number;
  /** Assumed length of a list field without `first:` and without a size known from the data. */
  defaultListSize: number;
  /** Assumed length of `creatures` when the data's size is not at hand (validation-only use). */
  allListSize: number;
}

/** The defaults: depth 12 (deep enough for evolutions of evolutions), cost 50,000. */
export const DEFAULT_LIMITS: QueryLimits = {
  maxDepth: 12,
  maxCost: 50_000,
  defaultListSize: 10,
  allListSize: 151,
};

/** Choices of {@link validationRules}. */
export interface RuleOptions {
  /** Include {@link costLimit} (default true; the HTTP engine checks cost per request instead). */
  cost?: boolean;
  /** Allow `__schema`/`__type` (default true; false adds {@link NoIntrospectionRule}). */
  introspection?: boolean;
  /** List sizes of the current data for {@link costLimit}. */
  known?: () => KnownListSizes;
}

/**
 * graphql-js's specified rules (with `VariablesInAllowedPositionRule` replaced by
 * {@link VariablesFitPositionsRule}, which also lets String variables fill ID positions) plus
 * {@link depthLimit}, {@link costLimit} and {@link NoIntrospectionRule} as `options` say.
 */
export function validationRules(limits: QueryLimits, options: RuleOptions = {}): ValidationRule[] {
  const rules = specifiedRules.map((rule) =>
    rule === VariablesInAllowedPositionRule ? VariablesFitPositionsRule : rule,
  );
  rules.push(depthLimit(limits.maxDepth));
  if (options.cost ?? true) rules.push(costLimit(limits, options.known));
  if (options.introspection === false) rules.push(NoIntrospectionRule);
  return rules;
}

/**
 * The depth meter of `document`: a function giving an operation's depth, the deepest field nesting
 * of its selections with fragments followed (`{ a { b } }` has depth 2; introspection fields, whose
 * names start with `__`, and their selections are not counted). Each fragment's depth is computed
 * once per document and reused at every spread, so measuring is linear in the document's size however
 * often fragments spread each other; a fragment spread inside itself (a cycle, which graphql-js's
 * `NoFragmentCyclesRule` reports) adds nothing, and a spread of an unknown fragment counts 0.
 * `document` is a parse of either graphql-js major.
 */
export function depthMeter(document: DocumentShape): (operation: OperationShape) => number {
  const fragments = fragmentsOf(document);
  const fragmentDepths = new Map<string, number>();
  const inProgress = new Set<string>();
  /** Depth of a selection set counted from its parent field (a leaf field counts 1). */
  const depth = (set: SelectionSetShape): number => {
    let deepest = 0;
    for (const sel of set.selections) {
      if (sel.kind === 'Field') {
        if (sel.name.value.startsWith('__')) continue;
        deepest = Math.max(deepest, sel.selectionSet ? 1 + depth(sel.selectionSet) : 1);
      } else if (sel.kind === 'InlineFragment') {
        deepest = Math.max(deepest, depth(sel.selectionSet));
      } else {
        const name = sel.name.value;
        let known = fragmentDepths.get(name);
        if (known === undefined) {
          const frag = fragments.get(name);
          if (!frag || inProgress.has(name)) continue;
          inProgress.add(name);
          known = depth(frag.selectionSet);
          inProgress.delete(name);
          fragmentDepths.set(name, known);
        }
        deepest = Math.max(deepest, known);
      }
    }
    return deepest;
  };
  return (operation) => depth(operation.selectionSet);
}

/**
 * The `QUERY_TOO_DEEP` error of an operation measured at `depth`, located at the operation, or
 * undefined when `depth` is within `maxDepth`.
 */
function tooDeep(depth: number, maxDepth: number, operation: OperationShape): GraphQLError | undefined {
  return depth > maxDepth
    ? errorAt(`Query depth ${depth} exceeds the maximum depth of ${maxDepth}`, operation, {
        code: 'QUERY_TOO_DEEP',
      })
    : undefined;
}

/**
 * The depth limit over a whole document, for a transport that checks a document outside graphql-js 16
 * validation (incremental delivery parses with graphql-js 17): one `QUERY_TOO_DEEP` error per
 * operation deeper than `maxDepth` ({@link depthMeter}), in document order, as {@link depthLimit}
 * reports them; empty when every operation is within the limit.
 */
export function checkDepth(document: DocumentShape, maxDepth: number): GraphQLError[] {
  const depthOf = depthMeter(document);
  const errors: GraphQLError[] = [];
  for (const definition of document.definitions) {
    if (!isOperation(definition)) continue;
    const error = tooDeep(depthOf(definition), maxDepth, definition);
    if (error) errors.push(error);
  }
  return errors;
}

/**
 * A validation rule rejecting operations nested deeper than `maxDepth` ({@link depthMeter}: fragments
 * followed, introspection not counted, linear in the document's size) with `extensions.code`
 * `QUERY_TOO_DEEP`.
 */
export function depthLimit(maxDepth: number): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const depthOf = depthMeter(context.getDocument());
    return {
      OperationDefinition(node: OperationDefinitionNode) {
        const error = tooDeep(depthOf(node), maxDepth, node);
        if (error) context.reportError(error);
      },
    };
  };
}

/**
 * A validation rule rejecting operations whose estimated cost (`estimateCost` through {@link checkCost}) exceeds
 * `limits.maxCost`, for transports that validate without variables (a variable `first:` then counts as
 * the list's known size). `known` gives the list sizes of the current data (default: only
 * `Query.creatures` = `limits.allListSize`). The HTTP engine runs the same estimate per request with the
 * variables' values instead.
 */
export function costLimit(limits: QueryLimits, known?: () => KnownListSizes): ValidationRule {
  return (context: ValidationContext): ASTVisitor => ({
    OperationDefinition(node: OperationDefinitionNode) {
      const error = checkCost(
        context.getSchema(),
        context.getDocument(),
        node,
        undefined,
        limits,
        known?.() ?? new Map([['Query.creatures', { max: limits.allListSize, mean: limits.allListSize }]]),
      );
      if (error) context.reportError(error);
    },
  });
}

/**
 * A validation rule refusing the introspection fields `__schema` and `__type` (`__typename` stays
 * allowed) with `extensions.code` `INTROSPECTION_DISABLED`.
 */
export function NoIntrospectionRule(context: ValidationContext): ASTVisitor {
  return {
    Field(node) {
      const name = node.name.value;
      if (name === '__schema' || name === '__type') {
        context.reportError(
          new GraphQLError(`Introspection is disabled on this server: ${name} cannot be queried`, {
            nodes: [node],
            extensions: { code: 'INTROSPECTION_DISABLED' },
          }),
        );
      }
    },
  };
}
