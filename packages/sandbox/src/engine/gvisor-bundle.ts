/**
 * The files of a gVisor box on the host: where they live under its box directory (box-files.ts plus
 * its network namespace file), the OCI bundle runsc runs (`config.json` from `buildOciConfig` with the
 * changes of `gvisorOciConfig`, plus the tier's `engine.json`; written as the container tier's,
 * box-bundle.ts), and the environment of the `supervisor.sh` that mounts the root and runs
 * `runsc run --detach` (gvisor.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type BundleHost,
  idmapSupervisorEnv,
  ociConfigInput,
  supervisorEnv,
  writeBundle,
} from './box-bundle.ts';
import { type BoxPaths, boxPaths, readBoxMeta } from './box-files.ts';
import type { GVisorPlatform } from './gvisor-platform.ts';
import { buildOciConfig } from './oci.ts';
import type { EngineBoxSpec } from './types.ts';

/**
 * Host tasks the Sentry, the gofer and their Go runtimes use besides the box's own processes
 * (measured: 29 for an idle box, 56 after its first command).
 */
export const SENTRY_TASKS = 96;

/** Per-box facts in `<boxDir>/bundle/engine.json` (the tiers read `isolation` to route calls). */
export interface GVisorMeta {
  id: string;
  isolation: 'gvisor';
  platform: GVisorPlatform;
  /** The box's environment, `KEY=value` entries; exec'd commands start from it. */
  env: string[];
  /** Default user of exec'd commands (`name`, `uid` or `uid:gid`), as in the box spec. */
  user?: string;
  /** Default working directory of exec'd commands, absolute. */
  workingDir: string;
  /** CPU cores the box may use (the denominator of `cpuPercent`). */
  cpus: number;
  /** Size of the box's disk image, GB; absent for a box whose layer predates the disk. */
  diskSizeGb?: number;
}

/** `GVisorMeta` with where the box lives on the host (absolute paths). */
export type GVisorBoxMeta = GVisorMeta & { boxDir: string; rootfs: string };

/** Absolute host paths of one gVisor box's files: the engine's `BoxPaths` plus its network namespace file. */
export type GVisorBoxPaths = BoxPaths & {
  /** The box's network namespace file until the sandbox holds it. */
  netns: string;
};

/** The files of the gVisor box in `boxDir` (`boxPaths`, and `bundle/netns`). */
export function gvisorBoxPaths(boxDir: string, diskSizeGb?: number): GVisorBoxPaths {
  return { ...boxPaths(boxDir, diskSizeGb), netns: join(boxDir, 'bundle', 'netns') };
}

/**
 * The `config.json` of a gVisor box: `buildOciConfig` with three changes.
 * - No `/sys/fs/cgroup` mount (gVisor 20221219 has no cgroupfs for boxes).
 * - No `seccomp` section: runsc ignores it (without `--oci-seccomp`, which would not cover `exec`
 *   processes either); the Sentry's own host seccomp filter and its syscall emulation take its place.
 * - `pids.limit` is the box's `pidsLimit` twice over (ptrace: a host thread per box thread plus the
 *   Sentry's tracer thread) plus `SENTRY_TASKS`: runsc applies the limit to its host processes.
 * @throws BoxError as `buildOciConfig` (unknown capability name).
 */
export function gvisorOciConfig(
  spec: EngineBoxSpec,
  paths: Parameters<typeof buildOciConfig>[1],
): Record<string, unknown> {
  const config = buildOciConfig(spec, paths);
  config.mounts = (config.mounts as { destination: string }[]).filter(
    (m) => m.destination !== '/sys/fs/cgroup',
  );
  const linux = config.linux as { seccomp?: unknown; resources: { pids: { limit: number } } };
  delete linux.seccomp;
  linux.resources.pids.limit = spec.pidsLimit * 2 + SENTRY_TASKS;
  return config;
}

/** Host binaries bound into every gVisor box (see `writeGVisorBundle`). */
export interface GVisorBundleHost {
  /** The static init bound at `/.sandbox/init`. */
  init: string;
  /** Host busybox bound as the tty helper, when the host has one. */
  busybox?: string;
  platform: GVisorPlatform;
  /**
   * Whether runsc joins the network namespace the engine made at `p.netns` (a box with a network);
   * otherwise runsc makes the sandbox's network namespace itself (`--network=none`).
   */
  netns: boolean;
  /**
   * The start gate's FIFO (`<bundle>/start-gate`, made by the launcher, gvisor-launcher.ts) that the
   * prestart hook reads: runsc boots the sandbox, then waits for `go` before it takes the network
   * namespace's interfaces over. Only with `netns`.
   */
  startGate?: string;
}

/**
 * Writes the box's OCI bundle (box-bundle.ts `writeBundle`): `config.json` (`gvisorOciConfig`, host
 * paths replaced by their bind targets, the network namespace at `p.netns` when `host.netns`, `cwd` the box's working
 * directory), `engine.json` (`GVisorMeta`) and, for a box without a disk, its `hosts` and `hostname`.
 * @returns the meta written to `engine.json`.
 * @throws BoxError as `buildOciConfig`; the file system error when the bundle cannot be written.
 */
export function writeGVisorBundle(
  spec: EngineBoxSpec,
  p: GVisorBoxPaths,
  diskSizeGb: number | undefined,
  host: GVisorBundleHost,
): GVisorMeta {
  const bundleHost: BundleHost = { init: host.init, ...(host.busybox ? { ttyHelper: host.busybox } : {}) };
  const config = gvisorOciConfig(...ociConfigInput(spec, p, diskSizeGb, bundleHost));
  // The network namespace made (and linked) before runsc runs: runsc copies its interfaces at start.
  if (host.netns) {
    const linux = config.linux as { namespaces: { type: string; path?: string }[] };
    linux.namespaces = linux.namespaces.map((n) => (n.type === 'network' ? { ...n, path: p.netns } : n));
    // runsc runs prestart hooks after booting the sandbox and before its network set-up; the hook runs
    // as runsc does (the gVisor namespace's root) and fails unless the launcher relays `go`.
    if (host.startGate)
      config.hooks = {
        prestart: [
          {
            path: '/bin/sh',
            args: ['sh', '-c', 'read -r go <"$1" && [ "$go" = go ]', 'start-gate', host.startGate],
          },
        ],
      };
  }
  const meta: GVisorMeta = {
    id: spec.id,
    isolation: 'gvisor',
    platform: host.platform,
    env: spec.env,
    user: spec.user,
    workingDir: spec.workingDir,
    cpus: spec.cpus,
    diskSizeGb,
  };
  writeBundle(spec, p, diskSizeGb, config, meta);
  return meta;
}

/** How the supervisor of a gVisor box mounts its root for the gVisor user namespace (idmap.ts). */
export interface GVisorIdmapEnv {
  /** `[perl, idmap-mount.pl, hostUid, hostGid, size]`: the helper with the namespace's mapping. */
  helper: string[];
}

/**
 * The environment of `supervisor.sh` (scripts.ts) for a gVisor box: box-bundle.ts `supervisorEnv`,
 * where `runtime` is the runsc command line (launcher included) and `binds` the list from
 * `stageBoxFiles`. With `idmap` the root is an overlay over idmapped layer clones, the writable layer
 * and /etc files are handed to the mapped root, host paths are bound idmapped (a managed volume as it
 * is; `idmapSupervisorEnv`), and the launcher makes, limits and joins the box's cgroup (`SB_CG_*`,
 * from `config.json`'s resources).
 * @throws the fs error when the bundle's `config.json` cannot be read.
 */
export function gvisorSupervisorEnv(
  spec: EngineBoxSpec,
  p: GVisorBoxPaths,
  diskSizeGb: number | undefined,
  runtime: string[],
  binds: string[],
  idmap?: GVisorIdmapEnv,
): Record<string, string> {
  const env = supervisorEnv(spec, p, diskSizeGb, runtime, binds);
  if (!idmap) return env;
  const resources = (
    JSON.parse(readFileSync(join(p.bundle, 'config.json'), 'utf8')) as {
      linux: {
        resources: {
          memory: { limit: number };
          cpu: { quota: number; period: number };
          pids: { limit: number };
        };
      };
    }
  ).linux.resources;
  return {
    ...env,
    ...idmapSupervisorEnv(spec, p, diskSizeGb, idmap.helper, binds),
    SB_CG_ID: spec.id,
    SB_CG_MEM: String(resources.memory.limit),
    SB_CG_CPU: `${resources.cpu.quota} ${resources.cpu.period}`,
    SB_CG_PIDS: String(resources.pids.limit),
  };
}

/**
 * Reads the meta of box `id` through its `<boxesDir>/<id>` link.
 * @returns undefined when the box is unknown or not a gVisor box (no error is thrown).
 */
export function readGVisorMeta(boxesDir: string, id: string): GVisorBoxMeta | undefined {
  const meta = readBoxMeta<GVisorMeta>(boxesDir, id);
  return meta?.isolation === 'gvisor' ? meta : undefined;
}
