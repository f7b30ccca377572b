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

/**
 * Pre-serialized leaf data: the JSON text of string values, kept by value. The store hands out the same
 * string objects on every request, so after the first answer a name or a type costs one map lookup
 * instead of a `JSON.stringify`. Bounded: strings longer than {@link MAX_ENCODED_LENGTH} are not kept, and
 * the map is emptied when it holds {@link MAX_ENCODED} entries.
 */
const encoded = new Map<string, string>();
const MAX_ENCODED = 50_000;
const MAX_ENCODED_LENGTH = 200;

/** The JSON text of a string, exactly as `JSON.stringify` writes it. */
export function jsonString(value: string): string {
  let text = encoded.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    if (value.length <= MAX_ENCODED_LENGTH) {
      if (encoded.size >= MAX_ENCODED) encoded.clear();
      encoded.set(value, text);
    }
  }
  return text;
}

const INT_MIN = -2147483648;
const INT_MAX = 2147483647;

function scalarWriter(type: GraphQLOutputType): Writer | undefined {
  if (type === GraphQLString || type === GraphQLID) {
    return (v) => {
      if (typeof v === 'string') return jsonString(v);
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
 * not a query or uses what plans do not cover. The document must be valid for `schema`. The plan is
 * generated JavaScript (one function per selection set, straight-line field by field); the only values
 * spliced into its source are JSON string literals of names, everything else is passed by reference.
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
  const helpers: unknown[] = [];
  const ref = (value: unknown) => `h[${helpers.push(value) - 1}]`;
  const lit = (text: string) => JSON.stringify(text);
  const functions: string[] = [];
  let names = 0;

  const inner = (type: GraphQLOutputType, x: string, nodes: readonly FieldNode[]): string => {
    if (isListType(type)) {
      const i = `i${names++}`;
      const y = `y${names++}`;
      return (
        `if (!Array.isArray(${x})) B(); s += '['; for (let ${i} = 0; ${i} < ${x}.length; ${i}++) { ` +
        `if (${i} > 0) s += ','; const ${y} = ${x}[${i}]; ${value(type.ofType, y, nodes)} } s += ']';`
      );
    }
    if (isObjectType(type))
      return `s += ${objectFunction(type, collectSubfields(schema, fragments, {}, type, nodes))}(${x}, c, v);`;
    if (type === GraphQLString || type === GraphQLID) {
      return `s += typeof ${x} === 'string' ? J(${x}) : ${ref(scalarWriter(type))}(${x});`;
    }
    if (type === GraphQLInt) {
      return `if (typeof ${x} !== 'number' || !Number.isInteger(${x}) || ${x} > ${INT_MAX} || ${x} < ${INT_MIN}) B(); s += '' + ${x};`;
    }
    if (type === GraphQLFloat)
      return `if (typeof ${x} !== 'number' || !Number.isFinite(${x})) B(); s += '' + ${x};`;
    if (type === GraphQLBoolean) return `if (typeof ${x} !== 'boolean') B(); s += ${x} ? 'true' : 'false';`;
    const scalar = scalarWriter(type);
    if (!scalar) {
      covered = false;
      return 'B();';
    }
    return `s += ${ref(scalar)}(${x});`;
  };
  const value = (type: GraphQLOutputType, x: string, nodes: readonly FieldNode[]): string =>
    isNonNullType(type)
      ? `if (${x} == null) B(); ${inner(type.ofType, x, nodes)}`
      : `if (${x} == null) s += 'null'; else { ${inner(type, x, nodes)} }`;

  function objectFunction(type: GraphQLObjectType, fields: Map<string, readonly FieldNode[]>): string {
    const name = `o${names++}`;
    const defs = type.getFields();
    const lines: string[] = [];
    let first = true;
    for (const [responseKey, nodes] of fields) {
      const node = nodes[0]!;
      lines.push(`s += ${lit(`${first ? '{' : ','}${JSON.stringify(responseKey)}:`)};`);
      first = false;
      const fieldName = node.name.value;
      if (fieldName === '__typename') {
        lines.push(`s += ${lit(JSON.stringify(type.name))};`);
        continue;
      }
      const def = defs[fieldName];
      if (!def) {
        covered = false;
        break;
      }
      if (!def.resolve) {
        lines.push(`x = p[${lit(fieldName)}]; if (typeof x === 'function') B();`);
      } else {
        const args = usesVariables(node)
          ? `${ref(getArgumentValues)}(${ref(def)}, ${ref(node)}, v)`
          : ref(getArgumentValues(def, node, {}));
        lines.push(
          `x = ${ref(def.resolve)}(p, ${args}, c, undefined); ` +
            `if (x !== null && typeof x === 'object' && typeof x.then === 'function') B();`,
        );
      }
      lines.push(value(def.type, 'x', nodes));
    }
    functions.push(
      `function ${name}(p, c, v) { let s = ''; let x; ${lines.join(' ')} return ${first ? "'{}'" : "s + '}'"}; }`,
    );
    return name;
  }

  const data = objectFunction(
    root,
    collectFields(schema, fragments, {}, root, operation.selectionSet as SelectionSetNode),
  );
  if (!covered) return undefined;
  const source = `${functions.join('\n')}\nreturn function plan(p, c, v) { try { return '{"data":' + ${data}(p ?? {}, c, v) + '}'; } catch { throw B.bailout; } };`;
  return new Function('h', 'J', 'B', source)(helpers, jsonString, bail) as Plan;
}

function bail(): never {
  throw BAIL;
}
bail.bailout = BAIL;
