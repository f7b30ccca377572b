/**
 * A cache keyed by the exact bytes of a request body, for the per-request lookups of the `/graphql`
 * route (the parsed request of a JSON body, the response cache of POST queries).
 *
 * Looking a body up by its text costs a hash over every character of a string made for that request
 * alone (V8 caches a string's hash in the string, but each request brings a new string): about 1 ns a
 * character, half a microsecond for a typical 400-byte query body, on top of decoding and JSON-parsing
 * it. This cache instead keys a bounded LRU ({@link LRUCache}) by a 32-bit
 * fingerprint of the bytes — their length, bytes sampled across the body and every byte of its last 24
 * (where `variables` and `operationName` usually are) — and keeps with each entry a copy of the bytes,
 * so a lookup is a hash of one number and one `memcmp`; no string is made.
 *
 * Two different bodies with the same fingerprint share one slot: the later `set` replaces the earlier,
 * and `get` answers only for bytes equal to the stored ones, so a collision costs a miss, never a wrong
 * answer. The same goes for the `variant` number (what else the key holds, e.g. the request's `Accept`),
 * which is mixed into the fingerprint and compared too.
 */
import { LRUCache } from 'lru-cache';

/** Options of {@link BytesKeyedCache}. */
export interface BytesKeyedCacheOptions<V> {
  /** Most entries kept (least recently used go first). */
  max: number;
  /** Bodies longer than this many bytes are neither looked up nor kept. */
  maxKeyBytes: number;
  /** Most bytes kept in all (keys plus `sizeOf` of the values); default: no limit beyond `max`. */
  maxBytes?: number;
  /** The size in bytes of a value, counted against `maxBytes` (default 0). */
  sizeOf?: (value: V) => number;
}

interface Slot<V> {
  bytes: Buffer;
  variant: number;
  value: V;
}

/**
 * The fingerprint of `bytes` within `variant`: an FNV-1a-style 32-bit mix of the variant, the length,
 * up to 32 bytes sampled at even steps before the last 24, and the last 24 bytes.
 */
export function fingerprintOf(bytes: Uint8Array, variant: number): number {
  const length = bytes.length;
  let h = Math.imul(0x811c9dc5 ^ variant, 0x01000193) ^ length;
  const tail = length > 24 ? length - 24 : 0;
  const step = tail > 32 ? (tail >>> 5) + 1 : 1;
  for (let i = 0; i < tail; i += step) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  for (let i = tail; i < length; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}

/** A bounded cache from (body bytes, variant number) to a value; see the module comment. */
export class BytesKeyedCache<V> {
  readonly #maxKeyBytes: number;
  readonly #slots: LRUCache<number, Slot<V>>;

  constructor(options: BytesKeyedCacheOptions<V>) {
    this.#maxKeyBytes = options.maxKeyBytes;
    const sizeOf = options.sizeOf;
    this.#slots = new LRUCache<number, Slot<V>>(
      options.maxBytes === undefined
        ? { max: options.max }
        : {
            max: options.max,
            maxSize: options.maxBytes,
            sizeCalculation: (slot) => slot.bytes.length + (sizeOf ? sizeOf(slot.value) : 0) + 1,
          },
    );
  }

  /** The value kept for exactly these bytes in `variant`, or undefined. */
  get(bytes: Uint8Array, variant = 0): V | undefined {
    if (bytes.length > this.#maxKeyBytes) return undefined;
    const slot = this.#slots.get(fingerprintOf(bytes, variant));
    return slot !== undefined && slot.variant === variant && slot.bytes.equals(bytes)
      ? slot.value
      : undefined;
  }

  /**
   * Keeps `value` for a copy of `bytes` in `variant` (replacing whatever shared the fingerprint); does
   * nothing for bodies over `maxKeyBytes`.
   */
  set(bytes: Uint8Array, value: V, variant = 0): void {
    if (bytes.length > this.#maxKeyBytes) return;
    this.#slots.set(fingerprintOf(bytes, variant), { bytes: Buffer.from(bytes), variant, value });
  }

  /** Drops every entry. */
  clear(): void {
    this.#slots.clear();
  }

  /** Entries kept now. */
  get size(): number {
    return this.#slots.size;
  }
}
