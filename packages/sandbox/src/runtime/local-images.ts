/**
 * Images of a local runtime: `runtime.images` over the image store of `homeDir` (pull, get, list, remove),
 * and the image a box is started from (`prepareImage`).
 */
import { conflict, notFound, withCode } from '../errors.ts';
import type { ImageStore, PreparedImage } from '../images/index.ts';
import { type RuntimeImages, splitReference } from './backend.ts';
import type { NormalizedBoxOptions } from './options.ts';
import type { StateDb } from './state.ts';

/**
 * The image of a box's options, ready to start: its `rootfsPath` as a one-layer image, else its `image`
 * from the store, pulled when not stored yet.
 * @throws BoxError code `image` when the image cannot be pulled.
 */
export async function prepareImage(
  store: ImageStore,
  options: Pick<NormalizedBoxOptions, 'image' | 'rootfsPath'>,
): Promise<PreparedImage> {
  if (options.rootfsPath !== undefined) return store.fromRootfsPath(options.rootfsPath);
  const image = options.image!;
  try {
    return (await store.get(image)) ?? (await store.pull(image));
  } catch (error) {
    throw withCode(error, 'image', `cannot pull image '${image}'`);
  }
}

/**
 * `runtime.images` of a local runtime (`RuntimeImages`). `pull` throws BoxError code `image`; `remove`
 * throws `not_found` for an image that is not stored and `conflict` while a box of `db` uses it.
 */
export function localImages(store: ImageStore, db: StateDb): RuntimeImages {
  return {
    pull: async (reference, options) => {
      const image = await store.pull(reference, options).catch((error) => {
        throw withCode(error, 'image', `cannot pull image '${reference}'`);
      });
      return {
        reference,
        configDigest: image.configDigest,
        layerCount: image.layerDirs.length,
        digest: image.digest,
        resolvedReference: image.reference,
      };
    },
    get: (reference) => store.get(reference),
    list: async () =>
      (await store.list()).map((image) => ({
        ...image,
        ...splitReference(image.reference),
        id: image.digest,
        cachedAt: image.pulledAt,
      })),
    remove: async (reference) => {
      const target = await store.get(reference);
      if (!target) throw notFound(`image '${reference}' is not stored`);
      for (const record of db.listBoxes()) {
        if (record.options.image === undefined) continue;
        const used = await store.get(record.options.image).catch(() => null);
        if (used?.digest === target.digest) {
          throw conflict(
            `image '${reference}' is used by box ${record.name ?? record.id}; remove the box first`,
          );
        }
      }
      await store.remove(reference);
    },
  };
}
