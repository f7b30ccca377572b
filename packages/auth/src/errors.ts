/**
 * Typed errors thrown by the auth core. Each carries a stable {@link AuthErrorCode} for callers that do not
 * use `instanceof`; {@link AUTH_ERROR_STATUS} is the one table of the HTTP status each code is answered with
 * (spec 001, "Errors › Administration API"; the permission middleware answers `invalid_token` with 401).
 */

/**
 * The stable codes of {@link AuthError}, one per class:
 * - `validation` — {@link ValidationError}, bad input (400);
 * - `constraint` — {@link ConstraintError}, the store refused an update or delete on a constraint (400);
 * - `invalid_token` — {@link InvalidTokenError} and its `DpopProofError`, a token or proof failed verification (401);
 * - `not_found` — {@link NotFoundError}, the target record does not exist (404);
 * - `conflict` — {@link ConflictError}, a unique field already holds the value (409).
 */
export type AuthErrorCode = 'validation' | 'constraint' | 'invalid_token' | 'not_found' | 'conflict';

/** HTTP status of each {@link AuthErrorCode}: the administration API and the middleware answer with it. */
export const AUTH_ERROR_STATUS: Readonly<Record<AuthErrorCode, 400 | 401 | 404 | 409>> = Object.freeze({
  validation: 400,
  constraint: 400,
  invalid_token: 401,
  not_found: 404,
  conflict: 409,
});

/** Base of the auth core's errors; `code` is one of {@link AuthErrorCode}, its status {@link AUTH_ERROR_STATUS}. */
export class AuthError extends Error {
  /** Stable machine-readable code (see {@link AuthErrorCode}). */
  readonly code: AuthErrorCode;
  constructor(code: AuthErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** Bad input: `field` names the offending field, `rule` the rule it broke (admin API → 400). */
export class ValidationError extends AuthError {
  readonly field: string;
  readonly rule: string;
  constructor(field: string, rule: string, message?: string) {
    super('validation', message ?? `${field}: ${rule}`);
    this.field = field;
    this.rule = rule;
  }
}

/** The target record does not exist (admin API → 404). `entity` is e.g. `'user'`, `key` the id looked up. */
export class NotFoundError extends AuthError {
  readonly entity: string;
  readonly key: string;
  constructor(entity: string, key: string) {
    super('not_found', `${entity} '${key}' not found`);
    this.entity = entity;
    this.key = key;
  }
}

/**
 * A uniqueness conflict reported by the storage's unique constraint (admin API → 409), e.g. creating a
 * user whose user name already exists. `field` is the unique field (`'userName'`, `'name'`, `'clientId'`, `'code'`).
 */
export class ConflictError extends AuthError {
  readonly entity: string;
  readonly field: string;
  constructor(entity: string, field: string, value: string, options?: ErrorOptions) {
    super('conflict', `${entity} with ${field} '${value}' already exists`, options);
    this.entity = entity;
    this.field = field;
  }
}

/**
 * The storage rejected an update or delete on a constraint (admin API → 400), e.g. deleting a built-in
 * system role.
 */
export class ConstraintError extends AuthError {
  readonly constraint: string;
  constructor(constraint: string, message: string, options?: ErrorOptions) {
    super('constraint', message, options);
    this.constraint = constraint;
  }
}

/** A bearer token failed verification (bad signature, expired, malformed, unknown subject). */
export class InvalidTokenError extends AuthError {
  constructor(message: string, options?: ErrorOptions) {
    super('invalid_token', message, options);
  }
}
