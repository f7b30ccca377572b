/**
 * `box.files` (E2B `sandbox.files` in spirit): read, write, list, stat, exists, makeDir, remove, rename
 * and watchDir on a running box, over a `FilesBackend` (local or REST). This class checks every argument
 * (a `BoxError` `invalid_option` naming the field) and converts data forms; the backend does the I/O.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import { BoxError } from '../../errors.ts';
import type { ChunkSink } from './pump.ts';
import { checkBoxPath } from './root.ts';
import type {
  FilesBackend,
  FilesystemEvent,
  JsEntryInfo,
  JsWriteInfo,
  WatchHandle,
  WatchOptions,
  WriteData,
} from './types.ts';

/** Largest `depth` of `list`. */
export const MAX_LIST_DEPTH = 64;

/** Output forms of `files.read`: UTF-8 text (default), bytes, or a web byte stream. */
export type ReadFormat = 'text' | 'bytes' | 'stream';

/** Turns any accepted `WriteData` into a Node byte stream. @throws BoxError naming `data`. */
export function toReadable(data: WriteData): Readable {
  if (typeof data === 'string') return Readable.from([Buffer.from(data, 'utf8')]);
  if (data instanceof Uint8Array)
    return Readable.from([Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
  if (data instanceof ArrayBuffer) return Readable.from([Buffer.from(data)]);
  if (typeof Blob !== 'undefined' && data instanceof Blob) {
    return Readable.fromWeb(data.stream() as unknown as NodeReadableStream<Uint8Array>);
  }
  if (data instanceof Readable) return data;
  if (data && typeof (data as ReadableStream).getReader === 'function') {
    return Readable.fromWeb(data as unknown as NodeReadableStream<Uint8Array>);
  }
  if (data && typeof (data as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function') {
    return Readable.from(data as AsyncIterable<Uint8Array | string>);
  }
  throw new BoxError(
    'invalid files option data: must be a string, Uint8Array, ArrayBuffer, Blob, ReadableStream or async iterable of bytes',
    { field: 'data' },
  );
}

/** Collects a byte stream into one Buffer. */
export async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}

/** The backend of each `BoxFiles`, for {@link backendOf}. */
const backends = new WeakMap<BoxFiles, FilesBackend>();

/** @internal The backend `files` forwards to (a wrapper box forwards its own `files` to it). */
export function backendOf(files: BoxFiles): FilesBackend {
  const backend = backends.get(files);
  if (!backend) throw new BoxError('files of an unknown box', { code: 'internal' });
  return backend;
}

/** The files of one box (see the module comment). Obtained as `box.files`. */
export class BoxFiles {
  readonly #backend: FilesBackend;

  /** @internal Use `box.files`. */
  constructor(backend: FilesBackend) {
    this.#backend = backend;
    backends.set(this, backend);
  }

  /** @internal The box's writable host folders (`FilesBackend.sharedHostRoots`), for `copyIn`/`copyOut`. */
  async sharedHostRoots(): Promise<string[]> {
    return (await this.#backend.sharedHostRoots?.()) ?? [];
  }

  /**
   * Reads a regular file (symlinks are followed inside the box). `format`: `text` (default, UTF-8 string),
   * `bytes` (`Uint8Array`), `stream` (web `ReadableStream<Uint8Array>`, read as it arrives).
   * @throws BoxError `not_found`, `conflict` (a directory or special file), `permission_denied`,
   *   `invalid_option` (field `path` or `format`).
   */
  read(path: string, options?: { format?: 'text' }): Promise<string>;
  read(path: string, options: { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, options: { format: 'stream' }): Promise<ReadableStream<Uint8Array>>;
  async read(
    path: string,
    options: { format?: ReadFormat } = {},
  ): Promise<string | Uint8Array | ReadableStream<Uint8Array>> {
    checkBoxPath(path);
    const format = options?.format ?? 'text';
    if (format !== 'text' && format !== 'bytes' && format !== 'stream') {
      throw new BoxError("invalid files option format: must be 'text', 'bytes' or 'stream'", {
        field: 'format',
      });
    }
    const stream = await this.#backend.readStream(path);
    if (format === 'stream') return Readable.toWeb(stream) as unknown as ReadableStream<Uint8Array>;
    const bytes = await collect(stream);
    return format === 'text'
      ? bytes.toString('utf8')
      : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  }

  /** @internal The file's bytes as a Node stream (REST server, `copyOut`): no web-stream conversion. */
  readNode(path: string): Promise<Readable> {
    checkBoxPath(path);
    return this.#backend.readStream(path);
  }

  /**
   * @internal Hands the bytes of a regular file of the box to `sink` chunk by chunk (`copyOut`, the REST
   * download route); locally through one reused buffer. @throws as `read`.
   */
  readInto(path: string, sink: ChunkSink): Promise<void> {
    checkBoxPath(path);
    return this.#backend.readInto(path, sink);
  }

  /**
   * @internal Writes the open host file `hostFd` (from its offset to its end) to `path` through one reused
   * buffer (`copyIn`), with the semantics of `write`. @throws as `write`.
   */
  writeFromFd(path: string, hostFd: number, mode?: number): Promise<JsWriteInfo> {
    checkBoxPath(path);
    return this.#backend.writeStream(path, { hostFd }, mode);
  }

  /**
   * Writes a file, replacing it atomically if it exists (readers never see a partial file; owner and mode
   * of an existing file are kept) or creating it and missing parents as the box's user (`mode`, default
   * 0o644). Streams are written as they arrive.
   * @throws BoxError `invalid_option` (field `path`, `data` or `mode`), `conflict` (a directory is in the
   *   way), `permission_denied`.
   */
  async write(path: string, data: WriteData, options: { mode?: number } = {}): Promise<JsWriteInfo> {
    checkBoxPath(path);
    const mode = options?.mode;
    if (mode !== undefined && (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)) {
      throw new BoxError('invalid files option mode: must be an integer from 0 to 0o7777', { field: 'mode' });
    }
    return this.#backend.writeStream(path, toReadable(data), mode);
  }

  /**
   * Entries of a directory, sorted by name per directory, down to `depth` levels (default 1: the
   * children only; symlinked directories are not entered).
   * @throws BoxError `not_found`, `invalid_option` (not a directory; `depth` not an integer 1–64).
   */
  async list(path: string, options: { depth?: number } = {}): Promise<JsEntryInfo[]> {
    checkBoxPath(path);
    const depth = options?.depth ?? 1;
    if (!Number.isInteger(depth) || depth < 1 || depth > MAX_LIST_DEPTH) {
      throw new BoxError(`invalid files option depth: must be an integer from 1 to ${MAX_LIST_DEPTH}`, {
        field: 'depth',
      });
    }
    return this.#backend.list(path, depth);
  }

  /** The entry at `path` (a final symlink is reported as a symlink). @throws BoxError `not_found`. */
  stat(path: string): Promise<JsEntryInfo> {
    checkBoxPath(path);
    return this.#backend.stat(path);
  }

  /** E2B's name for {@link stat}. */
  getInfo(path: string): Promise<JsEntryInfo> {
    return this.stat(path);
  }

  /** Whether an entry exists at `path` (a dangling symlink exists). */
  async exists(path: string): Promise<boolean> {
    checkBoxPath(path);
    try {
      await this.#backend.stat(path);
      return true;
    } catch (error) {
      if (error instanceof BoxError && error.code === 'not_found') return false;
      throw error;
    }
  }

  /** Creates a directory and its missing parents; resolves false when it already existed. */
  makeDir(path: string): Promise<boolean> {
    checkBoxPath(path);
    return this.#backend.makeDir(path);
  }

  /** Removes a file, symlink (not its target) or directory tree. @throws BoxError `not_found`. */
  remove(path: string): Promise<void> {
    checkBoxPath(path);
    return this.#backend.remove(path);
  }

  /** Renames (moves) an entry; an existing file at `newPath` is replaced. Returns the moved entry. */
  rename(oldPath: string, newPath: string): Promise<JsEntryInfo> {
    checkBoxPath(oldPath, 'oldPath');
    checkBoxPath(newPath, 'newPath');
    return this.#backend.rename(oldPath, newPath);
  }

  /**
   * Watches a directory (inotify): `onEvent` gets `{ name, type }` for entries created, removed or
   * written; with `recursive`, subdirectories too (names relative to `path`). Resolves once the watch is
   * in place; `stop()` ends it.
   */
  watchDir(
    path: string,
    onEvent: (event: FilesystemEvent) => void,
    options: WatchOptions = {},
  ): Promise<WatchHandle> {
    checkBoxPath(path);
    if (typeof onEvent !== 'function') {
      throw new BoxError('invalid files option onEvent: must be a function', { field: 'onEvent' });
    }
    const recursive = options?.recursive ?? false;
    if (typeof recursive !== 'boolean') {
      throw new BoxError('invalid files option recursive: must be a boolean', { field: 'recursive' });
    }
    let exited = false;
    return this.#backend.watch({
      path,
      recursive,
      onEvent,
      onExit: (error) => {
        if (exited) return;
        exited = true;
        options?.onExit?.(error);
      },
    });
  }

  /** @internal Creates a symlink (used by `copyIn`). */
  symlink(path: string, target: string): Promise<void> {
    checkBoxPath(path);
    if (typeof target !== 'string' || target === '' || target.includes('\0')) {
      throw new BoxError('invalid files option target: must be a non-empty path', { field: 'target' });
    }
    return this.#backend.symlink(path, target);
  }
}
