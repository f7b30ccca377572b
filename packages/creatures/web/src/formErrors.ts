/**
 * Splits a failed mutation's errors into errors of form fields and errors of the whole form. The field of
 * a GraphQL error is read from `extensions.field` when the server gives it (a path such as
 * `input.attacks.fast[0].damage` or a list of its segments), otherwise from the path the server's
 * validation message starts with (`input.name must be unique: …`), or from graphql-js's variable coercion
 * message (`Variable "$input" got invalid value 12.5 at "input.maxCP"; …`).
 */
import { CombinedError } from '@urql/core';

/** Field errors keyed by the form's own field keys, plus the errors that concern no one field. */
export interface FormErrors {
  fields: Record<string, string>;
  general: string[];
}

/** No errors. */
export const NO_ERRORS: FormErrors = { fields: {}, general: [] };

/** The path segments of `input.attacks.fast[0].damage` without the leading `input`: `attacks fast 0 damage`. */
export function pathSegments(path: string): string[] {
  const segments = path
    .replace(/\[(\d+)\]/g, '.$1')
    .split('.')
    .filter(Boolean);
  return segments[0] === 'input' ? segments.slice(1) : segments;
}

/** The input path a GraphQL error is about, as segments; null when it names none. */
export function errorPath(error: { message: string; extensions?: Record<string, unknown> }): string[] | null {
  const field = error.extensions?.field;
  if (typeof field === 'string' && field !== '') return pathSegments(field);
  if (Array.isArray(field) && field.length > 0) {
    return pathSegments(field.map((s) => (typeof s === 'number' ? `[${s}]` : `.${String(s)}`)).join(''));
  }
  const coercion = /^Variable "\$input" got invalid value .* at "([\w.[\]]+)"/.exec(error.message);
  if (coercion?.[1]) return pathSegments(coercion[1]);
  const own = /^input\.([\w.[\]]+) /.exec(error.message);
  if (own?.[1]) return pathSegments(own[1]);
  return null;
}

/**
 * A message as shown next to its field, which already says what field it is: without graphql-js's
 * `Variable "$input" got invalid value … at "…"; ` preamble or the server's leading input path
 * (`input.maxCP must be …` → `Must be …`).
 */
export function fieldMessage(message: string): string {
  const cut = /^Variable "\$input" got invalid value .* at "[\w.[\]]+"; (.*)$/s.exec(message);
  if (cut?.[1]) return cut[1];
  const rest = /^input\.[\w.[\]]+ (.+)$/s.exec(message)?.[1];
  return rest ? rest.charAt(0).toUpperCase() + rest.slice(1) : message;
}

/**
 * Sorts `error`'s messages by field: `fieldKey` maps an error's path segments to the key of the form field
 * that shows it (or null: the message goes to the whole form). The first message per field wins.
 */
export function formErrors(
  error: CombinedError | Error,
  fieldKey: (segments: string[]) => string | null,
): FormErrors {
  const result: FormErrors = { fields: {}, general: [] };
  if (!(error instanceof CombinedError) || error.graphQLErrors.length === 0) {
    const network = error instanceof CombinedError && error.networkError;
    result.general.push(network ? `Network error: ${network.message}` : error.message);
    return result;
  }
  for (const e of error.graphQLErrors) {
    const path = errorPath(e);
    const key = path && fieldKey(path);
    if (key && result.fields[key] === undefined) result.fields[key] = fieldMessage(e.message);
    else result.general.push(e.message);
  }
  return result;
}
