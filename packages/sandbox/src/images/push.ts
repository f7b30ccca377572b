/**
 * Pushing images over the OCI Distribution API (OCI Distribution Spec v1.1 "Push": monolithic blob upload
 * POST then PUT `?digest=`, manifest PUT). Used by the offline image scripts and by tests to publish
 * fixtures; the SDK itself only pulls.
 */

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { JsImageRegistry } from '../types.ts';
import { RegistryClient } from './client.ts';
import { type Descriptor, type ImageConfig, type Manifest, MediaType } from './oci.ts';
import { endpointFor, type RegistryEndpoint } from './reference.ts';

/** Content of one blob to push: bytes in memory, or a file with its known digest and size. */
export type BlobSource = { data: Buffer } | { path: string; digest: string; size: number };

/** sha256 digest `sha256:<hex>` of bytes. */
export function sha256Digest(data: Buffer | string): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** Pushes one blob unless the registry already has it. Returns its descriptor fields. Throws `RegistryError`. */
export async function pushBlob(
  client: RegistryClient,
  repository: string,
  blob: BlobSource,
): Promise<{ digest: string; size: number }> {
  const digest = 'data' in blob ? sha256Digest(blob.data) : blob.digest;
  const size = 'data' in blob ? blob.data.length : blob.size;
  const head = await client.request(repository, `${repository}/blobs/${digest}`, {
    method: 'HEAD',
    actions: 'pull,push',
    accept: [404],
  });
  head.resume();
  if (head.statusCode === 200) return { digest, size };
  const start = await client.request(repository, `${repository}/blobs/uploads/`, {
    method: 'POST',
    actions: 'pull,push',
    headers: { 'content-length': '0' },
  });
  start.resume();
  const location = start.headers.location;
  if (!location) throw new Error(`registry gave no upload location for ${repository}`);
  const url = new URL(location, client.endpoint.baseUrl);
  url.searchParams.set('digest', digest);
  const res = await client.request(repository, url.toString(), {
    method: 'PUT',
    actions: 'pull,push',
    headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
    body: 'data' in blob ? blob.data : createReadStream(blob.path),
    timeoutMs: 600_000,
  });
  res.resume();
  return { digest, size };
}

/** Pushes a manifest or index document under `reference` (a tag or digest). Returns its digest. */
export async function pushManifest(
  client: RegistryClient,
  repository: string,
  reference: string,
  body: Buffer,
  mediaType: string,
): Promise<string> {
  const res = await client.request(repository, `${repository}/manifests/${reference}`, {
    method: 'PUT',
    actions: 'pull,push',
    headers: { 'content-type': mediaType, 'content-length': String(body.length) },
    body,
  });
  res.resume();
  return sha256Digest(body);
}

/** One layer to push: a blob and its media type (gzip by default). */
export interface PushLayer {
  blob: BlobSource;
  mediaType?: string;
  /** sha256 of the uncompressed tar (the config's diff_id). */
  diffId: string;
}

/**
 * Pushes a single-platform image (layers, config, OCI manifest) as `repository:tag` on a registry.
 * `config` is completed with `rootfs.diff_ids` from the layers. Returns the manifest digest and descriptor.
 */
export async function pushImage(
  target: { host: string; registries?: JsImageRegistry[]; endpoint?: RegistryEndpoint },
  repository: string,
  tags: string[],
  layers: PushLayer[],
  config: ImageConfig,
): Promise<{ digest: string; manifest: Descriptor }> {
  const client = new RegistryClient(target.endpoint ?? endpointFor(target.host, target.registries));
  const layerDescs: Descriptor[] = [];
  for (const l of layers) {
    const { digest, size } = await pushBlob(client, repository, l.blob);
    layerDescs.push({ mediaType: l.mediaType ?? MediaType.ociLayerGzip, digest, size });
  }
  const cfg: ImageConfig = { ...config, rootfs: { type: 'layers', diff_ids: layers.map((l) => l.diffId) } };
  const cfgBytes = Buffer.from(JSON.stringify(cfg));
  const c = await pushBlob(client, repository, { data: cfgBytes });
  const manifest: Manifest & { mediaType: string } = {
    schemaVersion: 2,
    mediaType: MediaType.ociManifest,
    config: { mediaType: MediaType.ociConfig, digest: c.digest, size: c.size },
    layers: layerDescs,
  };
  const body = Buffer.from(JSON.stringify(manifest));
  let digest = sha256Digest(body);
  for (const tag of tags) digest = await pushManifest(client, repository, tag, body, MediaType.ociManifest);
  return { digest, manifest: { mediaType: MediaType.ociManifest, digest, size: body.length } };
}
