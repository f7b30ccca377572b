/**
 * Byte copies between open files and writable streams through one reused buffer. A stream pipeline
 * allocates a fresh Buffer for every chunk it reads, and V8 collects that garbage only after about
 * 64 MiB of it has built up outside its heap, so a large file copied with streams raises the process's
 * RSS by that much; a pump holds one buffer for the whole copy and waits until each chunk is written
 * (to the kernel) before it reads the next one into the same memory.
 */
import { read, write } from 'node:fs';
import type { Writable } from 'node:stream';

/** Size of the buffer one pump reuses (bytes). */
export const PUMP_BUFFER_BYTES = 256 * 1024;

/** Where a pump puts each chunk; resolves once `chunk` is no longer referenced (its bytes are written). */
export type ChunkSink = (chunk: Buffer) => Promise<void>;

function readAt(fd: number, buffer: Buffer, position: number): Promise<number> {
  return new Promise((resolve, reject) =>
    read(fd, buffer, 0, buffer.length, position, (error, bytesRead) =>
      error ? reject(error) : resolve(bytesRead),
    ),
  );
}

/**
 * Reads the regular file open at `fd` from its start to its end (or `limit` bytes, at most; positional
 * reads, the fd's offset is not used) and hands each chunk to `sink`.
 * @returns the number of bytes copied.
 * @throws the `fs.read` error or whatever `sink` rejects with.
 */
export async function pumpFd(fd: number, sink: ChunkSink, limit = Number.POSITIVE_INFINITY): Promise<number> {
  const buffer = Buffer.allocUnsafeSlow(PUMP_BUFFER_BYTES);
  let total = 0;
  while (total < limit) {
    const n = await readAt(fd, buffer.subarray(0, Math.min(buffer.length, limit - total)), total);
    if (n === 0) break;
    await sink(buffer.subarray(0, n));
    total += n;
  }
  return total;
}

/** A sink that writes each chunk whole to the file open at `fd` (at its current offset). */
export function fdSink(fd: number): ChunkSink {
  return async (chunk) => {
    let offset = 0;
    while (offset < chunk.length) {
      offset += await new Promise<number>((resolve, reject) =>
        write(fd, chunk, offset, chunk.length - offset, null, (error, written) =>
          error ? reject(error) : resolve(written),
        ),
      );
    }
  };
}

/**
 * A sink that writes each chunk to `stream` and resolves when the stream reports it written (for a
 * socket or HTTP request: handed to the kernel), so the chunk's memory can be reused.
 */
export function streamSink(stream: Writable): ChunkSink {
  return (chunk) =>
    new Promise<void>((resolve, reject) => {
      stream.write(chunk, (error) => (error ? reject(error) : resolve()));
    });
}

/** An open host file given to `FilesBackend.writeStream` in place of a stream: its bytes are pumped. */
export interface HostFileSource {
  /** The open regular file, read from its start to its end; the caller closes it. */
  readonly hostFd: number;
}

/** True when `source` is a `HostFileSource` rather than a stream. */
export function isHostFile(source: unknown): source is HostFileSource {
  return typeof (source as HostFileSource | null)?.hostFd === 'number';
}
