/**
 * The byte writer behind query plans (`plan.ts`): a plan writes the UTF-8 bytes of its JSON answer
 * straight into one scratch buffer shared by every plan of the process, then copies the bytes written
 * into a `Buffer` of their exact length, the body of the HTTP answer. Writing bytes instead of
 * concatenating strings spares the HTTP layer a flattening and encoding pass over the whole answer.
 *
 * Generated plan code keeps the buffer and the write position in local variables and calls these
 * helpers with them: each helper takes `(b, n, …)` and returns the new position; a helper that needs
 * more room grows {@link WRITER}`.b` (the caller reloads it). Text is written exactly as `JSON.stringify`
 * writes it (RFC 8259 §7 escapes; lone surrogates as `\uXXXX`), so a plan's bytes are those of
 * graphql-js's `JSON.stringify(result)`.
 */

/** Initial and resting size of the scratch buffer, in bytes. */
const INITIAL_SIZE = 64 * 1024;
/** A scratch buffer grown past this (by a huge answer) is dropped after the plan that grew it. */
const MAX_KEPT_SIZE = 4 * 1024 * 1024;

/** The shared scratch buffer (`b`) and whether a plan is writing into it now (`busy`). */
export const WRITER: { b: Buffer; busy: boolean } = { b: Buffer.allocUnsafe(INITIAL_SIZE), busy: false };

/**
 * Grows the scratch buffer so that `k` more bytes fit after the first `n` (which it keeps); returns
 * the new buffer (also in {@link WRITER}`.b`).
 */
export function grow(n: number, k: number): Buffer {
  let size = WRITER.b.length * 2;
  while (size < n + k) size *= 2;
  const bigger = Buffer.allocUnsafe(size);
  WRITER.b.copy(bigger, 0, 0, n);
  WRITER.b = bigger;
  return bigger;
}

/**
 * JSON text of strings that `writeString` cannot copy byte for byte (non-ASCII, or with characters JSON
 * escapes), as UTF-8 bytes, kept by value: the store hands out the same strings on every request.
 * Bounded: strings longer than {@link MAX_ENCODED_LENGTH} are not kept, and the map is emptied when it
 * holds {@link MAX_ENCODED} entries.
 */
const encoded = new Map<string, Buffer>();
const MAX_ENCODED = 50_000;
const MAX_ENCODED_LENGTH = 200;

/** The UTF-8 bytes of `JSON.stringify(value)`, from the bounded map when the string is short. */
function encodedString(value: string): Buffer {
  let bytes = encoded.get(value);
  if (bytes === undefined) {
    bytes = Buffer.from(JSON.stringify(value), 'utf8');
    if (value.length <= MAX_ENCODED_LENGTH) {
      if (encoded.size >= MAX_ENCODED) encoded.clear();
      encoded.set(value, bytes);
    }
  }
  return bytes;
}

/** Writes `bytes` at `n` (growing the buffer if needed); returns the new position. */
export function writeBytes(b: Buffer, n: number, bytes: Uint8Array): number {
  const length = bytes.length;
  if (n + length > b.length) b = grow(n, length);
  if (length < 32) for (let i = 0; i < length; i++) b[n + i] = bytes[i]!;
  else b.set(bytes, n);
  return n + length;
}

/**
 * Writes a string as a JSON string literal at `n`; returns the new position. Printable ASCII without
 * `"` and `\` is copied character by character; anything else goes through `JSON.stringify`.
 */
export function writeString(b: Buffer, n: number, value: string): number {
  const length = value.length;
  if (n + length + 2 > b.length) b = grow(n, length + 2);
  b[n] = 34;
  let m = n + 1;
  for (let i = 0; i < length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7f || c === 34 || c === 92) return writeBytes(b, n, encodedString(value));
    b[m++] = c;
  }
  b[m] = 34;
  return m + 1;
}

/** Writes ASCII text (a number's decimal form, JSON text of a custom scalar) at `n`; returns the new position. */
export function writeAscii(b: Buffer, n: number, text: string): number {
  const length = text.length;
  if (n + length > b.length) b = grow(n, length);
  for (let i = 0; i < length; i++) b[n + i] = text.charCodeAt(i);
  return n + length;
}

/** Writes any JSON text at `n` as UTF-8; returns the new position. */
export function writeJson(b: Buffer, n: number, text: string): number {
  const length = Buffer.byteLength(text);
  if (n + length > b.length) b = grow(n, length);
  return n + b.write(text, n, 'utf8');
}

/**
 * Runs `write(b, root, context, variables)` over the scratch buffer (writing from position 0, returning
 * the end position) and returns a copy of the bytes it wrote. Throws whatever `write` throws. Not
 * re-entrant: a plan that runs while another one writes (a resolver running a query plan itself) throws
 * `busy`, so the caller falls back as on any bailout.
 */
export function written(
  write: (b: Buffer, root: unknown, context: unknown, variables: Record<string, unknown>) => number,
  root: unknown,
  context: unknown,
  variables: Record<string, unknown>,
  busy: Error,
): Buffer {
  if (WRITER.busy) throw busy;
  WRITER.busy = true;
  try {
    const n = write(WRITER.b, root, context, variables);
    const out = Buffer.allocUnsafe(n);
    WRITER.b.copy(out, 0, 0, n);
    return out;
  } finally {
    WRITER.busy = false;
    if (WRITER.b.length > MAX_KEPT_SIZE) WRITER.b = Buffer.allocUnsafe(INITIAL_SIZE);
  }
}
