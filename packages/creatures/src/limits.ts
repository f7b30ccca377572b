/**
 * Query depth and cost limits as GraphQL validation rules (GraphQL spec §6 "Validation": extra rules
 * run beside the specified ones). A document over a limit is answered with one clear GraphQL error
 * (code `QUERY_TOO_DEEP` / `QUERY_TOO_COSTLY`) and is never executed.
 */
import {
  type ASTVisitor,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLType,
  isListType,
  isNonNullType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  specifiedRules,
  type ValidationContext,
  type ValidationRule,
  VariablesInAllowedPositionRule,
} from 'graphql';
import { VariablesFitPositionsRule } from './variable-positions.ts';

/** Limits applied to every operation. */
export interface QueryLimits {
  /** Deepest field nesting allowed outside introspection (`{ a { b } }` has depth 2). */
  maxDepth: number;
  /** Highest estimated cost allowed: fields counted once per item of each enclosing list. */
  maxCost: number;
  /** Assumed length of a list field without a `first` argument (the `creatures` list uses `allListSize`). */
  defaultListSize: number;
  /** Assumed length of `creatures` without `first`. */
  allListSize: number;
}

/** The defaults: depth 12 (deep enough for evolutions of evolutions), cost 50,000. */
export const DEFAULT_LIMITS: QueryLimits = {
  maxDepth: 12,
  maxCost: 50_000,
  defaultListSize: 10,
  allListSize: 151,
};

/**
 * graphql-js's specified rules (with `VariablesInAllowedPositionRule` replaced by
 * {@link VariablesFitPositionsRule}, which also lets String variables fill ID positions) plus
 * {@link depthLimit} and {@link costLimit} for `limits`.
 */
export function validationRules(limits: QueryLimits): ValidationRule[] {
  const rules = specifiedRules.map((rule) =>
    rule === VariablesInAllowedPositionRule ? VariablesFitPositionsRule : rule,
  );
  return [...rules, depthLimit(limits.maxDepth), costLimit(limits)];
}

function fragmentsOf(context: ValidationContext): Map<string, FragmentDefinitionNode> {
  const map = new Map<string, FragmentDefinitionNode>();
  for (const def of context.getDocument().definitions) {
    if (def.kind === Kind.FRAGMENT_DEFINITION) map.set(def.name.value, def);
  }
  return map;
}

/** A validation rule rejecting operations nested deeper than `maxDepth` (introspection not counted). */
export function depthLimit(maxDepth: number): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = fragmentsOf(context);
    const depth = (set: SelectionSetNode, level: number, seen: Set<string>): number => {
      let deepest = level;
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (sel.name.value.startsWith('__')) continue;
          if (sel.selectionSet) deepest = Math.max(deepest, depth(sel.selectionSet, level + 1, seen));
          else deepest = Math.max(deepest, level + 1);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
          deepest = Math.max(deepest, depth(sel.selectionSet, level, seen));
        } else {
          const frag = fragments.get(sel.name.value);
          if (!frag || seen.has(frag.name.value)) continue;
          deepest = Math.max(deepest, depth(frag.selectionSet, level, new Set(seen).add(frag.name.value)));
        }
        if (deepest > maxDepth) return deepest;
      }
      return deepest;
    };
    return {
      OperationDefinition(node: OperationDefinitionNode) {
        const d = depth(node.selectionSet, 0, new Set());
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
 * A validation rule rejecting operations whose estimated cost exceeds `limits.maxCost`. Each field costs
 * 1, times the estimated length of every enclosing list: the `first` argument when it is a literal, else
 * `allListSize` for `creatures` and `defaultListSize` for other list fields. Introspection fields cost 1.
 */
export function costLimit(limits: QueryLimits): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const fragments = fragmentsOf(context);
    const schema = context.getSchema();
    const cost = (set: SelectionSetNode, typeName: string, seen: Set<string>): number => {
      let total = 0;
      const type = schema.getType(typeName);
      const fields = type && 'getFields' in type ? type.getFields() : {};
      for (const sel of set.selections) {
        if (sel.kind === Kind.FIELD) {
          if (sel.name.value.startsWith('__')) {
            total += 1;
            continue;
          }
          const field = fields[sel.name.value];
          if (!field) continue;
          let named: GraphQLType = field.type;
          let isList = false;
          while (isListType(named) || isNonNullType(named)) {
            if (isListType(named)) isList = true;
            named = named.ofType;
          }
          let items = 1;
          if (isList) {
            const first = sel.arguments?.find((a) => a.name.value === 'first')?.value;
            items =
              first?.kind === Kind.INT
                ? Number(first.value)
                : sel.name.value === 'creatures'
                  ? limits.allListSize
                  : limits.defaultListSize;
          }
          const inner = sel.selectionSet ? cost(sel.selectionSet, named.name, seen) : 0;
          total += items * (1 + inner);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
          total += cost(sel.selectionSet, sel.typeCondition?.name.value ?? typeName, seen);
        } else {
          const frag = fragments.get(sel.name.value);
          if (!frag || seen.has(frag.name.value)) continue;
          total += cost(frag.selectionSet, frag.typeCondition.name.value, new Set(seen).add(frag.name.value));
        }
        if (total > limits.maxCost) return total;
      }
      return total;
    };
    return {
      OperationDefinition(node: OperationDefinitionNode) {
        const root = schema.getRootType(node.operation);
        if (!root) return;
        const c = cost(node.selectionSet, root.name, new Set());
        if (c > limits.maxCost) {
          context.reportError(
            new GraphQLError(`Query cost ${c} exceeds the maximum cost of ${limits.maxCost}`, {
              nodes: [node],
              extensions: { code: 'QUERY_TOO_COSTLY' },
            }),
          );
        }
      },
    };
  };
}
