/**
 * A files backend that forwards every operation to a backend resolved for it. Serves the box's backend
 * chosen per operation by its isolation tier (the local backend, local.ts, where the host resolves paths in
 * the box root, for container boxes; the in-box backend, gvisor.ts, whose files the host does not touch, for
 * gVisor boxes) and the files of a box started on first use (`SimpleBox`).
 */
import type { Readable } from 'node:stream';
import type { ChunkSink, HostFileSource } from './pump.ts';
import type { FilesBackend, JsEntryInfo, JsWriteInfo, WatchHandle, WatchRequest } from './types.ts';

/** Forwards every call to the backend `pick` resolves for it. */
export class ForwardedFiles implements FilesBackend {
  readonly #pick: () => Promise<FilesBackend>;
  readonly #roots: () => Promise<string[]>;

  /**
   * @param pick the backend to use, resolved per operation (it may reject, e.g. box not found).
   * @param roots the box's writable host folders (`FilesBackend.sharedHostRoots`); by default those of
   *   the backend `pick` resolves.
   */
  constructor(pick: () => Promise<FilesBackend>, roots?: () => Promise<string[]>) {
    this.#pick = pick;
    this.#roots = roots ?? (async () => (await pick()).sharedHostRoots?.() ?? []);
  }

  sharedHostRoots(): Promise<string[]> {
    return this.#roots();
  }

  async readStream(path: string): Promise<Readable> {
    return (await this.#pick()).readStream(path);
  }

  async readInto(path: string, sink: ChunkSink): Promise<void> {
    return (await this.#pick()).readInto(path, sink);
  }

  async writeStream(path: string, source: Readable | HostFileSource, mode?: number): Promise<JsWriteInfo> {
    return (await this.#pick()).writeStream(path, source, mode);
  }

  async list(path: string, depth: number): Promise<JsEntryInfo[]> {
    return (await this.#pick()).list(path, depth);
  }

  async stat(path: string): Promise<JsEntryInfo> {
    return (await this.#pick()).stat(path);
  }

  async makeDir(path: string): Promise<boolean> {
    return (await this.#pick()).makeDir(path);
  }

  async remove(path: string): Promise<void> {
    return (await this.#pick()).remove(path);
  }

  async rename(from: string, to: string): Promise<JsEntryInfo> {
    return (await this.#pick()).rename(from, to);
  }

  async symlink(path: string, target: string): Promise<void> {
    return (await this.#pick()).symlink(path, target);
  }

  async watch(request: WatchRequest): Promise<WatchHandle> {
    return (await this.#pick()).watch(request);
  }
}
