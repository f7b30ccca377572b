/**
 * The OCI image layer of the sandbox SDK (spec 002: `image`, `rootfsPath`, `JsOptions.imageRegistries`,
 * `homeDir`): pulls over the OCI Distribution API, a verified content store, layers unpacked once as
 * overlayfs lower dirs, and pull progress.
 */
export { RegistryClient, RegistryError } from './client.ts';
export type { Descriptor, ImageConfig, Index, Manifest } from './oci.ts';
export { MediaType } from './oci.ts';
export { renderPullProgress } from './progress.ts';
export { pushBlob, pushImage, pushManifest, sha256Digest } from './push.ts';
export type { ParsedReference, QualifiedReference } from './reference.ts';
export { candidates, formatReference, parseReference } from './reference.ts';
export type { ImageInfo, ImageRuntimeConfig, PreparedImage, PullOptions, PullProgress } from './store.ts';
export { ImageStore, selectPlatform } from './store.ts';
