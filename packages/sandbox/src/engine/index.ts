/**
 * Isolation engines of the sandbox. `createEngine()` returns the OCI container engine
 * (crun or runc); the `Engine` contract is in types.ts.
 */
import { type CreateEngineOptions, OciEngine } from './engine.ts';

export { DEFAULT_CAPABILITIES, resolveCapabilities } from './capabilities.ts';
export type { CreateEngineOptions, EngineNetworkContext, OciRuntimeName } from './engine.ts';
export { isHybridCgroupHost, mountsUnder, OciEngine, resolveUser } from './engine.ts';
export { buildOciConfig, INIT_PATH, MASKED_PATHS, READONLY_PATHS, validateSpec } from './oci.ts';
export { defaultSeccompProfile } from './seccomp.ts';
export type * from './types.ts';

/**
 * Creates the OCI engine: `crun` by default when installed (through a private mount namespace on
 * hybrid cgroup hosts), else `runc`; state under `options.stateRoot` (default `/run/seed-sandbox`).
 * Creates the state directories and helper scripts.
 * @returns a promise of the engine (rejects with BoxError when the runtime, `catatonit` or
 *   `unshare` is missing, or an option is invalid).
 */
export async function createEngine(options: CreateEngineOptions = {}): Promise<OciEngine> {
  return new OciEngine(options);
}
export { HOST_BUSYBOX, makeBusyboxRootfs } from './rootfs.ts';
