/**
 * Manifest and platform resolution (image-spec manifest.md, image-index.md): a reference's manifest,
 * following an index to this machine's platform, every document checked against its digest; the image
 * config blob fetched, verified and stored; and the runtime settings read from the config.
 */
import { readFile } from 'node:fs/promises';
import { BoxError } from '../errors.ts';
import { isTransient, type RegistryClient } from './client.ts';
import { digestOf, digestParts } from './digest.ts';
import { readBody } from './http.ts';
import type { ImageRuntimeConfig } from './image-types.ts';
import { SharedJob, SharedJobs, withRetries } from './job.ts';
import {
  type Descriptor,
  hostArchitecture,
  type ImageConfig,
  type Index,
  MANIFEST_ACCEPT,
  type Manifest,
  MediaType,
} from './oci.ts';
import type { QualifiedReference } from './reference.ts';
import type { StoreFiles } from './store-files.ts';

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

/** The runtime settings of an image config (image-spec config.md `config`). */
export function runtimeConfig(cfg: ImageConfig): ImageRuntimeConfig {
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

/** A resolved manifest, its digest and the raw documents read on the way (index, manifest). */
export interface ResolvedManifest {
  manifest: Manifest;
  digest: string;
  raw: Buffer[];
}

/**
 * Fetches the manifest of a reference (following an index to this platform, 3 levels at most); verifies
 * digests. Documents are read up to 4 MiB.
 * @throws RegistryError for registry answers; BoxError `image` for a digest mismatch, schema 1, no manifest
 *   for this platform or a malformed document.
 */
export async function resolveManifest(
  client: RegistryClient,
  ref: QualifiedReference,
  signal: AbortSignal,
): Promise<ResolvedManifest> {
  const bad = (message: string) => new BoxError(message, { code: 'image' });
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
      if (digest !== want) throw bad(`manifest digest mismatch: expected ${want}, got ${digest}`);
    } else digest = digestOf('sha256', body);
    raw.push(body);
    let doc: (Manifest & Index) | undefined;
    try {
      doc = JSON.parse(body.toString('utf8')) as Manifest & Index;
    } catch {
      throw bad('manifest is not valid JSON');
    }
    const type = doc.mediaType ?? String(res.headers['content-type'] ?? '').split(';')[0];
    if (type === MediaType.dockerManifestV1 || doc.schemaVersion === 1) {
      throw bad('Docker schema 1 manifests are not supported');
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
        throw bad(`no manifest for platform linux/${arch} in the image index (has: ${have})`);
      }
      want = pick.digest;
      continue;
    }
    if (!doc.config?.digest || !Array.isArray(doc.layers)) throw bad('manifest has no config or layers');
    return { manifest: doc, digest, raw };
  }
  throw bad('image index nesting deeper than 3 levels');
}

/** A small blob to fetch: from which registry repository, its descriptor, and the most bytes read. */
export interface BlobRequest {
  client: RegistryClient;
  /** Repository path on the registry, e.g. `library/busybox`. */
  repository: string;
  /** The blob's descriptor (its digest is verified). */
  desc: Descriptor;
  /** Bytes read at most; a longer body is refused. */
  limit: number;
}

/** Bound of the bytes `BlobFetcher` keeps of recently fetched blobs (4 MiB; image configs are a few KiB). */
export const RECENT_BLOB_BYTES = 4 * 1024 * 1024;

/**
 * Fetches small blobs (image configs) by digest, verified, from the store or the registry; concurrent
 * fetches of one digest share one download (a `SharedJob`, stopped when every waiting pull has aborted),
 * retried twice after transient failures. The caller stores the blob once the image it belongs to is
 * complete, so a failed pull leaves the store as it was; until then, a pull of the same image under another
 * reference reuses the verified bytes from a cache of recent blobs bounded to `RECENT_BLOB_BYTES`.
 */
export class BlobFetcher {
  private readonly jobs = new SharedJobs<string, Buffer, never>();
  private readonly files: StoreFiles;
  /** Recently fetched, verified blobs by digest, oldest first; their sizes add up to `recentBytes`. */
  private readonly recent = new Map<string, Buffer>();
  private recentBytes = 0;

  /** @param files the store's files. */
  constructor(files: StoreFiles) {
    this.files = files;
  }

  /**
   * The blob `request.desc` from the store, or downloaded (at most `request.limit` bytes).
   * @throws BoxError `image` on a digest mismatch; RegistryError for registry answers.
   */
  fetch(request: BlobRequest, signal: AbortSignal): Promise<Buffer> {
    const { digest } = request.desc;
    const recent = this.recent.get(digest);
    if (recent) return Promise.resolve(recent);
    const job = this.jobs.get(
      digest,
      () =>
        new SharedJob<Buffer, never>(async (_, jobSignal) => {
          const blob = await withRetries(3, () => this.fetchOnce(request, jobSignal), isTransient, jobSignal);
          this.remember(digest, blob);
          return blob;
        }),
    );
    return job.wait(undefined, signal, (reason) =>
      reason instanceof Error ? reason : new BoxError('aborted', { code: 'image' }),
    );
  }

  /** Keeps `blob` among the recent blobs, dropping the oldest past `RECENT_BLOB_BYTES`. */
  private remember(digest: string, blob: Buffer): void {
    if (blob.length > RECENT_BLOB_BYTES || this.recent.has(digest)) return;
    this.recent.set(digest, blob);
    this.recentBytes += blob.length;
    for (const [d, b] of this.recent) {
      if (this.recentBytes <= RECENT_BLOB_BYTES) break;
      this.recent.delete(d);
      this.recentBytes -= b.length;
    }
  }

  /** One attempt of `fetch`: the stored blob if it is intact, else one download, verified. */
  private async fetchOnce(
    { client, repository, desc, limit }: BlobRequest,
    signal: AbortSignal,
  ): Promise<Buffer> {
    const { alg } = digestParts(desc.digest);
    const cached = await readFile(this.files.blobPath(desc.digest)).catch(() => null);
    if (cached && digestOf(alg, cached) === desc.digest) return cached;
    const res = await client.request(repository, `${repository}/blobs/${desc.digest}`, { signal });
    const body = await readBody(res, limit);
    const got = digestOf(alg, body);
    if (got !== desc.digest) {
      throw new BoxError(`digest mismatch for blob ${desc.digest}: got ${got}`, { code: 'image' });
    }
    return body;
  }
}
