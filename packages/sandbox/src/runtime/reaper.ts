/**
 * The lifetime reaper: one process per `homeDir` that enforces the stored box lifetimes
 * (`lifetimes.ts`) — pauses idle `autoPause` boxes, applies `onTimeout` when a box's timeout passes, and
 * removes `autoDelete` boxes once they have been stopped long enough.
 *
 * Who runs it: `ensureReaper(homeDir)` starts `flock -n <homeDir>/reaper.lock node reaper-main.ts
 * <homeDir>` as a detached process in its own session, so it survives the process that started it (an SDK
 * script, `sandbox serve`). The lock file decides: a second start while one reaper holds the lock exits at
 * once without running anything (`flock -n` gives up), and the kernel drops the lock when the reaper dies
 * however it dies. A running reaper writes its `pid:starttime` to `<homeDir>/reaper.pid`, which lets a
 * starter skip the spawn altogether. The reaper exits when no box needs it (`LifetimeStore.needsReaper`);
 * it removes `reaper.pid` first and then looks once more, so a lifetime stored meanwhile is never missed:
 * either the reaper sees it, or the starter sees no pid file and starts a new one.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LifetimeRow, LifetimeStore } from './lifetimes.ts';
import { ownerAlive, processIdentity } from './state.ts';

/** How often the reaper looks at the lifetimes table, ms. */
export const REAPER_TICK_MS = 200;

/** What the reaper needs from a local runtime over the `homeDir` (`LocalRuntime.reaperHost`). */
export interface ReaperHost {
  /** The lifetimes table. */
  readonly lifetimes: LifetimeStore;
  /** The box's status reconciled with the engine (`running`, `paused`, `stopped`, …); null when gone. */
  status(id: string): Promise<string | null>;
  /** True while a command started by any process runs in the box. */
  execsRunning(id: string): boolean;
  /** Pauses a running box (cgroup freezer). */
  pause(id: string): Promise<void>;
  /** Stops a box (removed afterwards when it has `autoRemove`). */
  stop(id: string): Promise<void>;
  /** Removes a box, running or not. */
  remove(id: string): Promise<void>;
}

/** Path of the reaper's pid file in a `homeDir`. */
function pidFile(homeDir: string): string {
  return join(homeDir, 'reaper.pid');
}

/** True when a reaper process runs for `homeDir` (its pid file names a live process). */
export function reaperRunning(homeDir: string): boolean {
  try {
    return ownerAlive(readFileSync(pidFile(homeDir), 'utf8').trim());
  } catch {
    return false;
  }
}

/**
 * Starts the reaper of `homeDir` unless one runs; returns at once (the reaper starts in the background,
 * detached, in its own session; its output goes to `<homeDir>/reaper.log`).
 */
export function ensureReaper(homeDir: string): void {
  if (reaperRunning(homeDir)) return;
  const self = fileURLToPath(import.meta.url);
  const main = join(self, '..', `reaper-main${self.slice(self.lastIndexOf('.'))}`);
  const child = spawn(
    'flock',
    ['-n', '-E', '0', join(homeDir, 'reaper.lock'), process.execPath, main, homeDir],
    { detached: true, stdio: 'ignore' },
  );
  child.on('error', () => {});
  child.unref();
}

/** True when an exec pid file of a live process names box `id` (`<id>.<node pid>.<n>.*` in `execDir`). */
export function execsRunningIn(execDir: string, id: string): boolean {
  let names: string[];
  try {
    names = readdirSync(execDir);
  } catch {
    return false;
  }
  for (const name of names) {
    if (!name.startsWith(`${id}.`)) continue;
    const owner = Number(name.split('.')[1]);
    if (owner > 0 && processIdentity(owner) !== null) return true;
  }
  return false;
}

/** One action of a reaper pass, as logged: box, what was done, and why. */
export interface ReaperAction {
  boxId: string;
  action: 'pause' | 'stop' | 'remove';
  reason: 'timeout' | 'autoPause' | 'autoDelete';
}

/** What one row calls for at `now`, or null. */
async function decide(host: ReaperHost, row: LifetimeRow, now: number): Promise<ReaperAction | null> {
  const status = await host.status(row.boxId);
  if (status === null) return null;
  const live = status === 'running' || status === 'paused';
  if (row.deadline !== null && now >= row.deadline) {
    host.lifetimes.clearDeadline(row.boxId);
    if (row.onTimeout === 'remove') return { boxId: row.boxId, action: 'remove', reason: 'timeout' };
    if (live && row.onTimeout === 'stop') return { boxId: row.boxId, action: 'stop', reason: 'timeout' };
    if (status === 'running' && row.onTimeout === 'pause') {
      return { boxId: row.boxId, action: 'pause', reason: 'timeout' };
    }
  }
  if (
    status === 'running' &&
    row.autoPause !== null &&
    now - row.lastActive >= row.autoPause * 1000 &&
    !host.execsRunning(row.boxId)
  ) {
    return { boxId: row.boxId, action: 'pause', reason: 'autoPause' };
  }
  if (status === 'stopped' && row.autoDelete !== null) {
    if (row.stoppedAt === null) host.lifetimes.markStopped(row.boxId, now);
    else if (now - row.stoppedAt >= row.autoDelete * 1000) {
      return { boxId: row.boxId, action: 'remove', reason: 'autoDelete' };
    }
  }
  return null;
}

/**
 * One pass over the lifetimes table at `now` (epoch ms): decides and carries out what each box calls for.
 * Failures of one box do not stop the pass; they are returned with the actions.
 */
export async function reapOnce(
  host: ReaperHost,
  now = Date.now(),
): Promise<{ done: ReaperAction[]; failed: { action: ReaperAction; error: string }[] }> {
  const done: ReaperAction[] = [];
  const failed: { action: ReaperAction; error: string }[] = [];
  for (const row of host.lifetimes.list()) {
    let action: ReaperAction | null = null;
    try {
      action = await decide(host, row, now);
      if (!action) continue;
      if (action.action === 'pause') await host.pause(action.boxId);
      else if (action.action === 'stop') await host.stop(action.boxId);
      else await host.remove(action.boxId);
      done.push(action);
    } catch (error) {
      if (action) failed.push({ action, error: (error as Error).message });
    }
  }
  return { done, failed };
}

/**
 * The reaper's loop (run by `reaper-main.ts` under the lock): a pass every {@link REAPER_TICK_MS} until no
 * box needs it (see the module comment for the hand-over with starters). `log` gets one line per action.
 */
export async function runReaper(
  homeDir: string,
  host: ReaperHost,
  log: (line: string) => void,
): Promise<void> {
  const me = processIdentity(process.pid) ?? `${process.pid}:0`;
  writeFileSync(pidFile(homeDir), me);
  for (;;) {
    const { done, failed } = await reapOnce(host);
    for (const a of done) log(`${new Date().toISOString()} ${a.action} ${a.boxId} (${a.reason})`);
    for (const f of failed) {
      log(`${new Date().toISOString()} ${f.action.action} ${f.action.boxId} failed: ${f.error}`);
    }
    if (!host.lifetimes.needsReaper()) {
      rmSync(pidFile(homeDir), { force: true });
      if (!host.lifetimes.needsReaper()) return;
      writeFileSync(pidFile(homeDir), me);
    }
    await new Promise((resolve) => setTimeout(resolve, REAPER_TICK_MS));
  }
}
