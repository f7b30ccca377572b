/**
 * Error hierarchy of the sandbox SDK (spec 002, "Errors"): `BoxError` is the base; `ExecError`,
 * `TimeoutError` and `ParseError` derive from it. Every error carries a stable machine `code`
 * (`BoxErrorCode`); the REST server derives its HTTP status from that code alone ({@link ERROR_CODES}).
 */

/**
 * Stable machine codes of `BoxError.code`. New codes may be added; existing ones never change meaning.
 * Every `BoxError` carries one (`BoxErrorInit`); an unknown box is `not_found` everywhere. Their HTTP
 * statuses and meanings are in {@link ERROR_CODES}.
 */
export const BOX_ERROR_CODES = [
  'invalid_option',
  'not_found',
  'conflict',
  'image',
  'timeout',
  'exec',
  'parse',
  'unsupported',
  'unavailable',
  'unauthenticated',
  'permission_denied',
  'quota_exceeded',
  'capacity',
  'internal',
] as const;
/** One of {@link BOX_ERROR_CODES}. */
export type BoxErrorCode = (typeof BOX_ERROR_CODES)[number];

/** The category (`error.type`) of an error body of the REST server. */
export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'capacity_error'
  | 'sandbox_error'
  | 'internal_error';

/** One row of {@link ERROR_CODES}. */
export interface ErrorCodeInfo {
  /** HTTP status of an answer with this code. */
  readonly status: number;
  /** `error.type` of the body. */
  readonly type: ErrorType;
  /** The `BoxError.code` the SDK's REST client turns the answer into (the code itself for a `BoxErrorCode`). */
  readonly sdk: BoxErrorCode;
  /** When it is answered (the README "Errors" table and the OpenAPI `Error` schema say the same). */
  readonly meaning: string;
}

const row = (status: number, type: ErrorType, sdk: BoxErrorCode, meaning: string): ErrorCodeInfo => ({
  status,
  type,
  sdk,
  meaning,
});

/**
 * The one table of error codes: every `BoxError.code` and every further code the REST server answers
 * (`error.code` of its error bodies), each with its HTTP status — the server takes the status from this
 * table alone, never from a message — its `error.type`, and the `BoxError.code` the REST client rebuilds.
 * The OpenAPI `Error` schema enumerates these keys; `test/errors-codes.test.ts` checks the README table
 * against it and drives the server for its codes.
 */
export const ERROR_CODES = {
  invalid_option: row(
    400,
    'invalid_request_error',
    'invalid_option',
    'a bad option, argument or request field (`field` names it)',
  ),
  not_found: row(
    404,
    'not_found_error',
    'not_found',
    "no such box, volume, pool, execution, snapshot, file or tenant (another tenant's is not found either)",
  ),
  conflict: row(
    409,
    'conflict_error',
    'conflict',
    'the state forbids it: running / not running, name taken, in use, a directory in the way',
  ),
  image: row(422, 'sandbox_error', 'image', 'the image cannot be pulled, found or unpacked'),
  exec: row(422, 'sandbox_error', 'exec', 'a command failed or cannot start'),
  timeout: row(504, 'sandbox_error', 'timeout', 'an operation exceeded its time limit'),
  parse: row(502, 'sandbox_error', 'parse', 'command output could not be parsed'),
  unsupported: row(501, 'sandbox_error', 'unsupported', 'this runtime does not offer the operation'),
  unavailable: row(
    503,
    'sandbox_error',
    'unavailable',
    'the REST server (or a service it needs) cannot be reached',
  ),
  unauthenticated: row(401, 'authentication_error', 'unauthenticated', 'the credential was refused'),
  permission_denied: row(
    403,
    'permission_error',
    'permission_denied',
    "a permission is missing (also a box user's file permissions)",
  ),
  quota_exceeded: row(
    429,
    'rate_limit_error',
    'quota_exceeded',
    'the tenant is over a quota or rate limit (`field` names it; `Retry-After` when waiting helps)',
  ),
  capacity: row(
    503,
    'capacity_error',
    'capacity',
    'the node cannot hold the box now (`field`: `memory`, `disk`, `processes`; `Retry-After`)',
  ),
  internal: row(
    500,
    'internal_error',
    'internal',
    'anything else: a bug or a host failure (generic message; the server log has the cause)',
  ),
  invalid_body: row(
    400,
    'invalid_request_error',
    'invalid_option',
    'the body (or a header carrying JSON) is not what the route takes',
  ),
  unknown_field: row(
    400,
    'invalid_request_error',
    'invalid_option',
    'the body or query names a field the route does not know (`field` names it)',
  ),
  body_too_large: row(
    413,
    'invalid_request_error',
    'invalid_option',
    'the JSON body is larger than the server takes (4 MiB)',
  ),
  unsupported_media_type: row(
    415,
    'invalid_request_error',
    'invalid_option',
    'the body has a media type the route does not take',
  ),
  upgrade_required: row(
    426,
    'invalid_request_error',
    'invalid_option',
    'a WebSocket endpoint reached without an upgrade',
  ),
  route_not_found: row(404, 'not_found_error', 'not_found', 'no route of that method and path'),
  execution_not_found: row(
    404,
    'not_found_error',
    'not_found',
    'no such execution on the multiplexed exec stream',
  ),
  volume_not_found: row(
    404,
    'not_found_error',
    'not_found',
    'a box names a managed volume its tenant does not have',
  ),
  tunnel_not_found: row(
    404,
    'not_found_error',
    'not_found',
    "no such prepared tunnel (one-shot, 60 s), or another tenant's",
  ),
  preview_not_found: row(
    404,
    'not_found_error',
    'not_found',
    'a preview URL unknown, expired, revoked, or for another box or port',
  ),
  already_attached: row(
    409,
    'conflict_error',
    'conflict',
    'the execution already has an attached client (one at a time)',
  ),
  missing_credentials: row(
    401,
    'authentication_error',
    'unauthenticated',
    'no credential (`Authorization: Bearer` or `X-API-KEY`)',
  ),
  invalid_credentials: row(
    401,
    'authentication_error',
    'unauthenticated',
    'not a valid API key or access token of this server',
  ),
  invalid_token: row(
    401,
    'authentication_error',
    'unauthenticated',
    'the access token is invalid or expired',
  ),
  invalid_tenant: row(
    401,
    'authentication_error',
    'unauthenticated',
    "the access token's tenant claim (or `sub`) is missing, malformed or reserved",
  ),
  missing_permission: row(
    403,
    'permission_error',
    'permission_denied',
    'the credential lacks the permission the route needs',
  ),
  loopback_only: row(
    403,
    'permission_error',
    'permission_denied',
    'a server without credentials serves loopback clients only',
  ),
  tunnel_failed: row(502, 'sandbox_error', 'unavailable', 'the box side of a tunnel cannot be reached'),
  preview_unreachable: row(
    502,
    'sandbox_error',
    'unavailable',
    'the box port behind a preview URL cannot be reached',
  ),
} as const satisfies Record<BoxErrorCode, ErrorCodeInfo> & Record<string, ErrorCodeInfo>;

/** A code of {@link ERROR_CODES}: a `BoxErrorCode` or a further code of the REST server's answers. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** True when `value` is a key of {@link ERROR_CODES}. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

/** True when `value` is one of {@link BOX_ERROR_CODES}. */
export function isBoxErrorCode(value: unknown): value is BoxErrorCode {
  return typeof value === 'string' && (BOX_ERROR_CODES as readonly string[]).includes(value);
}

/** Options of a `BoxError`: the standard `cause`, the stable code, and the offending option field. */
export interface BoxErrorOptions extends ErrorOptions {
  /** Path of the rejected option, e.g. `volumes[0].readOnly` or `ports[1].protocol`. */
  field?: string;
  /** Stable code; default `invalid_option` when `field` is given, else `internal`. */
  code?: BoxErrorCode;
  /** When retrying may succeed, ms from now (`quota_exceeded`, `capacity`: HTTP `Retry-After`). */
  retryAfterMs?: number;
}

/**
 * What `new BoxError(message, init)` takes: `BoxErrorOptions` with a `code`, or with a `field` (then the
 * code is `invalid_option` unless given). Every `BoxError` thus carries a deliberate code; the type
 * checker refuses one without.
 */
export type BoxErrorInit = BoxErrorOptions & ({ code: BoxErrorCode } | { field: string });

/**
 * Any SDK error (spec 002 "Errors": base class). `message` says what failed and, where known, which field
 * or image; `code` is the stable machine code (see {@link BOX_ERROR_CODES}); `field` is set when a
 * caller-supplied option was rejected (code `invalid_option`: HTTP 400 over REST).
 */
export class BoxError extends Error {
  /** Stable machine code; callers branch on this, never on `message`. */
  readonly code: BoxErrorCode;
  /** Path of the rejected option (`volumes[0].hostPath`), when the error is about one. */
  readonly field?: string;
  /** When retrying may succeed, ms from now (`quota_exceeded`, `capacity`); absent: no hint. */
  readonly retryAfterMs?: number;
  /**
   * @param message human-readable description naming the offending field, image or box.
   * @param options the stable `code` (or a `field`: `invalid_option`), `cause`, `retryAfterMs`.
   */
  constructor(message: string, options: BoxErrorInit) {
    super(message, options);
    this.name = 'BoxError';
    this.code = options?.code ?? (options?.field !== undefined ? 'invalid_option' : 'internal');
    if (options?.field !== undefined) this.field = options.field;
    if (options?.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs;
  }
}

/** Shorthand: a `BoxError` with code `not_found`. */
export function notFound(message: string, options?: Omit<BoxErrorOptions, 'code'>): BoxError {
  return new BoxError(message, { ...options, code: 'not_found' });
}

/** Shorthand: a `BoxError` with code `conflict`. */
export function conflict(message: string, options?: Omit<BoxErrorOptions, 'code'>): BoxError {
  return new BoxError(message, { ...options, code: 'conflict' });
}

/** Shorthand: a `BoxError` with code `invalid_option` naming `field`. */
export function invalidOption(field: string, message: string): BoxError {
  return new BoxError(message, { field, code: 'invalid_option' });
}

/**
 * The same error with `code` when it is a `BoxError` still carrying the default `internal` code (errors of
 * lower layers that do not set codes themselves, e.g. the image store's `image` failures); other errors
 * become a `BoxError` with that code and `prefix: message`.
 */
export function withCode(error: unknown, code: BoxErrorCode, prefix?: string): BoxError {
  if (error instanceof BoxError) {
    if (error.code !== 'internal') return error;
    Object.defineProperty(error, 'code', { value: code, enumerable: true });
    return error;
  }
  const message = (error as Error)?.message ?? String(error);
  return new BoxError(prefix ? `${prefix}: ${message}` : message, { code, cause: error });
}

/** The `code` of `error` when it is a `BoxError`, else `fallback` (default `internal`). */
export function codeOf(error: unknown, fallback: BoxErrorCode = 'internal'): BoxErrorCode {
  return error instanceof BoxError ? error.code : fallback;
}

/**
 * A legacy or mistyped option shape (BoxLite's own SDK throws `TypeError` for these): e.g. `network:
 * 'enabled'` (a string instead of `{ mode }`) or a top-level `allowNet`. A `TypeError`, with the stable
 * `code` `invalid_option` and the `field`, so that REST maps it to 400 like any `invalid_option`.
 */
export class OptionTypeError extends TypeError {
  readonly code = 'invalid_option' as const;
  readonly field: string;
  /** @param field the offending option; `message` names it and the expected shape. */
  constructor(field: string, message: string) {
    super(message);
    this.name = 'TypeError';
    this.field = field;
  }
}

/**
 * A command failed with a non-zero exit code (spec 002 "Errors"); code `exec`.
 * `command` is the command line as run, `exitCode` its exit status, `stderr` what it wrote to stderr.
 */
export class ExecError extends BoxError {
  readonly command: string;
  readonly exitCode: number;
  readonly stderr: string;
  constructor(command: string, exitCode: number, stderr: string) {
    super(
      `command '${command}' exited with code ${exitCode}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`,
      { code: 'exec' },
    );
    this.name = 'ExecError';
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** An operation exceeded its time limit, for example `waitUntilReady` (spec 002 "Errors"); code `timeout`. */
export class TimeoutError extends BoxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, { ...options, code: 'timeout' });
    this.name = 'TimeoutError';
  }
}

/** Command output could not be parsed, for example a cursor position (spec 002 "Errors"); code `parse`. */
export class ParseError extends BoxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, { ...options, code: 'parse' });
    this.name = 'ParseError';
  }
}
