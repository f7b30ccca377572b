/**
 * The cost model of an operation: an estimate of how many values its answer can hold, computed before
 * it runs. Each selected field costs 1, times the number of items of every list it sits in. A list's
 * item count is, in this order: its `first:` argument (a literal or a variable's value) capped by what
 * the data can hold; the length of its `ids:` or `representations:` argument (`Query.nodes`, `Query._entities`); the `first:` (else `last:`) of
 * the connection it belongs to (`CreatureConnection.edges`/`nodes`);
 * the size of such lists in the current data (recomputed after every change) — the longest one
 * (`Creature.evolutions`: 3) for a list inside a single object, the mean length rounded up (1) for a list
 * repeated inside another list, since over many items the answer holds the typical length, not the
 * longest every time; else {@link CostModel.defaultListSize}. Fragments are expanded; introspection
 * fields cost 1. Each fragment's cost is computed once per page size and repetition and reused at
 * every spread, so an estimate is linear in the document's size however often fragments spread each
 * other.
 *
 * The document may come from either graphql-js major (`ast-shape.ts`); field types are looked up in
 * the engine's graphql-js 16 schema by name.
 */
import {
  type GraphQLError,
  type GraphQLField,
  type GraphQLSchema,
  type GraphQLType,
  getNamedType,
  isInterfaceType,
  isListType,
  isNonNullType,
  isObjectType,
} from 'graphql';
import {
  type DocumentShape,
  errorAt,
  type FieldShape,
  fragmentsOf,
  type OperationShape,
  type SelectionSetShape,
  type ValueShape,
} from './ast-shape.ts';
import { DEFAULT_CONNECTION_PAGE } from './listing.ts';

/**
 * List sizes known from the data: `"Type.field"` → the most items that list has (or can have) and the
 * mean number of items, rounded up.
 */
export type KnownListSizes = ReadonlyMap<string, { max: number; mean: number }>;

/** Inputs of {@link estimateCost}. */
export interface CostModel {
  /** Items assumed for a list with no `first:` and no known size. */
  defaultListSize: number;
  /** Items assumed for a connection's `edges`/`nodes` without `first:`. */
  defaultPageSize: number;
  /** Known sizes of list fields (see {@link KnownListSizes}). */
  known: KnownListSizes;
}

/** The list field that contributes most to a cost, to point the client at it. */
export interface CostDriver {
  /** Response path of the field, e.g. `creatures` or `creature.evolutions`. */
  path: string;
  /** Items the list was counted with. */
  items: number;
  /** Cost of one item (1 plus its selections). */
  each: number;
  /** Whether the field takes a `first:` argument. */
  takesFirst: boolean;
}

/** The estimate: total cost, and the heaviest list field (if any list is selected). */
export interface CostEstimate {
  cost: number;
  driver?: CostDriver;
  /** Whether a variable's value entered the estimate (then it cannot be cached per document). */
  usesVariables: boolean;
  /**
   * Field selections of the operation with fragments expanded, each counted once whatever lists it
   * sits in: the size of the code a query compiler generates for it. Independent of variables.
   */
  fields: number;
}

/**
 * Reads the argument `name` of `node` as a number: `literal` of its literal value, or `variable` of the
 * variable's value in `variables` (`fromVariable` then true); no `value` when the argument is absent.
 */
function numberArgument(
  node: FieldShape,
  name: string,
  variables: Record<string, unknown> | undefined,
  literal: (arg: ValueShape) => number | undefined,
  variable: (value: unknown) => number | undefined,
): { value?: number; fromVariable: boolean } {
  const arg = node.arguments?.find((a) => a.name.value === name)?.value;
  if (!arg) return { fromVariable: false };
  if (arg.kind === 'Variable') return { value: variable(variables?.[arg.name.value]), fromVariable: true };
  return { value: literal(arg), fromVariable: false };
}

/** An Int argument (a literal, or a variable's number value). */
const intArgument = (node: FieldShape, name: string, variables: Record<string, unknown> | undefined) =>
  numberArgument(
    node,
    name,
    variables,
    (arg) => (arg.kind === 'IntValue' ? Number(arg.value) : undefined),
    (v) => (typeof v === 'number' ? v : undefined),
  );

/** The number of items of a list argument (a literal list, or a variable's array value; another literal: 1). */
const listArgumentLength = (node: FieldShape, name: string, variables: Record<string, unknown> | undefined) =>
  numberArgument(
    node,
    name,
    variables,
    (arg) => (arg.kind === 'ListValue' ? arg.values.length : 1),
    (v) => (Array.isArray(v) ? v.length : undefined),
  );

function isList(type: GraphQLType): boolean {
  return isListType(isNonNullType(type) ? type.ofType : type);
}

/** The cost of a selection set and its heaviest list (path relative to the set, with its local cost). */
interface Walked {
  total: number;
  /** Field selections with fragments expanded, lists not multiplied. */
  fields: number;
  driver?: CostDriver;
  driverCost: number;
}

/**
 * Estimates the cost of `operation` (see the module comment) with `variables` (coerced values, or
 * undefined at validation time, when a variable `first:` counts as the known size). `document` and
 * `operation` are a parse of either graphql-js major; fields are looked up in `schema` by type name.
 */
export function estimateCost(
  schema: GraphQLSchema,
  document: DocumentShape,
  operation: OperationShape,
  variables: Record<string, unknown> | undefined,
  model: CostModel,
): CostEstimate {
  const fragments = fragmentsOf(document);
  let usesVariables = false;
  /** Fragment name, page size and repetition → the cost of its selection set there. */
  const memo = new Map<string, Walked>();
  const inProgress = new Set<string>();

  const walk = (
    set: SelectionSetShape,
    typeName: string,
    pageSize: number | undefined,
    repeated: boolean,
  ): Walked => {
    const type = schema.getType(typeName);
    const fields = (isObjectType(type) || isInterfaceType(type) ? type.getFields() : {}) as Record<
      string,
      GraphQLField<unknown, unknown>
    >;
    let total = 0;
    let fieldCount = 0;
    let driver: CostDriver | undefined;
    let driverCost = 0;
    const consider = (inner: Walked, prefix: string) => {
      if (inner.driver && inner.driverCost > driverCost) {
        driverCost = inner.driverCost;
        driver = { ...inner.driver, path: prefix ? `${prefix}.${inner.driver.path}` : inner.driver.path };
      }
    };
    for (const sel of set.selections) {
      if (sel.kind === 'InlineFragment') {
        const inner = walk(sel.selectionSet, sel.typeCondition?.name.value ?? typeName, pageSize, repeated);
        total += inner.total;
        fieldCount += inner.fields;
        consider(inner, '');
        continue;
      }
      if (sel.kind === 'FragmentSpread') {
        const name = sel.name.value;
        const key = `${name}\u0000${pageSize}\u0000${repeated}`;
        let inner = memo.get(key);
        if (inner === undefined) {
          const frag = fragments.get(name);
          if (!frag || inProgress.has(name)) continue;
          inProgress.add(name);
          inner = walk(frag.selectionSet, frag.typeCondition.name.value, pageSize, repeated);
          inProgress.delete(name);
          memo.set(key, inner);
        }
        total += inner.total;
        fieldCount += inner.fields;
        consider(inner, '');
        continue;
      }
      const name = sel.name.value;
      fieldCount += 1;
      if (name.startsWith('__')) {
        total += 1;
        continue;
      }
      const field = fields[name];
      if (!field) continue;
      const responseName = sel.alias?.value ?? name;
      const takesFirst = field.args.some((a) => a.name === 'first');
      const first = takesFirst ? intArgument(sel, 'first', variables) : { fromVariable: false };
      const last = field.args.some((a) => a.name === 'last')
        ? intArgument(sel, 'last', variables)
        : { fromVariable: false };
      const listArg = field.args.find((a) => a.name === 'ids' || a.name === 'representations');
      const ids = listArg ? listArgumentLength(sel, listArg.name, variables) : { fromVariable: false };
      if (first.fromVariable || last.fromVariable || ids.fromVariable) usesVariables = true;
      const known = model.known.get(`${typeName}.${name}`);
      const knownSize = known === undefined ? undefined : repeated ? known.mean : known.max;
      let items = 1;
      if (isList(field.type)) {
        const fromPage = name === 'edges' || name === 'nodes' ? pageSize : undefined;
        items = first.value ?? ids.value ?? fromPage ?? knownSize ?? model.defaultListSize;
        if (known !== undefined) items = Math.min(items, known.max);
        items = Math.max(items, 0);
      }
      // A connection field passes its page size down to its edges and nodes.
      const childPage =
        !isList(field.type) && takesFirst
          ? Math.min(
              first.value ?? last.value ?? model.defaultPageSize,
              known?.max ?? Number.POSITIVE_INFINITY,
            )
          : undefined;
      const inner = sel.selectionSet
        ? walk(
            sel.selectionSet,
            getNamedType(field.type).name,
            childPage,
            repeated || items > 1 || (childPage ?? 0) > 1,
          )
        : undefined;
      if (inner) {
        consider(inner, responseName);
        fieldCount += inner.fields;
      }
      const cost = items * (1 + (inner?.total ?? 0));
      if (isList(field.type) && cost > driverCost) {
        driverCost = cost;
        driver = { path: responseName, items, each: 1 + (inner?.total ?? 0), takesFirst };
      }
      total += cost;
    }
    return { total, fields: fieldCount, driver, driverCost };
  };

  const root =
    operation.operation === 'query'
      ? schema.getQueryType()
      : operation.operation === 'mutation'
        ? schema.getMutationType()
        : schema.getSubscriptionType();
  if (!root) return { cost: 0, usesVariables, fields: 0 };
  const { total, fields, driver } = walk(operation.selectionSet, root.name, undefined, false);
  return { cost: total, driver, usesVariables, fields };
}

/** The limit {@link checkCost} applies and the model's default list length. */
export interface CostLimit {
  /** Highest estimated cost allowed. */
  maxCost: number;
  /** Items assumed for a list with no `first:` and no known size. */
  defaultListSize: number;
}

/**
 * The cost check of the transports that estimate a document once per request (WebSocket, incremental
 * delivery, the validation rule of `limits.ts`): {@link estimateCost} with `variables`, the data's
 * `known` list sizes and connection pages of `DEFAULT_CONNECTION_PAGE` items, then the
 * `QUERY_TOO_COSTLY` error ({@link costError}) when the estimate exceeds `limit.maxCost`, else
 * undefined. The HTTP engine runs the same estimate and comparison with a per-document cache.
 */
export function checkCost(
  schema: GraphQLSchema,
  document: DocumentShape,
  operation: OperationShape,
  variables: Record<string, unknown> | undefined,
  limit: CostLimit,
  known: KnownListSizes,
): GraphQLError | undefined {
  const estimate = estimateCost(schema, document, operation, variables, {
    defaultListSize: limit.defaultListSize,
    defaultPageSize: DEFAULT_CONNECTION_PAGE,
    known,
  });
  return tooCostly(estimate, limit.maxCost, operation);
}

/**
 * The one cost check of every transport: the `QUERY_TOO_COSTLY` error ({@link costError}) when
 * `estimate.cost` is over `maxCost`, else undefined. {@link checkCost} estimates and calls it; the HTTP
 * engine calls it with its cached estimates.
 */
export function tooCostly(
  estimate: CostEstimate,
  maxCost: number,
  operation: OperationShape,
): GraphQLError | undefined {
  return estimate.cost > maxCost ? costError(estimate, maxCost, operation) : undefined;
}

/**
 * The `QUERY_TOO_COSTLY` error for an estimate over `maxCost`: it names the heaviest list field, its
 * item count and cost per item, and suggests `first:` where the field takes one; located at the
 * operation ({@link errorAt}).
 */
export function costError(estimate: CostEstimate, maxCost: number, operation: OperationShape): GraphQLError {
  // Thousands separators by hand: the first `toLocaleString` of a process loads ICU data (tens of ms).
  const n = (x: number) => String(Math.round(x)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  let message = `Query cost ${n(estimate.cost)} exceeds the maximum cost of ${n(maxCost)} (each value of the answer counts 1).`;
  const d = estimate.driver;
  if (d) {
    message += ` The largest part is ${d.path}: ${n(d.items)} items × ${n(d.each)} per item.`;
    const fit = Math.max(0, Math.floor((maxCost - (estimate.cost - d.items * d.each)) / d.each));
    message += d.takesFirst
      ? ` Ask for fewer items with ${d.path.split('.').at(-1)}(first: ${n(Math.max(1, Math.min(fit, d.items - 1)))}) or select fewer fields inside it.`
      : ' Select fewer fields inside it or fewer nested lists.';
  }
  return errorAt(message, operation, {
    code: 'QUERY_TOO_COSTLY',
    cost: estimate.cost,
    maxCost,
    ...(d ? { field: d.path } : {}),
  });
}

/** The data's creature fields, as far as their list lengths matter to {@link listSizesOf}. */
interface CreatureLists {
  types: readonly unknown[];
  resistant: readonly unknown[];
  weaknesses: readonly unknown[];
  evolutions: readonly unknown[];
  previousEvolutions: readonly unknown[];
  attacks: { fast: readonly unknown[]; special: readonly unknown[] };
}

/**
 * The {@link KnownListSizes} of the creature schema for the current data: `Query.creatures` (and the
 * connection's pages) hold at most every creature, each `Creature` list at most its longest instance.
 */
export function listSizesOf(creatures: readonly CreatureLists[]): KnownListSizes {
  const count = creatures.length;
  const size = (pick: (c: CreatureLists) => readonly unknown[]) => {
    let max = 0;
    let sum = 0;
    for (const c of creatures) {
      const n = pick(c).length;
      sum += n;
      if (n > max) max = n;
    }
    return { max, mean: count === 0 ? 0 : Math.ceil(sum / count) };
  };
  const all = { max: count, mean: count };
  return new Map([
    ['Query.creatures', all],
    ['Query.creaturesConnection', all],
    ['CreatureConnection.edges', all],
    ['CreatureConnection.nodes', all],
    ['Creature.types', size((c) => c.types)],
    ['Creature.resistant', size((c) => c.resistant)],
    ['Creature.weaknesses', size((c) => c.weaknesses)],
    ['Creature.evolutions', size((c) => c.evolutions)],
    ['Creature.previousEvolutions', size((c) => c.previousEvolutions)],
    ['Attacks.fast', size((c) => c.attacks.fast)],
    ['Attacks.special', size((c) => c.attacks.special)],
  ]);
}
