/**
 * HTTP plumbing of the administration API: strict request validation, the spec's error body and status
 * mapping (spec 001 "Errors › Administration API"), and the JSON-only body rule.
 *
 * - Request bodies are validated by a dedicated Ajv instance without type coercion, default filling or
 *   removal of unknown properties: a wrong type or an unknown field is a 400, not silently fixed.
 *   Query strings and path parameters (always text) are coerced to the schema's types.
 * - Every error leaves as `{ "error": "message" }` with 400, 403, 404, 409 (or 401/413 where HTTP needs
 *   them); only a genuine server fault is a 500, with a generic message.
 */
import { Ajv, type ErrorObject } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AUTH_ERROR_STATUS, AuthError } from '../errors.ts';

// ajv-formats is CommonJS with `exports.default`; under Node's ESM interop the default import is the module.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ??
  addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

/** An answer of the administration API carrying an HTTP status and the spec's `{ error }` body. */
export class AdminHttpError extends Error {
  /** HTTP status (400, 403, 404, 409, …). */
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'AdminHttpError';
    this.statusCode = statusCode;
  }
}

/** 403 of a separation-of-duties rule (spec 001 "Authentication", rules 1–3). */
export class SeparationOfDutiesError extends AdminHttpError {
  /** The permission code the caller lacks, e.g. `auth.admin.roles`. */
  readonly permission: string;
  /** The request field that needs it, e.g. `roles`. */
  readonly field: string;
  constructor(field: string, permission: string) {
    super(403, `changing '${field}' requires the permission '${permission}' (separation of duties)`);
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
    (errors, dataVar) => new AdminHttpError(400, formatAjvError(errors[0], dataVar)),
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

/** Sends the spec's error body. */
export function sendError(reply: FastifyReply, statusCode: number, message: string): FastifyReply {
  return reply.code(statusCode).type('application/json; charset=utf-8').send({ error: message });
}

/**
 * Maps any error thrown while handling an admin request to the spec's status and body:
 * an `AuthError` → the status of its code in `AUTH_ERROR_STATUS` (validation and constraint 400,
 * invalid_token 401, not_found 404, conflict 409),
 * Fastify's own client errors (malformed JSON, empty body, too large, …) → their 4xx (415 becomes 400:
 * the spec answers "body not JSON" with 400), anything else → 500 with a generic message (logged).
 */
export function adminErrorHandler(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  if (error instanceof AdminHttpError) return sendError(reply, error.statusCode, error.message);
  if (error instanceof AuthError) return sendError(reply, AUTH_ERROR_STATUS[error.code], error.message);
  const fastifyError = error as FastifyError;
  if ('validation' in fastifyError && fastifyError.validation) {
    return sendError(
      reply,
      400,
      formatAjvError(fastifyError.validation[0] as ErrorObject, fastifyError.validationContext ?? 'body'),
    );
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    if (status === 415 || fastifyError.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return sendError(reply, 400, 'body must be JSON (Content-Type: application/json)');
    }
    if (error instanceof SyntaxError || fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
      return sendError(reply, 400, `body is not valid JSON: ${error.message}`);
    }
    return sendError(reply, status, error.message);
  }
  request.log.error({ err: error }, 'administration API failure');
  return sendError(reply, 500, 'internal server error');
}

const JSON_TYPE = /^application\/json\s*(?:;|$)/i;

/**
 * `preParsing` hook: a request that carries a body must declare JSON (spec: "body not JSON" → 400). Runs
 * after the permission check (`onRequest`) and before any parser could turn a form or text body into an
 * object.
 * @throws AdminHttpError 400 when a body is present with another content type.
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
    throw new AdminHttpError(400, 'body must be JSON (Content-Type: application/json)');
  }
  return payload;
}
