/**
 * The image store: pulls images over the OCI Distribution API, verifies every blob against its digest,
 * unpacks each layer once into a directory usable as an overlayfs lower dir, and indexes references.
 *
 * Layout under `<homeDir>/images/` (every write is temp + rename, so a crash never leaves a half layer
 * that is later used):
 * - `blobs/<alg>/<hex>`            manifests, indexes and configs, by digest;
 * - `layers/<alg>/<hex>/rootfs/`   an unpacked layer (keyed by its compressed digest) and `layer.json`;
 * - `refs/<sha256(reference)>.json` one record per pulled reference (reference → manifest digest);
 * - `tmp/`                          work in progress (cleared of stale entries on start).
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { mkdir, readdir, readFile, realpath, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join, resolve, sep } from 'node:path';
import { PassThrough, type Readable, Transform, Writable } from 'node:stream';
import { finished, pipeline } from 'node:stream/promises';
import zlib from 'node:zlib';
import { BoxError } from '../errors.ts';
import type { JsImageRegistry } from '../types.ts';
import { isTransient, RegistryClient, RegistryError } from './client.ts';
import { readBody } from './http.ts';
import {
  type Descriptor,
  hostArchitecture,
  type ImageConfig,
  type Index,
  MANIFEST_ACCEPT,
  type Manifest,
  MediaType,
} from './oci.ts';
import { candidates, endpointFor, formatReference, type QualifiedReference } from './reference.ts';
import { extractLayer } from './unpack.ts';

/** Runtime settings from the image config (image-spec config.md `config`), used to start a box. */
export interface ImageRuntimeConfig {
  /** `KEY=value` entries. */
  env: string[];
  entrypoint: string[] | null;
  cmd: string[] | null;
  workingDir: string | null;
  user: string | null;
  /** e.g. `8080/tcp`. EXPOSE does not publish host ports (spec 002 "Network tunnels"). */
  exposedPorts: string[];
  /**
   * The image's HEALTHCHECK test (Docker image config `Healthcheck.Test`): `['CMD', …]` or
   * `['CMD-SHELL', script]`; null when the image has none or disables it (`['NONE']`).
   */
  healthcheck: string[] | null;
}

/** An image ready to run: its layers unpacked, bottom first, each usable as an overlayfs lower dir. */
export interface PreparedImage {
  /** Normalized reference, e.g. `127.0.0.1:5000/library/python:slim`, or the real path of a rootfs. */
  reference: string;
  /** Manifest digest `sha256:…` (for a prepared rootfs directory: a digest of its path and mtime). */
  digest: string;
  /** Digest of the image config blob (for a prepared rootfs directory: the same as `digest`). */
  configDigest: string;
  /** Absolute directories of the unpacked layers, BOTTOM (base) FIRST. Read-only: never write into them. */
  layerDirs: string[];
  config: ImageRuntimeConfig;
}

/** Progress of one pull. Bytes are compressed bytes downloaded from the registry. */
export interface PullProgress {
  reference: string;
  phase: 'resolving' | 'downloading' | 'unpacking' | 'done';
  layersTotal: number;
  layersDone: number;
  bytesTotal: number;
  bytesDone: number;
}

/** A stored image as listed (spec 002 runtime `images.list`). `sizeBytes`: unpacked file bytes. */
export interface ImageInfo {
  reference: string;
  digest: string;
  sizeBytes: number;
  /** RFC 3339. */
  pulledAt: string;
}

/** Options of `ImageStore.pull`. */
export interface PullOptions {
  onProgress?: (p: PullProgress) => void;
  /** Aborts this caller's wait; the shared download stops when every waiting caller has aborted. */
  signal?: AbortSignal;
  /** Ask the registry even when the reference is stored (re-resolve the tag). Default false. */
  refresh?: boolean;
}

interface RefRecord {
  reference: string;
  digest: string;
  configDigest: string;
  layers: string[];
  sizeBytes: number;
  pulledAt: string;
}

interface LayerRecord {
  digest: string;
  diffId: string;
  mediaType: string;
  sizeBytes: number;
  compressedBytes: number;
}

const LAYER_MEDIA_TYPES = new Set<string>([
  MediaType.ociLayerGzip,
  MediaType.ociLayerTar,
  MediaType.ociLayerZstd,
  MediaType.ociLayerNondistGzip,
  MediaType.dockerLayerGzip,
  MediaType.dockerForeignLayer,
]);
const LAYER_CONCURRENCY = 3;
const DIGEST_RE = /^(sha256|sha512):([a-f0-9]{64}|[a-f0-9]{128})$/;

/** Splits and validates a digest; throws naming the digest. */
function digestParts(digest: string): { alg: string; hex: string } {
  const m = DIGEST_RE.exec(digest);
  if (!m || (m[1] === 'sha256' && m[2]!.length !== 64) || (m[1] === 'sha512' && m[2]!.length !== 128)) {
    throw new BoxError(`unsupported or malformed digest '${digest}'`);
  }
  return { alg: m[1]!, hex: m[2]! };
}

function digestOf(alg: string, data: Buffer): string {
  return `${alg}:${createHash(alg).update(data).digest('hex')}`;
}

/** Pass-through that hashes and counts bytes. */
class HashCounter extends Transform {
  private readonly hash;
  readonly alg: string;
  bytes = 0;
  private readonly onChunk?: (n: number) => void;
  constructor(alg: string, onChunk?: (n: number) => void) {
    super();
    this.alg = alg;
    this.hash = createHash(alg);
    this.onChunk = onChunk;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null, d?: Buffer) => void): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.onChunk?.(chunk.length);
    cb(null, chunk);
  }
  digest(): string {
    return `${this.alg}:${this.hash.digest('hex')}`;
  }
}

function decompressor(mediaType: string): Transform {
  if (mediaType.endsWith('+zstd') || mediaType.endsWith('.zstd')) {
    const z = (zlib as unknown as { createZstdDecompress?: () => Transform }).createZstdDecompress;
    if (!z) throw new BoxError(`zstd layers need Node.js with zlib zstd support (layer type ${mediaType})`);
    return z();
  }
  if (mediaType.endsWith('gzip')) return zlib.createGunzip({ chunkSize: 256 * 1024 });
  if (mediaType.endsWith('.tar')) return new PassThrough();
  throw new BoxError(`unsupported layer media type '${mediaType}'`);
}

/** Picks the manifest for linux and this machine's architecture from an index (image-index.md). */
export function selectPlatform(index: Index): Descriptor | undefined {
  const host = hostArchitecture();
  const linux = (index.manifests ?? []).filter(
    (m) => m.platform?.os === 'linux' && m.platform.architecture === host.architecture,
  );
  return (
    linux.find((m) => m.platform?.variant === host.variant) ??
    linux.find((m) => !m.platform?.variant) ??
    linux[0] ??
    // Indexes without platform fields (e.g. a plain OCI layout): a single manifest is taken as is.
    (index.manifests?.length === 1 && !index.manifests[0]!.platform ? index.manifests[0] : undefined)
  );
}

function runtimeConfig(cfg: ImageConfig): ImageRuntimeConfig {
  const c = cfg.config ?? {};
  return {
    env: c.Env ?? [],
    entrypoint: c.Entrypoint && c.Entrypoint.length > 0 ? c.Entrypoint : null,
    cmd: c.Cmd && c.Cmd.length > 0 ? c.Cmd : null,
    workingDir: c.WorkingDir ? c.WorkingDir : null,
    user: c.User ? c.User : null,
    exposedPorts: Object.keys(c.ExposedPorts ?? {}),
    healthcheck: healthTest(c.Healthcheck?.Test),
  };
}

/** A usable `Healthcheck.Test`: `['CMD', program, …]` or `['CMD-SHELL', script]`; else null. */
function healthTest(test: unknown): string[] | null {
  if (!Array.isArray(test) || !test.every((t) => typeof t === 'string')) return null;
  if (test[0] === 'CMD' && test.length > 1 && test[1] !== '') return test;
  if (test[0] === 'CMD-SHELL' && test.length === 2 && test[1] !== '') return test;
  return null;
}

/** A layer download/unpack in flight, shared by every pull that needs it. */
interface LayerJob {
  promise: Promise<LayerRecord>;
  /** Compressed bytes received so far (for sharers that join late). */
  bytes: number;
  onBytes: Set<(n: number) => void>;
  onDownloaded: Set<() => void>;
  sharers: number;
  controller: AbortController;
}

interface PullJob {
  promise: Promise<PreparedImage>;
  listeners: Set<(p: PullProgress) => void>;
  /** The latest event, replayed to a caller that joins the pull after it started. */
  last?: PullProgress;
  waiters: number;
  controller: AbortController;
}

/** Where a layer's bytes come from: a registry blob or a file of an OCI layout. */
type LayerSource = { client: RegistryClient; repository: string } | { layoutDir: string };

/**
 * Stores images under `<homeDir>/images` and prepares them for boxes. Safe for concurrent use in one
 * process (shared pulls) and across processes (atomic renames; a loser of a race reuses the winner's layer).
 * All methods reject with `BoxError` naming the image and the cause.
 */
export class ImageStore {
  readonly homeDir: string;
  private readonly registries: JsImageRegistry[];
  private readonly root: string;
  private readonly clients = new Map<string, RegistryClient>();
  private readonly jobs = new Map<string, PullJob>();
  private readonly layerJobs = new Map<string, LayerJob>();
  private readonly blobJobs = new Map<string, Promise<Buffer>>();
  private readonly rootfsCache = new Map<string, PreparedImage>();
  private ready: Promise<void> | undefined;

  /**
   * @param options.homeDir base directory (default `~/.sandbox`); images live in `<homeDir>/images`.
   * @param options.registries `JsOptions.imageRegistries`: transport, TLS, search order and auth per host.
   * @throws BoxError when a registry entry has no host or a bad transport.
   */
  constructor(options: { homeDir?: string; registries?: JsImageRegistry[] } = {}) {
    this.homeDir = resolve(options.homeDir ?? join(homedir(), '.sandbox'));
    this.registries = options.registries ?? [];
    this.registries.forEach((r, i) => {
      if (!r || typeof r.host !== 'string' || r.host.length === 0) {
        throw new BoxError(`imageRegistries[${i}].host must be a non-empty string`);
      }
      if (r.transport !== undefined && r.transport !== 'http' && r.transport !== 'https') {
        throw new BoxError(`imageRegistries[${i}].transport must be 'http' or 'https'`);
      }
    });
    this.root = join(this.homeDir, 'images');
  }

  private init(): Promise<void> {
    this.ready ??= (async () => {
      for (const d of ['blobs', 'layers', 'refs', 'tmp'])
        await mkdir(join(this.root, d), { recursive: true });
      // Leftovers of crashed pulls older than an hour (younger ones may belong to a live process).
      const tmp = join(this.root, 'tmp');
      for (const name of await readdir(tmp)) {
        const st = await stat(join(tmp, name)).catch(() => null);
        if (st && Date.now() - st.mtimeMs > 3_600_000)
          await rm(join(tmp, name), { recursive: true, force: true });
      }
    })();
    return this.ready;
  }

  private client(domain: string): RegistryClient {
    let c = this.clients.get(domain);
    if (!c) {
      c = new RegistryClient(endpointFor(domain, this.registries));
      this.clients.set(domain, c);
    }
    return c;
  }

  private blobPath(digest: string): string {
    const { alg, hex } = digestParts(digest);
    return join(this.root, 'blobs', alg, hex);
  }

  private layerPath(digest: string): string {
    const { alg, hex } = digestParts(digest);
    return join(this.root, 'layers', alg, hex);
  }

  private refPath(reference: string): string {
    return join(this.root, 'refs', `${createHash('sha256').update(reference).digest('hex')}.json`);
  }

  private async tmpDir(): Promise<string> {
    const dir = join(this.root, 'tmp', `${Date.now()}-${process.pid}-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    return dir;
  }

  /** Writes a file atomically (temp file in the same directory + rename). */
  private async writeAtomic(path: string, data: Buffer | string): Promise<void> {
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    await writeFile(tmp, data);
    await rename(tmp, path);
  }

  private async readRef(reference: string): Promise<RefRecord | null> {
    try {
      return JSON.parse(await readFile(this.refPath(reference), 'utf8')) as RefRecord;
    } catch {
      return null;
    }
  }

  /** Builds a PreparedImage from a record when everything it needs is on disk; null otherwise. */
  private async fromRecord(rec: RefRecord): Promise<PreparedImage | null> {
    let cfg: ImageConfig;
    try {
      cfg = JSON.parse(await readFile(this.blobPath(rec.configDigest), 'utf8')) as ImageConfig;
    } catch {
      return null;
    }
    const layerDirs = rec.layers.map((d) => join(this.layerPath(d), 'rootfs'));
    for (const d of layerDirs) if (!fs.existsSync(d)) return null;
    return {
      reference: rec.reference,
      digest: rec.digest,
      configDigest: rec.configDigest,
      layerDirs,
      config: runtimeConfig(cfg),
    };
  }

  /**
   * The stored image for `reference` (normalized through the search registries like `pull`), without any
   * network access; null when it is not stored. Throws `BoxError` on a malformed reference.
   */
  async get(reference: string): Promise<PreparedImage | null> {
    await this.init();
    for (const c of candidates(reference, this.registries)) {
      const rec = await this.readRef(formatReference(c));
      if (rec) {
        const img = await this.fromRecord(rec);
        if (img) return img;
      }
    }
    return null;
  }

  /**
   * Returns the image for `reference`, pulling it when not stored (or when `refresh`). Unqualified names are
   * tried against each `search` registry in order, then Docker Hub. Concurrent calls for one image share
   * one download and unpack; layers already stored are never downloaded again.
   * @throws BoxError naming the image and the cause (401, 404, digest mismatch, unreachable registry, abort).
   */
  async pull(reference: string, options: PullOptions = {}): Promise<PreparedImage> {
    options.signal?.throwIfAborted();
    await this.init();
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
    let job = this.jobs.get(key);
    if (!job) {
      const controller = new AbortController();
      const listeners = new Set<(p: PullProgress) => void>();
      const emit = (p: PullProgress) => {
        newJob.last = p;
        for (const l of listeners) {
          try {
            l(p);
          } catch {
            // a failing progress listener must not break the pull
          }
        }
      };
      const newJob: PullJob = {
        listeners,
        waiters: 0,
        controller,
        promise: this.doPull(reference, emit, controller.signal).finally(() => this.jobs.delete(key)),
      };
      newJob.promise.catch(() => {});
      this.jobs.set(key, newJob);
      job = newJob;
    }
    const j = job;
    const listener = options.onProgress;
    if (listener) {
      // A caller joining a pull in flight first learns where it stands, then follows it.
      if (j.last) {
        try {
          listener(j.last);
        } catch {
          // a failing progress listener must not break the pull
        }
      }
      j.listeners.add(listener);
    }
    j.waiters++;
    const signal = options.signal;
    try {
      if (!signal) return await j.promise;
      return await new Promise<PreparedImage>((res, rej) => {
        const onAbort = () => {
          rej(new BoxError(`pull of image '${reference}' aborted`, { cause: signal.reason }));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        j.promise.then(res, rej).finally(() => signal.removeEventListener('abort', onAbort));
      });
    } finally {
      if (listener) j.listeners.delete(listener);
      j.waiters--;
      if (j.waiters === 0 && signal?.aborted) j.controller.abort(signal.reason);
    }
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
    let resolved: { ref: QualifiedReference; manifest: Manifest; digest: string; raw: Buffer[] } | undefined;
    const cands = candidates(reference, this.registries);
    for (const c of cands) {
      try {
        resolved = { ref: c, ...(await this.resolveManifest(c, signal)) };
        break;
      } catch (err) {
        if (signal.aborted) throw new BoxError(`pull of image '${reference}' aborted`, { cause: err });
        const msg = `${formatReference(c)}: ${(err as Error).message}`;
        // A registry that answered something other than "not found"/"unauthorized" for a qualified name, or
        // a digest mismatch, is final; unqualified names fall through to the next candidate.
        if (cands.length === 1 || !(err instanceof RegistryError)) {
          throw new BoxError(`cannot pull image '${reference}': ${msg}`, { cause: err });
        }
        failures.push(msg);
      }
    }
    if (!resolved) throw new BoxError(`cannot pull image '${reference}': ${failures.join('; ')}`);
    const { ref, manifest, digest } = resolved;
    const normalized = formatReference(ref);
    progress.reference = normalized;
    const client = this.client(ref.domain);
    const fail = (err: unknown): never => {
      if (err instanceof BoxError && err.message.includes(`'${normalized}'`)) throw err;
      const why = signal.aborted ? 'aborted' : (err as Error).message;
      throw new BoxError(`cannot pull image '${normalized}': ${why}`, { cause: err });
    };
    try {
      const cfgBytes = await this.fetchBlob(
        client,
        ref.repository,
        manifest.config,
        16 * 1024 * 1024,
        signal,
      );
      const cfg = JSON.parse(cfgBytes.toString('utf8')) as ImageConfig;
      for (const raw of resolved.raw) await this.saveBlob(digestOf('sha256', raw), raw);
      const layers = manifest.layers ?? [];
      progress.layersTotal = layers.length;
      progress.bytesTotal = layers.reduce((a, l) => a + (l.size ?? 0), 0);
      progress.phase = 'downloading';
      emit({ ...progress });
      const records = await this.ensureLayers(
        { client, repository: ref.repository },
        layers,
        cfg.rootfs?.diff_ids ?? [],
        progress,
        emit,
        signal,
      );
      const rec: RefRecord = {
        reference: normalized,
        digest,
        configDigest: manifest.config.digest,
        layers: layers.map((l) => l.digest),
        sizeBytes: records.reduce((a, r) => a + r.sizeBytes, 0),
        pulledAt: new Date().toISOString(),
      };
      await this.writeAtomic(this.refPath(normalized), JSON.stringify(rec));
      const img = await this.fromRecord(rec);
      // A concurrent `remove` in another process may have collected a shared layer meanwhile: fetch again.
      if (!img) {
        if (attempt > 0) throw new BoxError('stored layers disappeared while pulling (concurrent remove?)');
        return await this.doPull(reference, emit, signal, attempt + 1);
      }
      progress.phase = 'done';
      progress.layersDone = layers.length;
      emit({ ...progress });
      return img;
    } catch (err) {
      return fail(err);
    }
  }

  /** Fetches the manifest of a reference (following an index to this platform); verifies digests. */
  private async resolveManifest(
    ref: QualifiedReference,
    signal: AbortSignal,
  ): Promise<{ manifest: Manifest; digest: string; raw: Buffer[] }> {
    const client = this.client(ref.domain);
    const raw: Buffer[] = [];
    let want = ref.digest ?? ref.tag ?? 'latest';
    for (let depth = 0; depth < 3; depth++) {
      const res = await client.request(ref.repository, `${ref.repository}/manifests/${want}`, {
        headers: { accept: MANIFEST_ACCEPT },
        signal,
      });
      const body = await readBody(res, 4 * 1024 * 1024);
      let digest: string;
      if (want.includes(':')) {
        const { alg } = digestParts(want);
        digest = digestOf(alg, body);
        if (digest !== want) throw new BoxError(`manifest digest mismatch: expected ${want}, got ${digest}`);
      } else digest = digestOf('sha256', body);
      raw.push(body);
      let doc: (Manifest & Index) | undefined;
      try {
        doc = JSON.parse(body.toString('utf8')) as Manifest & Index;
      } catch {
        throw new BoxError('manifest is not valid JSON');
      }
      const type = doc.mediaType ?? String(res.headers['content-type'] ?? '').split(';')[0];
      if (type === MediaType.dockerManifestV1 || doc.schemaVersion === 1) {
        throw new BoxError('Docker schema 1 manifests are not supported');
      }
      if (
        type === MediaType.ociIndex ||
        type === MediaType.dockerManifestList ||
        Array.isArray(doc.manifests)
      ) {
        const pick = selectPlatform(doc);
        if (!pick) {
          const arch = hostArchitecture().architecture;
          const have = doc.manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`).join(', ');
          throw new BoxError(`no manifest for platform linux/${arch} in the image index (has: ${have})`);
        }
        want = pick.digest;
        continue;
      }
      if (!doc.config?.digest || !Array.isArray(doc.layers))
        throw new BoxError('manifest has no config or layers');
      return { manifest: doc, digest, raw };
    }
    throw new BoxError('image index nesting deeper than 3 levels');
  }

  /**
   * Downloads a small blob (config), verifies its digest and stores it; concurrent fetches of one digest
   * are shared. The shared job ends only once the blob is on disk, so a pull that asks after it finds
   * the stored copy instead of downloading again.
   */
  private fetchBlob(
    client: RegistryClient,
    repository: string,
    desc: Descriptor,
    limit: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    let job = this.blobJobs.get(desc.digest);
    if (!job) {
      job = (async () => {
        const body = await this.fetchBlobOnce(client, repository, desc, limit, signal);
        await this.saveBlob(desc.digest, body);
        return body;
      })().finally(() => this.blobJobs.delete(desc.digest));
      this.blobJobs.set(desc.digest, job);
    }
    return job;
  }

  private async fetchBlobOnce(
    client: RegistryClient,
    repository: string,
    desc: Descriptor,
    limit: number,
    signal: AbortSignal,
  ): Promise<Buffer> {
    const { alg } = digestParts(desc.digest);
    const cached = await readFile(this.blobPath(desc.digest)).catch(() => null);
    if (cached && digestOf(alg, cached) === desc.digest) return cached;
    const res = await client.request(repository, `${repository}/blobs/${desc.digest}`, { signal });
    const body = await readBody(res, limit);
    const got = digestOf(alg, body);
    if (got !== desc.digest) throw new BoxError(`digest mismatch for blob ${desc.digest}: got ${got}`);
    return body;
  }

  private async saveBlob(digest: string, data: Buffer): Promise<void> {
    const p = this.blobPath(digest);
    if (!fs.existsSync(p)) await this.writeAtomic(p, data);
  }

  /** Ensures all layers are unpacked, up to LAYER_CONCURRENCY at a time; the first failure aborts the rest. */
  private async ensureLayers(
    source: LayerSource,
    layers: Descriptor[],
    diffIds: string[],
    progress: PullProgress,
    emit: (p: PullProgress) => void,
    signal: AbortSignal,
  ): Promise<LayerRecord[]> {
    const local = new AbortController();
    const onAbort = () => local.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    let last = 0;
    const onBytes = (n: number) => {
      progress.bytesDone += n;
      const now = Date.now();
      if (now - last >= 100) {
        last = now;
        emit({ ...progress });
      }
    };
    const out: LayerRecord[] = new Array(layers.length);
    let next = 0;
    const worker = async () => {
      while (next < layers.length) {
        const i = next++;
        const desc = layers[i]!;
        if (!LAYER_MEDIA_TYPES.has(desc.mediaType)) {
          throw new BoxError(`layer ${desc.digest} has unsupported media type '${desc.mediaType}'`);
        }
        out[i] = await this.ensureLayer(source, desc, diffIds[i], onBytes, local.signal, () => {
          progress.phase = 'unpacking';
        });
        progress.layersDone++;
        emit({ ...progress });
      }
    };
    try {
      await Promise.all(
        Array.from({ length: Math.min(LAYER_CONCURRENCY, layers.length) }, () =>
          worker().catch((e) => {
            local.abort(e);
            throw e;
          }),
        ),
      );
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    return out;
  }

  /**
   * One layer: reuse when stored, share when in flight (every sharer gets the byte progress, including what
   * was downloaded before it joined; the work stops only when all sharers have aborted), else download or
   * read, verify, unpack and rename into place.
   */
  private async ensureLayer(
    source: LayerSource,
    desc: Descriptor,
    diffId: string | undefined,
    onBytes: (n: number) => void,
    signal: AbortSignal,
    onDownloaded: () => void,
  ): Promise<LayerRecord> {
    let job = this.layerJobs.get(desc.digest);
    if (!job) {
      const controller = new AbortController();
      const created: LayerJob = {
        promise: Promise.resolve(null as unknown as LayerRecord),
        bytes: 0,
        onBytes: new Set(),
        onDownloaded: new Set(),
        sharers: 0,
        controller,
      };
      const fanout = (n: number) => {
        created.bytes += n;
        for (const l of created.onBytes) l(n);
      };
      const downloaded = () => {
        for (const l of created.onDownloaded) l();
      };
      const dir = this.layerPath(desc.digest);
      created.promise = (async () => {
        const meta = await readFile(join(dir, 'layer.json'), 'utf8').catch(() => null);
        if (meta) return JSON.parse(meta) as LayerRecord;
        for (let attempt = 0; ; attempt++) {
          const before = created.bytes;
          try {
            return await this.unpackLayer(source, desc, diffId, fanout, controller.signal, downloaded);
          } catch (err) {
            fanout(before - created.bytes); // a retry downloads again: take back the failed attempt's bytes
            if (attempt < 2 && isTransient(err) && !controller.signal.aborted) continue;
            throw err;
          }
        }
      })().finally(() => this.layerJobs.delete(desc.digest));
      created.promise.catch(() => {});
      this.layerJobs.set(desc.digest, created);
      job = created;
    }
    const j = job;
    if (j.bytes > 0) onBytes(j.bytes);
    j.onBytes.add(onBytes);
    j.onDownloaded.add(onDownloaded);
    j.sharers++;
    try {
      return await new Promise<LayerRecord>((res, rej) => {
        const onAbort = () => rej(signal.reason ?? new BoxError('aborted'));
        if (signal.aborted) onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        j.promise.then(res, rej).finally(() => signal.removeEventListener('abort', onAbort));
      });
    } finally {
      j.onBytes.delete(onBytes);
      j.onDownloaded.delete(onDownloaded);
      j.sharers--;
      if (j.sharers === 0 && signal.aborted) j.controller.abort(signal.reason);
    }
  }

  private async unpackLayer(
    source: LayerSource,
    desc: Descriptor,
    diffId: string | undefined,
    onBytes: (n: number) => void,
    signal: AbortSignal,
    onDownloaded: () => void,
  ): Promise<LayerRecord> {
    const { alg } = digestParts(desc.digest);
    const tmp = await this.tmpDir();
    try {
      let body: Readable;
      if ('client' in source) {
        body = await source.client.request(source.repository, `${source.repository}/blobs/${desc.digest}`, {
          signal,
          timeoutMs: 120_000,
        });
      } else {
        body = fs.createReadStream(await this.layoutBlob(source.layoutDir, desc.digest), {
          highWaterMark: 256 * 1024,
        });
      }
      const compressed = new HashCounter(alg, onBytes);
      const decomp = decompressor(desc.mediaType);
      const diff = new HashCounter('sha256');
      const rootfs = join(tmp, 'rootfs');
      await mkdir(rootfs);
      // body → hash → sink ⇢ decompress → hash → tar. The download side always runs to its end (unless the
      // network fails or the pull is aborted) so that a corrupted blob is reported as a digest mismatch
      // rather than as the zlib or tar error it causes downstream.
      let broken: Error | undefined;
      let pending: (() => void) | undefined;
      const release = () => {
        const p = pending;
        pending = undefined;
        p?.();
      };
      const breakChain = (e: Error) => {
        if (broken) return;
        broken = e;
        decomp.unpipe(diff);
        decomp.destroy();
        diff.destroy(e);
        release();
      };
      decomp.on('error', breakChain);
      decomp.on('drain', release);
      decomp.pipe(diff);
      const sink = new Writable({
        write(chunk: Buffer, _enc, cb) {
          if (broken || decomp.write(chunk)) cb();
          else pending = cb;
        },
        final(cb) {
          if (!broken) decomp.end();
          cb();
        },
      });
      const download = pipeline(body, compressed, sink, { signal });
      download.catch((e: Error) => breakChain(e));
      compressed.on('end', onDownloaded);
      let extractError: unknown;
      let stats: Awaited<ReturnType<typeof extractLayer>> | undefined;
      try {
        stats = await extractLayer(diff, rootfs);
        diff.resume(); // trailing padding after the tar end blocks
        await finished(diff);
      } catch (e) {
        extractError = e;
        breakChain(e as Error);
      }
      await download;
      const got = compressed.digest();
      if (got !== desc.digest) {
        throw new BoxError(`digest mismatch for layer ${desc.digest}: content hashes to ${got}`);
      }
      if (typeof desc.size === 'number' && compressed.bytes !== desc.size) {
        throw new BoxError(
          `size mismatch for layer ${desc.digest}: ${compressed.bytes} bytes, expected ${desc.size}`,
        );
      }
      if (extractError || !stats) throw extractError ?? broken;
      const gotDiff = diff.digest();
      if (diffId && diffId !== gotDiff) {
        throw new BoxError(`diff_id mismatch for layer ${desc.digest}: ${gotDiff}, config says ${diffId}`);
      }
      const rec: LayerRecord = {
        digest: desc.digest,
        diffId: gotDiff,
        mediaType: desc.mediaType,
        sizeBytes: stats.bytes,
        compressedBytes: compressed.bytes,
      };
      await writeFile(join(tmp, 'layer.json'), JSON.stringify(rec));
      const dir = this.layerPath(desc.digest);
      await mkdir(dirname(dir), { recursive: true });
      try {
        await rename(tmp, dir);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
        // Another process finished the same layer first: use theirs.
        await rm(tmp, { recursive: true, force: true });
      }
      return rec;
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      throw err;
    }
  }

  /** Lists stored images (one entry per reference), sorted by reference. */
  async list(): Promise<ImageInfo[]> {
    await this.init();
    const out: ImageInfo[] = [];
    for (const name of await readdir(join(this.root, 'refs'))) {
      if (!name.endsWith('.json')) continue;
      try {
        const rec = JSON.parse(await readFile(join(this.root, 'refs', name), 'utf8')) as RefRecord;
        out.push({
          reference: rec.reference,
          digest: rec.digest,
          sizeBytes: rec.sizeBytes,
          pulledAt: rec.pulledAt,
        });
      } catch {
        // a record being replaced: skip
      }
    }
    return out.sort((a, b) => a.reference.localeCompare(b.reference));
  }

  /**
   * Removes a stored reference, then layers and blobs no other stored reference uses. Layers in use by
   * running boxes must not be removed by the caller (the runtime checks that first).
   * @throws BoxError when the reference is not stored.
   */
  async remove(reference: string): Promise<void> {
    await this.init();
    let removed: string | undefined;
    for (const c of candidates(reference, this.registries)) {
      const r = formatReference(c);
      if (await this.readRef(r)) {
        await rm(this.refPath(r), { force: true });
        removed = r;
        break;
      }
    }
    if (!removed) throw new BoxError(`image '${reference}' is not stored`);
    await this.collectGarbage();
  }

  /** Deletes layers and blobs that no stored reference needs (layers in flight in this process are kept). */
  private async collectGarbage(): Promise<void> {
    const keepLayers = new Set<string>(this.layerJobs.keys());
    const keepBlobs = new Set<string>();
    for (const name of await readdir(join(this.root, 'refs'))) {
      if (!name.endsWith('.json')) continue;
      const rec = JSON.parse(
        await readFile(join(this.root, 'refs', name), 'utf8').catch(() => '{}'),
      ) as RefRecord;
      for (const l of rec.layers ?? []) keepLayers.add(l);
      if (rec.configDigest) keepBlobs.add(rec.configDigest);
      if (rec.digest) keepBlobs.add(rec.digest);
    }
    if (this.jobs.size > 0) return; // a pull in flight may still write its record: keep everything
    for (const kind of ['layers', 'blobs'] as const) {
      const keep = kind === 'layers' ? keepLayers : keepBlobs;
      for (const alg of await readdir(join(this.root, kind)).catch(() => [] as string[])) {
        for (const hex of await readdir(join(this.root, kind, alg)).catch(() => [] as string[])) {
          if (hex.includes('.tmp-') || keep.has(`${alg}:${hex}`)) continue;
          if (kind === 'blobs' && (await this.isIndexOfKept(join(this.root, kind, alg, hex), keepBlobs)))
            continue;
          const victim = join(this.root, kind, alg, hex);
          const grave = join(this.root, 'tmp', `gc-${randomBytes(6).toString('hex')}`);
          // Rename first so that a half-deleted layer is never seen as complete.
          await rename(victim, grave).catch(() => {});
          await rm(grave, { recursive: true, force: true });
        }
      }
    }
  }

  /** True when a blob is an index whose manifests include a kept manifest. */
  private async isIndexOfKept(path: string, keep: Set<string>): Promise<boolean> {
    try {
      const doc = JSON.parse(await readFile(path, 'utf8')) as Partial<Index>;
      return Array.isArray(doc.manifests) && doc.manifests.some((m) => keep.has(m.digest));
    } catch {
      return false;
    }
  }

  /** Path of a blob inside an OCI layout, refusing blobs that are (or resolve through) symlinks outside it. */
  private async layoutBlob(layoutDir: string, digest: string): Promise<string> {
    const { alg, hex } = digestParts(digest);
    const p = join(layoutDir, 'blobs', alg, hex);
    let real: string;
    try {
      real = await realpath(p);
    } catch {
      throw new BoxError(`OCI layout '${layoutDir}' has no blob ${digest}`);
    }
    if (!real.startsWith(layoutDir + sep)) {
      throw new BoxError(`OCI layout '${layoutDir}': blob ${digest} is a symlink escaping the layout`);
    }
    return real;
  }

  private async readLayoutJson<T>(layoutDir: string, desc: Descriptor): Promise<{ doc: T; raw: Buffer }> {
    const { alg } = digestParts(desc.digest);
    const raw = await readFile(await this.layoutBlob(layoutDir, desc.digest));
    const got = digestOf(alg, raw);
    if (got !== desc.digest) {
      throw new BoxError(`OCI layout '${layoutDir}': digest mismatch for blob ${desc.digest}: got ${got}`);
    }
    return { doc: JSON.parse(raw.toString('utf8')) as T, raw };
  }

  /**
   * Prepares a `rootfsPath`: either an OCI image layout directory (has an `oci-layout` file; its image for
   * this platform is unpacked into the store like a pull) or a prepared root filesystem directory, used
   * read-only as the single layer. Symlinks must not escape it: a relative symlink climbing above the
   * root, or a layout blob resolving outside the layout, is rejected.
   * @throws BoxError naming the path and the rule.
   */
  async fromRootfsPath(path: string): Promise<PreparedImage> {
    await this.init();
    if (typeof path !== 'string' || path.length === 0)
      throw new BoxError('rootfsPath must be a non-empty path');
    let real: string;
    try {
      real = await realpath(resolve(path));
    } catch {
      throw new BoxError(`rootfsPath '${path}' does not exist`);
    }
    const st = await stat(real);
    if (!st.isDirectory()) throw new BoxError(`rootfsPath '${path}' is not a directory`);
    if (fs.existsSync(join(real, 'oci-layout'))) return this.fromLayout(real);
    const key = `${real}\0${st.mtimeMs}`;
    const hit = this.rootfsCache.get(key);
    if (hit) return hit;
    checkSymlinks(real, path);
    const digest = `sha256:${createHash('sha256').update(key).digest('hex')}`;
    const img: PreparedImage = {
      reference: real,
      digest,
      configDigest: digest,
      layerDirs: [real],
      config: {
        env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
        entrypoint: null,
        cmd: null,
        workingDir: null,
        user: null,
        exposedPorts: [],
        healthcheck: null,
      },
    };
    this.rootfsCache.set(key, img);
    return img;
  }

  private async fromLayout(layoutDir: string): Promise<PreparedImage> {
    const fail = (why: string) => new BoxError(`rootfsPath '${layoutDir}' (OCI layout): ${why}`);
    let index: Index;
    try {
      const layoutFile = JSON.parse(await readFile(join(layoutDir, 'oci-layout'), 'utf8')) as {
        imageLayoutVersion?: string;
      };
      if (!layoutFile.imageLayoutVersion) throw fail('oci-layout has no imageLayoutVersion');
      index = JSON.parse(await readFile(join(layoutDir, 'index.json'), 'utf8')) as Index;
    } catch (err) {
      if (err instanceof BoxError) throw err;
      throw fail(`cannot read oci-layout/index.json: ${(err as Error).message}`);
    }
    let desc: Descriptor | undefined = selectPlatform(index) ?? index.manifests?.[0];
    for (let depth = 0; desc && depth < 3; depth++) {
      if (desc.mediaType === MediaType.ociIndex || desc.mediaType === MediaType.dockerManifestList) {
        desc = selectPlatform((await this.readLayoutJson<Index>(layoutDir, desc)).doc);
        continue;
      }
      const { doc: manifest, raw } = await this.readLayoutJson<Manifest>(layoutDir, desc);
      const { doc: cfg, raw: cfgRaw } = await this.readLayoutJson<ImageConfig>(layoutDir, manifest.config);
      await this.saveBlob(desc.digest, raw);
      await this.saveBlob(manifest.config.digest, cfgRaw);
      const progress: PullProgress = {
        reference: layoutDir,
        phase: 'unpacking',
        layersTotal: manifest.layers.length,
        layersDone: 0,
        bytesTotal: 0,
        bytesDone: 0,
      };
      try {
        await this.ensureLayers(
          { layoutDir },
          manifest.layers,
          cfg.rootfs?.diff_ids ?? [],
          progress,
          () => {},
          new AbortController().signal,
        );
      } catch (err) {
        throw fail((err as Error).message);
      }
      return {
        reference: layoutDir,
        digest: desc.digest,
        configDigest: manifest.config.digest,
        layerDirs: manifest.layers.map((l) => join(this.layerPath(l.digest), 'rootfs')),
        config: runtimeConfig(cfg),
      };
    }
    throw fail(`no image for linux/${hostArchitecture().architecture} in index.json`);
  }
}

/** Rejects relative symlinks in a prepared rootfs that resolve above its root. */
function checkSymlinks(root: string, shown: string): void {
  const entries = fs.readdirSync(root, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    if (!e.isSymbolicLink()) continue;
    const abs = join(e.parentPath, e.name);
    const target = fs.readlinkSync(abs);
    if (target.startsWith('/')) continue; // resolved inside the box's root by the kernel
    const rel = abs.slice(root.length + 1);
    const depth = rel.split('/').length - 1;
    let level = depth;
    for (const part of target.split('/')) {
      if (part === '..') level--;
      else if (part !== '' && part !== '.') level++;
      if (level < 0) {
        throw new BoxError(
          `rootfsPath '${shown}': symlink '${rel}' -> '${target}' escapes the root filesystem`,
        );
      }
    }
  }
}
