/**
 * A warm pool's box runs commands exactly as a cold box does: the exec'd process of a handed-out box has
 * the same seccomp mode and filter count, `no_new_privs` and capability sets (`/proc/<pid>/status` of
 * the command itself) as one of a box started for the call; and the pool refills once the handed-out
 * box's first command has ended (pool.ts `REFILL_DELAY_MS`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { JsRuntime } from '../src/index.ts';
// internal: the refill delay is the bound the pool is checked against
import { REFILL_DELAY_MS } from '../src/runtime/pool.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, run, tempHome, testRuntime } from './runtime-helpers.ts';

const options = { network: { mode: 'disabled' as const }, memoryMib: 128 };
const FIELDS = ['Seccomp', 'Seccomp_filters', 'NoNewPrivs', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'];

/** The security fields of the exec'd `cat`'s own status. */
function securityFields(status: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of status.split('\n')) {
    const [key, value] = line.split(':\t');
    if (key && value !== undefined && FIELDS.includes(key)) out[key] = value.trim();
  }
  return out;
}

describe('warm pool exec', () => {
  let runtime: JsRuntime;

  before(() => {
    ensureRegistry();
    runtime = testRuntime(tempHome('sandbox-pool-exec-'));
  });

  after(async () => {
    await cleanupAll();
  });

  it("a pooled box's command has the seccomp filter, no_new_privs and capabilities of a cold box's", async () => {
    const pool = runtime.pool({ image: BUSYBOX, size: 1, options });
    await pool.filled();
    const warm = await runtime.create({ image: BUSYBOX, ...options });
    const warmStatus = securityFields((await run(warm, 'cat', ['/proc/self/status'])).stdout);
    await pool.filled();
    const cold = await runtime.create({ image: BUSYBOX, ...options, memoryMib: 256 });
    const coldStatus = securityFields((await run(cold, 'cat', ['/proc/self/status'])).stdout);
    assert.deepEqual(Object.keys(warmStatus).sort(), [...FIELDS].sort());
    assert.deepEqual(warmStatus, coldStatus);
    assert.equal(warmStatus.Seccomp, '2', 'seccomp filter mode');
    assert.ok(Number(warmStatus.Seccomp_filters) >= 1);
    assert.equal(warmStatus.NoNewPrivs, '1');
    assert.equal(warmStatus.CapAmb, '0000000000000000');
    await pool.close();
  });

  it('a pool refills within REFILL_DELAY_MS when the handed-out box runs no command', async () => {
    const pool = runtime.pool({ image: BUSYBOX, size: 1, options });
    await pool.filled();
    await runtime.create({ image: BUSYBOX, ...options });
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, REFILL_DELAY_MS / 2));
    assert.equal(pool.ready(), 0, 'not refilled before the delay');
    await pool.filled();
    assert.ok(performance.now() - t0 >= REFILL_DELAY_MS - 5);
    await pool.close();
  });
});
