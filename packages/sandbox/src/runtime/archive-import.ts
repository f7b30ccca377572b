/**
 * Import of box archives (`archive.ts` describes the format): the archive is read with `tar-stream`, at
 * most `maxImportBytes` (checked against the file's size first and counted as it is read), accepting
 * only `oci-layout`, `index.json` and `blobs/sha256/<64 hex>` entries (written with O_EXCL into a fresh
 * directory); every blob is checked against its digest; the image part is written as an OCI layout
 * under `<homeDir>/imports/<digest>` (the new box's `rootfsPath`, unpacked by the image store with its
 * verification and bounds); the box layer's blob is returned for the caller to unpack into the new box's
 * disk, with the archived options as found (`archive-options.ts` decides what of them is kept).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { BoxError } from '../errors.ts';
import { HashCounter } from '../images/digest.ts';
import { ARCHIVE_KEYS, CONFIG, type Descriptor, jsonBlob, LAYER_TAR, MANIFEST } from './archive.ts';

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

/** Resources a box archive's options ask for (only the fields that are numbers). */
export interface ArchiveResources {
  cpus?: number;
  memoryMib?: number;
  diskSizeGb?: number;
}

/**
 * The resources (`cpus`, `memoryMib`, `diskSizeGb`) the options of the archive at `path` ask for, read
 * without unpacking anything: small JSON blobs (up to 1 MiB each, 16 MiB in all) are kept in memory while
 * the tar is read once, then followed from `index.json` to the manifest and the config label. The REST
 * import admits a box for these and passes them again to `importBox`, so the box gets what was admitted.
 * Anything unreadable gives `{}` (the import itself then names the problem).
 */
export async function archiveResources(path: string, maxImportBytes: number): Promise<ArchiveResources> {
  const small = new Map<string, Buffer>();
  let kept = 0;
  const extract = tar.extract();
  const counted = new HashCounter('sha256', {
    limit: maxImportBytes,
    overLimit: () => importTooLarge(maxImportBytes),
  });
  const reading = pipeline(fs.createReadStream(path), counted, extract);
  reading.catch(() => {});
  try {
    for await (const entry of extract) {
      const name = entry.header.name.replace(/^\.\//, '');
      const size = entry.header.size ?? 0;
      if (
        (name === 'index.json' || BLOB_RE.test(name)) &&
        size <= 1 << 20 &&
        kept + size <= 16 << 20 &&
        !small.has(name)
      ) {
        const chunks: Buffer[] = [];
        for await (const c of entry) chunks.push(c as Buffer);
        kept += size;
        small.set(name, Buffer.concat(chunks));
      } else entry.resume();
    }
    await reading;
    const json = (name: string | undefined): Record<string, unknown> => {
      const data = name === undefined ? undefined : small.get(name);
      const doc: unknown = data ? JSON.parse(data.toString('utf8')) : undefined;
      return isPlainObject(doc) ? doc : {};
    };
    const blob = (desc: unknown) =>
      isPlainObject(desc) && typeof desc.digest === 'string'
        ? `blobs/sha256/${desc.digest.slice(7)}`
        : undefined;
    const index = json('index.json');
    const manifest = json(blob(Array.isArray(index.manifests) ? index.manifests[0] : undefined));
    const config = json(blob(manifest.config));
    const labels =
      isPlainObject(config.config) && isPlainObject(config.config.Labels) ? config.config.Labels : {};
    const label = labels[ARCHIVE_KEYS.options];
    const options: unknown = typeof label === 'string' ? JSON.parse(label) : undefined;
    if (!isPlainObject(options)) return {};
    const out: ArchiveResources = {};
    for (const key of ['cpus', 'memoryMib', 'diskSizeGb'] as const) {
      if (typeof options[key] === 'number') out[key] = options[key];
    }
    return out;
  } catch (error) {
    extract.destroy();
    if (error instanceof BoxError) throw error;
    return {};
  }
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
