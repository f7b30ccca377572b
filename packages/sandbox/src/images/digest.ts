/**
 * Digests and byte streams of the image store: digest parsing (image-spec descriptor.md "Digests"),
 * a hashing and counting pass-through with an optional byte bound, and the decompressor of a layer's media
 * type (image-spec layer.md "Distributable Format").
 */
import { createHash } from 'node:crypto';
import { PassThrough, Transform } from 'node:stream';
import zlib from 'node:zlib';
import { BoxError } from '../errors.ts';
import { MediaType } from './oci.ts';

/** Layer media types the store unpacks. */
export const LAYER_MEDIA_TYPES: ReadonlySet<string> = new Set<string>([
  MediaType.ociLayerGzip,
  MediaType.ociLayerTar,
  MediaType.ociLayerZstd,
  MediaType.ociLayerNondistGzip,
  MediaType.dockerLayerGzip,
  MediaType.dockerForeignLayer,
]);

const DIGEST_RE = /^(sha256|sha512):([a-f0-9]{64}|[a-f0-9]{128})$/;

/**
 * Splits and validates a digest (`sha256:<64 hex>` or `sha512:<128 hex>`).
 * @throws BoxError `image` naming the digest when it is malformed or of another algorithm.
 */
export function digestParts(digest: string): { alg: string; hex: string } {
  const m = DIGEST_RE.exec(digest);
  if (!m || (m[1] === 'sha256' && m[2]!.length !== 64) || (m[1] === 'sha512' && m[2]!.length !== 128)) {
    throw new BoxError(`unsupported or malformed digest '${digest}'`, { code: 'image' });
  }
  return { alg: m[1]!, hex: m[2]! };
}

/** `<alg>:<hex>` of `data`. */
export function digestOf(alg: string, data: Buffer): string {
  return `${alg}:${createHash(alg).update(data).digest('hex')}`;
}

/**
 * Pass-through that hashes and counts bytes; with `limit`, fails with `overLimit()` before passing on a
 * chunk that would take the count past `limit` bytes.
 */
export class HashCounter extends Transform {
  private readonly hash;
  readonly alg: string;
  /** Bytes passed so far. */
  bytes = 0;
  private readonly onChunk: ((n: number) => void) | undefined;
  private readonly limit: number;
  private readonly overLimit: (() => Error) | undefined;
  /**
   * @param alg hash algorithm (`sha256`, `sha512`).
   * @param options.onChunk called with each chunk's length (progress).
   * @param options.limit most bytes let through; `overLimit` makes the error.
   */
  constructor(
    alg: string,
    options: { onChunk?: (n: number) => void; limit?: number; overLimit?: () => Error } = {},
  ) {
    super();
    this.alg = alg;
    this.hash = createHash(alg);
    this.onChunk = options.onChunk;
    this.limit = options.limit ?? Number.POSITIVE_INFINITY;
    this.overLimit = options.overLimit;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null, d?: Buffer) => void): void {
    if (this.bytes + chunk.length > this.limit) {
      cb(this.overLimit?.() ?? new BoxError(`stream longer than ${this.limit} bytes`, { code: 'image' }));
      return;
    }
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.onChunk?.(chunk.length);
    cb(null, chunk);
  }
  /** The digest of everything passed (call once, after the end). */
  digest(): string {
    return `${this.alg}:${this.hash.digest('hex')}`;
  }
}

/**
 * The decompressor of a layer media type (gzip, zstd, or none for plain tar).
 * @throws BoxError `image` for another media type, or zstd on a Node.js without it.
 */
export function decompressor(mediaType: string): Transform {
  if (mediaType.endsWith('+zstd') || mediaType.endsWith('.zstd')) {
    const z = (zlib as unknown as { createZstdDecompress?: () => Transform }).createZstdDecompress;
    if (!z) {
      throw new BoxError(`zstd layers need Node.js with zlib zstd support (layer type ${mediaType})`, {
        code: 'image',
      });
    }
    return z();
  }
  if (mediaType.endsWith('gzip')) return zlib.createGunzip({ chunkSize: 256 * 1024 });
  if (mediaType.endsWith('.tar')) return new PassThrough();
  throw new BoxError(`unsupported layer media type '${mediaType}'`, { code: 'image' });
}
