/**
 * Masking of unexpected errors, the one place that decides what a client sees of an error, for every
 * transport: the HTTP engine, the execution results streamed by the subscription transports (SSE,
 * WebSocket, multipart) and incremental delivery (graphql-js 17). An error whose original error is not
 * a `GraphQLError` of either graphql-js major (a resolver bug, a failing store) is unexpected: it is
 * reported through `onUnexpectedError` and, when masking is on, replaced by `Internal server error`
 * with `extensions.code` `INTERNAL_SERVER_ERROR` (its path kept).
 */
import { type ExecutionResult, GraphQLError, type GraphQLFormattedError } from 'graphql';
import { GraphQLError as GraphQLError17 } from 'graphql17';
import type { CreatureErrorCode } from './errors.ts';

/** The message a client sees in place of an unexpected error. */
const MASKED_MESSAGE = 'Internal server error';
/** The `extensions` a client sees in place of an unexpected error's. */
const MASKED_EXTENSIONS: { code: CreatureErrorCode } = { code: 'INTERNAL_SERVER_ERROR' };

/** An error of either graphql-js major, as far as masking reads it. */
export interface MaskableError {
  /** The exception a resolver (or the store under it) threw, when the error wraps one. */
  readonly originalError?: unknown;
}

/**
 * Whether an error came from an unexpected exception rather than a deliberate `GraphQLError` (of
 * graphql-js 16 or 17): it wraps an original error that is no `GraphQLError`.
 */
export function isUnexpected(error: MaskableError): boolean {
  const original = error.originalError;
  return original != null && !(original instanceof GraphQLError) && !(original instanceof GraphQLError17);
}

/**
 * The decision for one error: false when it is not unexpected ({@link isUnexpected}); else reports its
 * original error to `onUnexpectedError` and answers `maskErrors` (whether the client sees the masked
 * error instead of this one).
 */
function masks(
  error: MaskableError,
  maskErrors: boolean,
  onUnexpectedError: ((err: unknown) => void) | undefined,
): boolean {
  if (!isUnexpected(error)) return false;
  onUnexpectedError?.(error.originalError);
  return maskErrors;
}

/**
 * `error` itself when it is not unexpected ({@link isUnexpected}); else reports its original error to
 * `onUnexpectedError` and returns, with `maskErrors`, `Internal server error` with `extensions.code`
 * `INTERNAL_SERVER_ERROR` (its nodes and path kept), without it the error unchanged.
 */
export function maskError(
  error: GraphQLError,
  maskErrors: boolean,
  onUnexpectedError?: (err: unknown) => void,
): GraphQLError {
  return masks(error, maskErrors, onUnexpectedError)
    ? new GraphQLError(MASKED_MESSAGE, {
        nodes: error.nodes,
        path: error.path,
        extensions: { ...MASKED_EXTENSIONS },
      })
    : error;
}

/**
 * The JSON a client sees of an error of graphql-js 17 (incremental delivery): `error.toJSON()`, or,
 * when {@link maskError}'s rule masks it, `{ message: 'Internal server error', path, extensions:
 * { code: 'INTERNAL_SERVER_ERROR' } }` (no locations). Reports unexpected errors to `onUnexpectedError`.
 */
export function maskedJson(
  error: MaskableError & {
    readonly path?: readonly (string | number)[] | undefined;
    toJSON(): GraphQLFormattedError;
  },
  maskErrors: boolean,
  onUnexpectedError?: (err: unknown) => void,
): GraphQLFormattedError {
  return masks(error, maskErrors, onUnexpectedError)
    ? { message: MASKED_MESSAGE, path: error.path, extensions: { ...MASKED_EXTENSIONS } }
    : error.toJSON();
}

/**
 * `result` with its unexpected errors reported and (with `maskErrors`) masked ({@link maskError});
 * `undefined` when it has none (the result is then sent as it is).
 */
export function maskUnexpectedErrors(
  result: ExecutionResult,
  maskErrors: boolean,
  onUnexpectedError?: (err: unknown) => void,
): ExecutionResult | undefined {
  if (!result.errors?.some(isUnexpected)) return undefined;
  return {
    ...result,
    errors: result.errors.map((error) => maskError(error, maskErrors, onUnexpectedError)),
  };
}
