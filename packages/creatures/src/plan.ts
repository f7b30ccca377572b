/**
 * Query plans: a query operation compiled into one function that resolves the data and writes the JSON
 * response text in the same walk, with no intermediate result object (GraphQL spec §6 "Execution" for
 * the happy path, §7 "Response" for the shape). Field order and merging come from graphql-js's own
 * `collectFields`, scalars are serialized by their types' `serialize` (inlined for the built-in
 * scalars), so the text is the one graphql-js / graphql-jit would produce.
 *
 * A plan covers only answers without errors. Anything else — a resolver that throws or returns a
 * promise, a null in a non-null position, a value a scalar cannot serialize — makes the plan throw
 * {@link PlanBailout}, and the caller runs the operation again with the full executor (graphql-jit),
 * which reports the error the standard way. That re-run is only safe for side-effect-free operations:
 * plans are built for queries only. {@link compilePlan} returns `undefined` for what it does not cover
 * (abstract types, `@skip`/`@include` on variables, subscriptions and mutations).
 */
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  GraphQLBoolean,
  GraphQLFloat,
  GraphQLID,
  GraphQLInt,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  GraphQLString,
  isEnumType,
  isListType,
  isNonNullType,
  isObjectType,
  isScalarType,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  visit,
} from 'graphql';
import { collectFields, collectSubfields } from 'graphql/execution/collectFields.js';
import { getArgumentValues } from 'graphql/execution/values.js';

/** Thrown by a plan when the answer needs the full executor (an error, a promise, a bad value). */
export class PlanBailout extends Error {}
const BAIL = new PlanBailout('plan bailout');

/** A compiled plan: `(rootValue, contextValue, coercedVariables) => JSON text of the whole response`. */
export type Plan = (root: unknown, context: unknown, variables: Record<string, unknown>) => string;

type Writer = (value: unknown, context: unknown, variables: Record<string, unknown>) => string;

const INT_MIN = -2147483648;
const INT_MAX = 2147483647;

function scalarWriter(type: GraphQLOutputType): Writer | undefined {
  if (type === GraphQLString || type === GraphQLID) {
    return (v) => {
      if (typeof v === 'string') return JSON.stringify(v);
      if (type === GraphQLID && Number.isInteger(v)) return JSON.stringify(String(v));
      throw BAIL;
    };
  }
  if (type === GraphQLInt) {
    return (v) => {
      if (typeof v === 'number' && Number.isInteger(v) && v >= INT_MIN && v <= INT_MAX) return String(v);
      throw BAIL;
    };
  }
  if (type === GraphQLFloat) {
    return (v) => {
      if (typeof v === 'number' && Number.isFinite(v)) return JSON.stringify(v);
      throw BAIL;
    };
  }
  if (type === GraphQLBoolean) {
    return (v) => {
      if (typeof v === 'boolean') return v ? 'true' : 'false';
      throw BAIL;
    };
  }
  if (isScalarType(type) || isEnumType(type)) {
    return (v) => {
      let out: unknown;
      try {
        out = type.serialize(v);
      } catch {
        throw BAIL;
      }
      if (out === undefined) throw BAIL;
      return JSON.stringify(out);
    };
  }
  return undefined;
}

/** Whether any `@skip`/`@include` in the document takes a variable (the plan fixes directives at compile time). */
function hasVariableDirectives(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Directive(node) {
      if (
        (node.name.value === 'skip' || node.name.value === 'include') &&
        node.arguments?.some((a) => a.value.kind === Kind.VARIABLE)
      ) {
        found = true;
      }
    },
  });
  return found;
}

function usesVariables(node: FieldNode): boolean {
  let found = false;
  for (const arg of node.arguments ?? []) {
    visit(arg.value, {
      Variable() {
        found = true;
      },
    });
  }
  return found;
}

/**
 * Compiles the query `operation` of `document` into a {@link Plan}, or `undefined` when the operation is
 * not a query or uses what plans do not cover. The document must be valid for `schema`.
 */
export function compilePlan(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): Plan | undefined {
  if (operation.operation !== 'query' || hasVariableDirectives(document)) return undefined;
  const fragments: Record<string, FragmentDefinitionNode> = Object.create(null);
  for (const def of document.definitions)
    if (def.kind === Kind.FRAGMENT_DEFINITION) fragments[def.name.value] = def;
  const root = schema.getQueryType();
  if (!root) return undefined;
  let covered = true;

  const objectWriter = (type: GraphQLObjectType, fields: Map<string, readonly FieldNode[]>): Writer => {
    const defs = type.getFields();
    const parts: { prefix: string; write: Writer }[] = [];
    let first = true;
    for (const [responseKey, nodes] of fields) {
      const node = nodes[0]!;
      const prefix = `${first ? '{' : ','}${JSON.stringify(responseKey)}:`;
      first = false;
      const fieldName = node.name.value;
      if (fieldName === '__typename') {
        const name = JSON.stringify(type.name);
        parts.push({ prefix, write: () => name });
        continue;
      }
      const def = defs[fieldName];
      if (!def) {
        covered = false;
        break;
      }
      const value = valueWriter(def.type, nodes);
      const resolve = def.resolve;
      if (!resolve) {
        parts.push({
          prefix,
          write: (parent, context, variables) => {
            const v = (parent as Record<string, unknown>)[fieldName];
            return value(typeof v === 'function' ? bail() : v, context, variables);
          },
        });
        continue;
      }
      const dynamicArgs = usesVariables(node);
      const fixedArgs = dynamicArgs ? undefined : getArgumentValues(def, node, {});
      parts.push({
        prefix,
        write: (parent, context, variables) => {
          const args = fixedArgs ?? getArgumentValues(def, node, variables);
          let v: unknown;
          try {
            v = resolve(parent, args, context, undefined as never);
          } catch {
            throw BAIL;
          }
          if (
            v instanceof Promise ||
            (v !== null && typeof v === 'object' && typeof (v as { then?: unknown }).then === 'function')
          ) {
            throw BAIL;
          }
          return value(v, context, variables);
        },
      });
    }
    if (parts.length === 0) return () => '{}';
    return (parent, context, variables) => {
      let out = '';
      for (let i = 0; i < parts.length; i++) {
        const part = parts[i]!;
        out += part.prefix + part.write(parent, context, variables);
      }
      return `${out}}`;
    };
  };

  const valueWriter = (type: GraphQLOutputType, nodes: readonly FieldNode[]): Writer => {
    if (isNonNullType(type)) {
      const inner = valueWriter(type.ofType, nodes);
      return (v, c, vars) => (v == null ? bail() : inner(v, c, vars));
    }
    let write: Writer;
    if (isListType(type)) {
      const item = valueWriter(type.ofType, nodes);
      write = (v, c, vars) => {
        if (!Array.isArray(v)) throw BAIL;
        if (v.length === 0) return '[]';
        let out = `[${item(v[0], c, vars)}`;
        for (let i = 1; i < v.length; i++) out += `,${item(v[i], c, vars)}`;
        return `${out}]`;
      };
    } else if (isObjectType(type)) {
      write = objectWriter(type, collectSubfields(schema, fragments, {}, type, nodes));
    } else {
      const scalar = scalarWriter(type);
      if (!scalar) {
        covered = false;
        return bail;
      }
      write = scalar;
    }
    return (v, c, vars) => (v == null ? 'null' : write(v, c, vars));
  };

  const data = objectWriter(
    root,
    collectFields(schema, fragments, {}, root, operation.selectionSet as SelectionSetNode),
  );
  if (!covered) return undefined;
  return (rootValue, context, variables) => `{"data":${data(rootValue ?? {}, context, variables)}}`;
}

function bail(): never {
  throw BAIL;
}
