/**
 * The `running_executions` quota of the shared service: how many commands one tenant may have running
 * at once over the server (`limits.ts`; null: unlimited). A start takes a slot before the command is
 * started and gives it back when the command ends (or fails to start); the check and the take are one
 * synchronous step, so concurrent starts never overshoot. A start over the quota is BoxError
 * `quota_exceeded` (429) naming `running_executions`. The operator is not bound.
 */
import { BoxError } from '../../errors.ts';
import type { Principal } from '../auth.ts';
import type { LimitsFile } from './limits.ts';

/** Running executions per tenant (see the module comment). */
export class ExecutionSlots {
  readonly #limits: LimitsFile;
  readonly #running = new Map<string, number>();

  /** @param limits the server's limits file (`running_executions`). */
  constructor(limits: LimitsFile) {
    this.#limits = limits;
  }

  /** Commands of `tenant` running now (started over the server, not yet ended). */
  running(tenant: string): number {
    return this.#running.get(tenant) ?? 0;
  }

  /**
   * Takes a slot for a command of `principal`'s tenant; the returned function gives it back (once; later
   * calls do nothing). The operator's commands are counted but never refused.
   * @throws BoxError `quota_exceeded` (field `running_executions`) when the tenant runs its quota already.
   */
  take(principal: Principal): () => void {
    const tenant = principal.tenant;
    const max = this.#limits.tenant(tenant).running_executions;
    const now = this.running(tenant);
    if (!principal.operator && max !== null && now >= max) {
      throw new BoxError(
        `quota exceeded: running_executions (tenant ${tenant} runs ${now} of ${max} commands at once)`,
        { code: 'quota_exceeded', field: 'running_executions' },
      );
    }
    this.#running.set(tenant, now + 1);
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      const left = this.running(tenant) - 1;
      if (left > 0) this.#running.set(tenant, left);
      else this.#running.delete(tenant);
    };
  }
}
