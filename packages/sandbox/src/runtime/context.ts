/**
 * What a local box backend (`LocalBox`, `box-local.ts`) needs from its runtime (internal; keeps the box
 * free of the runtime class).
 */
import type { Engine } from '../engine/types.ts';
import type { ExecutionReport } from './execution.ts';
import type { TimeoutAction } from './lifetimes.ts';
import type { SnapshotService } from './snapshots.ts';
import type { BoxRecord } from './state.ts';

/** Runtime services shared by the local boxes of one `LocalRuntime`. */
export interface RuntimeContext {
  /** The isolation engine (created on first use). */
  engine(): Promise<Engine>;
  /** The box's record reconciled with the engine's live state; null when the box no longer exists. */
  refresh(id: string): Promise<BoxRecord | null>;
  /** Counts a started command (box and runtime counters). */
  countCommand(id: string): void;
  /** Counts a finished command: bytes in and out, and an exec error when `exitCode` is not 0. */
  countExecEnd(id: string, report: ExecutionReport): void;
  /** Writes counters not yet in the state database (before reading them back); optional. */
  flushCounters?(): void;
  /** Stops a box, then removes it when it was created with `autoRemove`. */
  stopBox(id: string, graceMs?: number): Promise<void>;
  /** Starts a stopped box again with its writable layer and volumes (no-op when running). */
  startBox(id: string): Promise<void>;
  /** Pause, resume and lifetimes of boxes (`lifetimes.ts`); absent: `unsupported`. */
  lifecycle?: BoxLifecycle;
  /** Snapshots and export of boxes (`snapshot-local.ts`); absent: `unsupported`. */
  snapshots?: SnapshotService;
  /**
   * Replaces the box's `allowNet` (`box.network.update`): in its running network and in its record;
   * resolves to the rules in force. Absent: `unsupported`.
   */
  updateNetwork?(id: string, allowNet: string[]): Promise<string[]>;
}

/** Pause, resume and lifetime services of a runtime for its box handles. */
export interface BoxLifecycle {
  /** Freezes a running box (cgroup freezer); no-op when paused. @throws BoxError `conflict` when not running. */
  pause(id: string): Promise<void>;
  /** Thaws a paused box; no-op when running. @throws BoxError `conflict` when stopped. */
  resume(id: string): Promise<void>;
  /** Resumes the box when it is paused and was created with `autoResume`; true when it did. */
  autoResume(id: string): Promise<boolean>;
  /** Sets the box's timeout to `ms` from now, with `action` at expiry (default: the box's `onTimeout`). */
  setTimeout(id: string, ms: number, action?: TimeoutAction): Promise<void>;
  /** Restarts the box's idle clock (`autoPause`): a command started or ended. */
  touch(id: string): void;
}
