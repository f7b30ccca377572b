/**
 * Request validation of the REST runtime server from the route schemas (Ajv, JSON Schema 2020-12 subset
 * Fastify accepts): bodies are validated without type coercion, default filling or removal of unknown
 * properties (a wrong type or an unknown field is a 400, never silently fixed); query strings and path
 * parameters, always text, are coerced to the schema's types (an `integer` must be plain decimal digits).
 * Every failure is an `HttpError` 400 naming the field (`invalid_option`, or `unknown_field`).
 *
 * Answers are serialized with `JSON.stringify`: response schemas document them (and tests check answers
 * against them) but never drop a field.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { FastifyInstance, FastifySchema, FastifySchemaCompiler } from 'fastify';
import { SHARED_SCHEMAS } from './schemas.ts';
import { HttpError } from './wire.ts';

function newAjv(coerce: boolean): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    coerceTypes: coerce,
    useDefaults: false,
    removeAdditional: false,
    strict: true,
    allowUnionTypes: true,
    // Formats only annotate the documented answers; requests are checked by the SDK's own rules.
    formats: { 'date-time': true, binary: true },
  });
  for (const schema of SHARED_SCHEMAS) ajv.addSchema(schema);
  return ajv;
}

const bodyAjv = newAjv(false);
const textAjv = newAjv(true);

/** What a request part is called in error messages. */
const PART: Record<string, string> = {
  body: 'field',
  querystring: 'query parameter',
  params: 'path parameter',
  headers: 'header',
};

function fieldPath(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '');
}

/**
 * The `HttpError` of the first Ajv error of a request part (`body`, `querystring`, `params`): 400
 * `unknown_field` for a field the schema does not have, else `invalid_option`, naming the field.
 */
export function schemaError(errors: readonly Partial<ErrorObject>[], part: string): HttpError {
  const error = errors[0];
  const what = PART[part] ?? part;
  if (!error) return new HttpError('invalid_body', `invalid ${what}`);
  const base = fieldPath(error.instancePath ?? '');
  const params = (error.params ?? {}) as Record<string, unknown>;
  if (error.keyword === 'additionalProperties') {
    const field = base ? `${base}.${params.additionalProperty}` : String(params.additionalProperty);
    return new HttpError('unknown_field', `unknown ${what} '${field}'`, field);
  }
  if (error.keyword === 'required') {
    const field = base ? `${base}.${params.missingProperty}` : String(params.missingProperty);
    return new HttpError('invalid_option', `missing ${what} ${field}`, field);
  }
  if (!base) {
    const message = part === 'body' ? `the body ${error.message}` : `invalid ${what}: ${error.message}`;
    return new HttpError('invalid_body', message);
  }
  return new HttpError('invalid_option', `invalid ${what} ${base}: ${error.message}`, base);
}

/** Validates text parts (query, params): Ajv with coercion, integers only as plain decimal digits. */
function textValidator(schema: Record<string, unknown>): ValidateFunction {
  const validate = textAjv.compile(schema);
  const properties = (schema.properties ?? {}) as Record<string, { type?: unknown }>;
  const integers = Object.keys(properties).filter((key) => properties[key]?.type === 'integer');
  const strict = ((data: unknown) => {
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
        ];
        return false;
      }
    }
    const ok = validate(data);
    strict.errors = validate.errors ?? null;
    return ok;
  }) as ValidateFunction;
  strict.errors = null;
  return strict;
}

/** The server's validator compiler (see the module comment). */
export const validatorCompiler: FastifySchemaCompiler<FastifySchema> = ({ schema, httpPart }) =>
  httpPart === 'body' ? bodyAjv.compile(schema as object) : textValidator(schema as Record<string, unknown>);

/**
 * Validator compiler of a route whose body is not JSON (a raw byte stream) or is checked by the SDK's own
 * option rules (box options: errors name the camelCase option, as the local runtime does): the body
 * schema documents it, its other parts are validated as usual.
 */
export const documentedBody: FastifySchemaCompiler<FastifySchema> = (route) =>
  route.httpPart === 'body' ? () => true : validatorCompiler(route);

/**
 * A validator of one shared schema for input that does not come through a route (the start frames of the
 * exec WebSockets). @throws HttpError 400 as a route would.
 */
export function bodyValidator<T>(id: string): (value: unknown) => T {
  const validate = bodyAjv.getSchema(id);
  if (!validate) throw new Error(`no shared schema '${id}'`);
  return (value) => {
    if (!validate(value)) throw schemaError(validate.errors ?? [], 'body');
    return value as T;
  };
}

/** Installs validation and serialization on the server's root instance (every plugin inherits them). */
export function installValidation(app: FastifyInstance): void {
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));
  app.setSchemaErrorFormatter((errors, dataVar) => schemaError(errors, dataVar));
}
