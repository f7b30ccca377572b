/**
 * E2B's wire rules shared by the control plane and envd: the error body `{ code, message }` whose `code`
 * is the HTTP status (E2B `spec/openapi.yml` `Error`), the statuses the SDK maps (400, 401, 404, 409,
 * 429, 507; `e2b` `handleApiError`), and checks of request fields that name the field and the rule.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { BoxError } from '../errors.ts';
import { type HttpError, httpErrorOf } from '../rest/wire.ts';

/** E2B's error body: `code` is the HTTP status. */
export interface E2bErrorBody {
  code: number;
  message: string;
}

/** An error answered as `{ code, message }` with `status`. */
export class E2bError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'E2bError';
    this.status = status;
  }
}

/**
 * The status and body of any error: `E2bError` as it is, `HttpError`/`BoxError` by their stable code
 * (`rest/wire.ts` `httpErrorOf`; 403 answers as 401, which the SDK maps to an authentication error), any
 * other error as 500 `internal server error` (its message is not revealed).
 */
export function e2bErrorOf(error: unknown): E2bErrorBody {
  if (error instanceof E2bError) return { code: error.status, message: error.message };
  const http: HttpError = httpErrorOf(error);
  const status = http.status === 403 ? 401 : http.status;
  return { code: status, message: http.message };
}

/** The Connect error of an error thrown by a service method (BoxError codes → Connect codes). */
export function connectErrorOf(error: unknown): ConnectError {
  if (error instanceof ConnectError) return error;
  if (error instanceof BoxError) {
    const code =
      {
        invalid_option: Code.InvalidArgument,
        not_found: Code.NotFound,
        conflict: Code.FailedPrecondition,
        unauthenticated: Code.Unauthenticated,
        permission_denied: Code.PermissionDenied,
        quota_exceeded: Code.ResourceExhausted,
        capacity: Code.ResourceExhausted,
        timeout: Code.DeadlineExceeded,
        unsupported: Code.Unimplemented,
        unavailable: Code.Unavailable,
      }[error.code as string] ?? Code.Internal;
    return new ConnectError(code === Code.Internal ? 'internal error' : error.message, code);
  }
  return new ConnectError('internal error', Code.Internal);
}

/** A field of a JSON body: absent/null → undefined; else must satisfy `check`. @throws E2bError 400. */
export function field<T>(
  body: Record<string, unknown>,
  name: string,
  rule: string,
  check: (value: unknown) => value is T,
): T | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (!check(value)) throw new E2bError(400, `invalid field ${name}: ${rule}`);
  return value;
}

/** True for a string. */
export const isString = (v: unknown): v is string => typeof v === 'string';
/** True for a boolean. */
export const isBoolean = (v: unknown): v is boolean => typeof v === 'boolean';
/** True for an integer ≥ 0. */
export const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
/** True for a `{ string: string }` object of at most 256 entries. */
export function isStringMap(v: unknown): v is Record<string, string> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const entries = Object.entries(v);
  return (
    entries.length <= 256 &&
    entries.every(([k, x]) => k.length > 0 && k.length <= 256 && typeof x === 'string' && x.length <= 16_384)
  );
}
/** True for an array of at most 256 strings. */
export function isStringList(v: unknown): v is string[] {
  return Array.isArray(v) && v.length <= 256 && v.every((x) => typeof x === 'string' && x.length <= 512);
}

/** The body as an object (absent → `{}`). @throws E2bError 400 for anything but a JSON object. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body))
    throw new E2bError(400, 'the body must be a JSON object');
  return body as Record<string, unknown>;
}

/**
 * A timeout in seconds from field `name`: absent → `fallback`; else an integer from 0 to `max`.
 * @throws E2bError 400 naming the field.
 */
export function timeoutField(
  body: Record<string, unknown>,
  name: string,
  fallback: number,
  max: number,
): number {
  const value = field(
    body,
    name,
    `must be an integer number of seconds from 0 to ${max}`,
    (v): v is number => isCount(v) && (v as number) <= max,
  );
  return value ?? fallback;
}
