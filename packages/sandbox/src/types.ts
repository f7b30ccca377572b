/**
 * Public data types of the sandbox SDK, named and shaped exactly as spec 002 "Resources and their
 * fields". Behaviour lives elsewhere; this module only declares shapes.
 */
import type { EngineStats } from './engine/types.ts';
import type { ImageLimits } from './images/limits.ts';

/** Registry configuration (spec 002 `JsImageRegistry`). */
export interface JsImageRegistry {
  /** Registry host, with port when not the default, e.g. `127.0.0.1:5000` or `registry-1.docker.io`. */
  host: string;
  /** `https` (default) or `http`. */
  transport?: 'https' | 'http';
  /** Accept any TLS certificate from this registry (https only). Default false. */
  skipVerify?: boolean;
  /** When true, unqualified references such as `python:slim` are tried against this registry, in list order. */
  search?: boolean;
  /** Credentials: `username`/`password` (basic, or exchanged for a bearer token) or a ready `bearerToken`. */
  auth?: { username?: string; password?: string; bearerToken?: string };
}

/** Runtime configuration (spec 002 `JsOptions`). */
export interface JsOptions {
  /** Base directory for runtime data; default `~/.sandbox`. */
  homeDir?: string;
  /** Registry transport, TLS, search and auth configuration; default `[]`. */
  imageRegistries?: JsImageRegistry[];
  /**
   * Bounds on what images and box archives may cost this host (bytes and entry counts; `ImageLimits` in
   * `images/limits.ts`: `maxLayerBytes`, `maxLayerEntries`, `maxImageBytes`, `maxImageEntries`,
   * `maxStoreBytes`, `maxImportBytes`); each given one replaces its default. Exceeding one fails the pull
   * or import with code `image` naming it. Local runtimes only.
   */
  imageLimits?: Partial<ImageLimits>;
  /**
   * Base URL of a REST runtime (`sandbox serve`), e.g. `http://127.0.0.1:8100`: the runtime is then
   * remote. Env fallback `SANDBOX_URL` (used only when `homeDir` is not given).
   */
  url?: string;
  /** API key of the REST runtime (bearer); env fallback `SANDBOX_API_KEY`. */
  apiKey?: string;
  /** Access token (JWT) of the auth service for the REST runtime; env fallback `SANDBOX_ACCESS_TOKEN`. */
  accessToken?: string;
  /**
   * Default isolation tier of this runtime's boxes (see `JsBoxOptions.isolation`); default
   * `container`. Named as Kubernetes' RuntimeClass and E2B/Modal speak of it: how a box is isolated.
   */
  isolation?: IsolationTier;
}

/**
 * How a box is isolated from the host. `container`: an OCI container (crun/runc) — namespaces,
 * cgroups, capabilities, seccomp; box processes call the host kernel. `gvisor`: the same container
 * run by gVisor's runsc — a user-space kernel (the Sentry) answers the box's system calls.
 */
export type IsolationTier = 'container' | 'gvisor';

/** The isolation of a box as `JsBoxInfo.isolation` reports it. */
export interface JsIsolationInfo {
  tier: IsolationTier;
  /** gVisor platform (`ptrace` or `kvm`, chosen per host: see ENGINE.md); only for `gvisor`. */
  platform?: 'ptrace' | 'kvm';
}

/** An environment variable of a box (spec 002 `JsEnvVar`). */
export interface JsEnvVar {
  key: string;
  value: string;
}

/**
 * A mount (spec 002 `JsVolumeSpec`): exactly one of `managedVolume` (volume id or name) and `hostPath`.
 * `readOnly: true` is rejected on a managed volume.
 */
export interface JsVolumeSpec {
  managedVolume?: string;
  hostPath?: string;
  guestPath: string;
  readOnly?: boolean;
}

/** Network configuration (spec 002 `NetworkSpec`). `allowNet` only with mode `enabled`; empty means full access. */
export interface NetworkSpec {
  mode: 'enabled' | 'disabled';
  allowNet?: string[];
}

/** Local TCP port mapping (spec 002 `JsPortSpec`). `hostPort` absent: auto-assigned. UDP is rejected. */
export interface JsPortSpec {
  hostPort?: number;
  guestPort: number;
  /** `tcp` (default); `udp` is rejected at creation. */
  protocol?: string;
  /** Default `0.0.0.0`. */
  hostIp?: string;
}

/** Outbound HTTP(S) secret substitution rule (spec 002 `Secret`). */
export interface Secret {
  name: string;
  /** The secret itself; never visible inside the box. */
  value: string;
  /** Hosts the substitution applies to; all hosts when absent. */
  hosts?: string[];
  /** Default `<SECRET:${name}>`. */
  placeholder?: string;
}

/** Expert-only options (spec 002 `AdvancedBoxOptions`). */
export interface AdvancedBoxOptions {
  /** Linux capability names (`CAP_NET_RAW` or `NET_RAW`) added to or dropped from the default set. */
  capabilities?: { add?: string[]; drop?: string[] };
  /**
   * Ordinary (non-root) accounts only: when no cgroup subtree is delegated to the caller
   * (`sandbox setup <user>`), run the box without its cpu, memory and pids limits instead of failing;
   * `JsBoxInfo.limitsEnforced` is then `false`. Default false; ignored as root and when limits can be enforced.
   */
  allowUnlimited?: boolean;
}

/** Options of `JsRuntime.create` (spec 002 `JsBoxOptions`); defaults as the spec's table. */
export interface JsBoxOptions extends JsLifetimeOptions {
  /** OCI image reference. One of `image` and `rootfsPath` is required. */
  image?: string;
  /** Prepared rootfs directory or OCI image layout directory. */
  rootfsPath?: string;
  /** CPU cores; default 1. */
  cpus?: number;
  /** Memory in MiB; default 512. */
  memoryMib?: number;
  /** Size limit of the box's writable layer, GB; none by default. */
  diskSizeGb?: number;
  /** Working directory in the box; default `/root`. */
  workingDir?: string;
  env?: JsEnvVar[];
  volumes?: JsVolumeSpec[];
  /** Default `{ mode: 'enabled' }`. */
  network?: NetworkSpec;
  ports?: JsPortSpec[];
  secrets?: Secret[];
  advanced?: AdvancedBoxOptions;
  /** Remove the box when it stops; default false. */
  autoRemove?: boolean;
  /** The box survives the exit of the parent process; default false. */
  detach?: boolean;
  /**
   * Isolation tier of this box: `container` or `gvisor` (needs runsc on the host); default the
   * runtime's `JsOptions.isolation`, else `container`. A `gvisor` box refuses `tty` commands.
   */
  isolation?: IsolationTier;
  /**
   * Replaces the image's ENTRYPOINT (BoxLite `entrypoint`). With `entrypoint` or `cmd` set, the box runs
   * a main process, `entrypoint + cmd`, started after the box is up (and again on every `start()`);
   * without either, the box runs no main process (only the commands given to `exec`).
   */
  entrypoint?: string[];
  /**
   * Replaces the image's CMD (BoxLite `cmd`): the main process is the image's ENTRYPOINT (or
   * `entrypoint`) followed by these arguments. Setting `entrypoint` alone drops the image's CMD (Docker's rule).
   */
  cmd?: string[];
  /**
   * User of the main process and the default user of `exec` (BoxLite `user`): `name|uid[:group|gid]`,
   * names looked up in the box's /etc/passwd and /etc/group; default the image's USER, else root.
   */
  user?: string;
  /** Periodic health check of the box (BoxLite `healthCheck`; Docker HEALTHCHECK semantics). */
  healthCheck?: JsHealthCheckOptions;
  /**
   * Labels of the box, kept with it and shown in `JsBoxInfo.labels`, `GET /v1/boxes` (filter
   * `?label=key=value`) and `sandbox ps`: at most 64, keys matching `^[a-z0-9][a-z0-9._/-]{0,62}$`,
   * values strings of at most 256 characters. A box made through the E2B API carries `e2b.template` and
   * `e2b.metadata.<key>`. A box handed out by a warm pool gets the labels of the create, not the pool's.
   * Invalid labels are a BoxError `invalid_option` naming `labels`.
   */
  labels?: Record<string, string>;
}

/**
 * Health check of a box (BoxLite `JsHealthCheckOptions`; Docker HEALTHCHECK semantics). Times in seconds.
 * A check is one run of `command` in the box; it fails on a non-zero exit or when it outlasts `timeout`.
 */
export interface JsHealthCheckOptions {
  /** Seconds between the start of one check and the next; default 30. */
  interval?: number;
  /** Seconds a check may take before it is killed and counted as failed; default 30. */
  timeout?: number;
  /** Consecutive failures (after the start period) that make the box `unhealthy`; default 3. */
  retries?: number;
  /** Seconds after each start during which failures do not count; default 0. */
  startPeriod?: number;
  /**
   * The check, exec form (`['curl', '-f', 'http://localhost/']`), or Docker's `['CMD', …]` /
   * `['CMD-SHELL', 'script']`. Default: the image's HEALTHCHECK when it has one, else a probe that the box
   * still runs commands (BoxLite checks its guest agent the same way).
   */
  command?: string[];
}

/** Health of a box (BoxLite `JsHealthState`): `none` when no health check is configured. */
export type JsHealthState = 'none' | 'starting' | 'healthy' | 'unhealthy';

/** Health status of a box (BoxLite `JsHealthStatus`). */
export interface JsHealthStatus {
  state: JsHealthState;
  /** Consecutive failed checks. */
  failures: number;
  /** RFC 3339 time of the last completed check; absent before the first. */
  lastCheck?: string;
}

/** What happens when a box's timeout passes (`JsLifetimeOptions.onTimeout`). */
export type TimeoutAction = 'stop' | 'pause' | 'remove';

/**
 * Lifetimes of a box: BoxLite's `autoPause`, `autoDelete` and `autoResume`, E2B's `timeoutMs`.
 * Stored with the box and enforced by the reaper process of the `homeDir`, so they hold for detached
 * boxes with no SDK process alive and across restarts of the runtime.
 */
export interface JsLifetimeOptions {
  /** Pause the box once it has been idle (no command started, running or ending) this many seconds (> 0). */
  autoPause?: number;
  /** Remove the box this many seconds after it stopped (≥ 0; 0: at the reaper's next pass). */
  autoDelete?: number;
  /** A command on a paused box resumes it first instead of being refused with `conflict`. */
  autoResume?: boolean;
  /** The box's timeout: `onTimeout` happens this many ms after creation (or after `box.setTimeout`). */
  timeoutMs?: number;
  /** What the timeout does: `stop` (default), `pause` or `remove`. */
  onTimeout?: TimeoutAction;
}

/** State of a box (spec 002 `JsBoxStateInfo`). */
export interface JsBoxStateInfo {
  /** One of `configured`, `running`, `stopped`, `failed`. */
  status: string;
  running: boolean;
  pid?: number;
}

/** Outbound or inbound network facts (spec 002 `JsOutboundNetworkInfo` / `JsInboundNetworkInfo`). */
export interface JsOutboundNetworkInfo {
  mode: string;
  allowNet: string[];
}
export type JsInboundNetworkInfo = JsOutboundNetworkInfo;

/** A concrete active local port binding (spec 002 `JsPublishedPort`). */
export interface JsPublishedPort {
  guestPort: number;
  hostIp: string;
  hostPort: number;
  protocol: string;
}

/** Network facts of a box (spec 002 `JsNetworkInfo`). */
export interface JsNetworkInfo {
  outbound: JsOutboundNetworkInfo;
  inbound: JsInboundNetworkInfo;
  /** null: this handle does not know the publications; []: none active. */
  publishedPorts: JsPublishedPort[] | null;
  /** @deprecated mirrors `outbound.mode`. */
  mode: string;
  /** @deprecated mirrors `outbound.allowNet`. */
  allowNet: string[];
}

/** Box metadata (spec 002 `JsBoxInfo`). */
export interface JsBoxInfo {
  /** ULID. */
  id: string;
  name?: string;
  state: JsBoxStateInfo;
  /** ISO 8601 creation time. */
  createdAt: string;
  /** RFC 3339 time the box most recently entered Running. */
  startedAt?: string;
  /** Image reference or rootfs path. */
  image: string;
  cpus: number;
  memoryMib: number;
  /** null: network information unavailable. */
  network: JsNetworkInfo | null;
  /** Isolation tier (and gVisor platform) the box runs under; absent when the server does not say. */
  isolation?: JsIsolationInfo;
  /** Health of the box (BoxLite `healthStatus`); state `none` without a `healthCheck`. */
  healthStatus?: JsHealthStatus;
  /** `false` when the box runs without its cpu, memory and pids limits (`advanced.allowUnlimited`); absent otherwise. */
  limitsEnforced?: false;
  /** The box's labels (`JsBoxOptions.labels`); absent when it has none. */
  labels?: Record<string, string>;
}

/** Result of `JsExecution.wait` (spec 002 `JsExecResult`). */
export interface JsExecResult {
  /** 0 is success; 128 + signal number when the command was killed by a signal (spec 002). */
  exitCode: number;
  /** Why the command did not finish normally (BoxLite `errorMessage`): e.g. its `timeoutSecs` passed. */
  errorMessage?: string;
}

/** Result of the wrapper boxes' `exec` (spec 002 `ExecResult`). */
export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** A screenshot (spec 002 `Screenshot`): base64 PNG and its size in pixels. */
export interface Screenshot {
  data: string;
  width: number;
  height: number;
  format: 'png';
}

/** Browser of a BrowserBox (spec 002 `BrowserType`). */
export type BrowserType = 'chromium' | 'firefox' | 'webkit';

/** Runtime counters (spec 002 `JsRuntimeMetrics`). */
export interface JsRuntimeMetrics {
  boxesCreatedTotal: number;
  /** Boxes that failed during creation. */
  boxesFailedTotal: number;
  numRunningBoxes: number;
  totalCommandsExecuted: number;
  totalExecErrors: number;
}

/**
 * Box counters, resources (bytes, percent; the fields of `EngineStats`, present while the box runs) and
 * creation stage timings in ms (spec 002 `JsBoxMetrics`).
 */
export interface JsBoxMetrics extends EngineStats {
  commandsExecutedTotal: number;
  execErrorsTotal: number;
  /** Bytes written to commands' stdin. */
  bytesSentTotal: number;
  /** Bytes read from commands' stdout and stderr. */
  bytesReceivedTotal: number;
  totalCreateDurationMs?: number;
  guestBootDurationMs?: number;
  stageFilesystemSetupMs?: number;
  stageImagePrepareMs?: number;
  stageGuestRootfsMs?: number;
  stageBoxConfigMs?: number;
  stageBoxSpawnMs?: number;
  stageContainerInitMs?: number;
}

/**
 * A byte connection through a box tunnel (spec 002 "Network tunnels": `connection.read`, `write`,
 * `close`). `read(maxBytes)` resolves with 1..maxBytes bytes (default 65536) as soon as any arrive, and
 * with an empty Buffer once the box side has closed; `write` resolves when the bytes are handed on.
 */
export interface JsTunnelConnection {
  read(maxBytes?: number): Promise<Buffer>;
  write(data: Buffer | Uint8Array | string): Promise<void>;
  close(): Promise<void>;
}

/** Where a forwarder listens on the host: TCP (`host` default `127.0.0.1`, `port` 0 = ephemeral) or a unix socket. */
export type TunnelListen = { type: 'tcp'; host?: string; port: number } | { type: 'unix'; path: string };

/**
 * A listener that opens a fresh tunnel to the box port for every client (spec 002 `TunnelForwarder`).
 * `localAddr()` is `host:port` (concrete port) or the unix socket path; `wait()` resolves when the
 * forwarder is closed; `close()` may be called any number of times.
 */
export interface TunnelForwarder {
  localAddr(): string;
  wait(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A prepared one-shot tunnel to a TCP port in the box (spec 002 `JsBoxTunnel`): consume it once with
 * `connect()` or `forward(listen)`. `uri()` is the public URL of a remote tunnel, null for local boxes.
 */
export interface JsBoxTunnel {
  uri(): string | null;
  connect(): Promise<JsTunnelConnection>;
  forward(listen: TunnelListen): Promise<TunnelForwarder>;
}

/** A signed preview URL of a box port, served by `sandbox serve`. */
export interface JsPreviewUrl {
  /** The URL (its token included): reaches the port over HTTP and WebSocket without an API key. */
  url: string;
  /** The token of the URL (`pv_…`). */
  token: string;
  /** Id of the preview (to revoke it: `DELETE /v1/boxes/{box}/previews/{id}`). */
  id: string;
  /** When it stops working, RFC 3339. */
  expiresAt: string;
}

/**
 * `box.network` (spec 002 `JsNetworkHandle`): `tunnel(port)` prepares a tunnel to a box TCP port
 * (1–65535); `previewUrl(port, { expiresIn })` asks a REST server for a signed preview URL of the port
 * (`expiresIn` ms, default 1 hour, at most 7 days; a local runtime throws BoxError `unsupported`);
 * `update({ allowNet })` replaces the box's outbound allowlist (`NetworkSpec.allowNet` rules; `[]` is
 * full outbound access) while it runs — at once for new connections, and established connections to a
 * destination no longer allowed are cut — and for its later starts; it resolves to the policy in force.
 * Throws BoxError `invalid_option` naming `allowNet` / `network.allowNet[i]`, `conflict` for a box whose
 * network is `disabled`, `unsupported` on a rootless runtime, `unavailable` when the host's network
 * helper does not answer.
 */
export interface JsNetworkHandle {
  tunnel(port: number): Promise<JsBoxTunnel>;
  previewUrl(port: number, options?: { expiresIn?: number }): Promise<JsPreviewUrl>;
  update(policy: JsNetworkPolicy): Promise<JsNetworkPolicy>;
}

/** The changeable network policy of a box (`box.network.update`): its outbound allowlist. */
export interface JsNetworkPolicy {
  allowNet: string[];
}

/**
 * A tenant's use of a `sandbox serve` node and its limits (`runtime.usage()`, `GET /v1/usage`): running
 * boxes, their vCPUs and memory (MiB), the disk of all its boxes (GiB), its snapshots (bytes), its
 * running commands; each limit null when unlimited.
 */
export interface JsTenantUsage {
  tenant: string;
  usage: {
    runningBoxes: number;
    vcpus: number;
    memoryMib: number;
    diskGb: number;
    snapshotBytes: number;
    /** Commands running now (the `running_executions` quota). */
    runningExecutions: number;
  };
  limits: Record<string, number | null>;
}
