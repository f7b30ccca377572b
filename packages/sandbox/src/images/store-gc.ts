/**
 * Listing, removal and garbage collection of the image store: references are listed from `refs/`;
 * removing one deletes its record, then every layer and blob no stored reference needs (a layer is first
 * renamed into `tmp/`, so a half-deleted layer is never seen as complete), giving its bytes back to the
 * store's disk budget (the store's ledger, shared by processes).
 */
import { randomBytes } from 'node:crypto';
import { renameSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { ImageInfo } from './image-types.ts';
import type { Index } from './oci.ts';
import type { RefRecord, StoreFiles } from './store-files.ts';

/** Lists stored images (one entry per reference), sorted by reference. */
export async function listImages(files: StoreFiles): Promise<ImageInfo[]> {
  const out: ImageInfo[] = [];
  for (const name of await readdir(join(files.root, 'refs'))) {
    if (!name.endsWith('.json')) continue;
    try {
      const rec = JSON.parse(await readFile(join(files.root, 'refs', name), 'utf8')) as RefRecord;
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
 * Deletes layers and blobs that no stored reference needs.
 * @param keepLayers digests of layers in flight in this process.
 * @param pullsInFlight pulls running in this process: while any runs, nothing is deleted (it may still
 *   write its record).
 */
export async function collectGarbage(
  files: StoreFiles,
  keepLayers: string[],
  pullsInFlight: number,
): Promise<void> {
  const keep = { layers: new Set<string>(keepLayers), blobs: new Set<string>() };
  for (const name of await readdir(join(files.root, 'refs'))) {
    if (!name.endsWith('.json')) continue;
    const rec = JSON.parse(
      await readFile(join(files.root, 'refs', name), 'utf8').catch(() => '{}'),
    ) as Partial<RefRecord>;
    for (const l of rec.layers ?? []) keep.layers.add(l);
    if (rec.configDigest) keep.blobs.add(rec.configDigest);
    if (rec.digest) keep.blobs.add(rec.digest);
  }
  if (pullsInFlight > 0) return;
  for (const kind of ['layers', 'blobs'] as const) {
    for (const alg of await readdir(join(files.root, kind)).catch(() => [] as string[])) {
      for (const hex of await readdir(join(files.root, kind, alg)).catch(() => [] as string[])) {
        const digest = `${alg}:${hex}`;
        if (hex.includes('.tmp-') || keep[kind].has(digest)) continue;
        const victim = join(files.root, kind, alg, hex);
        if (kind === 'blobs' && (await isIndexOfKept(victim, keep.blobs))) continue;
        const grave = join(files.root, 'tmp', `gc-${randomBytes(6).toString('hex')}`);
        const moved = () => {
          try {
            renameSync(victim, grave);
            return true;
          } catch {
            return false;
          }
        };
        // A layer leaves the directory and the store's ledger at once (its bytes are free store-wide).
        if (!(kind === 'layers' ? files.budget.remove(digest, moved) : moved())) continue;
        await rm(grave, { recursive: true, force: true });
      }
    }
  }
}

/** True when a blob is an index whose manifests include a kept manifest. */
async function isIndexOfKept(path: string, keep: Set<string>): Promise<boolean> {
  try {
    const doc = JSON.parse(await readFile(path, 'utf8')) as Partial<Index>;
    return Array.isArray(doc.manifests) && doc.manifests.some((m) => keep.has(m.digest));
  } catch {
    return false;
  }
}
