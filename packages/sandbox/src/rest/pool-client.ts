/**
 * Warm pools of a REST runtime (the server side is `pool-routes.ts`): `runtime.pool(spec)` on a
 * REST runtime asks the server to keep the boxes ready, and `create()` with matching options on that
 * runtime is handed one by the server. The handle is returned at once, as a local pool's is: its id is
 * chosen here (a ULID) and sent with the create request, whose outcome `filled()` and `close()` report.
 */
import { ulid } from 'ulid';
import { BoxError } from '../errors.ts';
import { validateBoxOptions } from '../runtime/options.ts';
import { type JsBoxPool, type PoolSpec, poolBoxOptions } from '../runtime/pool.ts';
import type { Connection } from './client.ts';

interface WirePool {
  id: string;
  size: number;
  ready: number;
}

/** A warm pool kept by a REST server (the `JsBoxPool` of a REST runtime). */
export class RestPool implements JsBoxPool {
  readonly id: string;
  readonly size: number;
  readonly #conn: Connection;
  /** The create request; rejects with the server's refusal. */
  readonly #created: Promise<void>;
  #ready = 0;
  #closed: Promise<void> | null = null;
  readonly #onClose: (pool: RestPool) => void;

  /**
   * Validates `spec` here (as a local runtime does, and refusing host paths as every REST call does), then
   * asks the server to create the pool.
   * @throws BoxError `invalid_option` naming `image`, `size`, `options` or the box option at fault.
   */
  constructor(conn: Connection, spec: PoolSpec, onClose: (pool: RestPool) => void) {
    const { options, size } = poolBoxOptions(spec);
    validateBoxOptions(options, { allowHostBinds: false });
    this.id = ulid();
    this.size = size;
    this.#conn = conn;
    const { image, ...rest } = options;
    this.#created = conn
      .call<WirePool>('POST', '/v1/pools', { id: this.id, image, size, options: rest })
      .then((pool) => {
        this.#ready = pool.ready;
      });
    // A refusal is reported by `filled()` and `close()`; it never goes unhandled.
    this.#created.catch(() => {});
    this.#onClose = onClose;
  }

  /** Boxes ready on the server when it last answered about this pool (`filled()` refreshes it). */
  ready(): number {
    return this.#ready;
  }

  /**
   * Resolves once the server's pool holds `size` ready boxes.
   * @throws BoxError: the server's refusal of the pool, or the error of a failed refill.
   */
  async filled(): Promise<void> {
    await this.#created;
    const pool = await this.#conn.call<WirePool>('GET', `/v1/pools/${this.id}/filled`);
    this.#ready = pool.ready;
  }

  /** Closes the pool on the server: the boxes it holds ready are removed. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#onClose(this);
      try {
        await this.#created;
      } catch {
        this.#ready = 0;
        return; // never created: nothing to close
      }
      try {
        await this.#conn.call('DELETE', `/v1/pools/${this.id}`);
      } catch (error) {
        if (!(error instanceof BoxError && error.code === 'not_found')) throw error;
      }
      this.#ready = 0;
    })();
    return this.#closed;
  }
}
