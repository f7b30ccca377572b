/**
 * A bounded queue feeding one server stream (process output, watch events): producers `push` without
 * waiting; the stream reads it as an async iterator, with a keepalive item whenever nothing came for
 * `keepaliveMs`. A consumer that falls more than `maxBytes` behind ends with a `resource_exhausted`
 * Connect error instead of growing the server's memory.
 */
import { Code, ConnectError } from '@connectrpc/connect';

/** Most bytes a stream may hold for a slow client before it is ended, bytes (8 MiB). */
export const STREAM_BACKLOG_BYTES = 8 * 1024 * 1024;

/** One stream's queue of items of type `T`. */
export class StreamQueue<T> {
  readonly #items: T[] = [];
  readonly #maxBytes: number;
  #bytes = 0;
  #closed = false;
  #error: Error | null = null;
  #wake: (() => void) | null = null;

  /** @param maxBytes most bytes held (as `push` counts them), bytes. */
  constructor(maxBytes = STREAM_BACKLOG_BYTES) {
    this.#maxBytes = maxBytes;
  }

  /** Adds an item weighing `bytes`; past the bound the queue fails with `resource_exhausted`. */
  push(item: T, bytes = 0): void {
    if (this.#closed) return;
    this.#bytes += bytes;
    if (this.#bytes > this.#maxBytes) {
      this.fail(
        new ConnectError(
          `the client read too slowly: over ${this.#maxBytes} bytes queued`,
          Code.ResourceExhausted,
        ),
      );
      return;
    }
    this.#items.push(item);
    this.#notify();
  }

  /** Ends the stream after the queued items. */
  close(): void {
    this.#closed = true;
    this.#notify();
  }

  /** Ends the stream now with `error`. */
  fail(error: Error): void {
    this.#error = error;
    this.#closed = true;
    this.#items.length = 0;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  /**
   * The items until `close`, `fail` or `signal` aborts, with `keepalive()` after `keepaliveMs` of quiet.
   * `bytesOf` gives each item's weight back to the bound as it leaves.
   */
  async *drain(
    signal: AbortSignal,
    keepaliveMs: number,
    keepalive: () => T,
    bytesOf: (item: T) => number,
  ): AsyncGenerator<T> {
    const onAbort = () => this.close();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (this.#error) throw this.#error;
        const item = this.#items.shift();
        if (item !== undefined) {
          this.#bytes -= bytesOf(item);
          yield item;
          continue;
        }
        if (this.#closed) return;
        let timer: NodeJS.Timeout | undefined;
        const quiet = await new Promise<boolean>((resolve) => {
          this.#wake = () => resolve(false);
          timer = setTimeout(() => resolve(true), keepaliveMs);
        });
        clearTimeout(timer);
        this.#wake = null;
        if (quiet && !this.#closed) yield keepalive();
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }
}

/** The keepalive interval a client asks for (`Keepalive-Ping-Interval`, seconds), in ms: 1 s to 5 min, default 50 s. */
export function keepaliveMsOf(header: string | null): number {
  const seconds = Number(header);
  if (!header || !Number.isFinite(seconds)) return 50_000;
  return Math.min(300, Math.max(1, seconds)) * 1000;
}
