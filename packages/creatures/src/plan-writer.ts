/**
 * The byte writer behind query plans (`plan.ts`): a plan writes the UTF-8 bytes of its JSON answer
 * straight into a slab shared by every plan of the process, after the answers written before it. A
 * small answer (up to {@link MAX_VIEW} bytes) is handed out as a view of the bytes written (no copy), and
 * that part of the slab is never written over: once less than {@link MIN_FREE} bytes are left, the next
 * answer goes into a new slab, and the old one lives on only as long as answers that view it (as node's
 * own `Buffer` pool does). A larger answer is copied out into a `Buffer` of its own and its place in the
 * slab is written over by the next answer (views of big slabs would keep whole slabs alive and make
 * new ones often). Writing bytes instead of concatenating strings spares the HTTP layer a flattening and
 * encoding pass over the whole answer.
 *
 * Generated plan code keeps the slab and the write position in local variables and calls these helpers
 * with them: each helper takes `(b, n, …)` and returns the new position; a helper that needs more room
 * grows {@link WRITER}`.b` (the caller reloads it). Text is written exactly as `JSON.stringify` writes it
 * (RFC 8259 §7 escapes; lone surrogates as `\uXXXX`), so a plan's bytes are those of graphql-js's
 * `JSON.stringify(result)`.
 */

/** Size of a new slab, in bytes. */
const SLAB_SIZE = 64 * 1024;
/** A slab with fewer free bytes than this after an answer is left to the answers that view it. */
const MIN_FREE = 8 * 1024;
/** Answers up to this many bytes are views of the slab; larger ones are copies. */
const MAX_VIEW = 4 * 1024;
/**
 * {@link writtenText} hands out answers up to this many bytes as latin1 text (the HTTP layer writes such
 * a string in one `write` with the response head).
 */
export const MAX_TEXT_BYTES = 16 * 1024;
/** A slab grown past this (by a huge answer) is left after the plan that grew it. */
const MAX_KEPT_SIZE = 4 * 1024 * 1024;

/**
 * The current slab (`b`), where the answer being written starts (`start`) and where the next one will
 * (`next`), and whether a plan is writing now (`busy`).
 */
export const WRITER: { b: Buffer; start: number; next: number; busy: boolean } = {
  b: Buffer.allocUnsafeSlow(SLAB_SIZE),
  start: 0,
  next: 0,
  busy: false,
};

/**
 * Makes room for `k` more bytes after position `n` of the answer being written: a new, larger slab that
 * holds that answer's bytes so far at the same positions (earlier answers stay in the old slab); returns
 * it (also in {@link WRITER}`.b`).
 */
export function grow(n: number, k: number): Buffer {
  let size = WRITER.b.length * 2;
  while (size < n + k) size *= 2;
  const bigger = Buffer.allocUnsafeSlow(size);
  WRITER.b.copy(bigger, WRITER.start, WRITER.start, n);
  WRITER.b = bigger;
  return bigger;
}

/**
 * JSON text of strings that `writeString` cannot copy byte for byte (non-ASCII, or with characters JSON
 * escapes), as UTF-8 bytes, kept by value: the store hands out the same strings on every request.
 * Bounded: strings longer than {@link MAX_ENCODED_LENGTH} are not kept, and the map is emptied when it
 * holds {@link MAX_ENCODED} entries or {@link MAX_ENCODED_BYTES} bytes (UTF-16 keys and their bytes). (Looking every string up here instead of copying it was measured
 * slower for the list of all creatures: hundreds of lookups in a large map cost more than short copies.)
 */
const encoded = new Map<string, Buffer>();
const MAX_ENCODED = 50_000;
const MAX_ENCODED_LENGTH = 200;
const MAX_ENCODED_BYTES = 4 * 1024 * 1024;
let encodedBytes = 0;

/** The UTF-8 bytes of `JSON.stringify(value)`, from the bounded map when the string is short. */
function encodedString(value: string): Buffer {
  let bytes = encoded.get(value);
  if (bytes === undefined) {
    bytes = Buffer.from(JSON.stringify(value), 'utf8');
    if (value.length <= MAX_ENCODED_LENGTH) {
      if (encoded.size >= MAX_ENCODED || encodedBytes >= MAX_ENCODED_BYTES) {
        encoded.clear();
        encodedBytes = 0;
      }
      encoded.set(value, bytes);
      encodedBytes += value.length * 2 + bytes.length + 64;
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

/** The signature of a plan's generated writer: writes from `start`, returns the end position. */
type Write = (
  b: Buffer,
  start: number,
  root: unknown,
  context: unknown,
  variables: Record<string, unknown>,
) => number;

/**
 * Claims the slab for one plan's writer and returns the position it writes from; throws `busy` while
 * another writer holds it (the caller releases it by setting `WRITER.busy` back to false).
 */
function claim(busy: Error): number {
  if (WRITER.busy) throw busy;
  WRITER.busy = true;
  const start = WRITER.next;
  WRITER.start = start;
  return start;
}

/** Replaces a slab grown past {@link MAX_KEPT_SIZE} by a new one of {@link SLAB_SIZE} bytes. */
function dropGrownSlab(): void {
  if (WRITER.b.length > MAX_KEPT_SIZE) {
    WRITER.b = Buffer.allocUnsafeSlow(SLAB_SIZE);
    WRITER.next = 0;
  }
}

/** A copy of the answer at `start`–`end` of the slab; drops a slab grown past {@link MAX_KEPT_SIZE}. */
function copyOut(start: number, end: number): Buffer {
  const copy = Buffer.allocUnsafe(end - start);
  WRITER.b.copy(copy, 0, start, end);
  dropGrownSlab();
  return copy;
}

/**
 * Like {@link written}, but an answer up to {@link MAX_TEXT_BYTES} comes back as a latin1 string of its
 * bytes (one character per byte: `Buffer.from(text, 'latin1')` gives the bytes back, and node writes
 * such a string with `'latin1'` encoding as those bytes), and its place in the slab is written over by
 * the next answer (no view of the slab is handed out, so the slab is never left behind). A larger answer
 * is a copy, as from {@link written}.
 */
export function writtenText(
  write: Write,
  root: unknown,
  context: unknown,
  variables: Record<string, unknown>,
  busy: Error,
): string | Buffer {
  const start = claim(busy);
  try {
    const end = write(WRITER.b, start, root, context, variables);
    if (end - start > MAX_TEXT_BYTES) return copyOut(start, end);
    const text = WRITER.b.toString('latin1', start, end);
    dropGrownSlab();
    return text;
  } finally {
    WRITER.busy = false;
  }
}

/**
 * Runs `write(b, start, root, context, variables)` over the slab (writing from `start`, returning the end
 * position) and returns the bytes it wrote: a view that nothing writes over later, or for a large answer
 * a copy. Throws whatever `write` throws (its bytes are then left to be written over). Not re-entrant:
 * a plan that runs while another one writes (a resolver running a query plan itself) throws `busy`, so
 * the caller falls back as on any bailout.
 */
export function written(
  write: Write,
  root: unknown,
  context: unknown,
  variables: Record<string, unknown>,
  busy: Error,
): Buffer {
  const start = claim(busy);
  try {
    const end = write(WRITER.b, start, root, context, variables);
    if (end - start > MAX_VIEW) return copyOut(start, end);
    const out = WRITER.b.subarray(start, end);
    const next = (end + 7) & ~7;
    if (WRITER.b.length - next < MIN_FREE || WRITER.b.length > MAX_KEPT_SIZE) {
      WRITER.b = Buffer.allocUnsafeSlow(SLAB_SIZE);
      WRITER.next = 0;
    } else WRITER.next = next;
    return out;
  } finally {
    WRITER.busy = false;
  }
}
