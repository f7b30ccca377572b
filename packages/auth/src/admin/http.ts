/**
 * HTTP plumbing of the administration API: strict request validation, the spec's error body and status
 * mapping (spec 001 "Errors › Administration API"), and the JSON-only body rule.
 *
 * - Request bodies are validated by a dedicated Ajv instance without type coercion, default filling or
 *   removal of unknown properties: a wrong type or an unknown field is a 400, not silently fixed.
 *   Query strings and path parameters (always text) are coerced to the schema's types.
 * - Every error has an {@link AdminErrorCode}, whose status ({@link ADMIN_ERROR_STATUS}: 400, 401, 403, 404,
 *   409, 413, 414) it leaves with, as `{ "error": "message" }`; only a genuine server fault is `internal`
 *   (500), with a generic message.
 */
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AUTH_ERROR_STATUS, AuthError, type AuthErrorCode } from '../errors.ts';

// ajv-formats is CommonJS with `exports.default`; under Node's ESM interop the default import is the module.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/**
 * The stable codes of the administration API's errors, each answered with one HTTP status
 * ({@link ADMIN_ERROR_STATUS}): the core's {@link AuthErrorCode}s, and
 * - `separation_of_duties` — {@link SeparationOfDutiesError}, a change needs a permission the caller lacks (403);
 * - `payload_too_large` — the request body is over the route's limit (413);
 * - `uri_too_long` — a path parameter is over the router's limit (414);
 * - `internal` — a server fault, answered with a generic message and logged (500).
 */
export type AdminErrorCode =
  | AuthErrorCode
  | 'separation_of_duties'
  | 'payload_too_large'
  | 'uri_too_long'
  | 'internal';

/** HTTP status of each {@link AdminErrorCode} (spec 001 "Errors › Administration API"). */
export const ADMIN_ERROR_STATUS: Readonly<
  Record<AdminErrorCode, 400 | 401 | 403 | 404 | 409 | 413 | 414 | 500>
> = Object.freeze({
  ...AUTH_ERROR_STATUS,
  separation_of_duties: 403,
  payload_too_large: 413,
  uri_too_long: 414,
  internal: 500,
});

/** An error of the administration API: its {@link AdminErrorCode} gives the status, the body is `{ error }`. */
export class AdminHttpError extends Error {
  /** Stable machine-readable code. */
  readonly code: AdminErrorCode;
  /** HTTP status of `code` ({@link ADMIN_ERROR_STATUS}). */
  readonly statusCode: number;
  constructor(code: AdminErrorCode, message: string) {
    super(message);
    this.name = 'AdminHttpError';
    this.code = code;
    this.statusCode = ADMIN_ERROR_STATUS[code];
  }
}

/** 403 of a separation-of-duties rule (spec 001 "Authentication", rules 1–3); code `separation_of_duties`. */
export class SeparationOfDutiesError extends AdminHttpError {
  /** The permission code the caller lacks, e.g. `auth.admin.roles`. */
  readonly permission: string;
  /** The request field that needs it, e.g. `roles`. */
  readonly field: string;
  constructor(field: string, permission: string) {
    super(
      'separation_of_duties',
      `changing '${field}' requires the permission '${permission}' (separation of duties)`,
    );
    this.permission = permission;
    this.field = field;
  }
}

function newAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    coerceTypes: coerce,
    useDefaults: coerce,
    removeAdditional: false,
    strict: true,
    allowUnionTypes: true,
  });
  addFormats(ajv);
  return ajv;
}

const bodyAjv = newAjv(false);
const textAjv = newAjv(true);

/** Installs the strict validator compiler on `app` (an encapsulated context). */
export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return bodyAjv.compile(schema);
    const validate = textAjv.compile(schema);
    // Ajv coerces any string `Number()` accepts ('0x10', '1e2', ' 7 '); only plain decimal digits are integers here.
    const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
    const integers = Object.keys(properties).filter((key) => properties[key]?.type === 'integer');
    const strict = (data: unknown) => {
      for (const key of integers) {
        const value = (data as Record<string, unknown> | null)?.[key];
        if (typeof value === 'string' && !/^-?\d{1,15}$/.test(value)) {
          strict.errors = [
            {
              instancePath: `/${key}`,
              schemaPath: '',
              keyword: 'type',
              params: { type: 'integer' },
              message: 'must be integer',
            },
          ] as ErrorObject[];
          return false;
        }
      }
      const ok = validate(data);
      strict.errors = validate.errors;
      return ok;
    };
    strict.errors = null as ErrorObject[] | null | undefined;
    return strict;
  });
  app.setSchemaErrorFormatter(
    (errors, dataVar) => new AdminHttpError('validation', formatAjvError(errors[0], dataVar)),
  );
}

function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '');
}

/** A one-line message naming the field and the rule an Ajv error broke, e.g. `roles[2]: must be string`. */
export function formatAjvError(error: ErrorObject | undefined, dataVar: string): string {
  const where = dataVar === 'body' ? 'body' : dataVar;
  if (!error) return `${where}: invalid`;
  const path = fieldPath(error.instancePath);
  const prefix = path ? (dataVar === 'body' ? path : `${where}.${path}`) : where;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${path ? `${prefix}.` : dataVar === 'body' ? '' : `${where}.`}${String(params.missingProperty)}: required`;
    case 'additionalProperties':
      return `${prefix}: unknown field '${String(params.additionalProperty)}'`;
    case 'minProperties':
      return `${prefix}: at least ${String(params.limit)} field(s) required`;
    case 'enum':
      return `${prefix}: must be one of ${(params.allowedValues as unknown[]).map(String).join(', ')}`;
    default:
      return `${prefix}: ${error.message ?? 'invalid'}`;
  }
}

/** Sends the spec's error body `{ error: message }` with the status of `code`. */
export function sendError(reply: FastifyReply, code: AdminErrorCode, message: string): FastifyReply {
  return reply
    .code(ADMIN_ERROR_STATUS[code])
    .type('application/json; charset=utf-8')
    .send({ error: message });
}

/**
 * The code of an error Fastify raised for a client's request (malformed JSON, empty body, bad URL, …):
 * `payload_too_large` for a body over the limit (413), `uri_too_long` for a path parameter over the router's
 * limit (414), `validation` (400) for the others.
 */
export function frameworkErrorCode(error: { statusCode?: number; code?: string }): AdminErrorCode {
  if (error.statusCode === 413 || error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return 'payload_too_large';
  if (error.statusCode === 414) return 'uri_too_long';
  return 'validation';
}

/**
 * Maps any error thrown while handling an admin request to its {@link AdminErrorCode} and answers with the
 * code's status and the spec's body: an `AdminHttpError` or `AuthError` → its own code; a schema validation
 * failure → `validation`; Fastify's own client errors (malformed JSON, empty body, wrong content type, too
 * large, …) → {@link frameworkErrorCode}; anything else → `internal` (500) with a generic message (logged).
 */
export function adminErrorHandler(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof AdminHttpError || error instanceof AuthError)
    return sendError(reply, error.code, error.message);
  const fastifyError = error as FastifyError;
  if ('validation' in fastifyError && fastifyError.validation) {
    return sendError(
      reply,
      'validation',
      formatAjvError(fastifyError.validation[0] as ErrorObject, fastifyError.validationContext ?? 'body'),
    );
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 415 || fastifyError.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return sendError(reply, 'validation', 'body must be JSON (Content-Type: application/json)');
    }
    if (error instanceof SyntaxError || fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return sendError(reply, 'validation', `body is not valid JSON: ${error.message}`);
    }
    return sendError(reply, frameworkErrorCode(fastifyError), error.message);
  }
  request.log.error({ err: error }, 'administration API failure');
  return sendError(reply, 'internal', 'internal server error');
}

const JSON_TYPE = /^application\/json\s*(?:;|$)/i;

/**
 * `preParsing` hook: a request that carries a body must declare JSON (spec: "body not JSON" → 400). Runs
 * after the permission check (`onRequest`) and before any parser could turn a form or text body into an
 * object.
 * @throws AdminHttpError `validation` (400) when a body is present with another content type.
 */
export async function requireJsonBody<T>(
  request: FastifyRequest,
  _reply: FastifyReply,
  payload: T,
): Promise<T> {
  const length = request.headers['content-length'];
  const hasBody =
    request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (!hasBody) return payload;
  const type = request.headers['content-type'];
  if (typeof type !== 'string' || !JSON_TYPE.test(type)) {
    throw new AdminHttpError('validation', 'body must be JSON (Content-Type: application/json)');
  }
  return payload;
}
