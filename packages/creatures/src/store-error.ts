/**
 * The error every `Store` write throws when it refuses: a plain `Error` with a code from the package's
 * error table (`errors.ts`, `CREATURE_ERRORS`) and the input field it is about. The store layer knows
 * nothing of GraphQL; the resolvers (`schema.ts`) turn a `CreatureStoreError` into the `GraphQLError` the
 * client sees, with the same message and `extensions.code`.
 */
import type { CreatureErrorCode } from './errors.ts';

/** The codes a `Store` write refuses with (rows of `CREATURE_ERRORS`). */
export type CreatureStoreErrorCode = Extract<CreatureErrorCode, 'BAD_USER_INPUT' | 'NOT_FOUND'>;

/**
 * A refused store write. `code` is `BAD_USER_INPUT` (an input value breaks a data rule: `field` names it,
 * e.g. `input.attacks.fast[2].damage`, and the message names the field and the rule) or `NOT_FOUND` (no
 * record has the id: `field` is `id`). `extensions` holds `{ code }`, the shape graphql-js copies into a
 * located error's `extensions`.
 */
export class CreatureStoreError extends Error {
  override readonly name = 'CreatureStoreError';
  /** The stable code from the package's error table. */
  readonly code: CreatureStoreErrorCode;
  /** The input field the error is about (`input.name`, `input.attacks.fast[2].damage`, `id`). */
  readonly field: string;
  /** `{ code }`, as a GraphQL error carries it. */
  readonly extensions: { readonly code: CreatureStoreErrorCode };

  constructor(code: CreatureStoreErrorCode, field: string, message: string) {
    super(message);
    this.code = code;
    this.field = field;
    this.extensions = { code };
  }
}

/** A `BAD_USER_INPUT` {@link CreatureStoreError}: `message` names `field` and the rule it breaks. */
export function invalidInput(field: string, message: string): CreatureStoreError {
  return new CreatureStoreError('BAD_USER_INPUT', field, message);
}

/** A `NOT_FOUND` {@link CreatureStoreError} for an id that names no record. */
export function noRecord(message: string): CreatureStoreError {
  return new CreatureStoreError('NOT_FOUND', 'id', message);
}
