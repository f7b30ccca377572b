/**
 * Query plans: a query operation compiled into one function that resolves the data and writes the JSON
 * response in the same walk, as UTF-8 bytes into a scratch buffer (`plan-writer.ts`), with no
 * intermediate result object and no intermediate string (GraphQL spec §6 "Execution" for the happy
 * path, §7 "Response" for the shape). Field order and merging come from graphql-js's own
 * `collectFields`, scalars are serialized by their types' `serialize` (inlined for the built-in
 * scalars), so the bytes are those of the text graphql-js / graphql-jit would produce.
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
import {
  grow,
  WRITER,
  writeAscii,
  writeBytes,
  writeJson,
  writeString,
  written,
  writtenText,
} from './plan-writer.ts';

/** Thrown by a plan when the answer needs the full executor (an error, a promise, a bad value). */
export class PlanBailout extends Error {}
const BAIL = new PlanBailout('plan bailout');

/**
 * A compiled plan: `(rootValue, contextValue, coercedVariables) =>` the UTF-8 bytes of the JSON text of
 * the whole response (`{"data":…}`). Throws {@link PlanBailout} where the answer needs the full executor.
 */
export type Plan = ((root: unknown, context: unknown, variables: Record<string, unknown>) => Buffer) & {
  /**
   * The same answer, up to `MAX_TEXT_BYTES` (16 KiB) as a latin1 string of its UTF-8 bytes (one
   * character per byte; `plan-writer.ts` `writtenText`), larger as bytes. Throws {@link PlanBailout} as
   * the plan does.
   */
  text(root: unknown, context: unknown, variables: Record<string, unknown>): string | Buffer;
};

/** Serializes a leaf value to its JSON text, or throws {@link PlanBailout}. */
type Writer = (value: unknown) => string;

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

/** Static pieces up to this many bytes are written by inline byte stores, longer ones by a copy. */
const INLINE_BYTES = 48;

/**
 * Compiles the query `operation` of `document` into a {@link Plan}, or `undefined` when the operation is
 * not a query or uses what plans do not cover. The document must be valid for `schema`. The plan is
 * generated JavaScript (one function per selection set, straight-line field by field, each taking and
 * returning the write position `n` in the scratch buffer `b`); the only values spliced into its source
 * are byte values and JSON string literals of names, everything else is passed by reference.
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

  /** Code writing the fixed text `text` at `n`. */
  const put = (text: string): string => {
    const bytes = Buffer.from(text, 'utf8');
    if (bytes.length > INLINE_BYTES) return `n = WB(b, n, ${ref(bytes)}); b = W.b;`;
    let code = `if (n + ${bytes.length} > b.length) b = G(n, ${bytes.length});`;
    for (let i = 0; i < bytes.length; i++) code += ` b[n${i ? ` + ${i}` : ''}] = ${bytes[i]};`;
    return `${code} n += ${bytes.length};`;
  };
  /** Code writing the value of the helper call `call` (string → JSON text) at `n`. */
  const putJson = (call: string) => `n = WJ(b, n, ${call}); b = W.b;`;

  const inner = (type: GraphQLOutputType, x: string, nodes: readonly FieldNode[]): string => {
    if (isListType(type)) {
      const i = `i${names++}`;
      const y = `y${names++}`;
      return (
        `if (!Array.isArray(${x})) B(); ${put('[')} for (let ${i} = 0; ${i} < ${x}.length; ${i}++) { ` +
        `if (${i} > 0) { ${put(',')} } const ${y} = ${x}[${i}]; ${value(type.ofType, y, nodes)} } ${put(']')}`
      );
    }
    if (isObjectType(type)) {
      const fn = objectFunction(type, collectSubfields(schema, fragments, {}, type, nodes));
      return `n = ${fn}(${x}, c, v, n); b = W.b;`;
    }
    if (type === GraphQLString || type === GraphQLID) {
      return `if (typeof ${x} === 'string') { n = WS(b, n, ${x}); b = W.b; } else { ${putJson(`${ref(scalarWriter(type))}(${x})`)} }`;
    }
    if (type === GraphQLInt) {
      return `if (typeof ${x} !== 'number' || !Number.isInteger(${x}) || ${x} > ${INT_MAX} || ${x} < ${INT_MIN}) B(); n = WA(b, n, '' + ${x}); b = W.b;`;
    }
    if (type === GraphQLFloat)
      return `if (typeof ${x} !== 'number' || !Number.isFinite(${x})) B(); n = WA(b, n, '' + ${x}); b = W.b;`;
    if (type === GraphQLBoolean)
      return `if (${x} === true) { ${put('true')} } else if (${x} === false) { ${put('false')} } else B();`;
    const scalar = scalarWriter(type);
    if (!scalar) {
      covered = false;
      return 'B();';
    }
    return putJson(`${ref(scalar)}(${x})`);
  };
  const value = (type: GraphQLOutputType, x: string, nodes: readonly FieldNode[]): string =>
    isNonNullType(type)
      ? `if (${x} == null) B(); ${inner(type.ofType, x, nodes)}`
      : `if (${x} == null) { ${put('null')} } else { ${inner(type, x, nodes)} }`;

  function objectFunction(type: GraphQLObjectType, fields: Map<string, readonly FieldNode[]>): string {
    const name = `o${names++}`;
    const defs = type.getFields();
    const lines: string[] = [];
    let first = true;
    for (const [responseKey, nodes] of fields) {
      const node = nodes[0]!;
      const key = `${first ? '{' : ','}${JSON.stringify(responseKey)}:`;
      first = false;
      const fieldName = node.name.value;
      if (fieldName === '__typename') {
        lines.push(put(key + JSON.stringify(type.name)));
        continue;
      }
      lines.push(put(key));
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
    lines.push(put(first ? '{}' : '}'));
    functions.push(`function ${name}(p, c, v, n) { let b = W.b; let x; ${lines.join(' ')} return n; }`);
    return name;
  }

  const data = objectFunction(
    root,
    collectFields(schema, fragments, {}, root, operation.selectionSet as SelectionSetNode),
  );
  if (!covered) return undefined;
  const source =
    `${functions.join('\n')}\n` +
    `function run(b, n, p, c, v) { try { ${put('{"data":')} n = ${data}(p ?? {}, c, v, n); b = W.b; ${put('}')} return n; } catch { throw B.bailout; } }\n` +
    'function plan(p, c, v) { return X(run, p, c, v, B.bailout); }\n' +
    'plan.text = function text(p, c, v) { return XT(run, p, c, v, B.bailout); };\n' +
    'return plan;';
  return new Function('h', 'W', 'G', 'WB', 'WS', 'WA', 'WJ', 'X', 'XT', 'B', source)(
    helpers,
    WRITER,
    grow,
    writeBytes,
    writeString,
    writeAscii,
    writeJson,
    written,
    writtenText,
    bail,
  ) as Plan;
}

function bail(): never {
  throw BAIL;
}
bail.bailout = BAIL;
