/**
 * Box archives (`box.export(path)` / `runtime.importBox(path)`): one tar file holding an OCI
 * image layout (image-spec image-layout.md: `oci-layout`, `index.json`, `blobs/sha256/…`) whose one image
 * has the box image's layers plus one more layer, the box's writable layer (`archive-tar.ts`), so the
 * archive also opens as an image (`skopeo inspect oci-archive:<path>`). Layers are uncompressed tars
 * (`application/vnd.oci.image.layer.v1.tar`); owners in the box layer are box ids (0 = box root).
 *
 * The box's options ride in the config's `config.Labels` and the manifest's annotations:
 * `org.seed.sandbox.options` (JSON `JsBoxOptions` without secrets, ports and host binds),
 * `org.seed.sandbox.image` (the image reference or rootfs path it was made from), and the box layer's
 * descriptor carries `org.seed.sandbox.layer=box`.
 *
 * Import (reading, bounds, untrusted options) is `archive-import.ts`.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { BoxError } from '../errors.ts';
import type { ImageRuntimeConfig } from '../images/store.ts';
import type { JsBoxOptions } from '../types.ts';
import { type IdShift, writeLayerTar } from './archive-tar.ts';

/** Media types of a box archive's layers, manifest and config. */
export const LAYER_TAR = 'application/vnd.oci.image.layer.v1.tar';
/** Media type of the archive's manifest. */
export const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
/** Media type of the archive's config. */
export const CONFIG = 'application/vnd.oci.image.config.v1+json';
/** Label / annotation keys of a box archive. */
export const ARCHIVE_KEYS = {
  options: 'org.seed.sandbox.options',
  image: 'org.seed.sandbox.image',
  layer: 'org.seed.sandbox.layer',
} as const;

/** A descriptor of an archive blob (image-spec descriptor.md). */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

/** What `writeBoxArchive` needs. */
export interface BoxArchiveSource {
  /** Unpacked image layers, bottom first (the store's lower dirs). */
  imageLayers: string[];
  /** The image's runtime settings (env, entrypoint, cmd, workingDir, user). */
  imageConfig: ImageRuntimeConfig;
  /** Read-only directory of the box's writable layer. */
  boxLayer: string;
  /** Host ids of the box's user namespace (owners become box ids), or null. */
  idMap: IdShift | null;
  options: JsBoxOptions;
  /** Image reference or rootfs path the box was made from. */
  image: string;
}

/** Throughput figures of an export. */
export interface ArchiveStats {
  bytes: number;
  layers: number;
}

/** Writes one layer tar into `dir`, named by its digest; returns its descriptor. */
async function layerBlob(dir: string, root: string, shift: IdShift | null): Promise<Descriptor> {
  const tmp = join(dir, `layer-${process.hrtime.bigint()}`);
  const hash = createHash('sha256');
  let size = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      size += chunk.length;
      cb(null, chunk);
    },
  });
  const file = fs.createWriteStream(tmp);
  const written = pipeline(tap, file);
  await writeLayerTar(root, tap, shift);
  await written;
  const digest = `sha256:${hash.digest('hex')}`;
  await rename(tmp, join(dir, digest.slice(7)));
  return { mediaType: LAYER_TAR, digest, size };
}

/** `doc` as a JSON blob and its descriptor. */
export function jsonBlob(mediaType: string, doc: unknown): { desc: Descriptor; data: Buffer } {
  const data = Buffer.from(JSON.stringify(doc));
  return {
    desc: {
      mediaType,
      digest: `sha256:${createHash('sha256').update(data).digest('hex')}`,
      size: data.length,
    },
    data,
  };
}

/**
 * Writes the archive of a box to `path` (replaced atomically when complete). Temporary layer files live
 * next to it and are removed.
 * @throws BoxError naming `path` when it cannot be written.
 */
export async function writeBoxArchive(src: BoxArchiveSource, path: string): Promise<ArchiveStats> {
  const work = `${path}.parts-${process.pid}`;
  try {
    await mkdir(work, { recursive: true });
  } catch (error) {
    throw new BoxError(`export: cannot write next to '${path}': ${(error as Error).message}`, {
      field: 'path',
    });
  }
  try {
    const layers: Descriptor[] = [];
    for (const dir of src.imageLayers) layers.push(await layerBlob(work, dir, null));
    const box = await layerBlob(work, src.boxLayer, src.idMap);
    box.annotations = { [ARCHIVE_KEYS.layer]: 'box' };
    layers.push(box);
    const labels = { [ARCHIVE_KEYS.options]: JSON.stringify(src.options), [ARCHIVE_KEYS.image]: src.image };
    const c = src.imageConfig;
    const config = jsonBlob(CONFIG, {
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      os: 'linux',
      created: new Date().toISOString(),
      config: {
        Env: c.env,
        ...(c.entrypoint ? { Entrypoint: c.entrypoint } : {}),
        ...(c.cmd ? { Cmd: c.cmd } : {}),
        ...(c.workingDir ? { WorkingDir: c.workingDir } : {}),
        ...(c.user ? { User: c.user } : {}),
        Labels: labels,
      },
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.digest) },
      history: layers.map((_, i) => ({
        created_by: i === layers.length - 1 ? 'seed sandbox box layer' : 'image layer',
      })),
    });
    const manifest = jsonBlob(MANIFEST, {
      schemaVersion: 2,
      mediaType: MANIFEST,
      config: config.desc,
      layers,
      annotations: labels,
    });
    const index = {
      schemaVersion: 2,
      manifests: [{ ...manifest.desc, annotations: { 'org.opencontainers.image.ref.name': 'box' } }],
    };
    const pack = tar.pack();
    const tmpOut = `${path}.tmp-${process.pid}`;
    const written = pipeline(pack, fs.createWriteStream(tmpOut));
    const put = (name: string, data: Buffer) =>
      new Promise<void>((resolve, reject) =>
        pack.entry({ name, mode: 0o644, mtime: new Date(0) }, data, (e) => (e ? reject(e) : resolve())),
      );
    await put('oci-layout', Buffer.from('{"imageLayoutVersion":"1.0.0"}'));
    await put('index.json', Buffer.from(JSON.stringify(index)));
    await put(`blobs/sha256/${manifest.desc.digest.slice(7)}`, manifest.data);
    await put(`blobs/sha256/${config.desc.digest.slice(7)}`, config.data);
    let bytes = 0;
    for (const l of layers) {
      bytes += l.size;
      await new Promise<void>((resolve, reject) => {
        const entry = pack.entry(
          { name: `blobs/sha256/${l.digest.slice(7)}`, size: l.size, mode: 0o644, mtime: new Date(0) },
          (e) => (e ? reject(e) : resolve()),
        );
        fs.createReadStream(join(work, l.digest.slice(7)))
          .on('error', reject)
          .pipe(entry);
      });
    }
    pack.finalize();
    await written;
    await rename(tmpOut, path);
    return { bytes, layers: layers.length };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
