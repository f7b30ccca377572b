/**
 * The checks every transport runs on an operation before it executes, each failing with its error code
 * (`errors.ts`): {@link checkDocument} parses the text within the parse limits (`parse-limits.ts`,
 * `GRAPHQL_PARSE_FAILED`) and validates it (`GRAPHQL_VALIDATION_FAILED`); {@link coerceVariables} coerces
 * the variables to their declared types (`BAD_USER_INPUT`; GraphQL over HTTP, "Variable coercion
 * failure"). The HTTP engine keeps a document's check per query text; WebSocket and multipart
 * subscriptions check each operation. The cost check is `cost.ts`'s.
 */
import {
  type DocumentNode,
  GraphQLError,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
  validate,
} from 'graphql';
import { getVariableValues } from 'graphql/execution/values.js';
import { withCode } from './errors.ts';
import { DEFAULT_PARSE_LIMITS, type ParseLimits, parseWithLimits } from './parse-limits.ts';

/** Most variable coercion errors reported for one operation (graphql-js's `maxErrors`). */
export const MAX_VARIABLE_ERRORS = 50;

/** A checked document, or the errors (with codes) that refuse it. */
export type DocumentCheck =
  | { readonly document: DocumentNode; readonly errors?: undefined }
  | { readonly document?: undefined; readonly errors: readonly GraphQLError[] };

/** Coerced variable values, or the errors (with code `BAD_USER_INPUT`) that refuse them. */
export type VariablesCheck =
  | { readonly coerced: Record<string, unknown>; readonly errors?: undefined }
  | { readonly coerced?: undefined; readonly errors: readonly GraphQLError[] };

/**
 * Parses `query` within `parseLimits` and validates it against `schema` with `rules`. A parse error
 * comes back as one `GRAPHQL_PARSE_FAILED` error (or the parse limit's own code), validation errors as
 * `GRAPHQL_VALIDATION_FAILED` (or the rule's own code); `suggestions: false` drops graphql-js's "Did you
 * mean …?" hints. Throws only what is not a `GraphQLError` (a fault, not the client's).
 */
export function checkDocument(
  schema: GraphQLSchema,
  query: string,
  rules: readonly ValidationRule[],
  suggestions = true,
  parseLimits: ParseLimits = DEFAULT_PARSE_LIMITS,
): DocumentCheck {
  let document: DocumentNode;
  try {
    document = parseWithLimits(query, parseLimits);
  } catch (err) {
    if (!(err instanceof GraphQLError)) throw err;
    return { errors: [withCode(err, 'GRAPHQL_PARSE_FAILED', suggestions)] };
  }
  const errors = validate(schema, document, rules);
  if (errors.length > 0)
    return { errors: errors.map((e) => withCode(e, 'GRAPHQL_VALIDATION_FAILED', suggestions)) };
  return { document };
}

/**
 * Coerces `variables` (the request's raw values) to the types `operation` declares (GraphQL spec
 * §6.1.2 "CoerceVariableValues", at most {@link MAX_VARIABLE_ERRORS} errors), as graphql-js's
 * `getVariableValues`; its errors get code `BAD_USER_INPUT`.
 */
export function coerceVariables(
  schema: GraphQLSchema,
  operation: OperationDefinitionNode,
  variables: Record<string, unknown>,
  suggestions = true,
): VariablesCheck {
  const result = getVariableValues(schema, operation.variableDefinitions ?? [], variables, {
    maxErrors: MAX_VARIABLE_ERRORS,
  });
  if (result.errors) return { errors: result.errors.map((e) => withCode(e, 'BAD_USER_INPUT', suggestions)) };
  return result;
}
