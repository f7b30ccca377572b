/**
 * The parts of a parsed GraphQL document that the cost model (`cost.ts`) and the depth limit
 * (`limits.ts`) read, as read-only structural types keyed by `kind` strings (GraphQL spec §2
 * "Language": operations, fragments, selection sets, fields, arguments, values). The documents of
 * graphql-js 16 (the engine) and of graphql-js 17 (incremental delivery, `incremental.ts`) both satisfy
 * them without a cast, so either major's parse of a text is checked by the same code and a text is
 * parsed once.
 *
 * The two majors do not build the same objects: graphql-js 17 leaves a field's `arguments` and
 * `directives` undefined where graphql-js 16 gives empty arrays. Every list that may be missing is
 * therefore optional here, and the code that reads these types treats a missing list as empty.
 */
import { GraphQLError } from 'graphql';

/** A name in the document: of a field, an argument, a variable, a fragment or a type. */
export interface NameShape {
  readonly value: string;
}

/** The text a document was parsed from (graphql-js's `Source` of either major). */
export interface SourceShape {
  readonly body: string;
  readonly name: string;
  /** Line and column (1-based) of the text's first character in a larger file. */
  readonly locationOffset: { readonly line: number; readonly column: number };
  readonly [Symbol.toStringTag]: string;
}

/** Where a node starts in its source: `start` is an offset in UTF-16 code units into `source.body`. */
export interface LocationShape {
  readonly start: number;
  readonly source: SourceShape;
}

/**
 * An argument's value (GraphQL spec §2.9 "Input Values"): the kinds the cost model reads (a variable,
 * an Int, a list) with their parts, every other kind by its name only.
 */
export type ValueShape =
  | { readonly kind: 'Variable'; readonly name: NameShape }
  | { readonly kind: 'IntValue'; readonly value: string }
  | { readonly kind: 'ListValue'; readonly values: readonly ValueShape[] }
  | {
      readonly kind:
        | 'FloatValue'
        | 'StringValue'
        | 'BooleanValue'
        | 'NullValue'
        | 'EnumValue'
        | 'ObjectValue';
    };

/** `name: value` in a field's arguments. */
export interface ArgumentShape {
  readonly name: NameShape;
  readonly value: ValueShape;
}

/** A field selection (§2.5); `arguments` and `selectionSet` may be missing (then none). */
export interface FieldShape {
  readonly kind: 'Field';
  readonly alias?: NameShape;
  readonly name: NameShape;
  readonly arguments?: readonly ArgumentShape[];
  readonly selectionSet?: SelectionSetShape;
}

/** `...Name` (§2.8). */
export interface FragmentSpreadShape {
  readonly kind: 'FragmentSpread';
  readonly name: NameShape;
}

/** `... on Type { … }` or `... { … }` (§2.8.2). */
export interface InlineFragmentShape {
  readonly kind: 'InlineFragment';
  readonly typeCondition?: { readonly name: NameShape };
  readonly selectionSet: SelectionSetShape;
}

/** One selection of a selection set. */
export type SelectionShape = FieldShape | FragmentSpreadShape | InlineFragmentShape;

/** `{ … }` (§2.4). */
export interface SelectionSetShape {
  readonly selections: readonly SelectionShape[];
}

/** An operation definition (§2.3); `loc` is missing when the document was parsed without locations. */
export interface OperationShape {
  readonly kind: 'OperationDefinition';
  readonly operation: 'query' | 'mutation' | 'subscription';
  readonly selectionSet: SelectionSetShape;
  readonly loc?: LocationShape;
}

/** `fragment Name on Type { … }` (§2.8). */
export interface FragmentShape {
  readonly kind: 'FragmentDefinition';
  readonly name: NameShape;
  readonly typeCondition: { readonly name: NameShape };
  readonly selectionSet: SelectionSetShape;
}

/** Any definition of a document: an operation, a fragment, or another kind the checks pass over. */
export type DefinitionShape = OperationShape | FragmentShape | { readonly kind: string };

/** A parsed document (§2.2). */
export interface DocumentShape {
  readonly definitions: readonly DefinitionShape[];
}

/** Whether `definition` is a fragment definition. */
export function isFragment(definition: DefinitionShape): definition is FragmentShape {
  return definition.kind === 'FragmentDefinition';
}

/** Whether `definition` is an operation definition. */
export function isOperation(definition: DefinitionShape): definition is OperationShape {
  return definition.kind === 'OperationDefinition';
}

/** The fragment definitions of `document` by name (the last one where a name repeats). */
export function fragmentsOf(document: DocumentShape): Map<string, FragmentShape> {
  const map = new Map<string, FragmentShape>();
  for (const definition of document.definitions) {
    if (isFragment(definition)) map.set(definition.name.value, definition);
  }
  return map;
}

/**
 * A graphql-js 16 `GraphQLError` with `message` and `extensions`, located (`locations`, `source`,
 * `positions`) at the start of `operation` when it has a location: the same error as one made with
 * `nodes: [operation]`, for an operation of either graphql-js major.
 */
export function errorAt(
  message: string,
  operation: OperationShape,
  extensions: Record<string, unknown>,
): GraphQLError {
  const loc = operation.loc;
  return new GraphQLError(message, {
    ...(loc ? { source: loc.source, positions: [loc.start] } : {}),
    extensions,
  });
}
