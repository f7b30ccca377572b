/**
 * The pipeline of one layer, verify before unpack (SECURITY.md "Images and box archives"):
 * 1. the compressed blob streams into a temporary file of the store while it is hashed, bounded by the
 *    size its descriptor declares (and counted against the store's disk budget);
 * 2. only a blob whose digest and size match is decompressed and unpacked (`unpack.ts`) into a staging
 *    directory, every byte and entry taken from the layer's, the image's and the store's budgets;
 * 3. the uncompressed stream's digest must equal the config's diff_id before the staging directory is
 *    published by one rename. Any failure removes the staging directory: the store is as before.
 */
import fs from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BoxError } from '../errors.ts';
import type { RegistryClient } from './client.ts';
import { decompressor, digestParts, HashCounter } from './digest.ts';
import { UnpackBudget } from './limits.ts';
import type { Descriptor } from './oci.ts';
import { renameUnlessTaken } from './store-budget.ts';
import type { LayerRecord, StoreFiles } from './store-files.ts';
import { extractLayer } from './unpack.ts';

/** Where a layer's bytes come from: a registry blob, or a reader of local blobs (an OCI layout). */
export type LayerSource =
  | { client: RegistryClient; repository: string }
  | { readBlob: (digest: string) => Promise<Readable> };

/** Callbacks of one layer's unpack: compressed bytes received (negative to take back), blob verified. */
export interface LayerCallbacks {
  onBytes: (n: number) => void;
  onDownloaded: () => void;
}

/**
 * A blob body longer than its descriptor's size: refused before the excess is written, and retried like
 * a broken transfer (a registry or proxy answered with a wrong body).
 */
export class OversizeBlobError extends BoxError {
  constructor(message: string) {
    super(message, { code: 'image' });
    this.name = 'OversizeBlobError';
  }
}

function bad(message: string): BoxError {
  return new BoxError(message, { code: 'image' });
}

/**
 * Downloads (or reads), verifies, unpacks and publishes one layer under `layers/<alg>/<hex>` (see the
 * module comment). `imageBudget` is shared by the image's layers.
 * @throws BoxError `image` on a digest, size or diff_id mismatch, hostile content or a bound (naming it);
 *   network errors as they come (the caller retries transient ones).
 */
export async function unpackLayer(
  files: StoreFiles,
  source: LayerSource,
  desc: Descriptor,
  diffId: string | undefined,
  imageBudget: UnpackBudget,
  callbacks: LayerCallbacks,
  signal: AbortSignal,
): Promise<LayerRecord> {
  const { alg } = digestParts(desc.digest);
  const limits = files.limits;
  if (typeof desc.size !== 'number' || !Number.isSafeInteger(desc.size) || desc.size < 0) {
    throw bad(`layer ${desc.digest} has no valid size in its descriptor`);
  }
  const size = desc.size;
  // The compressed blob is on disk until the layer is published: it counts against the store's budget.
  files.budget.take(size, 0);
  const layerBudget = new UnpackBudget(
    { name: 'maxLayerBytes', max: limits.maxLayerBytes },
    { name: 'maxLayerEntries', max: limits.maxLayerEntries },
  );
  const tmp = await files.tmpDir();
  let published = false;
  try {
    const body =
      'client' in source
        ? await source.client.request(source.repository, `${source.repository}/blobs/${desc.digest}`, {
            signal,
            timeoutMs: 120_000,
          })
        : await source.readBlob(desc.digest);
    const compressed = new HashCounter(alg, {
      onChunk: callbacks.onBytes,
      limit: size,
      overLimit: () =>
        new OversizeBlobError(
          `size mismatch for layer ${desc.digest}: more than the ${size} bytes its descriptor says`,
        ),
    });
    const blob = join(tmp, 'blob');
    await pipeline(body, compressed, fs.createWriteStream(blob, { flags: 'wx', mode: 0o600 }), { signal });
    const got = compressed.digest();
    if (got !== desc.digest) throw bad(`digest mismatch for layer ${desc.digest}: content hashes to ${got}`);
    if (compressed.bytes !== size) {
      throw bad(`size mismatch for layer ${desc.digest}: ${compressed.bytes} bytes, expected ${size}`);
    }
    callbacks.onDownloaded();

    const rootfs = join(tmp, 'rootfs');
    await mkdir(rootfs);
    // The tar stream is at most its files' bytes plus headers (one or two 512-byte blocks each) and padding.
    const tarLimit = limits.maxLayerBytes + 2048 * limits.maxLayerEntries + (1 << 20);
    const diff = new HashCounter('sha256', {
      limit: tarLimit,
      overLimit: () =>
        bad(`layer ${desc.digest} decompresses past maxLayerBytes (${limits.maxLayerBytes} bytes)`),
    });
    const decompressing = pipeline(
      fs.createReadStream(blob, { highWaterMark: 256 * 1024 }),
      decompressor(desc.mediaType),
      diff,
      { signal },
    );
    decompressing.catch(() => {});
    let stats: Awaited<ReturnType<typeof extractLayer>>;
    try {
      stats = await extractLayer(diff, rootfs, { budgets: [layerBudget, imageBudget, files.budget] });
      diff.resume(); // trailing padding after the tar end blocks
      await decompressing;
    } catch (error) {
      diff.destroy();
      const upstream = await decompressing.then(
        () => undefined,
        (e: Error) => e,
      );
      const cause = error instanceof BoxError ? error : (upstream ?? (error as Error));
      if (cause instanceof BoxError || signal.aborted) throw cause;
      throw bad(`layer ${desc.digest} cannot be unpacked: ${cause.message}`);
    }
    const gotDiff = diff.digest();
    if (diffId && diffId !== gotDiff) {
      throw bad(`diff_id mismatch for layer ${desc.digest}: ${gotDiff}, config says ${diffId}`);
    }
    await rm(blob);
    const rec: LayerRecord = {
      digest: desc.digest,
      diffId: gotDiff,
      mediaType: desc.mediaType,
      sizeBytes: stats.bytes,
      entries: stats.entries,
      compressedBytes: compressed.bytes,
    };
    await writeFile(join(tmp, 'layer.json'), JSON.stringify(rec));
    const dir = files.layerPath(desc.digest);
    await mkdir(dirname(dir), { recursive: true });
    // Published and recorded in the store's ledger at once; its bytes count as stored from then on.
    published = files.budget.publish(desc.digest, rec.sizeBytes, layerBudget.usedBytes, () =>
      renameUnlessTaken(tmp, dir),
    );
    // Another process finished the same layer first: use theirs (its bytes are in the ledger).
    if (!published) files.budget.give(layerBudget.usedBytes);
    return rec;
  } catch (err) {
    files.budget.give(layerBudget.usedBytes);
    imageBudget.give(layerBudget.usedBytes, layerBudget.usedEntries);
    throw err;
  } finally {
    files.budget.give(size);
    if (!published) await rm(tmp, { recursive: true, force: true });
  }
}
