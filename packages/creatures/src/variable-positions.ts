/**
 * The GraphQL spec's "All Variable Usages Are Allowed" validation (§5.8.5), with one widening: a variable
 * of type `String` may be used where an `ID` is expected. Every String value is a valid ID (ID input
 * coercion accepts any string, §3.5.5), so the widening cannot let an invalid value through; it lets
 * clients written for servers whose id arguments are `String` (the original creature tutorial's
 * `pokemon(id: String)`) send `query ($id: String) { creature(id: $id) { … } }` unchanged.
 */
import {
  type ASTVisitor,
  GraphQLError,
  type GraphQLInputType,
  isListType,
  isNonNullType,
  Kind,
  type OperationDefinitionNode,
  typeFromAST,
  type ValidationContext,
  type ValueNode,
} from 'graphql';

/** Whether a value of `from` may flow into a location of type `to` (subtyping, String ⊂ ID). */
function fits(from: GraphQLInputType, to: GraphQLInputType): boolean {
  if (isNonNullType(to)) return isNonNullType(from) && fits(from.ofType, to.ofType);
  if (isNonNullType(from)) return fits(from.ofType, to);
  if (isListType(to)) return isListType(from) && fits(from.ofType, to.ofType);
  if (isListType(from)) return false;
  return from === to || (from.name === 'String' && to.name === 'ID');
}

function hasValue(node: ValueNode | undefined): boolean {
  return node !== undefined && node.kind !== Kind.NULL;
}

/**
 * Validation rule replacing graphql-js's `VariablesInAllowedPositionRule`: reports a variable used in a
 * position its type does not fit, as `Variable "$x" of type "Int" used in position expecting type "ID!".`
 * with `extensions.code` `GRAPHQL_VALIDATION_FAILED`. A nullable variable may fill a non-null position when
 * the variable or the position has a default value (spec §5.8.5, "AreTypesCompatible" with defaults).
 */
export function VariablesFitPositionsRule(context: ValidationContext): ASTVisitor {
  return {
    OperationDefinition: {
      leave(operation: OperationDefinitionNode) {
        const schema = context.getSchema();
        const definitions = new Map(
          operation.variableDefinitions?.map((d) => [d.variable.name.value, d]) ?? [],
        );
        for (const { node, type, defaultValue } of context.getRecursiveVariableUsages(operation)) {
          const definition = definitions.get(node.name.value);
          if (!definition || !type) continue;
          const declared = typeFromAST(schema, definition.type) as GraphQLInputType | undefined;
          if (!declared) continue;
          let location = type;
          // A nullable variable with a default, or a position with a default, may fill a non-null position.
          if (
            isNonNullType(location) &&
            !isNonNullType(declared) &&
            (hasValue(definition.defaultValue) || defaultValue !== undefined)
          ) {
            location = location.ofType;
          }
          if (fits(declared, location)) continue;
          context.reportError(
            new GraphQLError(
              `Variable "$${node.name.value}" of type "${String(declared)}" used in position expecting type "${String(type)}".`,
              { nodes: [definition, node], extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } },
            ),
          );
        }
      },
    },
  };
}
