/**
 * Typed errors thrown by the auth core. The administration API (spec 001, "Errors › Administration API")
 * maps them to HTTP: {@link ValidationError} and {@link ConstraintError} → 400, {@link NotFoundError} → 404,
 * {@link ConflictError} → 409. Each carries a stable `code` string for callers that do not use `instanceof`.
 */
export class AuthError extends Error {
  /** Stable machine-readable code, e.g. `'validation'`, `'not_found'`, `'conflict'`, `'constraint'`. */
  readonly code: string;
  constructor(code: string, message: string, options?: ErrorOptions) {
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
