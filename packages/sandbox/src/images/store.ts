/**
 * The image store: pulls images over the OCI Distribution API, verifies every blob against its digest
 * before it is unpacked, unpacks each layer once into a directory usable as an overlayfs lower dir, and
 * indexes references. Its parts, one job each:
 * - `store-files.ts`  layout under `<homeDir>/images`, records, atomic writes, the disk budget;
 * - `resolve.ts`      manifest and platform resolution, config blobs;
 * - `layers.ts`       layer jobs (shared, concurrent, retried) and the image bounds;
 * - `layer-unpack.ts` download → verify → decompress → unpack → diff_id → publish of one layer;
 * - `job.ts`          the shared abortable job used by pulls and layer jobs;
 * - `store-gc.ts`     list, remove and garbage collection;
 * - `layout.ts`       `rootfsPath` (OCI layout or prepared root filesystem).
 */

import { rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { BoxError } from '../errors.ts';
import type { JsImageRegistry } from '../types.ts';
import { RegistryClient, RegistryError } from './client.ts';
import { digestOf } from './digest.ts';
import type { ImageInfo, PreparedImage, PullOptions, PullProgress } from './image-types.ts';
import { SharedJob, SharedJobs } from './job.ts';
import { LayerJobs } from './layers.ts';
import { prepareRootfsPath } from './layout.ts';
import { type ImageLimits, resolveImageLimits } from './limits.ts';
import type { ImageConfig } from './oci.ts';
import { candidates, endpointFor, formatReference, type QualifiedReference } from './reference.ts';
import { BlobFetcher, type ResolvedManifest, resolveManifest } from './resolve.ts';
import { type RefRecord, StoreFiles } from './store-files.ts';
import { collectGarbage, listImages } from './store-gc.ts';

/**
 * The pull errors that already name the image (made by the pull wrapper below, possibly in a retried pull),
 * so that an error is wrapped once: an unpacker or layer error, whatever its code, gets the image's name.
 */
const NAMES_IMAGE = new WeakSet<Error>();

export type {
  ImageInfo,
  ImageRuntimeConfig,
  PreparedImage,
  PullOptions,
  PullProgress,
} from './image-types.ts';
export { selectPlatform } from './resolve.ts';

/** Options of `new ImageStore`. */
export interface ImageStoreOptions {
  /** Base directory (default `~/.sandbox`); images live in `<homeDir>/images`. */
  homeDir?: string;
  /** `JsOptions.imageRegistries`: transport, TLS, search order and auth per host. */
  registries?: JsImageRegistry[];
  /** Bounds on unpacked sizes, entries and the store's disk use (`limits.ts`; defaults there). */
  limits?: Partial<ImageLimits>;
}

/**
 * Stores images under `<homeDir>/images` and prepares them for boxes. Safe for concurrent use in one
 * process (shared pulls) and across processes (atomic renames; a loser of a race reuses the winner's layer).
 * All methods reject with `BoxError` naming the image and the cause.
 */
export class ImageStore {
  readonly homeDir: string;
  /** The bounds in force. */
  readonly limits: ImageLimits;
  private readonly registries: JsImageRegistry[];
  private readonly files: StoreFiles;
  private readonly layers: LayerJobs;
  private readonly blobs: BlobFetcher;
  private readonly clients = new Map<string, RegistryClient>();
  private readonly pulls = new SharedJobs<string, PreparedImage, PullProgress>();
  private readonly rootfsCache = new Map<string, PreparedImage>();

  /**
   * @throws BoxError `invalid_option` when a registry entry has no host or a bad transport, or a limit
   *   is not a positive integer (field `imageLimits.<bound>`).
   */
  constructor(options: ImageStoreOptions = {}) {
    this.homeDir = resolve(options.homeDir ?? join(homedir(), '.sandbox'));
    this.registries = options.registries ?? [];
    this.registries.forEach((r, i) => {
      if (!r || typeof r.host !== 'string' || r.host.length === 0) {
        throw new BoxError(`imageRegistries[${i}].host must be a non-empty string`, {
          field: `imageRegistries[${i}].host`,
        });
      }
      if (r.transport !== undefined && r.transport !== 'http' && r.transport !== 'https') {
        throw new BoxError(`imageRegistries[${i}].transport must be 'http' or 'https'`, {
          field: `imageRegistries[${i}].transport`,
        });
      }
    });
    this.limits = resolveImageLimits(options.limits);
    this.files = new StoreFiles(join(this.homeDir, 'images'), this.limits);
    this.layers = new LayerJobs(this.files);
    this.blobs = new BlobFetcher(this.files);
  }

  private client(domain: string): RegistryClient {
    let c = this.clients.get(domain);
    if (!c) {
      c = new RegistryClient(endpointFor(domain, this.registries));
      this.clients.set(domain, c);
    }
    return c;
  }

  /**
   * The stored image for `reference` (normalized through the search registries like `pull`), without any
   * network access; null when it is not stored. Throws `BoxError` on a malformed reference.
   */
  async get(reference: string): Promise<PreparedImage | null> {
    await this.files.init();
    for (const c of candidates(reference, this.registries)) {
      const rec = await this.files.readRef(formatReference(c));
      if (rec) {
        const img = await this.files.fromRecord(rec);
        if (img) return img;
      }
    }
    return null;
  }

  /**
   * Returns the image for `reference`, pulling it when not stored (or when `refresh`). Unqualified names are
   * tried against each `search` registry in order, then Docker Hub. Concurrent calls for one image share
   * one download and unpack; layers already stored are never downloaded again.
   * @throws BoxError naming the image and the cause (401, 404, digest mismatch, a bound, unreachable
   *   registry, abort).
   */
  async pull(reference: string, options: PullOptions = {}): Promise<PreparedImage> {
    options.signal?.throwIfAborted();
    await this.files.init();
    if (!options.refresh) {
      const stored = await this.get(reference);
      if (stored) {
        options.onProgress?.({
          reference: stored.reference,
          phase: 'done',
          layersTotal: stored.layerDirs.length,
          layersDone: stored.layerDirs.length,
          bytesTotal: 0,
          bytesDone: 0,
        });
        return stored;
      }
    }
    const key = `${reference}\0${options.refresh ? 'r' : ''}`;
    const job = this.pulls.get(key, () => {
      let last: PullProgress | undefined;
      return new SharedJob<PreparedImage, PullProgress>(
        (self, signal) =>
          this.doPull(
            reference,
            (p) => {
              last = p;
              self.emit(p);
            },
            signal,
          ),
        (l) => {
          // A caller joining a pull in flight first learns where it stands, then follows it.
          if (last) l(last);
        },
      );
    });
    return job.wait(
      options.onProgress,
      options.signal,
      (reason) => new BoxError(`pull of image '${reference}' aborted`, { cause: reason, code: 'image' }),
    );
  }

  private async doPull(
    reference: string,
    emit: (p: PullProgress) => void,
    signal: AbortSignal,
    attempt = 0,
  ): Promise<PreparedImage> {
    await Promise.resolve(); // let the creating caller subscribe before the first event
    const progress: PullProgress = {
      reference,
      phase: 'resolving',
      layersTotal: 0,
      layersDone: 0,
      bytesTotal: 0,
      bytesDone: 0,
    };
    emit({ ...progress });
    const failures: string[] = [];
    let resolved: ({ ref: QualifiedReference } & ResolvedManifest) | undefined;
    const cands = candidates(reference, this.registries);
    for (const c of cands) {
      try {
        resolved = { ref: c, ...(await resolveManifest(this.client(c.domain), c, signal)) };
        break;
      } catch (err) {
        if (signal.aborted)
          throw new BoxError(`pull of image '${reference}' aborted`, { cause: err, code: 'image' });
        const msg = `${formatReference(c)}: ${(err as Error).message}`;
        // A registry that answered something other than "not found"/"unauthorized" for a qualified name, or
        // a digest mismatch, is final; unqualified names fall through to the next candidate.
        if (cands.length === 1 || !(err instanceof RegistryError)) {
          throw new BoxError(`cannot pull image '${reference}': ${msg}`, { cause: err, code: 'image' });
        }
        failures.push(msg);
      }
    }
    if (!resolved)
      throw new BoxError(`cannot pull image '${reference}': ${failures.join('; ')}`, { code: 'image' });
    const { ref, manifest, digest } = resolved;
    const normalized = formatReference(ref);
    progress.reference = normalized;
    const client = this.client(ref.domain);
    try {
      const cfgBytes = await this.blobs.fetch(
        { client, repository: ref.repository, desc: manifest.config, limit: 16 * 1024 * 1024 },
        signal,
      );
      const cfg = JSON.parse(cfgBytes.toString('utf8')) as ImageConfig;
      const layers = manifest.layers ?? [];
      progress.layersTotal = layers.length;
      progress.bytesTotal = layers.reduce((a, l) => a + (l.size ?? 0), 0);
      progress.phase = 'downloading';
      emit({ ...progress });
      const records = await this.layers.ensureAll(
        { client, repository: ref.repository },
        layers,
        cfg.rootfs?.diff_ids ?? [],
        progress,
        emit,
        signal,
      );
      // Documents are stored once every layer is: a failed pull leaves the store as it was.
      for (const raw of resolved.raw) await this.files.saveBlob(digestOf('sha256', raw), raw);
      await this.files.saveBlob(manifest.config.digest, cfgBytes);
      const rec: RefRecord = {
        reference: normalized,
        digest,
        configDigest: manifest.config.digest,
        layers: layers.map((l) => l.digest),
        sizeBytes: records.reduce((a, r) => a + r.sizeBytes, 0),
        pulledAt: new Date().toISOString(),
      };
      await this.files.writeAtomic(this.files.refPath(normalized), JSON.stringify(rec));
      const img = await this.files.fromRecord(rec);
      // A concurrent `remove` in another process may have collected a shared layer meanwhile: fetch again.
      if (!img) {
        if (attempt > 0)
          throw new BoxError('stored layers disappeared while pulling (concurrent remove?)', {
            code: 'conflict',
          });
        return await this.doPull(reference, emit, signal, attempt + 1);
      }
      progress.phase = 'done';
      progress.layersDone = layers.length;
      emit({ ...progress });
      return img;
    } catch (err) {
      if (err instanceof Error && NAMES_IMAGE.has(err)) throw err;
      const why = signal.aborted ? 'aborted' : (err as Error).message;
      const wrapped = new BoxError(`cannot pull image '${normalized}': ${why}`, {
        cause: err,
        code: 'image',
      });
      NAMES_IMAGE.add(wrapped);
      throw wrapped;
    }
  }

  /** Lists stored images (one entry per reference), sorted by reference. */
  async list(): Promise<ImageInfo[]> {
    await this.files.init();
    return listImages(this.files);
  }

  /**
   * Removes a stored reference, then layers and blobs no other stored reference uses. Layers in use by
   * running boxes must not be removed by the caller (the runtime checks that first).
   * @throws BoxError `not_found` when the reference is not stored.
   */
  async remove(reference: string): Promise<void> {
    await this.files.init();
    let removed: string | undefined;
    for (const c of candidates(reference, this.registries)) {
      const r = formatReference(c);
      if (await this.files.readRef(r)) {
        await rm(this.files.refPath(r), { force: true });
        removed = r;
        break;
      }
    }
    if (!removed) throw new BoxError(`image '${reference}' is not stored`, { code: 'not_found' });
    await collectGarbage(this.files, this.layers.inFlight(), this.pulls.size);
  }

  /**
   * Prepares a `rootfsPath`: either an OCI image layout directory (has an `oci-layout` file; its image for
   * this platform is unpacked into the store like a pull, verified and bounded the same way) or a prepared
   * root filesystem directory, used read-only as the single layer. Symlinks must not escape it: a relative
   * symlink climbing above the root, or a layout blob resolving outside the layout, is rejected.
   * @throws BoxError naming the path and the rule.
   */
  async fromRootfsPath(path: string): Promise<PreparedImage> {
    await this.files.init();
    return prepareRootfsPath({ files: this.files, layers: this.layers, cache: this.rootfsCache }, path);
  }
}
