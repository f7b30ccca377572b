/**
 * One shared, abortable job for work several callers wait on (a pull of one reference, the download and
 * unpack of one layer): the first caller starts it, later callers join it; each caller's own abort signal
 * ends only that caller's wait, and the job itself is aborted once every caller waiting on it has aborted.
 * Events the job emits go to every caller's listener; a caller joining late first gets `replay`.
 */

/** A job shared by callers (see the module comment). `E` is the type of its events. */
export class SharedJob<T, E> {
  /** Settles with the job's outcome (never rejects unhandled). */
  readonly promise: Promise<T>;
  /** Aborted when the last waiting caller has aborted; the work watches `signal`. */
  private readonly controller = new AbortController();
  private readonly listeners = new Set<(e: E) => void>();
  private waiters = 0;
  private readonly replay: ((listener: (e: E) => void) => void) | undefined;

  /**
   * @param run the work; it gets the job (to emit events) and the job's signal.
   * @param replay sends a late joiner what it missed (e.g. the last progress event).
   */
  constructor(
    run: (job: SharedJob<T, E>, signal: AbortSignal) => Promise<T>,
    replay?: (listener: (e: E) => void) => void,
  ) {
    this.replay = replay;
    this.promise = Promise.resolve().then(() => run(this, this.controller.signal));
    this.promise.catch(() => {});
  }

  /** Sends `e` to every listener; a listener that throws is ignored. */
  emit(e: E): void {
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        // a failing listener must not break the job
      }
    }
  }

  /**
   * Waits for the job as one caller.
   * @param listener gets the job's events while this caller waits (after `replay`).
   * @param signal ends this caller's wait, rejecting with `aborted(signal.reason)`.
   */
  async wait(
    listener: ((e: E) => void) | undefined,
    signal: AbortSignal | undefined,
    aborted: (reason: unknown) => Error,
  ): Promise<T> {
    if (listener) {
      try {
        this.replay?.(listener);
      } catch {
        // as in emit
      }
      this.listeners.add(listener);
    }
    this.waiters++;
    try {
      if (!signal) return await this.promise;
      return await new Promise<T>((resolve, reject) => {
        const onAbort = () => reject(aborted(signal.reason));
        if (signal.aborted) onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        this.promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
      });
    } finally {
      if (listener) this.listeners.delete(listener);
      this.waiters--;
      if (this.waiters === 0 && signal?.aborted) this.controller.abort(signal.reason);
    }
  }
}

/** Jobs by key: `get` joins the running job of a key or starts one, which leaves the map when it settles. */
export class SharedJobs<K, T, E> {
  private readonly jobs = new Map<K, SharedJob<T, E>>();

  /** Number of jobs running. */
  get size(): number {
    return this.jobs.size;
  }

  /** Keys of the jobs running. */
  keys(): IterableIterator<K> {
    return this.jobs.keys();
  }

  /** The running job of `key`, or a new one made by `start`. */
  get(key: K, start: () => SharedJob<T, E>): SharedJob<T, E> {
    let job = this.jobs.get(key);
    if (!job) {
      const created = start();
      job = created;
      this.jobs.set(key, created);
      created.promise.then(
        () => this.jobs.delete(key),
        () => this.jobs.delete(key),
      );
    }
    return job;
  }
}

/**
 * Runs `attempt` up to `times` times: again after a failure that `retryable` accepts while `signal` is
 * not aborted (`onFailure` runs after every failed attempt first, e.g. to take back its progress).
 * @throws the last attempt's error.
 */
export async function withRetries<T>(
  times: number,
  attempt: () => Promise<T>,
  retryable: (error: unknown) => boolean,
  signal: AbortSignal,
  onFailure?: () => void,
): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (error) {
      onFailure?.();
      if (i < times && retryable(error) && !signal.aborted) continue;
      throw error;
    }
  }
}
