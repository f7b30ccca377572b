/**
 * Shapes of the files API of a box (`box.files`, in the spirit of E2B's `sandbox.files`; BoxLite's
 * `copyIn`/`copyOut` options). Same API on local and REST boxes and on `SimpleBox`.
 */
import type { Readable } from 'node:stream';
import type { ChunkSink, HostFileSource } from './pump.ts';

/** Kind of a filesystem entry: regular file, directory, symbolic link, or anything else (fifo, socket, device). */
export type FileType = 'file' | 'dir' | 'symlink' | 'other';

/** One entry of a box's filesystem (E2B `EntryInfo`). */
export interface JsEntryInfo {
  /** Last path component. */
  name: string;
  /** Absolute path inside the box. */
  path: string;
  type: FileType;
  /** Size in bytes (of the link itself for a symlink). */
  size: number;
  /** Permission bits and set-id/sticky bits (`st_mode & 0o7777`). */
  mode: number;
  /** `ls -l` style permission string, e.g. `rwxr-xr-x`. */
  permissions: string;
  /** Owner user id inside the box. */
  uid: number;
  /** Owner group id inside the box. */
  gid: number;
  /** Last modification time. */
  modifiedTime: Date;
  /** Target of a symlink, as stored in the link. */
  symlinkTarget?: string;
}

/** Result of a write (E2B `WriteInfo`). */
export interface JsWriteInfo {
  name: string;
  /** Absolute path inside the box (after symlinks on the way were resolved). */
  path: string;
  type: 'file';
}

/**
 * Data accepted by `files.write`: text (UTF-8), bytes, a Blob, a web `ReadableStream` or any async
 * iterable of byte chunks (a Node `Readable`). Streams are written as they arrive (bounded memory).
 */
export type WriteData =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array | string>;

/** Kinds of `watchDir` events (E2B `FilesystemEventType`). */
export type FilesystemEventType = 'create' | 'write' | 'remove' | 'rename' | 'chmod';

/** One `watchDir` event: `name` is relative to the watched directory (`sub/file` when recursive). */
export interface FilesystemEvent {
  name: string;
  type: FilesystemEventType;
}

/** A running directory watch; `stop()` ends it (repeatable). */
export interface WatchHandle {
  stop(): Promise<void>;
}

/** Options of `watchDir`. */
export interface WatchOptions {
  /** Also watch every subdirectory, present and future (default false). */
  recursive?: boolean;
  /** Called once when the watch ends by itself (box stopped, connection lost), with the reason. */
  onExit?: (error?: Error) => void;
}

/** Options of `copyIn`/`copyOut` (BoxLite `CopyOptions`; same defaults). */
export interface CopyOptions {
  /** Copy directories recursively (default true); a directory source without it is refused. */
  recursive?: boolean;
  /** Replace existing files at the destination (default true); false makes an existing file a `conflict`. */
  overwrite?: boolean;
  /** Copy what symlinks point to instead of the links (default false: links are recreated as links). */
  followSymlinks?: boolean;
  /**
   * `docker cp` semantics (default true): a directory source copied to an existing directory lands in
   * `<dest>/<basename>`; false copies its contents into `<dest>`.
   */
  includeParent?: boolean;
}

/**
 * What a runtime flavour implements for `box.files` (local: confined host-side operations on the box
 * root; REST: HTTP streaming routes). `BoxFiles` (files.ts) checks arguments and converts formats above it.
 * Paths are absolute in-box paths, already checked.
 */
export interface FilesBackend {
  /** Byte stream of a regular file (symlinks followed inside the box). */
  readStream(path: string): Promise<Readable>;
  /**
   * Hands a regular file's bytes to `sink` chunk by chunk, waiting for each (locally one buffer is reused,
   * so a chunk must be consumed before the sink's promise resolves).
   */
  readInto(path: string, sink: ChunkSink): Promise<void>;
  /**
   * Replaces (atomically) or creates a regular file with the bytes of `source` (a stream, or an open host
   * file pumped with one reused buffer); parents are created.
   */
  writeStream(path: string, source: Readable | HostFileSource, mode?: number): Promise<JsWriteInfo>;
  /** Entries of a directory down to `depth` levels (1: its children). */
  list(path: string, depth: number): Promise<JsEntryInfo[]>;
  /** The entry itself (a final symlink is not followed). */
  stat(path: string): Promise<JsEntryInfo>;
  /** Creates a directory and missing parents; false when it already existed. */
  makeDir(path: string): Promise<boolean>;
  /** Removes a file, link, or directory tree. */
  remove(path: string): Promise<void>;
  /** Renames (moves) an entry inside the box; returns the entry at its new path. */
  rename(from: string, to: string): Promise<JsEntryInfo>;
  /** Creates a symbolic link `path` → `target` (parents are created); used by `copyIn`. */
  symlink(path: string, target: string): Promise<void>;
  /**
   * Absolute host paths of the box's writable host folders (`hostPath` volumes), whose contents the box
   * controls; `copyIn`/`copyOut` walk a named path inside one from its root without following symlinks.
   * Absent or empty where the host side is not this machine's (REST).
   */
  sharedHostRoots?(): Promise<string[]>;
  /** Watches a directory; resolves once the watch is in place. */
  watch(request: WatchRequest): Promise<WatchHandle>;
}

/** A directory watch as `BoxFiles.watchDir` hands it to a backend (arguments already checked). */
export interface WatchRequest {
  /** Absolute in-box path of the directory. */
  path: string;
  /** Also watch every subdirectory, present and future. */
  recursive: boolean;
  /** Called for each change: `name` relative to `path`. */
  onEvent: (event: FilesystemEvent) => void;
  /** Called when the watch ends by itself (box stopped, connection lost, too many entries), with the reason. */
  onExit: (error?: Error) => void;
}
