/**
 * Steps of a box's lifecycle the root engines (crun/runc in engine.ts, gVisor in gvisor.ts) take
 * alike: the network hook once the box runs (the box stopped when it fails), the stage timings
 * `start` reports, and the records `list` reports for crash garbage collection.
 */
import { BoxError, codeOf } from '../errors.ts';
import { isBoxId } from './box-files.ts';
import type { EngineNetworkContext } from './engine-options.ts';
import { mountsUnder } from './host-system.ts';
import type { EngineBoxRecord, EngineStarted, EngineState } from './types.ts';

/**
 * Runs the engine's `networkSetup` hook (when it has one) for the box that now runs; when the hook
 * rejects, the box is stopped (`stop`, errors ignored).
 * @throws BoxError `box <id>: network setup failed: <reason>` (the hook's error as its cause).
 */
export async function setUpNetwork(
  hook: ((ctx: EngineNetworkContext) => Promise<void>) | undefined,
  ctx: EngineNetworkContext,
  stop: () => Promise<void>,
): Promise<void> {
  if (!hook) return;
  try {
    await hook(ctx);
  } catch (err) {
    await stop().catch(() => {});
    throw new BoxError(`box ${ctx.id}: network setup failed: ${(err as Error).message}`, {
      cause: err,
      code: codeOf(err),
    });
  }
}

/** `performance.now()` readings (ms) of a start, from which `startTimings` derives its stages. */
export interface StartClock {
  /** How long writing the box config took, ms. */
  configMs: number;
  /** When the file system setup began. */
  fs0: number;
  /** When the supervisor reported the root mounted. */
  mounted: number;
  /** When the supervisor reported the runtime started. */
  started: number;
  /** When the box was up (network included). */
  end: number;
}

/** The four stage timings of `EngineStarted`, each rounded to 0.01 ms. */
export function startTimings(c: StartClock): EngineStarted['timings'] {
  const round = (ms: number) => Math.round(ms * 100) / 100;
  return {
    stageBoxConfigMs: round(c.configMs),
    stageFilesystemSetupMs: round(c.mounted - c.fs0),
    stageBoxSpawnMs: round(c.started - c.mounted),
    stageContainerInitMs: round(c.end - c.started),
  };
}

/**
 * The `Engine.list` record of each box in `ids` that is a well-formed box id (`isBoxId`): its box directory
 * (from `boxDir`, undefined when the engine has no record), its state (`stopped` rather than
 * `unknown` when the engine has a record) and the host mounts under its box directory.
 */
export async function boxRecords(
  ids: Iterable<string>,
  boxDir: (id: string) => string | undefined,
  state: (id: string) => Promise<EngineState>,
): Promise<EngineBoxRecord[]> {
  const out: EngineBoxRecord[] = [];
  for (const id of ids) {
    if (!isBoxId(id)) continue;
    const dir = boxDir(id);
    const st = await state(id);
    out.push({
      id,
      boxDir: dir,
      status: st.status === 'unknown' && dir !== undefined ? 'stopped' : st.status,
      pid: st.pid,
      mounts: dir !== undefined ? mountsUnder(dir) : [],
    });
  }
  return out;
}
