/**
 * Brute-force limits (OWASP ASVS 5.0 V6.3.1; the "credential stuffing" defence of OWASP's Authentication
 * Cheat Sheet) with `rate-limiter-flexible`: for each kind of secret check — passwords (login page and the
 * password grant share it), TOTP codes and reset requests — one limit per client IP and one per account
 * across all IPs. Each attempt consumes a point from both before the secret is checked (so parallel
 * attempts cannot overrun a limit) and a successful check gives them back, so in effect failures count.
 *
 * On SQLite (one process) the counters live in memory; on PostgreSQL they live in the `rate_limits` table
 * (migration 4), so every instance sharing the database counts the same attempts. If the database fails,
 * a memory limiter takes over for that instance (the library's "insurance" limiter).
 */
import { hash } from 'node:crypto';
import {
  type IRateLimiterOptions,
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterPostgres,
  RateLimiterRes,
} from 'rate-limiter-flexible';

/** What is limited: password checks (login page and password grant), TOTP codes, reset requests. */
export const LIMIT_KINDS = Object.freeze(['password', 'totp', 'reset'] as const);
/** One of {@link LIMIT_KINDS}. */
export type LimitKind = (typeof LIMIT_KINDS)[number];
/** Which counter refused: the client IP's or the account's (across IPs). */
export type LimitScope = 'ip' | 'account';

/** One limit: at most `points` attempts per `durationSeconds`; a refusal lasts until the window ends. */
export interface LimitRule {
  /** Attempts allowed per window (positive integer). */
  readonly points: number;
  /** Window length, seconds (positive integer). */
  readonly durationSeconds: number;
}

/** The limits of one kind; `false` turns that counter off. */
export interface KindLimits {
  readonly ip: LimitRule | false;
  readonly account: LimitRule | false;
}

/** Limits per kind (the server's `rateLimits` option; unset kinds keep {@link DEFAULT_RATE_LIMITS}). */
export type RateLimitSettings = Readonly<Record<LimitKind, KindLimits>>;

/**
 * Defaults (failed attempts, since successes give their point back): passwords 100 per IP per 5 minutes
 * (credential stuffing over many accounts) and 30 per account per hour across IPs (the lockout alone lets 5
 * through every 5 minutes, 60 an hour); TOTP 30 per IP per 5 minutes and 10 per account per 15 minutes;
 * reset requests 10 per IP and 5 per account per hour.
 */
export const DEFAULT_RATE_LIMITS: RateLimitSettings = Object.freeze({
  password: { ip: { points: 100, durationSeconds: 300 }, account: { points: 30, durationSeconds: 3600 } },
  totp: { ip: { points: 30, durationSeconds: 300 }, account: { points: 10, durationSeconds: 900 } },
  reset: { ip: { points: 10, durationSeconds: 3600 }, account: { points: 5, durationSeconds: 3600 } },
});

/** The keys of one attempt: the client IP and the account (a user name or id; case-insensitive). */
export interface LimitKeys {
  readonly ip?: string;
  readonly account?: string;
}

/** The answer of {@link RateLimits.consume}. */
export type LimitDecision =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly scope: LimitScope;
      /** Seconds until the window ends (`Retry-After`, RFC 9110 §10.2.3), at least 1. */
      readonly retryAfterSeconds: number;
      /** True for the first refusal of a window (callers audit that one only). */
      readonly first: boolean;
    };

/** A `pg`-style query function: what `rate-limiter-flexible`'s PostgreSQL limiter calls (`storeType: 'pool'`). */
export interface PgQueryClient {
  query(query: { text: string; values?: readonly unknown[] }): Promise<{ rows: unknown[]; rowCount: number }>;
}

/** Called on each refusal (metrics). */
export type RefusalListener = (kind: LimitKind, scope: LimitScope) => void;

/** The table of the PostgreSQL counters (created by the store's migration 4). */
export const RATE_LIMIT_TABLE = 'rate_limits';

/**
 * Checks limit settings. @returns complete settings (defaults for what is missing).
 * @throws RangeError naming the field (`rateLimits.password.ip.points`: positive integer, …).
 */
export function resolveRateLimits(
  input: Partial<Record<LimitKind, Partial<KindLimits>>> = {},
): RateLimitSettings {
  const out = {} as Record<LimitKind, KindLimits>;
  for (const kind of Object.keys(input)) {
    if (!(LIMIT_KINDS as readonly string[]).includes(kind))
      throw new RangeError(`rateLimits.${kind}: unknown kind (one of ${LIMIT_KINDS.join(', ')})`);
  }
  for (const kind of LIMIT_KINDS) {
    const given = input[kind] ?? {};
    const rule = (scope: LimitScope): LimitRule | false => {
      const value = given[scope] ?? DEFAULT_RATE_LIMITS[kind][scope];
      if (value === false) return false;
      for (const field of ['points', 'durationSeconds'] as const) {
        const n = value[field];
        if (!Number.isSafeInteger(n) || n < 1 || n > 1_000_000_000)
          throw new RangeError(`rateLimits.${kind}.${scope}.${field}: positive integer`);
      }
      return { points: value.points, durationSeconds: value.durationSeconds };
    };
    out[kind] = { ip: rule('ip'), account: rule('account') };
  }
  return Object.freeze(out);
}

/**
 * Parses `AUTH_RATE_LIMIT_<KIND>_<SCOPE>` values such as `30/300` (30 attempts per 300 s) or `off`.
 * @throws RangeError naming the variable.
 */
export function rateLimitsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): Partial<Record<LimitKind, Partial<KindLimits>>> {
  const out: Partial<Record<LimitKind, { ip?: LimitRule | false; account?: LimitRule | false }>> = {};
  for (const kind of LIMIT_KINDS) {
    for (const scope of ['ip', 'account'] as const) {
      const name = `AUTH_RATE_LIMIT_${kind.toUpperCase()}_${scope.toUpperCase()}`;
      const value = env[name];
      if (value === undefined || value === '') continue;
      out[kind] ??= {};
      const entry = out[kind];
      if (value === 'off') {
        entry[scope] = false;
        continue;
      }
      const match = /^(\d{1,9})\/(\d{1,9})$/.exec(value);
      if (!match) throw new RangeError(`${name}: <attempts>/<seconds> (e.g. 30/300) or off`);
      entry[scope] = { points: Number(match[1]), durationSeconds: Number(match[2]) };
    }
  }
  return out;
}

/** A counter key: never the user name or address in clear (SHA-256, 32 base64url characters). */
function counterKey(value: string): string {
  return hash('sha256', value.trim().toLowerCase(), 'base64url').slice(0, 32);
}

type LimiterFactory = (options: IRateLimiterOptions) => RateLimiterAbstract;

/**
 * The brute-force limits of a server. {@link RateLimits.memory} for one process, {@link RateLimits.postgres}
 * for instances sharing a PostgreSQL database.
 */
export class RateLimits {
  readonly settings: RateLimitSettings;
  readonly #limiters = new Map<string, RateLimiterAbstract>();
  #onRefused: RefusalListener | undefined;

  private constructor(settings: RateLimitSettings, factory: LimiterFactory) {
    this.settings = settings;
    for (const kind of LIMIT_KINDS) {
      for (const scope of ['ip', 'account'] as const) {
        const rule = settings[kind][scope];
        if (rule === false) continue;
        this.#limiters.set(
          `${kind}:${scope}`,
          factory({ keyPrefix: `${kind}:${scope}`, points: rule.points, duration: rule.durationSeconds }),
        );
      }
    }
  }

  /** Counters in this process's memory (SQLite: one instance). */
  static memory(settings: RateLimitSettings = DEFAULT_RATE_LIMITS): RateLimits {
    return new RateLimits(settings, (options) => new RateLimiterMemory(options));
  }

  /**
   * Counters in PostgreSQL's {@link RATE_LIMIT_TABLE} (shared by every instance), with an in-memory
   * limiter taking over while the database fails.
   */
  static postgres(client: PgQueryClient, settings: RateLimitSettings = DEFAULT_RATE_LIMITS): RateLimits {
    return new RateLimits(
      settings,
      (options) =>
        new RateLimiterPostgres({
          ...options,
          storeClient: client,
          storeType: 'pool',
          tableName: RATE_LIMIT_TABLE,
          tableCreated: true,
          clearExpiredByTimeout: true,
          insuranceLimiter: new RateLimiterMemory(options),
        }),
    );
  }

  /** Sets the listener told about each refusal (the server's metrics). */
  onRefused(listener: RefusalListener): void {
    this.#onRefused = listener;
  }

  /**
   * Counts one attempt of `kind` against the IP's and the account's limits (keys left out are not
   * counted). The IP is checked first; an attempt refused by the IP does not count against the account.
   * @returns `{ ok: true }`, or the refusing scope with the seconds to wait.
   * @throws the store's error only when the insurance limiter fails too.
   */
  async consume(kind: LimitKind, keys: LimitKeys): Promise<LimitDecision> {
    for (const scope of ['ip', 'account'] as const) {
      const key = keys[scope];
      const limiter = this.#limiters.get(`${kind}:${scope}`);
      if (key === undefined || key === '' || !limiter) continue;
      try {
        await limiter.consume(counterKey(key));
      } catch (error) {
        if (!(error instanceof RateLimiterRes)) throw error;
        this.#onRefused?.(kind, scope);
        return {
          ok: false,
          scope,
          retryAfterSeconds: Math.max(1, Math.ceil(error.msBeforeNext / 1000)),
          first: error.consumedPoints === limiter.points + 1,
        };
      }
    }
    return { ok: true };
  }

  /** Gives back the points of a successful attempt (a correct password, code or request). */
  async reward(kind: LimitKind, keys: LimitKeys): Promise<void> {
    for (const scope of ['ip', 'account'] as const) {
      const key = keys[scope];
      const limiter = this.#limiters.get(`${kind}:${scope}`);
      if (key === undefined || key === '' || !limiter) continue;
      await limiter.reward(counterKey(key));
    }
  }

  /** Forgets the account's counters of `kind` (e.g. after an administrator unlocks it). */
  async clearAccount(kind: LimitKind, account: string): Promise<void> {
    await this.#limiters.get(`${kind}:account`)?.delete(counterKey(account));
  }
}
