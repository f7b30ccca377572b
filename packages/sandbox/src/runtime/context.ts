/** What a box handle needs from its runtime (internal; keeps `JsBox` free of the runtime class). */
import type { Engine } from '../engine/types.ts';
import type { ExecutionReport } from './execution.ts';
import type { BoxRecord } from './state.ts';

/** Runtime services shared by the box handles of one `JsRuntime`. */
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
}
