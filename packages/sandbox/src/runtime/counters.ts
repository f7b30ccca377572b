/**
 * Exec counters of boxes batched in memory and written to the state database once per event-loop turn
 * (see `PendingCounters`).
 */
import type { CounterDelta, StateDb } from './state.ts';

/** Counter batches with unwritten deltas; written synchronously when the process exits. */
const unflushed = new Set<PendingCounters>();
let exitHookInstalled = false;

/**
 * Exec counters of boxes (commands, exec errors, stdin/output bytes), summed in memory and written to the
 * state database in one UPDATE per box on the next turn of the event loop — while the next command's
 * runtime process runs — instead of two synchronous writes on every exec's critical path. `flush()` writes
 * at once (box `metrics()`, runtime `close()`, process exit); another process sees the counters as soon as
 * the writing process's event loop turns. A SIGKILLed process can lose the deltas of its last turn.
 */
export class PendingCounters {
  readonly #db: StateDb;
  #deltas = new Map<string, Required<CounterDelta>>();
  #scheduled = false;

  constructor(db: StateDb) {
    this.#db = db;
  }

  /** Adds to the counters of box `id`; written on the next event loop turn. */
  add(id: string, delta: CounterDelta): void {
    let sum = this.#deltas.get(id);
    if (!sum) {
      sum = { commands: 0, errors: 0, sent: 0, received: 0 };
      this.#deltas.set(id, sum);
    }
    sum.commands += delta.commands ?? 0;
    sum.errors += delta.errors ?? 0;
    sum.sent += delta.sent ?? 0;
    sum.received += delta.received ?? 0;
    unflushed.add(this);
    if (!exitHookInstalled) {
      exitHookInstalled = true;
      process.on('exit', () => {
        for (const pending of unflushed) pending.flush();
      });
    }
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.flush();
      }).unref();
    }
  }

  /** Writes every pending delta now (one UPDATE per box). A write error is dropped with its deltas. */
  flush(): void {
    if (this.#deltas.size === 0) return;
    const deltas = this.#deltas;
    this.#deltas = new Map();
    unflushed.delete(this);
    for (const [id, delta] of deltas) {
      try {
        this.#db.addCounters(id, delta);
      } catch {
        // The database was closed or is unavailable: the counters are informational only.
      }
    }
  }
}
