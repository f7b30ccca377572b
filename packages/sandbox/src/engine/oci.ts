/**
 * Generation of a box's OCI runtime configuration (`config.json`, OCI runtime-spec 1.0.2).
 * Namespaces pid/mount/ipc/uts/network/cgroup (and user, with the box's id mapping), cgroup limits,
 * Docker's default capabilities and a
 * seccomp deny-list, masked and read-only paths as runc/Docker set them, and the box init.
 */
import { BoxError } from '../errors.ts';
import { resolveCapabilities } from './capabilities.ts';
import { type IdMapping, ociIdMappings } from './idmap.ts';
import { defaultSeccompProfile } from './seccomp.ts';
import type { EngineBoxSpec } from './types.ts';

/** Where the engine mounts its helpers inside every box (read-only, hidden). */
export const SANDBOX_DIR = '/.sandbox';
/** Path of the box init (a static `catatonit`, bind-mounted read-only) inside the box. */
export const INIT_PATH = `${SANDBOX_DIR}/init`;
/**
 * Path of the host's static busybox (bind-mounted read-only) inside the box. `exec` with `tty` runs
 * the command through its `setsid -c`, which makes the command a session leader owning its terminal.
 */
export const TTY_HELPER_PATH = `${SANDBOX_DIR}/busybox`;

/** CFS period used for the `cpus` quota, µs. */
export const CPU_PERIOD_US = 100_000;

/** Paths masked from the box (runc/moby defaults). */
export const MASKED_PATHS: readonly string[] = [
  '/proc/acpi',
  '/proc/asound',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
];

/** Paths mounted read-only in the box (runc/moby defaults). */
export const READONLY_PATHS: readonly string[] = [
  '/proc/bus',
  '/proc/fs',
  '/proc/irq',
  '/proc/sys',
  '/proc/sysrq-trigger',
];

/**
 * Resource limits (setrlimit(2)) of every process of a box, soft and hard, set explicitly so that a box
 * never inherits those of the process that created it:
 * - `RLIMIT_NOFILE` 1024 / 4096 open files per process (1024 is glibc `select`'s ceiling and the usual
 *   soft limit; programs may raise theirs to 4096). With `pidsLimit` 1024 a box holds at most ~4 M
 *   descriptors, and each one is charged to its memory cgroup.
 * - `RLIMIT_CORE` 0: no core dumps (a box's crash never writes the host disk or runs a host
 *   `core_pattern` helper).
 * - `RLIMIT_MEMLOCK` 8 MiB: the kernel's default locked-memory allowance.
 * Limits counted per user (`RLIMIT_NPROC`, `RLIMIT_SIGPENDING`, `RLIMIT_MSGQUEUE`) are left to the host
 * defaults: boxes of one host uid would share them; the pids cgroup bounds processes per box.
 */
export const BOX_RLIMITS: readonly { type: string; soft: number; hard: number }[] = [
  { type: 'RLIMIT_NOFILE', soft: 1024, hard: 4096 },
  { type: 'RLIMIT_CORE', soft: 0, hard: 0 },
  { type: 'RLIMIT_MEMLOCK', soft: 8 * 1024 * 1024, hard: 8 * 1024 * 1024 },
];

/** Host files the engine needs to build the config. */
export interface OciHostPaths {
  /** Merged overlay root of the box (absolute host path). */
  rootfs: string;
  /** Host path of the static init binary bind-mounted at `INIT_PATH`. */
  init: string;
  /** Init argv after the binary (e.g. `['-P']` for catatonit's pause mode). */
  initArgs: string[];
  /** Host path of a static busybox bind-mounted at `TTY_HELPER_PATH`, when the host has one. */
  ttyHelper?: string;
  /** Cgroup path of the box (absolute, relative to each hierarchy's root). */
  cgroupsPath: string;
  /** Host files bind-mounted at `/etc/hosts` and `/etc/hostname` (as Docker does), when given. */
  etcFiles?: { hosts: string; hostname: string };
  /**
   * The box's user namespace mapping (idmap.ts); absent: no user namespace (box root is host root).
   * With it, box ids `0..size-1` are host ids from `hostUid`/`hostGid` and capabilities are those of
   * the box's own user namespace.
   */
  idMap?: IdMapping;
}

/** Content of a box's `/etc/hosts` (loopback names and the hostname). */
export function etcHosts(hostname: string): string {
  return `127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t${hostname}\n`;
}

/**
 * Validates the numeric fields of a spec.
 * @throws BoxError naming the field (`id`, `cpus`, `memoryMib`, `pidsLimit`, `diskSizeGb`, `workingDir`,
 *   `hostname`, `boxDir`, `layerDirs[i]`, `mounts[i]`) and the rule broken.
 */
export function validateSpec(spec: EngineBoxSpec): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(spec.id)) {
    throw new BoxError(`id: '${spec.id}' must be 1-128 characters of [A-Za-z0-9_.-] starting alphanumeric`, {
      field: 'id',
      code: 'invalid_option',
    });
  }
  if (!(Number.isFinite(spec.cpus) && spec.cpus >= 0.01 && spec.cpus <= 1024)) {
    throw new BoxError(`cpus: ${spec.cpus} must be a number of cores between 0.01 and 1024`, {
      field: 'cpus',
      code: 'invalid_option',
    });
  }
  if (!(Number.isInteger(spec.memoryMib) && spec.memoryMib >= 6)) {
    throw new BoxError(`memoryMib: ${spec.memoryMib} must be an integer ≥ 6 (MiB)`, {
      field: 'memoryMib',
      code: 'invalid_option',
    });
  }
  if (!(Number.isInteger(spec.pidsLimit) && spec.pidsLimit >= 1)) {
    throw new BoxError(`pidsLimit: ${spec.pidsLimit} must be a positive integer`, {
      field: 'pidsLimit',
      code: 'invalid_option',
    });
  }
  if (spec.diskSizeGb !== undefined && !(Number.isFinite(spec.diskSizeGb) && spec.diskSizeGb > 0)) {
    throw new BoxError(`diskSizeGb: ${spec.diskSizeGb} must be a positive number of GB`, {
      field: 'diskSizeGb',
      code: 'invalid_option',
    });
  }
  if (!spec.workingDir.startsWith('/')) {
    throw new BoxError(`workingDir: '${spec.workingDir}' must be an absolute path`, {
      field: 'workingDir',
      code: 'invalid_option',
    });
  }
  if (spec.hostname.length === 0 || spec.hostname.length > 64 || /[\s/]/.test(spec.hostname)) {
    throw new BoxError(`hostname: '${spec.hostname}' must be 1-64 characters without spaces or '/'`, {
      field: 'hostname',
      code: 'invalid_option',
    });
  }
  if (!spec.boxDir.startsWith('/') || /[,:\s]/.test(spec.boxDir)) {
    throw new BoxError(`boxDir: '${spec.boxDir}' must be an absolute path without ',', ':' or whitespace`, {
      field: 'boxDir',
      code: 'invalid_option',
    });
  }
  if (spec.layerDirs.length === 0)
    throw new BoxError('layerDirs: at least one layer directory is required', {
      field: 'layerDirs',
      code: 'invalid_option',
    });
  for (const [i, d] of spec.layerDirs.entries()) {
    if (!d.startsWith('/') || /[,:\n]/.test(d)) {
      throw new BoxError(`layerDirs[${i}]: '${d}' must be an absolute path without ':', ',' or newline`, {
        field: `layerDirs[${i}]`,
        code: 'invalid_option',
      });
    }
  }
  for (const [i, m] of spec.mounts.entries()) {
    if (!m.hostPath.startsWith('/'))
      throw new BoxError(`mounts[${i}].hostPath: '${m.hostPath}' must be absolute`, {
        field: `mounts[${i}].hostPath`,
        code: 'invalid_option',
      });
    if (!m.guestPath.startsWith('/') || m.guestPath === '/') {
      throw new BoxError(`mounts[${i}].guestPath: '${m.guestPath}' must be an absolute path other than '/'`, {
        field: `mounts[${i}].guestPath`,
        code: 'invalid_option',
      });
    }
    if (m.guestPath === SANDBOX_DIR || m.guestPath.startsWith(`${SANDBOX_DIR}/`)) {
      throw new BoxError(`mounts[${i}].guestPath: '${m.guestPath}' is reserved by the engine`, {
        field: `mounts[${i}].guestPath`,
        code: 'invalid_option',
      });
    }
  }
}

/**
 * Builds the OCI `config.json` object of a box.
 * @param spec the box (validated with `validateSpec`).
 * @param paths host paths of the root, init and cgroup.
 * @returns a plain JSON-serialisable object (runtime-spec 1.0.2).
 * @throws BoxError for an unknown capability name.
 */
export function buildOciConfig(spec: EngineBoxSpec, paths: OciHostPaths): Record<string, unknown> {
  const caps = resolveCapabilities(spec.capabilities);
  const memoryBytes = spec.memoryMib * 1024 * 1024;
  const mounts: Record<string, unknown>[] = [
    { destination: '/proc', type: 'proc', source: 'proc', options: ['nosuid', 'noexec', 'nodev'] },
    {
      destination: '/dev',
      type: 'tmpfs',
      source: 'tmpfs',
      options: ['nosuid', 'strictatime', 'mode=755', 'size=65536k'],
    },
    {
      destination: '/dev/pts',
      type: 'devpts',
      source: 'devpts',
      options: ['nosuid', 'noexec', 'newinstance', 'ptmxmode=0666', 'mode=0620', 'gid=5'],
    },
    {
      destination: '/dev/shm',
      type: 'tmpfs',
      source: 'shm',
      options: ['nosuid', 'noexec', 'nodev', 'mode=1777', 'size=65536k'],
    },
    { destination: '/dev/mqueue', type: 'mqueue', source: 'mqueue', options: ['nosuid', 'noexec', 'nodev'] },
    { destination: '/sys', type: 'sysfs', source: 'sysfs', options: ['nosuid', 'noexec', 'nodev', 'ro'] },
    {
      destination: '/sys/fs/cgroup',
      type: 'cgroup',
      source: 'cgroup',
      options: ['nosuid', 'noexec', 'nodev', 'relatime', 'ro'],
    },
    { destination: INIT_PATH, type: 'bind', source: paths.init, options: ['bind', 'ro', 'nosuid', 'nodev'] },
  ];
  if (paths.ttyHelper) {
    mounts.push({
      destination: TTY_HELPER_PATH,
      type: 'bind',
      source: paths.ttyHelper,
      options: ['bind', 'ro', 'nosuid', 'nodev'],
    });
  }
  if (paths.etcFiles) {
    for (const [dest, src] of [
      ['/etc/hosts', paths.etcFiles.hosts],
      ['/etc/hostname', paths.etcFiles.hostname],
    ] as const) {
      mounts.push({
        destination: dest,
        type: 'bind',
        source: src,
        options: ['bind', 'rw', 'nosuid', 'nodev', 'noexec'],
      });
    }
  }
  for (const m of spec.mounts) {
    mounts.push({
      destination: m.guestPath,
      type: 'bind',
      source: m.hostPath,
      options: ['rbind', m.readOnly ? 'ro' : 'rw', 'nosuid', 'nodev', 'rprivate'],
    });
  }
  return {
    ociVersion: '1.0.2',
    process: {
      terminal: false,
      user: { uid: 0, gid: 0 },
      args: [INIT_PATH, ...paths.initArgs],
      env: spec.env,
      cwd: '/',
      capabilities: { bounding: caps, effective: caps, permitted: caps },
      noNewPrivileges: true,
      rlimits: BOX_RLIMITS,
    },
    root: { path: paths.rootfs, readonly: false },
    hostname: spec.hostname,
    mounts,
    linux: {
      namespaces: [
        { type: 'pid' },
        { type: 'network' },
        { type: 'ipc' },
        { type: 'uts' },
        { type: 'mount' },
        { type: 'cgroup' },
        ...(paths.idMap ? [{ type: 'user' }] : []),
      ],
      ...(paths.idMap ? ociIdMappings(paths.idMap) : {}),
      cgroupsPath: paths.cgroupsPath,
      resources: {
        devices: [{ allow: false, access: 'rwm' }],
        memory: { limit: memoryBytes },
        cpu: { quota: Math.max(1000, Math.round(spec.cpus * CPU_PERIOD_US)), period: CPU_PERIOD_US },
        pids: { limit: spec.pidsLimit },
      },
      seccomp: defaultSeccompProfile(caps),
      maskedPaths: MASKED_PATHS,
      readonlyPaths: READONLY_PATHS,
    },
  };
}
