/**
 * The contract between the box runtime (`src/runtime/`) and an isolation engine (`src/engine/`).
 * The first engine runs OCI containers with crun/runc; a micro-VM engine can implement the same
 * interface on hosts with working KVM. Existing members are fixed; new members must be optional.
 */
import type { Readable, Writable } from 'node:stream';

/** A bind mount into the box. `hostPath` must be absolute. */
export interface EngineMount {
  hostPath: string;
  guestPath: string;
  readOnly: boolean;
  /**
   * In a box with a user namespace: true for a directory whose files belong to the box (managed
   * volumes), stored with the box range's host ids (box root is host uid 100000 there) and bound as
   * is, its top directory given to the mapped root when host root owns it; false or absent for a
   * host directory, bound idmapped so that host uid `k` is box uid `k` (ENGINE.md "User namespaces").
   */
  ownedByBox?: boolean;
}

/** Everything the engine needs to start one box. Sizes in MiB/GB as named; times in ms. */
export interface EngineBoxSpec {
  /** Box id (ULID); also the container id given to the OCI runtime. */
  id: string;
  /** Hostname inside the box (box name, else id). */
  hostname: string;
  /** Unpacked image layers, bottom (base) layer first; mounted read-only as overlayfs lower dirs. */
  layerDirs: string[];
  /** Per-box directory the engine owns (bundle, overlay upper/work dirs, logs). Created by the runtime. */
  boxDir: string;
  /** `KEY=value` entries: image env overlaid with the box's env. */
  env: string[];
  /** Absolute working directory of commands (default `/root`). */
  workingDir: string;
  /** User of commands, `uid[:gid]` or a name from the image, default root. */
  user?: string;
  /** CPU cores (fractions allowed), enforced as a CFS quota. */
  cpus: number;
  /** Memory limit, MiB. */
  memoryMib: number;
  /** Maximum number of processes in the box. */
  pidsLimit: number;
  /** Size limit of the writable layer, GB; unlimited when absent. */
  diskSizeGb?: number;
  mounts: EngineMount[];
  /** Capability names (`NET_RAW` or `CAP_NET_RAW`) added to / dropped from the default OCI set. */
  capabilities: { add: string[]; drop: string[] };
  /**
   * Rootless engine only: run without cpu, memory and pids limits when no cgroup subtree is delegated
   * to the caller (engine/rootless.ts); otherwise such a start fails.
   */
  allowUnlimited?: boolean;
  /** `disabled`: only `lo`; `enabled`: user-mode networking. */
  network: { mode: 'enabled' | 'disabled'; allowNet: string[] };
  /** When false the box is stopped when the creating process exits, even on SIGKILL. */
  detach: boolean;
  /**
   * Isolation tier (gvisor-tiers.ts): `container` (default; crun/runc) or `gvisor` (runsc, a
   * user-space kernel). Only engines created by `createTieredEngine` look at it.
   */
  isolation?: 'container' | 'gvisor';
}

/** Stage timings of a start, ms (spec 002 `JsBoxMetrics` names). */
export interface EngineStartTimings {
  stageFilesystemSetupMs: number;
  stageBoxConfigMs: number;
  stageBoxSpawnMs: number;
  stageContainerInitMs: number;
}

/** A started box. `pid` is the host pid of the box's init process. */
export interface EngineStarted {
  pid: number;
  timings: EngineStartTimings;
}

/** Options of one command in a running box. */
export interface EngineExecOptions {
  cmd: string;
  args: string[];
  /** Extra `KEY=value` entries on top of the box env. */
  env: string[];
  cwd?: string;
  user?: string;
  /** Allocate a pseudo-terminal (stdout carries both streams; stderr ends empty). */
  tty?: boolean;
  /** Size of that terminal from the first byte on, in character cells; default 80×24. Only with `tty`. */
  ttySize?: { cols: number; rows: number };
  /**
   * Start the command in the background and return once it runs: its stdio is /dev/null, it outlives
   * this process, and `exited` resolves with 0 at once (a box's main process). Not with `tty`.
   */
  detach?: boolean;
}

/** A running command: raw byte streams and its exit. */
export interface EngineProcess {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Resolves with the exit code (128 + signal number when killed by a signal). */
  exited: Promise<number>;
  /** Sends a signal (default SIGKILL) to the command's process in the box. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Resizes the command's terminal (tty only), in character cells. */
  resize?(cols: number, rows: number): Promise<void>;
}

/** Live state of a box as the OCI runtime reports it. */
export interface EngineState {
  status: 'created' | 'running' | 'stopped' | 'unknown';
  pid?: number;
}

/**
 * Resource usage of a box from its cgroup and its network namespace (also the resource fields of the
 * public `JsBoxMetrics`). A field that could not be read is absent.
 */
export interface EngineStats {
  /** CPU usage since the previous call, percent of the box's allowance, 0.0–100.0. */
  cpuPercent?: number;
  /** Memory in use by the box's cgroup, bytes (`memory.current`, v1 `memory.usage_in_bytes`). */
  memoryBytes?: number;
  /** Bytes sent on the box's interfaces other than `lo` since they were made. */
  networkBytesSent?: number;
  /** Bytes received on the box's interfaces other than `lo` since they were made. */
  networkBytesReceived?: number;
  /** TCP connections currently established in the box's namespace (`CurrEstab`, /proc/net/snmp). */
  networkTcpConnections?: number;
  /** TCP failures since the box started: failed connection attempts plus resets of established ones. */
  networkTcpErrors?: number;
}

/** An isolation engine. All methods reject with `BoxError` (src/errors.ts) naming the box on failure. */
export interface Engine {
  /** Engine name for logs and metrics, e.g. `crun` or `runc`. */
  readonly name: string;
  /** Prepares the bundle and starts the box's init process; the box is running when this resolves. */
  start(spec: EngineBoxSpec): Promise<EngineStarted>;
  /** Runs a command in a running box. */
  exec(id: string, options: EngineExecOptions): Promise<EngineProcess>;
  /** Stops the box (SIGTERM, then SIGKILL after `graceMs`, default 2000) and unmounts its root. */
  stop(id: string, graceMs?: number): Promise<void>;
  /** Deletes the container and everything under its boxDir that the engine created. Idempotent. */
  remove(id: string, boxDir: string): Promise<void>;
  state(id: string): Promise<EngineState>;
  stats(id: string): Promise<EngineStats>;
  /**
   * Every box the engine's state still knows (index, OCI runtime, host mounts), for garbage
   * collection after a crash: `remove(id, boxDir)` each one the runtime has no record of. With
   * `include`, only the ids it accepts are reported (and only their state is read: one runtime call
   * each), so a runtime that has records of most boxes asks about the others only.
   */
  list?(include?: (id: string) => boolean): Promise<EngineBoxRecord[]>;
}

/** A box known to the engine, as listed by `Engine.list()`. */
export interface EngineBoxRecord {
  id: string;
  /** The box directory given at start, when the engine's index still has it. */
  boxDir?: string;
  /** The OCI runtime's view (`stopped` when only the index knows it; `unknown` when nothing does). */
  status: EngineState['status'];
  /** Host pid of the box init while running. */
  pid?: number;
  /** Host mount points under the box directory that are still mounted. */
  mounts: string[];
}
