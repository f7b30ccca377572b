/**
 * The response cache of the `/graphql` route: whole answers (body and headers) of read-only queries that
 * completed without errors, emptied on every data change. GET requests are keyed by their text
 * (`Accept`, `Content-Type` and the URL); JSON POST requests by the exact body bytes within their
 * (`Accept`, `Content-Type`) variant ({@link BytesKeyedCache}: no string is made or hashed per request).
 */

import type { ServerResponse } from 'node:http';
import { LRUCache } from 'lru-cache';
import { BytesKeyedCache } from '../bytes-cache.ts';
import type { ServerMetrics } from './metrics.ts';
import { endWith, ONE_WRITE_BYTES } from './respond.ts';

/** One cached answer. */
export interface CachedResponse {
  /** The body: text (node writes status line, headers and a string body in one write) or UTF-8 bytes. */
  body: string | Buffer;
  /** Flat name/value list for `writeHead`. */
  headers: string[];
  /**
   * For a body of bytes up to `ONE_WRITE_BYTES`: the same bytes as a latin1 string, made once when the
   * answer is kept, for {@link writeCached}'s single write.
   */
  latin1?: string;
}

/**
 * Answers 200 with a cached answer: a small byte body as its kept latin1 string (status line, headers
 * and body in one `write`, as `endWith` does), anything else through `endWith`.
 */
export function writeCached(res: ServerResponse, hit: CachedResponse): void {
  if (hit.latin1 === undefined) endWith(res, 200, hit.headers, hit.body);
  else {
    res.writeHead(200, hit.headers);
    res.end(hit.latin1, 'latin1');
  }
}

/** Most bytes kept in all, per key kind (GET URLs, POST bodies). */
const MAX_BYTES = 16 * 1024 * 1024;
/** Longest POST body kept as a key, in bytes. */
const MAX_KEY_BYTES = 64 * 1024;
/** Most (`Accept`, `Content-Type`) pairs told apart for POST keys; further pairs are not cached. */
const MAX_VARIANTS = 64;

const sizeOf = (v: CachedResponse) =>
  (typeof v.body === 'string' ? v.body.length * 2 : v.body.length) + (v.latin1?.length ?? 0) + 1;

/** A response cache of `size` entries per key kind, counting lookups in `metrics`. */
export class ResponseCache {
  readonly #texts: LRUCache<string, CachedResponse>;
  readonly #bodies: BytesKeyedCache<CachedResponse>;
  readonly #variants = new Map<string, Map<string, number>>();
  #variantCount = 0;
  readonly #metrics: ServerMetrics | undefined;

  constructor(size: number, metrics: ServerMetrics | undefined) {
    this.#texts = new LRUCache({ max: size, maxSize: MAX_BYTES, sizeCalculation: sizeOf });
    this.#bodies = new BytesKeyedCache({
      max: size,
      maxKeyBytes: MAX_KEY_BYTES,
      maxBytes: MAX_BYTES,
      sizeOf,
    });
    this.#metrics = metrics;
  }

  /** The text key of a GET (or other non-JSON) request. */
  static textKey(method: string, accept: string, contentType: string, urlOrBody: string): string {
    return `${method}\n${accept}\n${contentType}\n${urlOrBody}`;
  }

  /**
   * The variant number of a JSON POST's (`Accept`, `Content-Type`) pair, or -1 once
   * {@link MAX_VARIANTS} pairs are known (such requests are not cached).
   */
  variantOf(accept: string, contentType: string): number {
    let byType = this.#variants.get(accept);
    const known = byType?.get(contentType);
    if (known !== undefined) return known;
    if (this.#variantCount >= MAX_VARIANTS) return -1;
    if (!byType) {
      byType = new Map();
      this.#variants.set(accept, byType);
    }
    byType.set(contentType, this.#variantCount);
    return this.#variantCount++;
  }

  /** Looks a text key up (and counts the lookup). */
  getText(key: string): CachedResponse | undefined {
    const hit = this.#texts.get(key);
    this.#metrics?.cacheLookup(hit !== undefined);
    return hit;
  }

  /** Looks a JSON POST body up within its variant (and counts the lookup). */
  getBytes(bytes: Uint8Array, variant: number): CachedResponse | undefined {
    const hit = this.#bodies.get(bytes, variant);
    this.#metrics?.cacheLookup(hit !== undefined);
    return hit;
  }

  /**
   * Keeps an answer under a text key, or under body bytes and variant. A body that is a view of a larger
   * buffer (a query plan's slab) is kept as a copy, so that the cache holds only its own bytes; a small
   * byte body also as latin1 text ({@link CachedResponse.latin1}).
   */
  set(key: string | Uint8Array, variant: number, value: CachedResponse): void {
    const body = value.body;
    if (typeof body !== 'string') {
      value = {
        body: body.buffer.byteLength > body.length ? Buffer.from(body) : body,
        headers: value.headers,
        latin1: value.latin1 ?? (body.length <= ONE_WRITE_BYTES ? body.toString('latin1') : undefined),
      };
    }
    if (typeof key === 'string') this.#texts.set(key, value);
    else if (variant >= 0) this.#bodies.set(key, value, variant);
  }

  /** Drops every answer. */
  clear(): void {
    this.#texts.clear();
    this.#bodies.clear();
  }
}
