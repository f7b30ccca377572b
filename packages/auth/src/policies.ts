/**
 * Attribute-based policies (spec 001 "Permission evaluation"): named predicates over the subject, the resource
 * and the request, registered in code ({@link PolicyRegistry.register}) or from configuration
 * ({@link PolicyRegistry.registerConfig}). An endpoint naming a policy gets `GrantedByPolicy` when it holds,
 * `PolicyNotSatisfied` when it does not (or throws — policies fail closed), `PolicyNotFound` when no policy has
 * that name.
 */
import { ValidationError } from './errors.ts';

/** The authenticated subject as seen by policies and handlers. */
export interface AuthSubject {
  /** `user` for user tokens, `client` for client-credentials tokens (RFC 9068 §2.2: `sub` is the client id). */
  readonly kind: 'user' | 'client';
  /** User id or client id (the token's `sub`). */
  readonly id: string;
  /** User name, or the client id. */
  readonly name: string;
  /** Names of the user's roles (empty for clients). */
  readonly roles: readonly string[];
  /** The OAuth client the token was issued to (`client_id` claim), if any. */
  readonly clientId: string | null;
  /** Scopes granted to the token (`scope` claim split on spaces). */
  readonly scopes: readonly string[];
  /** All verified token claims. */
  readonly claims: Readonly<Record<string, unknown>>;
}

/** The request facts policies may look at (framework-neutral). */
export interface PolicyRequest {
  readonly method: string;
  /** Path and query as received. */
  readonly url: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Route parameters, when the framework provides them. */
  readonly params?: Readonly<Record<string, unknown>>;
  readonly query?: Readonly<Record<string, unknown>>;
  readonly remoteAddress?: string | null;
}

/** Input of a policy: `subject` is null for guests. */
export interface PolicyContext {
  readonly subject: AuthSubject | null;
  readonly resource: unknown;
  readonly request: PolicyRequest;
}

/** A policy predicate: true grants. May be async. Throwing counts as not satisfied. */
export type PolicyPredicate = (context: PolicyContext) => boolean | Promise<boolean>;

/**
 * One condition of a configured policy, over a dotted `path` into `{ subject, resource, request }`
 * (e.g. `subject.claims.department`, `resource.ownerId`, `request.params.id`). Exactly one operator:
 * `equals` (strict equality with a JSON value), `in` (value is one of the list), `equalsPath` (equal to the
 * value at another path, e.g. `subject.id`), `exists` (path present and not null / not present), `contains`
 * (array at path contains the value).
 */
export interface PolicyCondition {
  path: string;
  equals?: string | number | boolean | null;
  in?: readonly (string | number | boolean | null)[];
  equalsPath?: string;
  exists?: boolean;
  contains?: string | number | boolean | null;
}

/** A configured policy: all conditions of `all` must hold, and at least one of `any` (when given). */
export interface PolicyDefinition {
  all?: readonly PolicyCondition[];
  any?: readonly PolicyCondition[];
}

/** Outcome of {@link PolicyRegistry.evaluate}. */
export type PolicyOutcome = 'satisfied' | 'not_satisfied' | 'not_found';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const PATH = /^(subject|resource|request)(\.[A-Za-z0-9_$-]+){0,16}$/;
const OPERATORS = ['equals', 'in', 'equalsPath', 'exists', 'contains'] as const;

function lookup(root: Record<string, unknown>, path: string): unknown {
  let current: unknown = root;
  for (const key of path.split('.')) {
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

function holds(condition: PolicyCondition, root: Record<string, unknown>): boolean {
  const value = lookup(root, condition.path);
  if ('equals' in condition) return value === condition.equals;
  if (condition.in) return condition.in.includes(value as string);
  if (condition.equalsPath !== undefined) {
    const other = lookup(root, condition.equalsPath);
    return value !== undefined && value !== null && value === other;
  }
  if (condition.exists !== undefined) return (value !== undefined && value !== null) === condition.exists;
  if ('contains' in condition) return Array.isArray(value) && value.includes(condition.contains);
  return false;
}

function checkCondition(condition: unknown, field: string): PolicyCondition {
  if (!condition || typeof condition !== 'object') throw new ValidationError(field, 'object');
  const c = condition as Record<string, unknown>;
  if (typeof c.path !== 'string' || !PATH.test(c.path)) {
    throw new ValidationError(
      `${field}.path`,
      'path',
      `${field}.path: dotted path starting with subject, resource or request`,
    );
  }
  const ops = OPERATORS.filter((op) => op in c);
  if (ops.length !== 1) {
    throw new ValidationError(field, 'one_operator', `${field}: exactly one of ${OPERATORS.join(', ')}`);
  }
  if ('in' in c && !Array.isArray(c.in)) throw new ValidationError(`${field}.in`, 'array');
  if ('equalsPath' in c && (typeof c.equalsPath !== 'string' || !PATH.test(c.equalsPath))) {
    throw new ValidationError(`${field}.equalsPath`, 'path');
  }
  if ('exists' in c && typeof c.exists !== 'boolean') throw new ValidationError(`${field}.exists`, 'boolean');
  return c as unknown as PolicyCondition;
}

/** Compiles a configured policy into a predicate. @throws ValidationError naming the bad field. */
export function compilePolicy(definition: unknown, field = 'policy'): PolicyPredicate {
  if (!definition || typeof definition !== 'object') throw new ValidationError(field, 'object');
  const d = definition as Record<string, unknown>;
  const list = (key: 'all' | 'any') => {
    const value = d[key];
    if (value === undefined) return undefined;
    if (!Array.isArray(value)) throw new ValidationError(`${field}.${key}`, 'array');
    return value.map((c, i) => checkCondition(c, `${field}.${key}[${i}]`));
  };
  const all = list('all');
  const any = list('any');
  if (!all?.length && !any?.length)
    throw new ValidationError(field, 'conditions', `${field}: needs all or any conditions`);
  return ({ subject, resource, request }) => {
    const root = { subject, resource, request };
    if (all && !all.every((c) => holds(c, root))) return false;
    return !any?.length || any.some((c) => holds(c, root));
  };
}

/** The registry of named policies. */
export class PolicyRegistry {
  readonly #policies = new Map<string, PolicyPredicate>();

  /**
   * Registers (or replaces) a policy in code.
   * @throws ValidationError when the name is not 1–128 characters of `A-Z a-z 0-9 _ . : -`.
   */
  register(name: string, predicate: PolicyPredicate): this {
    if (typeof name !== 'string' || !NAME.test(name)) throw new ValidationError('name', 'policy_name');
    if (typeof predicate !== 'function') throw new ValidationError(`policies.${name}`, 'function');
    this.#policies.set(name, predicate);
    return this;
  }

  /**
   * Registers policies from configuration: `{ "<name>": { "all": [conditions], "any": [conditions] } }`
   * (see {@link PolicyCondition}). All or nothing: an invalid entry registers none.
   * @throws ValidationError naming e.g. `policies.owner.all[0].path`.
   */
  registerConfig(config: unknown): this {
    if (!config || typeof config !== 'object' || Array.isArray(config))
      throw new ValidationError('policies', 'object');
    const compiled = Object.entries(config).map(([name, definition]) => {
      if (!NAME.test(name)) throw new ValidationError(`policies.${name}`, 'policy_name');
      return [name, compilePolicy(definition, `policies.${name}`)] as const;
    });
    for (const [name, predicate] of compiled) this.#policies.set(name, predicate);
    return this;
  }

  /** Whether a policy of that name exists. */
  has(name: string): boolean {
    return this.#policies.has(name);
  }

  /** Evaluates a policy; a throwing or rejecting predicate gives `not_satisfied` (fail closed). */
  async evaluate(name: string, context: PolicyContext): Promise<PolicyOutcome> {
    const predicate = this.#policies.get(name);
    if (!predicate) return 'not_found';
    try {
      return (await predicate(context)) === true ? 'satisfied' : 'not_satisfied';
    } catch {
      return 'not_satisfied';
    }
  }
}
