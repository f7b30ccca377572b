/**
 * A `FilesBackend` over the files of a box obtained later (a wrapper box that starts on first use, such
 * as `SimpleBox`): every call first awaits the box, then forwards to its `box.files`.
 */
import type { Readable } from 'node:stream';
import type { BoxFiles } from './files.ts';
import { type ChunkSink, type HostFileSource, isHostFile } from './pump.ts';
import type { FilesBackend, FilesystemEvent, JsEntryInfo, JsWriteInfo, WatchHandle } from './types.ts';

/** Forwards to `files()` of a box started on demand. */
export class DeferredFiles implements FilesBackend {
  readonly #files: () => Promise<BoxFiles>;

  /** @param files resolves the started box's `files` (starting the box when needed). */
  constructor(files: () => Promise<BoxFiles>) {
    this.#files = files;
  }

  async readStream(path: string): Promise<Readable> {
    return (await this.#files()).readNode(path);
  }

  async readInto(path: string, sink: ChunkSink): Promise<void> {
    return (await this.#files()).readInto(path, sink);
  }

  async writeStream(path: string, source: Readable | HostFileSource, mode?: number): Promise<JsWriteInfo> {
    const files = await this.#files();
    if (isHostFile(source)) return files.writeFromFd(path, source.hostFd, mode);
    return files.write(path, source, mode !== undefined ? { mode } : {});
  }

  async list(path: string, depth: number): Promise<JsEntryInfo[]> {
    return (await this.#files()).list(path, { depth });
  }

  async stat(path: string): Promise<JsEntryInfo> {
    return (await this.#files()).stat(path);
  }

  async makeDir(path: string): Promise<boolean> {
    return (await this.#files()).makeDir(path);
  }

  async remove(path: string): Promise<void> {
    return (await this.#files()).remove(path);
  }

  async rename(from: string, to: string): Promise<JsEntryInfo> {
    return (await this.#files()).rename(from, to);
  }

  async symlink(path: string, target: string): Promise<void> {
    return (await this.#files()).symlink(path, target);
  }

  async sharedHostRoots(): Promise<string[]> {
    return (await this.#files()).sharedHostRoots();
  }

  async watch(
    path: string,
    recursive: boolean,
    onEvent: (e: FilesystemEvent) => void,
    onExit: (error?: Error) => void,
  ): Promise<WatchHandle> {
    return (await this.#files()).watchDir(path, onEvent, { recursive, onExit });
  }
}
