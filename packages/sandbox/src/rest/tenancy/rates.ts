/**
 * Per-tenant rate limits of the shared service with `rate-limiter-flexible`'s memory
 * limiter: boxes created per minute (`create_per_minute`), commands started per second
 * (`exec_per_second`), file operations per second (`files_per_second`), each from the tenant's limits
 * (`limits.ts`; null: unlimited). A refused call is BoxError `quota_exceeded` (429) naming the rate, with
 * the limiter's wait as `retryAfterMs` (the `Retry-After` header). The operator is not rate limited.
 * Limiters are rebuilt when the limits file changes.
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { BoxError } from '../../errors.ts';
import type { Principal } from '../auth.ts';
import type { LimitsFile, TenantLimits } from './limits.ts';

/** What is rate limited. */
export type RateKind = 'create' | 'exec' | 'files';

const FIELD: Record<RateKind, { field: keyof TenantLimits; durationS: number; unit: string }> = {
  create: { field: 'create_per_minute', durationS: 60, unit: 'boxes created per minute' },
  exec: { field: 'exec_per_second', durationS: 1, unit: 'commands started per second' },
  files: { field: 'files_per_second', durationS: 1, unit: 'file operations per second' },
};

/** The rate limiters of one server (see the module comment). */
export class TenantRates {
  readonly #limits: LimitsFile;
  #version = -1;
  /** One limiter per kind and points value; keyed by tenant inside. */
  #limiters = new Map<string, RateLimiterMemory>();

  /** @param limits the server's limits file. */
  constructor(limits: LimitsFile) {
    this.#limits = limits;
  }

  #limiter(kind: RateKind, points: number): RateLimiterMemory {
    if (this.#limits.version !== this.#version) {
      this.#version = this.#limits.version;
      this.#limiters = new Map();
    }
    const key = `${kind}:${points}`;
    let limiter = this.#limiters.get(key);
    if (!limiter) {
      limiter = new RateLimiterMemory({ points, duration: FIELD[kind].durationS });
      this.#limiters.set(key, limiter);
    }
    return limiter;
  }

  /**
   * Takes one `kind` call of `principal`'s tenant.
   * @throws BoxError `quota_exceeded` (field: the rate, `retryAfterMs`) when the tenant is over its rate.
   */
  async consume(kind: RateKind, principal: Principal): Promise<void> {
    if (principal.operator) return;
    const { field, unit } = FIELD[kind];
    const points = this.#limits.tenant(principal.tenant)[field];
    if (points === null) return;
    if (points <= 0) {
      throw new BoxError(`rate limit: ${field} is 0 for tenant ${principal.tenant}`, {
        code: 'quota_exceeded',
        field,
      });
    }
    try {
      await this.#limiter(kind, points).consume(principal.tenant);
    } catch (error) {
      if (!(error instanceof RateLimiterRes)) throw error;
      throw new BoxError(`rate limit: ${field} (tenant ${principal.tenant} may make ${points} ${unit})`, {
        code: 'quota_exceeded',
        field,
        retryAfterMs: Math.max(1, error.msBeforeNext),
      });
    }
  }
}
