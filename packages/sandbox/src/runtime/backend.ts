/**
 * The one runtime interface under `JsRuntime` (spec 002 "Runtime (`JsRuntime`)"; issue: "one runtime
 * interface"). `LocalRuntime` (`local.ts`, boxes on this host) and `RestRuntime` (`rest/client.ts`, boxes
 * on a `sandbox serve` server) implement it; `JsRuntime` (`src/js-runtime.ts`, above both) is a facade
 * that picks one and forwards every call, so no method checks "am I remote?".
 *
 * Boxes and executions: both backends return `JsBox` handles, facades over a `BoxBackend`
 * (`box-backend.ts`: `LocalBox` here, `RestBoxBackend` in `rest/box-client.ts`), and `JsExecution`s over
 * the command's process (an engine process, or the REST client's remote process), so callers see one
 * type per concept.
 */
import type { ImageInfo, ImageStore, PullOptions } from '../images/index.ts';
import type { ImageLimits } from '../images/limits.ts';
import type { JsBoxInfo, JsBoxOptions, JsRuntimeMetrics, JsTenantUsage } from '../types.ts';
import type { ImportedBox, ImportOptions } from './archive-options.ts';
import type { JsBox } from './box.ts';
import type { JsBoxPool, PoolSpec } from './pool.ts';
import type { CloneOptions } from './snapshots.ts';
import type { VolumeRecord } from './state.ts';

/**
 * A stored image as `images.list()` reports it: the store's `ImageInfo` plus BoxLite's fields —
 * `repository` (reference without tag or digest), `tag` (null for a digest reference), `id` (the manifest
 * digest) and `cachedAt` (RFC 3339, when it was pulled).
 */
export type ListedImage = ImageInfo & {
  repository: string;
  tag: string | null;
  id: string;
  cachedAt: string;
};

/** Splits a normalized reference into BoxLite's `repository` and `tag` (null for `name@sha256:…`). */
export function splitReference(reference: string): { repository: string; tag: string | null } {
  const at = reference.indexOf('@');
  if (at >= 0) return { repository: reference.slice(0, at), tag: null };
  const slash = reference.lastIndexOf('/');
  const colon = reference.lastIndexOf(':');
  if (colon > slash) return { repository: reference.slice(0, colon), tag: reference.slice(colon + 1) };
  return { repository: reference, tag: null };
}

/**
 * What `images.pull()` returns (BoxLite `JsImagePullResult`: `reference` as asked, `configDigest`,
 * `layerCount`), plus the manifest digest (`id` in `images.list()`) and the reference it is stored under.
 */
export interface ImagePullResult {
  /** The reference as given to `pull`, e.g. `busybox:latest`. */
  reference: string;
  /** Digest of the image config blob, `sha256:…`. */
  configDigest: string;
  /** Number of filesystem layers. */
  layerCount: number;
  /** Manifest digest, `sha256:…`. */
  digest: string;
  /** Normalized reference the image is stored under, e.g. `registry-1.docker.io/library/busybox:latest`. */
  resolvedReference: string;
}

/** Image operations of a runtime (`images.pull`, `images.list`, `images.remove`). */
export interface RuntimeImages {
  /**
   * Pulls an image (or finds it in the store) and prepares its layers; `options.onProgress` and
   * `signal` apply to a local runtime. @throws BoxError code `image`.
   */
  pull(reference: string, options?: PullOptions): Promise<ImagePullResult>;
  /** The stored image for a reference (no network access), or null. */
  get: ImageStore['get'];
  /** Images in the store, with BoxLite's `repository`, `tag`, `id` and `cachedAt` beside the store's fields. */
  list(): Promise<ListedImage[]>;
  /**
   * Removes an image reference from the store.
   * @throws BoxError code `conflict` when a box uses it, `not_found` when it is not stored.
   */
  remove: ImageStore['remove'];
}

/** Managed volumes of a runtime (spec 002 `JsVolumeSpec.managedVolume`; data in `<homeDir>/volumes`). */
export interface RuntimeVolumes {
  /** Creates a volume, optionally named (names are unique; an existing name returns that volume). */
  create(name?: string): Promise<VolumeRecord>;
  /** The volume with this id or name, or null. */
  get(idOrName: string): Promise<VolumeRecord | null>;
  /** All volumes, oldest first. */
  list(): Promise<VolumeRecord[]>;
  /** Deletes a volume and its data. @throws BoxError code `not_found` when missing, `conflict` when mounted. */
  remove(idOrName: string): Promise<void>;
}

/** What a runtime flavour implements; every member mirrors the `JsRuntime` member of the same name. */
export interface RuntimeBackend {
  /** Absolute base directory of the runtime's data; empty string for a REST runtime. */
  readonly homeDir: string;
  /** Base URL of the REST server; null for a local runtime. */
  readonly url: string | null;
  /** Bounds on images and imports of a local runtime (`JsOptions.imageLimits` over the defaults). */
  readonly imageLimits?: ImageLimits;
  /** Creates and starts a box (spec 002 `create`). */
  create(options: JsBoxOptions, name?: string): Promise<JsBox>;
  /** Every box (spec 002 `listInfo`). */
  listInfo(): Promise<JsBoxInfo[]>;
  /** One box's metadata or null (spec 002 `getInfo`). */
  getInfo(idOrName: string): Promise<JsBoxInfo | null>;
  /** A handle or null (spec 002 `get`). */
  get(idOrName: string): Promise<JsBox | null>;
  /** Runtime metrics (spec 002 `metrics`). */
  metrics(): Promise<JsRuntimeMetrics>;
  /** The caller's tenant usage and limits (REST runtimes only; absent: unsupported). */
  usage?(): Promise<JsTenantUsage>;
  /** Removes a box; a running one needs `force` (spec 002 `remove`). */
  remove(idOrName: string, force?: boolean): Promise<void>;
  /** Releases what the runtime holds in this process (spec 002 `close`). */
  close(): void;
  /** Stops the non-detached boxes this runtime created (BoxLite `shutdown(timeout)`; seconds). */
  shutdown(timeoutSecs?: number): Promise<void>;
  /** Image store operations. */
  readonly images: RuntimeImages;
  /** Managed volumes. */
  readonly volumes: RuntimeVolumes;
  /**
   * A new box started from a box's current state or one of its snapshots (`options.snapshot`), with the
   * source's options overridden by `options`.
   */
  cloneBox(idOrName: string, options?: CloneOptions, name?: string): Promise<JsBox>;
  /**
   * A new box from an archive written by `box.export`; `nameOrOptions` is its name or `ImportOptions`
   * (name, and options passed again over the archive's untrusted ones).
   */
  importBox(path: string, nameOrOptions?: string | ImportOptions): Promise<ImportedBox>;
  /** A warm pool of ready boxes (`pool.ts`); absent where the flavour keeps none. */
  pool?(spec: PoolSpec): JsBoxPool;
}
