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
 * Import reads the archive with `tar-stream`, at most `maxImportBytes` (checked against the file's size
 * first and counted as it is read), accepting only `oci-layout`, `index.json` and `blobs/sha256/<64 hex>`
 * entries (written with O_EXCL into a fresh directory), checks every blob against its digest, writes the
 * image part as an OCI layout under `<homeDir>/imports/<digest>` (the new box's `rootfsPath`, unpacked by
 * the image store with its verification and bounds) and returns the box layer's blob for the caller to
 * unpack into the new box's disk, and the archived options as found (`archive-options.ts` decides what of
 * them is kept).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { BoxError } from '../errors.ts';
import { HashCounter } from '../images/digest.ts';
import type { ImageRuntimeConfig } from '../images/store.ts';
import type { JsBoxOptions } from '../types.ts';
import { type IdShift, writeLayerTar } from './archive-tar.ts';

const LAYER_TAR = 'application/vnd.oci.image.layer.v1.tar';
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const CONFIG = 'application/vnd.oci.image.config.v1+json';
/** Label / annotation keys of a box archive. */
export const ARCHIVE_KEYS = {
  options: 'org.seed.sandbox.options',
  image: 'org.seed.sandbox.image',
  layer: 'org.seed.sandbox.layer',
} as const;

interface Descriptor {
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

function jsonBlob(mediaType: string, doc: unknown): { desc: Descriptor; data: Buffer } {
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

/** What `readBoxArchive` found. */
export interface ImportedArchive {
  /** The box's options as the archive has them (untrusted), without `image` and `rootfsPath`. */
  options: Record<string, unknown>;
  /** Image reference or path the box was made from at export. */
  image: string;
  /** Path of the box layer's tar (inside the import directory; the caller unpacks it). */
  boxLayer: string;
  /** The import directory (an OCI layout of the image part, kept as the box's rootfsPath). */
  layoutDir: string;
  /** What the caller removes once the box layer is unpacked (the layer file, or a duplicate import). */
  cleanup: string;
}

const BLOB_RE = /^blobs\/sha256\/[0-9a-f]{64}$/;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The error of an archive over `maxImportBytes`: code `image`, naming the bound. */
export function importTooLarge(maxImportBytes: number): BoxError {
  return new BoxError(`import: the archive is larger than maxImportBytes (${maxImportBytes} bytes)`, {
    code: 'image',
  });
}

/**
 * Reads the archive at `path` into `<importsDir>/<manifest digest hex>` (see the module comment).
 * @param maxImportBytes most bytes read from the archive.
 * @throws BoxError `invalid_option` naming `path` for anything that is not a box archive, `not_found`
 *   for a missing file, `image` for an archive over `maxImportBytes`.
 */
export async function readBoxArchive(
  path: string,
  importsDir: string,
  maxImportBytes: number,
): Promise<ImportedArchive> {
  const bad = (why: string) =>
    new BoxError(`import: '${path}' is not a box archive: ${why}`, { field: 'path' });
  const st = fs.statSync(path, { throwIfNoEntry: false });
  if (!st) throw new BoxError(`import: '${path}' does not exist`, { field: 'path', code: 'not_found' });
  if (st.size > maxImportBytes) throw importTooLarge(maxImportBytes);
  await mkdir(importsDir, { recursive: true, mode: 0o700 });
  const dir = await fs.promises.mkdtemp(join(importsDir, 'in-'));
  let moved = false;
  try {
    await mkdir(join(dir, 'blobs', 'sha256'), { recursive: true });
    const digests = new Map<string, string>();
    const extract = tar.extract();
    // Counted as read as well: the file may grow after its size was checked.
    const counted = new HashCounter('sha256', {
      limit: maxImportBytes,
      overLimit: () => importTooLarge(maxImportBytes),
    });
    const reading = pipeline(fs.createReadStream(path), counted, extract);
    try {
      for await (const entry of extract) {
        const name = entry.header.name.replace(/^\.\//, '');
        if (entry.header.type === 'directory' && /^(blobs|blobs\/sha256)\/?$/.test(name)) {
          entry.resume();
          continue;
        }
        if (
          entry.header.type !== 'file' ||
          !(name === 'oci-layout' || name === 'index.json' || BLOB_RE.test(name))
        ) {
          entry.resume();
          throw bad(`unexpected entry '${entry.header.name}'`);
        }
        const hash = createHash('sha256');
        const tap = new PassThrough();
        tap.on('data', (c: Buffer) => hash.update(c));
        await pipeline(entry, tap, fs.createWriteStream(join(dir, name), { flags: 'wx' }));
        digests.set(name, hash.digest('hex'));
      }
      await reading;
    } catch (error) {
      extract.destroy();
      await reading.catch(() => {});
      throw error instanceof BoxError ? error : bad((error as Error).message);
    }
    for (const [name, hex] of digests)
      if (name.startsWith('blobs/') && name.slice(13) !== hex)
        throw bad(`blob ${name} does not match its digest`);
    const readJson = async <T>(name: string): Promise<T> => {
      try {
        return JSON.parse(await readFile(join(dir, name), 'utf8')) as T;
      } catch {
        throw bad(`${name} is missing or not JSON`);
      }
    };
    const index = await readJson<{ manifests?: Descriptor[] }>('index.json');
    const mDesc = index.manifests?.[0];
    if (!mDesc || !/^sha256:[0-9a-f]{64}$/.test(mDesc.digest)) throw bad('index.json names no manifest');
    const manifest = await readJson<{
      config: Descriptor;
      layers: Descriptor[];
      annotations?: Record<string, string>;
    }>(`blobs/sha256/${mDesc.digest.slice(7)}`);
    const config = await readJson<
      { config?: { Labels?: Record<string, string> }; rootfs?: { diff_ids?: string[] } } & Record<
        string,
        unknown
      >
    >(`blobs/sha256/${manifest.config?.digest?.slice(7)}`);
    const boxDesc = manifest.layers?.at(-1);
    const labels = config.config?.Labels ?? {};
    if (boxDesc?.annotations?.[ARCHIVE_KEYS.layer] !== 'box' || !labels[ARCHIVE_KEYS.options]) {
      throw bad('it has no box layer or no box options (an image, not a box export?)');
    }
    for (const l of manifest.layers) {
      if (l.mediaType !== LAYER_TAR)
        throw bad(`layer media type ${l.mediaType} (only uncompressed tar layers)`);
      if (!digests.has(`blobs/sha256/${l.digest.slice(7)}`)) throw bad(`layer ${l.digest} is missing`);
    }
    let options: unknown;
    try {
      options = JSON.parse(labels[ARCHIVE_KEYS.options]!);
    } catch {
      throw bad(`label ${ARCHIVE_KEYS.options} is not JSON`);
    }
    if (!isPlainObject(options)) throw bad(`label ${ARCHIVE_KEYS.options} is not an object`);
    // The image part: the same layers but the box's, as a layout the image store reads (rootfsPath).
    const imageLayers = manifest.layers.slice(0, -1);
    const imgConfig = jsonBlob(CONFIG, {
      ...config,
      rootfs: { type: 'layers', diff_ids: imageLayers.map((l) => l.digest) },
    });
    const imgManifest = jsonBlob(MANIFEST, {
      schemaVersion: 2,
      mediaType: MANIFEST,
      config: imgConfig.desc,
      layers: imageLayers,
    });
    await writeFile(join(dir, 'blobs', 'sha256', imgConfig.desc.digest.slice(7)), imgConfig.data);
    await writeFile(join(dir, 'blobs', 'sha256', imgManifest.desc.digest.slice(7)), imgManifest.data);
    await writeFile(
      join(dir, 'index.json'),
      JSON.stringify({ schemaVersion: 2, manifests: [imgManifest.desc] }),
    );
    const boxLayer = join(dir, 'box-layer.tar');
    await rename(join(dir, 'blobs', 'sha256', boxDesc.digest.slice(7)), boxLayer);
    // One layout per exported image: a second import of the same archive reuses the first one's.
    const layoutDir = join(importsDir, mDesc.digest.slice(7, 23));
    let cleanup = dir;
    if (!fs.existsSync(layoutDir)) {
      await rename(dir, layoutDir);
      cleanup = join(layoutDir, 'box-layer.tar');
    }
    moved = true;
    const { image: _image, rootfsPath: _rootfs, ...rest } = options;
    return {
      options: rest,
      image: labels[ARCHIVE_KEYS.image] ?? '',
      boxLayer: cleanup === dir ? boxLayer : cleanup,
      layoutDir,
      cleanup,
    };
  } finally {
    if (!moved) await rm(dir, { recursive: true, force: true });
  }
}
