/**
 * The files of a gVisor box on the host: where they live under its box directory, the OCI bundle
 * runsc runs (`config.json` from `buildOciConfig` with the changes of `gvisorOciConfig`, plus the
 * tier's `engine.json`), the root's writable layer and bind targets, and the environment of the
 * `supervisor.sh` that mounts the root and runs `runsc run --detach` (gvisor.ts).
 */
import {
  existsSync,
  mkdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { DEFAULT_DISK_SIZE_GB, DISK_MOUNT_OPTIONS, ensureDiskImage } from './disk.ts';
import { type BoxPaths, boxPaths, mountsUnder } from './engine.ts';
import type { GVisorPlatform } from './gvisor-platform.ts';
import { alive, run } from './host-process.ts';
import type { OpenedHostPath } from './hostpath.ts';
import { buildOciConfig, etcHosts } from './oci.ts';
import type { EngineBoxSpec } from './types.ts';

/**
 * Host tasks the Sentry, the gofer and their Go runtimes use besides the box's own processes
 * (measured: 29 for an idle box, 56 after its first command).
 */
export const SENTRY_TASKS = 96;

/** Cgroup parent of every gVisor box (`/<parent>/<id>`), shared with the container tier. */
export const CGROUP_PARENT = 'seed-sandbox';

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

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
 * The disk size of a box, GB: `spec.diskSizeGb`, else `DEFAULT_DISK_SIZE_GB` — every box gets a
 * size-limited disk (disk.ts) holding its writable layer and /etc files — except a box whose layer
 * predates that default (an upper dir in its box directory, no disk image): undefined, it keeps its layer.
 */
export function gvisorDiskSizeGb(spec: Pick<EngineBoxSpec, 'diskSizeGb' | 'boxDir'>): number | undefined {
  const legacy =
    spec.diskSizeGb === undefined &&
    existsSync(join(spec.boxDir, 'upper')) &&
    !existsSync(join(spec.boxDir, 'disk.img'));
  return spec.diskSizeGb ?? (legacy ? undefined : DEFAULT_DISK_SIZE_GB);
}

/**
 * Unmounts every mount under `boxDir`, innermost first as `mountsUnder` lists them (lazily when a
 * plain unmount fails).
 * @throws BoxError when a mount is still there after both tries.
 */
export async function unmountBoxDir(boxDir: string): Promise<void> {
  for (const m of mountsUnder(boxDir)) {
    let r = await run('/bin/umount', [m]);
    if (r.code !== 0) r = await run('/bin/umount', ['-l', m]);
    if (r.code !== 0 && mountsUnder(m).includes(m))
      throw new BoxError(`unmounting ${m} failed: ${r.stderr.trim()}`);
  }
}

/** Names under a box directory that the gVisor tier creates (what `remove` deletes). */
export const GVISOR_BOX_FILES = [
  'bundle',
  'rootfs',
  'upper',
  'work',
  'disk',
  'disk.img',
  'disk.img.tmp',
  'binds',
  'runtime.log',
] as const;

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
}

/**
 * Writes the box's OCI bundle: `config.json` (`gvisorOciConfig`, host paths replaced by their bind
 * targets, the network namespace at `p.netns`, `cwd` the box's working directory), `engine.json`
 * (`GVisorMeta`) and, for a box without a disk, its `hosts` and `hostname` files.
 * @returns the meta written to `engine.json`.
 * @throws BoxError as `buildOciConfig`; the file system error when the bundle cannot be written.
 */
export function writeGVisorBundle(
  spec: EngineBoxSpec,
  p: GVisorBoxPaths,
  diskSizeGb: number | undefined,
  host: GVisorBundleHost,
): GVisorMeta {
  const etcDir = diskSizeGb !== undefined ? p.diskDir : p.bundle;
  // The supervisor binds each host path from its descriptor onto <boxDir>/binds/<i>.
  const mounts = spec.mounts.map((m, i) => ({ ...m, hostPath: join(p.binds, String(i)) }));
  const config = gvisorOciConfig(
    { ...spec, mounts },
    {
      rootfs: p.rootfs,
      init: host.init,
      initArgs: ['-P'],
      ...(host.busybox ? { ttyHelper: host.busybox } : {}),
      cgroupsPath: `/${CGROUP_PARENT}/${spec.id}`,
      etcFiles: { hosts: join(etcDir, 'hosts'), hostname: join(etcDir, 'hostname') },
    },
  );
  mkdirSync(p.bundle, { recursive: true });
  if (diskSizeGb === undefined) {
    writeFileSync(join(p.bundle, 'hosts'), etcHosts(spec.hostname));
    writeFileSync(join(p.bundle, 'hostname'), `${spec.hostname}\n`);
  }
  (config.process as { cwd: string }).cwd = spec.workingDir;
  // The network namespace made (and linked) before runsc runs: runsc copies its interfaces at start.
  const linux = config.linux as { namespaces: { type: string; path?: string }[] };
  linux.namespaces = linux.namespaces.map((n) => (n.type === 'network' ? { ...n, path: p.netns } : n));
  writeFileSync(join(p.bundle, 'config.json'), JSON.stringify(config));
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
  writeFileSync(join(p.bundle, 'engine.json'), JSON.stringify(meta));
  return meta;
}

/**
 * Prepares the box's files before its supervisor runs: the root mount point, the disk image (made
 * when missing, `ensureDiskImage`) or the layer directories, the `<boxesDir>/<id>` link to the box
 * directory, an empty log, no stale pid file, and a bind target per opened host path (a directory or
 * an empty file, as the host object is).
 * @returns the supervisor's bind list: `<fd>:<target>` per host path (`fd` 3, 4, … in order).
 * @throws BoxError when the disk image cannot be made; the file system error otherwise.
 */
export async function stageGVisorBoxFiles(
  stateRoot: string,
  boxesDir: string,
  spec: EngineBoxSpec,
  p: GVisorBoxPaths,
  diskSizeGb: number | undefined,
  opened: OpenedHostPath[],
): Promise<string[]> {
  mkdirSync(p.rootfs, { recursive: true });
  if (diskSizeGb !== undefined) {
    mkdirSync(p.diskDir, { recursive: true });
    await ensureDiskImage(stateRoot, spec.id, p.diskImg, diskSizeGb);
  } else {
    mkdirSync(p.upper, { recursive: true });
    mkdirSync(p.work, { recursive: true });
  }
  const link = join(boxesDir, spec.id);
  rmSync(link, { force: true });
  symlinkSync(spec.boxDir, link);
  rmSync(p.pidFile, { force: true });
  writeFileSync(p.log, '');
  rmSync(p.binds, { recursive: true, force: true });
  // runsc and its gofer look the bind targets up as the gVisor namespace's root: traverse, not list.
  if (opened.length > 0) mkdirSync(p.binds, { mode: 0o711 });
  const binds: string[] = [];
  for (const [i, o] of opened.entries()) {
    const target = join(p.binds, String(i));
    if (o.isDirectory) mkdirSync(target);
    else writeFileSync(target, '');
    binds.push(`${3 + i}:${target}`);
  }
  return binds;
}

/** How the supervisor of a gVisor box mounts its root for the gVisor user namespace (idmap.ts). */
export interface GVisorIdmapEnv {
  /** `[perl, idmap-mount.pl, hostUid, hostGid, size]`: the helper with the namespace's mapping. */
  helper: string[];
}

/**
 * The environment of `supervisor.sh` (scripts.ts) for a gVisor box: `runtime` is the runsc command
 * line (launcher included, joined with spaces), `binds` the list from `stageGVisorBoxFiles`. With
 * `idmap` the root is an overlay over idmapped layer clones, the writable layer and /etc files are
 * handed to the mapped root, host paths are bound idmapped (a managed volume as it is), and the
 * launcher makes, limits and joins the box's cgroup (`SB_CG_*`, from `config.json`'s resources).
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
  const etcDir = diskSizeGb !== undefined ? p.diskDir : p.bundle;
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
  const idmapEnv: Record<string, string> = idmap
    ? {
        SB_IDMAP: idmap.helper.join(' '),
        SB_IDMAP_OWN: [p.upper, p.work, join(etcDir, 'hosts'), join(etcDir, 'hostname')]
          .flatMap((f) => ['own', f])
          .join(' '),
        SB_IDMAP_BINDS: binds
          .flatMap((b, i) => {
            const [fd, target] = b.split(/:(.*)/s) as [string, string];
            return ['bind', `/proc/self/fd/${fd}`, target, spec.mounts[i]?.ownedByBox === true ? '0' : '1'];
          })
          .join(' '),
        SB_CG_ID: spec.id,
        SB_CG_MEM: String(resources.memory.limit),
        SB_CG_CPU: `${resources.cpu.quota} ${resources.cpu.period}`,
        SB_CG_PIDS: String(resources.pids.limit),
      }
    : {};
  return {
    ...idmapEnv,
    PATH: process.env.PATH ?? DEFAULT_PATH,
    SB_ID: spec.id,
    SB_RT: runtime.join(' '),
    SB_BUNDLE: p.bundle,
    SB_ROOTFS: p.rootfs,
    SB_LOWER: [...spec.layerDirs].reverse().join(':'),
    SB_UPPER: p.upper,
    SB_WORK: p.work,
    SB_DISK_IMG: diskSizeGb !== undefined ? p.diskImg : '',
    SB_DISK_OPTS: DISK_MOUNT_OPTIONS,
    SB_HOSTS: etcHosts(spec.hostname),
    SB_HOSTNAME: `${spec.hostname}\n`,
    SB_DISK_DIR: p.diskDir,
    SB_LOG: p.log,
    SB_PIDFILE: p.pidFile,
    SB_BINDS: binds.join(' '),
    SB_WATCH: spec.detach ? '0' : '1',
  };
}

/** Host pid of the sandbox process from runsc's pid file, while that process lives; else undefined. */
export function readSandboxPid(pidFile: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10);
    return pid > 0 && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Reads the meta of box `id` through its `<boxesDir>/<id>` link.
 * @returns undefined when the box is unknown or not a gVisor box (no error is thrown).
 */
export function readGVisorMeta(boxesDir: string, id: string): GVisorBoxMeta | undefined {
  try {
    const boxDir = readlinkSync(join(boxesDir, id));
    const meta = JSON.parse(readFileSync(join(boxDir, 'bundle', 'engine.json'), 'utf8')) as GVisorMeta;
    if (meta.isolation !== 'gvisor') return undefined;
    return { ...meta, boxDir, rootfs: join(boxDir, 'rootfs') };
  } catch {
    return undefined;
  }
}
