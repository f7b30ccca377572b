/**
 * Options of the container engine (`createEngine`, engine.ts; the rootless engine takes part of
 * them) and of the gVisor engine (`createGVisorEngine`, gvisor.ts), the context their network hooks
 * are called with, and the per-box facts the container engine keeps in `engine.json`.
 */
import type { GVisorNetnsContext } from './gvisor-netns.ts';
import type { GVisorPlatform } from './gvisor-platform.ts';
import type { IdMapping } from './idmap.ts';
import type { OciRuntimeName } from './oci-runtime.ts';
import type { EngineBoxSpec } from './types.ts';

/** Context handed to the network hooks: the box and the host pid of its init. */
export interface EngineNetworkContext {
  id: string;
  /** Host pid of the box init; its network namespace is `/proc/<pid>/ns/net`. */
  pid: number;
  boxDir: string;
  network: EngineBoxSpec['network'];
  /**
   * The box's link to its network, made by the runtime's `createRuntime` hook from the script
   * `networkLinkScript` gave (container tier, crun): resolves once made, rejects with the script's
   * error. Absent when the engine ran no such script.
   */
  linked?: Promise<void>;
}

/** What `networkLinkScript` gives the engine for a box (see `CreateEngineOptions.networkLinkScript`). */
export interface EngineLinkScript {
  /** Resolves once what the script needs on the host exists (the box runs only then); rejects on failure. */
  ready: Promise<void>;
  /**
   * POSIX `sh` script run as host root in the host's namespaces with the box's network namespace file
   * (`/proc/<pid>/ns/net`) as `$1` (sourced by the hook's shell: it enters the box's namespace itself,
   * e.g. `nsenter --net="$1" …`); exits non-zero on failure, its stderr the error.
   */
  script: string;
}

/** Options of `createEngine`. */
export interface CreateEngineOptions {
  /**
   * Directory of the engine's own state: runtime state (`<stateRoot>/<runtime>`), the box index
   * (`<stateRoot>/boxes/<id>` → boxDir), helper scripts and exec pid files. Default
   * `/run/seed-sandbox` (tmpfs: it vanishes with the mounts and containers on reboot). No spaces.
   */
  stateRoot?: string;
  /** OCI runtime; default `crun` when installed (faster), else `runc`. Env `SEED_SANDBOX_RUNTIME`. */
  runtime?: OciRuntimeName;
  /** Host path of the static init bound at `/.sandbox/init`; default `/usr/bin/catatonit`. */
  initPath?: string;
  /**
   * Called after the box init runs and before `start` resolves, with its pid (network namespace
   * setup, e.g. slirp4netns). A rejection fails the start and the box is torn down.
   */
  networkSetup?: (ctx: EngineNetworkContext) => Promise<void>;
  /**
   * Asked before a box starts: a script that links the box's network namespace, run in the background
   * by the runtime's `createRuntime` hook as soon as the namespace exists (crun only), so the link is
   * made while the runtime sets the box up; `networkSetup` then gets it as `ctx.linked`. Undefined:
   * no script (the network hook links the box itself).
   */
  networkLinkScript?: (id: string) => EngineLinkScript | undefined;
  /** Called when a box stops (before its root is unmounted), for the network's host side. */
  networkTeardown?: (id: string) => Promise<void>;
  /**
   * Namespace files (nsfs bind mounts) of box `id`'s network host side, e.g. its gateway namespace
   * `/run/netns/sbx-<id>`. The supervisor of a non-detached box unmounts and removes them after the
   * box when its creator dies, so nothing of the box's network outlives that process.
   */
  networkFiles?: (id: string) => string[];
  /**
   * Run each new box in its own user namespace, box ids `0..65535` mapped to the sandbox's host range
   * (`seed-sandbox` in `/etc/subuid`/`/etc/subgid`, added when missing; idmap.ts). Default true;
   * env `SEED_SANDBOX_USERNS=0` turns it off. A box keeps the setting it was first started with.
   */
  userNamespace?: boolean;
}

/** Persisted per-box facts another process needs to drive the box (`<boxDir>/bundle/engine.json`). */
export interface OciBoxMeta {
  id: string;
  /** The box's `KEY=value` environment. */
  env: string[];
  user?: string;
  workingDir: string;
  cpus: number;
  diskSizeGb?: number;
  /** Capability names of the box (bounding set); commands as uid 0 get them effective, others none. */
  capabilities?: string[];
  /**
   * The box's user namespace mapping, `null` for a box without one; absent in boxes first started
   * before user namespaces (their writable layer is owned by host ids as is: they keep running
   * without one).
   */
  idMap?: IdMapping | null;
}

/** Options of `createGVisorEngine`. */
export interface CreateGVisorEngineOptions {
  /** The engine state directory (shared with the container tier); default `/run/seed-sandbox`. */
  stateRoot?: string;
  /** Host path of the static init bound at `/.sandbox/init`; default `/usr/bin/catatonit`. */
  initPath?: string;
  /** gVisor platform; default: probed (gvisor-platform.ts), env `SEED_SANDBOX_GVISOR_PLATFORM`. */
  platform?: GVisorPlatform;
  /**
   * Runs before runsc starts the box, with the box's network namespace file: makes the interfaces
   * netstack will take over (runsc copies them at start only). Not called for a `disabled` network.
   */
  networkPrepare?: (ctx: GVisorNetnsContext) => Promise<void>;
  /** As `CreateEngineOptions.networkSetup`: runs once the sandbox runs, with its host pid. */
  networkSetup?: (ctx: EngineNetworkContext) => Promise<void>;
  /** As `CreateEngineOptions.networkTeardown`. */
  networkTeardown?: (id: string) => Promise<void>;
  /** As `CreateEngineOptions.networkFiles`; the box's own namespace file (`bundle/netns`) is added. */
  networkFiles?: (id: string) => string[];
}
