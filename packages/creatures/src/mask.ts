/**
 * Masking of unexpected errors, for the HTTP engine and in execution results streamed by the
 * subscription transports (SSE, WebSocket): an error whose original error is not a `GraphQLError` (a
 * resolver bug, a failing store) is reported through `onUnexpectedError` and, when masking is on,
 * replaced by `Internal server error` with `extensions.code` `INTERNAL_SERVER_ERROR` (its path and
 * locations kept).
 */
import { type ExecutionResult, GraphQLError } from 'graphql';

/** Whether an error came from an unexpected exception rather than a deliberate `GraphQLError`. */
export function isUnexpected(error: GraphQLError): boolean {
  return error.originalError != null && !(error.originalError instanceof GraphQLError);
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
  if (!isUnexpected(error)) return error;
  onUnexpectedError?.(error.originalError);
  return maskErrors
    ? new GraphQLError('Internal server error', {
        nodes: error.nodes,
        path: error.path,
        extensions: { code: 'INTERNAL_SERVER_ERROR' },
      })
    : error;
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
