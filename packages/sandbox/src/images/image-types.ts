/**
 * Public shapes of the image store (spec 002 runtime `images`): a prepared image, pull progress and
 * options, and a stored image as listed.
 */

/** Runtime settings from the image config (image-spec config.md `config`), used to start a box. */
export interface ImageRuntimeConfig {
  /** `KEY=value` entries. */
  env: string[];
  entrypoint: string[] | null;
  cmd: string[] | null;
  workingDir: string | null;
  user: string | null;
  /** e.g. `8080/tcp`. EXPOSE does not publish host ports (spec 002 "Network tunnels"). */
  exposedPorts: string[];
  /**
   * The image's HEALTHCHECK test (Docker image config `Healthcheck.Test`): `['CMD', …]` or
   * `['CMD-SHELL', script]`; null when the image has none or disables it (`['NONE']`).
   */
  healthcheck: string[] | null;
}

/** An image ready to run: its layers unpacked, bottom first, each usable as an overlayfs lower dir. */
export interface PreparedImage {
  /** Normalized reference, e.g. `127.0.0.1:5000/library/python:slim`, or the real path of a rootfs. */
  reference: string;
  /** Manifest digest `sha256:…` (for a prepared rootfs directory: a digest of its path and mtime). */
  digest: string;
  /** Digest of the image config blob (for a prepared rootfs directory: the same as `digest`). */
  configDigest: string;
  /** Absolute directories of the unpacked layers, BOTTOM (base) FIRST. Read-only: never write into them. */
  layerDirs: string[];
  config: ImageRuntimeConfig;
}

/** Progress of one pull. Bytes are compressed bytes downloaded from the registry. */
export interface PullProgress {
  reference: string;
  phase: 'resolving' | 'downloading' | 'unpacking' | 'done';
  layersTotal: number;
  layersDone: number;
  bytesTotal: number;
  bytesDone: number;
}

/** A stored image as listed (spec 002 runtime `images.list`). `sizeBytes`: unpacked file bytes. */
export interface ImageInfo {
  reference: string;
  digest: string;
  sizeBytes: number;
  /** RFC 3339. */
  pulledAt: string;
}

/** Options of `ImageStore.pull`. */
export interface PullOptions {
  onProgress?: (p: PullProgress) => void;
  /** Aborts this caller's wait; the shared download stops when every waiting caller has aborted. */
  signal?: AbortSignal;
  /** Ask the registry even when the reference is stored (re-resolve the tag). Default false. */
  refresh?: boolean;
}
