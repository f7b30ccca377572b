/**
 * Bounded output of commands run by MCP tools ("output larger than an MCP message may
 * carry comes back shortened and marked as truncated"): a capture keeps at most `limit` bytes of a stream
 * and counts the rest; `shorten` cuts text to a byte budget on a character boundary.
 */

/** Output of one stream kept up to a byte limit, with the total seen. */
export class BoundedOutput {
  readonly #limit: number;
  readonly #chunks: Buffer[] = [];
  #kept = 0;
  /** Bytes written in all (kept or not). */
  total = 0;
  /** Bytes read by `take()` so far (offset of the next unread byte in the kept output). */
  #read = 0;

  /** @param limit bytes kept at most; later bytes are counted only. */
  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Adds text written by the command. */
  push(text: string): void {
    const bytes = Buffer.from(text, 'utf8');
    this.total += bytes.length;
    const room = this.#limit - this.#kept;
    if (room <= 0) return;
    const part = bytes.length <= room ? bytes : bytes.subarray(0, room);
    this.#chunks.push(part);
    this.#kept += part.length;
  }

  /** True when bytes were dropped past the limit. */
  get overflowed(): boolean {
    return this.total > this.#kept;
  }

  /** The kept bytes. */
  bytes(): Buffer {
    if (this.#chunks.length > 1) this.#chunks.splice(0, this.#chunks.length, Buffer.concat(this.#chunks));
    return this.#chunks[0] ?? Buffer.alloc(0);
  }

  /** Kept bytes not returned by an earlier `take`, at most `max`, as text (whole characters). */
  take(max: number): { text: string; remaining: number } {
    const all = this.bytes();
    const slice = utf8Prefix(all.subarray(this.#read), max);
    this.#read += slice.length;
    return { text: slice.toString('utf8'), remaining: all.length - this.#read };
  }
}

/** The longest prefix of `bytes` of at most `max` bytes that ends on a UTF-8 character boundary. */
export function utf8Prefix(bytes: Buffer, max: number): Buffer {
  if (bytes.length <= max) return bytes;
  let end = max;
  // Back off continuation bytes (10xxxxxx) so that no character is cut.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

/** Result of {@link shorten}. */
export interface Shortened {
  text: string;
  truncated: boolean;
  /** Bytes of the whole text. */
  totalBytes: number;
}

/** `text` cut to `max` UTF-8 bytes (whole characters). */
export function shorten(text: string | Buffer, max: number): Shortened {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  const kept = utf8Prefix(bytes, max);
  return { text: kept.toString('utf8'), truncated: kept.length < bytes.length, totalBytes: bytes.length };
}
