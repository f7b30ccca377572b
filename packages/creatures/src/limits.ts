/**
 * Query depth and cost limits as GraphQL validation rules (GraphQL spec §6 "Validation": extra rules
 * run beside the specified ones). A document over a limit is answered with one clear GraphQL error
 * (code `QUERY_TOO_DEEP` / `QUERY_TOO_COSTLY`) and is never executed.
 */
import {
  type ASTVisitor,
  type FragmentDefinitionNode,
  GraphQLError,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  specifiedRules,
  type ValidationContext,
  type ValidationRule,
  VariablesInAllowedPositionRule,
} from 'graphql';
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

function fragmentsOf(context: ValidationContext): Map<string, FragmentDefinitionNode> {
  const map = new Map<string, FragmentDefinitionNode>();
  for (const def of context.getDocument().definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) map.set(def.name.value, def);
  }
  return map;
}

/**
 * A validation rule rejecting operations nested deeper than `maxDepth` (introspection not counted).
 * Each fragment's depth is computed once per document and reused at every spread, so the rule is
 * linear in the document's size however often fragments spread each other; a fragment spread inside
 * itself (a cycle, which graphql-js's `NoFragmentCyclesRule` reports) adds nothing.
 */
export function depthLimit(maxDepth: number): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = fragmentsOf(context);
    const fragmentDepths = new Map<string, number>();
    const inProgress = new Set<string>();
    /** Depth of a selection set counted from its parent field (a leaf field counts 1). */
    const depth = (set: SelectionSetNode): number => {
      let deepest = 0;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (sel.name.value.startsWith('__')) continue;
          deepest = Math.max(deepest, sel.selectionSet ? 1 + depth(sel.selectionSet) : 1);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
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
    return {
      OperationDefinition(node: OperationDefinitionNode) {
        const d = depth(node.selectionSet);
        if (d > maxDepth) {
          context.reportError(
            new GraphQLError(`Query depth ${d} exceeds the maximum depth of ${maxDepth}`, {
              nodes: [node],
              extensions: { code: 'QUERY_TOO_DEEP' },
            }),
          );
        }
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
