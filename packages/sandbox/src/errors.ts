/**
 * Error hierarchy of the sandbox SDK (spec 002, "Errors"): `BoxError` is the base; `ExecError`,
 * `TimeoutError` and `ParseError` derive from it. Every error carries a stable machine `code`
 * (`BoxErrorCode`); the REST server derives its HTTP status from that code alone (`rest/wire.ts`).
 */

/**
 * Stable machine codes of `BoxError.code`. New codes may be added; existing ones never change meaning.
 * Every `BoxError` carries one (`BoxErrorInit`); an unknown box is `not_found` everywhere. The table is
 * checked against `STATUS_OF_CODE` and the README by `test/errors-codes.test.ts`.
 *
 * | Code | Meaning | REST status |
 * |---|---|---|
 * | `invalid_option` | the caller passed a bad option or argument (`field` names it) | 400 |
 * | `not_found` | no box, volume, execution or file with that id, name or path | 404 |
 * | `conflict` | the object's state forbids it (running, not running, name taken, in use, exists) | 409 |
 * | `image` | an image cannot be pulled, found or unpacked | 422 |
 * | `timeout` | an operation exceeded its time limit | 504 |
 * | `exec` | a command failed (non-zero exit, cannot start) | 422 |
 * | `parse` | command output could not be parsed | 502 |
 * | `unsupported` | this runtime does not offer the operation | 501 |
 * | `unavailable` | the REST server cannot be reached | 503 |
 * | `unauthenticated` | the REST server refused the credential | 401 |
 * | `permission_denied` | the credential lacks a permission | 403 |
 * | `quota_exceeded` | the tenant is over a quota or rate limit (`field` names it; `retryAfterMs` when known) | 429 |
 * | `capacity` | the node cannot hold the box now (`field` names the resource; `retryAfterMs` hint) | 503 |
 * | `internal` | anything else (a bug, or a host failure) | 500 |
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
