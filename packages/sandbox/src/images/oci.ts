/**
 * OCI Image Format Specification v1.1 and Docker Image Manifest V2 Schema 2 media types and document
 * shapes (only the fields this package reads or writes).
 */

/** Media types, OCI and Docker. */
export const MediaType = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociConfig: 'application/vnd.oci.image.config.v1+json',
  ociLayerTar: 'application/vnd.oci.image.layer.v1.tar',
  ociLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  ociLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  ociLayerNondistGzip: 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  dockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerManifestV1: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  dockerConfig: 'application/vnd.docker.container.image.v1+json',
  dockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  dockerForeignLayer: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
} as const;

/** The Accept header of manifest requests: every manifest and index type we understand. */
export const MANIFEST_ACCEPT = [
  MediaType.ociIndex,
  MediaType.ociManifest,
  MediaType.dockerManifestList,
  MediaType.dockerManifest,
].join(', ');

/** OCI descriptor (image-spec descriptor.md). `size` in bytes. */
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string; variant?: string };
  annotations?: Record<string, string>;
  urls?: string[];
}

/** Image manifest (image-spec manifest.md) or Docker schema 2 manifest. */
export interface Manifest {
  schemaVersion: number;
  mediaType?: string;
  config: Descriptor;
  layers: Descriptor[];
}

/** Image index (image-spec image-index.md) or Docker manifest list. */
export interface Index {
  schemaVersion: number;
  mediaType?: string;
  manifests: Descriptor[];
}

/** Image configuration (image-spec config.md), fields used here. */
export interface ImageConfig {
  architecture?: string;
  os?: string;
  config?: {
    Env?: string[] | null;
    Entrypoint?: string[] | null;
    Cmd?: string[] | null;
    WorkingDir?: string;
    User?: string;
    ExposedPorts?: Record<string, unknown> | null;
    /** Docker's HEALTHCHECK: `Test` is `['CMD', …]`, `['CMD-SHELL', script]` or `['NONE']`. */
    Healthcheck?: { Test?: string[] | null } | null;
  };
  rootfs?: { type: string; diff_ids: string[] };
}

/** OCI platform architecture of this machine (Go's GOARCH names, as OCI uses). */
export function hostArchitecture(): { architecture: string; variant?: string } {
  switch (process.arch) {
    case 'x64':
      return { architecture: 'amd64' };
    case 'arm64':
      return { architecture: 'arm64', variant: 'v8' };
    case 'arm':
      return { architecture: 'arm', variant: 'v7' };
    case 'ia32':
      return { architecture: '386' };
    default:
      return { architecture: process.arch };
  }
}
