/**
 * The image store's files under `<homeDir>/images/` (every write is temp + rename, so a crash never leaves
 * a half layer that is later used):
 * - `blobs/<alg>/<hex>`            manifests, indexes and configs, by digest;
 * - `layers/<alg>/<hex>/rootfs/`   an unpacked layer (keyed by its compressed digest) and `layer.json`;
 * - `refs/<sha256(reference)>.json` one record per pulled reference (reference → manifest digest);
 * - `tmp/`                          work in progress (cleared of stale entries on start).
 *
 * - `budget.db`                    the store's disk budget (`ImageLimits.maxStoreBytes`) shared by every
 *                                   process using this directory: stored layers' unpacked bytes plus what
 *                                   work in flight has reserved (`store-budget.ts`).
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { digestParts } from './digest.ts';
import type { PreparedImage } from './image-types.ts';
import type { ImageLimits } from './limits.ts';
import type { ImageConfig } from './oci.ts';
import { runtimeConfig } from './resolve.ts';
import { StoreBudget } from './store-budget.ts';

/** One stored reference (`refs/<sha256(reference)>.json`). */
export interface RefRecord {
  reference: string;
  digest: string;
  configDigest: string;
  /** Compressed digests of the layers, bottom first. */
  layers: string[];
  /** Unpacked bytes of all layers. */
  sizeBytes: number;
  /** RFC 3339. */
  pulledAt: string;
}

/** One unpacked layer (`layers/<alg>/<hex>/layer.json`). */
export interface LayerRecord {
  digest: string;
  diffId: string;
  mediaType: string;
  /** Unpacked regular-file bytes. */
  sizeBytes: number;
  /** Tar entries (absent in records of older stores). */
  entries?: number;
  compressedBytes: number;
}

/** Paths, atomic writes, records and the disk budget of one store (see the module comment). */
export class StoreFiles {
  /** `<homeDir>/images`. */
  readonly root: string;
  readonly limits: ImageLimits;
  #budget: StoreBudget | undefined;
  private ready: Promise<void> | undefined;

  /** @param root `<homeDir>/images`; @param limits the store's bounds. */
  constructor(root: string, limits: ImageLimits) {
    this.root = root;
    this.limits = limits;
  }

  /** The store-wide budget (`maxStoreBytes`, shared by processes). @throws Error before `init` resolved. */
  get budget(): StoreBudget {
    if (!this.#budget) throw new Error('the image store is used before init');
    return this.#budget;
  }

  /**
   * Makes the directories, clears tmp entries older than an hour, opens the budget ledger and records in it
   * the stored layers' bytes (`StoreBudget.reconcile`).
   */
  init(): Promise<void> {
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
      const stored = new Map<string, number>();
      for (const alg of await readdir(join(this.root, 'layers')).catch(() => [] as string[])) {
        for (const hex of await readdir(join(this.root, 'layers', alg)).catch(() => [] as string[])) {
          const record = await this.readLayer(`${alg}:${hex}`);
          if (record) stored.set(`${alg}:${hex}`, record.sizeBytes);
        }
      }
      const budget = new StoreBudget(this.root, { name: 'maxStoreBytes', max: this.limits.maxStoreBytes });
      budget.reconcile(stored, (digest) => this.layerPath(digest));
      this.#budget = budget;
    })();
    return this.ready;
  }

  /** `blobs/<alg>/<hex>`. @throws BoxError `image` on a malformed digest. */
  blobPath(digest: string): string {
    const { alg, hex } = digestParts(digest);
    return join(this.root, 'blobs', alg, hex);
  }

  /** `layers/<alg>/<hex>`. @throws BoxError `image` on a malformed digest. */
  layerPath(digest: string): string {
    const { alg, hex } = digestParts(digest);
    return join(this.root, 'layers', alg, hex);
  }

  /** `refs/<sha256(reference)>.json`. */
  refPath(reference: string): string {
    return join(this.root, 'refs', `${createHash('sha256').update(reference).digest('hex')}.json`);
  }

  /** A fresh directory under `tmp/`. */
  async tmpDir(): Promise<string> {
    const dir = join(this.root, 'tmp', `${Date.now()}-${process.pid}-${randomBytes(4).toString('hex')}`);
    await mkdir(dir, { recursive: true });
    return dir;
  }

  /** Writes a file atomically (temp file in the same directory + rename). */
  async writeAtomic(path: string, data: Buffer | string): Promise<void> {
    await mkdir(dirname(path), { recursive: true });
    const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
    await writeFile(tmp, data);
    await rename(tmp, path);
  }

  /** Stores a verified blob unless it is stored. */
  async saveBlob(digest: string, data: Buffer): Promise<void> {
    const p = this.blobPath(digest);
    if (!fs.existsSync(p)) await this.writeAtomic(p, data);
  }

  /** The record of `reference`, or null. */
  async readRef(reference: string): Promise<RefRecord | null> {
    try {
      return JSON.parse(await readFile(this.refPath(reference), 'utf8')) as RefRecord;
    } catch {
      return null;
    }
  }

  /** The record of a stored layer, or null when it is not (completely) stored. */
  async readLayer(digest: string): Promise<LayerRecord | null> {
    try {
      return JSON.parse(await readFile(join(this.layerPath(digest), 'layer.json'), 'utf8')) as LayerRecord;
    } catch {
      return null;
    }
  }

  /** Builds a PreparedImage from a record when everything it needs is on disk; null otherwise. */
  async fromRecord(rec: RefRecord): Promise<PreparedImage | null> {
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
}
