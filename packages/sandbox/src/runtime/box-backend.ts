/**
 * The one box interface under `JsBox` (spec 002 "Box handle (`JsBox`)"): what a box does, whoever runs
 * it. `LocalBox` (`box-local.ts`: a box of this host, read from the state database and driven through the
 * engine) and the REST client's box (`rest/box-client.ts`: every call goes to a `sandbox serve` server)
 * implement it; `JsBox` (`box.ts`) is the facade that checks arguments once and forwards.
 *
 * Arguments reaching a backend are already checked by the facade: exec requests (`validateExecRequest`),
 * the environment as `KEY=value` entries (`envEntries`), timeouts (`checkTimeoutMs`) and actions
 * (`checkTimeoutAction`), snapshot names (`BoxSnapshots`) and file paths (`BoxFiles`).
 */
import type { CodeInterpreter } from '../interpreter/types.ts';
import type { JsBoxInfo, JsBoxMetrics, JsNetworkHandle, TimeoutAction } from '../types.ts';
import type { JsExecution } from './execution.ts';
import type { FilesBackend } from './files/types.ts';
import type { SnapshotOps } from './snapshots.ts';

/** Environment of one command: `{ KEY: value }`, `[key, value]` pairs or `{ key, value }` entries. */
export type ExecEnv = Record<string, string> | [string, string][] | { key: string; value: string }[];

/** Per-command options beyond the spec's `exec(cmd, args?, env?, tty?)`, used by the wrapper boxes. */
export interface ExecOptions {
  /** Working directory of the command (absolute); default the box's `workingDir`. */
  cwd?: string;
  /** User of the command: `uid[:gid]` or a name known in the image; default the image's user, else root. */
  user?: string;
  /** Allocate a pseudo-terminal. */
  tty?: boolean;
  /** Initial size of that terminal, in character cells (with `tty`); default 80×24. */
  ttySize?: { cols: number; rows: number };
}

/** What a box flavour implements; every member serves the `JsBox` member of the same name. */
export interface BoxBackend {
  /** Box id (ULID). */
  readonly id: string;
  /** Box name, or null when the box has none. */
  readonly name: string | null;
  /** Metadata read fresh (spec 002 `JsBoxInfo`). @throws BoxError `not_found` when the box was removed. */
  info(): Promise<JsBoxInfo>;
  /**
   * Starts a command. `env` holds `KEY=value` entries.
   * @throws BoxError `conflict` when the box is not running (a paused box is resumed first when it was
   *   created with `autoResume`), `exec` when the command cannot be started.
   */
  exec(cmd: string, args: string[], env: string[], options: ExecOptions): Promise<JsExecution>;
  /** Starts a stopped box again with its writable layer and volumes; no-op when running. */
  start(): Promise<void>;
  /**
   * Stops the box (then removes it when created with `autoRemove`); no-op when stopped. `graceMs`: time
   * its commands get after SIGTERM before SIGKILL (default the runtime's).
   */
  stop(graceMs?: number): Promise<void>;
  /** Freezes the box (cgroup freezer). @throws BoxError `conflict` when not running. */
  pause(): Promise<void>;
  /** Thaws a paused box. @throws BoxError `conflict` when stopped. */
  resume(): Promise<void>;
  /** Sets the box's timeout to `ms` from now with `action` at expiry (default the box's `onTimeout`). */
  setTimeout(ms: number, action?: TimeoutAction): Promise<void>;
  /** Counters, resource usage and stage timings (spec 002 `JsBoxMetrics`). */
  metrics(): Promise<JsBoxMetrics>;
  /** The file operations of the box (wrapped by `BoxFiles`, which checks every argument). */
  files(): FilesBackend;
  /** The snapshot operations of the box (wrapped by `BoxSnapshots`, which checks every name). */
  snapshots(): SnapshotOps;
  /** Writes the box as a portable archive to the local file `path`. */
  export(path: string): Promise<void>;
  /** Tunnels to TCP ports of the box (spec 002 `JsNetworkHandle`). */
  network(): JsNetworkHandle;
  /**
   * The box's code contexts when this flavour serves them itself (REST: the server's code routes); absent,
   * `JsBox.interpreter` drives the box's Jupyter Server from this process (`src/interpreter/`).
   */
  interpreter?(): CodeInterpreter;
}
