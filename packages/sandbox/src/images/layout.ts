/**
 * `rootfsPath` images: an OCI image layout directory (image-spec image-layout.md; its image for this
 * platform is unpacked into the store like a pull, every blob verified) or a prepared root filesystem
 * directory used read-only as the single layer (its relative symlinks must not climb above it).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { readFile, realpath, stat } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import { digestOf, digestParts } from './digest.ts';
import type { PreparedImage, PullProgress } from './image-types.ts';
import type { LayerJobs } from './layers.ts';
import {
  type Descriptor,
  hostArchitecture,
  type ImageConfig,
  type Index,
  type Manifest,
  MediaType,
} from './oci.ts';
import { runtimeConfig, selectPlatform } from './resolve.ts';
import type { StoreFiles } from './store-files.ts';

/** What `prepareRootfsPath` works with: the store's files and layer jobs, and a cache of rootfs directories. */
export interface LayoutContext {
  files: StoreFiles;
  layers: LayerJobs;
  /** Prepared rootfs directories by `<real path>\0<mtime>`. */
  cache: Map<string, PreparedImage>;
}

/**
 * Prepares a `rootfsPath` (see the module comment).
 * @throws BoxError naming the path and the rule (`invalid_option` field `rootfsPath` for a missing or
 *   non-directory path or an escaping symlink; `image` for a bad layout).
 */
export async function prepareRootfsPath(ctx: LayoutContext, path: string): Promise<PreparedImage> {
  if (typeof path !== 'string' || path.length === 0) {
    throw new BoxError('rootfsPath must be a non-empty path', { field: 'rootfsPath' });
  }
  let real: string;
  try {
    real = await realpath(resolve(path));
  } catch {
    throw new BoxError(`rootfsPath '${path}' does not exist`, { field: 'rootfsPath' });
  }
  const st = await stat(real);
  if (!st.isDirectory())
    throw new BoxError(`rootfsPath '${path}' is not a directory`, { field: 'rootfsPath' });
  if (fs.existsSync(join(real, 'oci-layout'))) return fromLayout(ctx, real);
  const key = `${real}\0${st.mtimeMs}`;
  const hit = ctx.cache.get(key);
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
  ctx.cache.set(key, img);
  return img;
}

/** Path of a blob inside an OCI layout, refusing blobs that are (or resolve through) symlinks outside it. */
async function layoutBlob(layoutDir: string, digest: string): Promise<string> {
  const { alg, hex } = digestParts(digest);
  const p = join(layoutDir, 'blobs', alg, hex);
  let real: string;
  try {
    real = await realpath(p);
  } catch {
    throw new BoxError(`OCI layout '${layoutDir}' has no blob ${digest}`, { code: 'image' });
  }
  if (!real.startsWith(layoutDir + sep)) {
    throw new BoxError(`OCI layout '${layoutDir}': blob ${digest} is a symlink escaping the layout`, {
      code: 'image',
    });
  }
  return real;
}

async function readLayoutJson<T>(layoutDir: string, desc: Descriptor): Promise<{ doc: T; raw: Buffer }> {
  const { alg } = digestParts(desc.digest);
  const raw = await readFile(await layoutBlob(layoutDir, desc.digest));
  const got = digestOf(alg, raw);
  if (got !== desc.digest) {
    throw new BoxError(`OCI layout '${layoutDir}': digest mismatch for blob ${desc.digest}: got ${got}`, {
      code: 'image',
    });
  }
  return { doc: JSON.parse(raw.toString('utf8')) as T, raw };
}

async function fromLayout(ctx: LayoutContext, layoutDir: string): Promise<PreparedImage> {
  const fail = (why: string) =>
    new BoxError(`rootfsPath '${layoutDir}' (OCI layout): ${why}`, { code: 'image' });
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
      desc = selectPlatform((await readLayoutJson<Index>(layoutDir, desc)).doc);
      continue;
    }
    const { doc: manifest, raw } = await readLayoutJson<Manifest>(layoutDir, desc);
    const { doc: cfg, raw: cfgRaw } = await readLayoutJson<ImageConfig>(layoutDir, manifest.config);
    await ctx.files.saveBlob(desc.digest, raw);
    await ctx.files.saveBlob(manifest.config.digest, cfgRaw);
    const progress: PullProgress = {
      reference: layoutDir,
      phase: 'unpacking',
      layersTotal: manifest.layers.length,
      layersDone: 0,
      bytesTotal: 0,
      bytesDone: 0,
    };
    const readBlob = async (digest: string): Promise<Readable> =>
      fs.createReadStream(await layoutBlob(layoutDir, digest), { highWaterMark: 256 * 1024 });
    try {
      await ctx.layers.ensureAll(
        { readBlob },
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
      layerDirs: manifest.layers.map((l) => join(ctx.files.layerPath(l.digest), 'rootfs')),
      config: runtimeConfig(cfg),
    };
  }
  throw fail(`no image for linux/${hostArchitecture().architecture} in index.json`);
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
          {
            field: 'rootfsPath',
          },
        );
      }
    }
  }
}
