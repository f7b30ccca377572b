/**
 * The lifecycle of the boxes of a local runtime: readiness and crash recovery, reconciliation of records
 * with the engine, and stop, start, restart, pause, resume and teardown of one box.
 *
 * Crash safety: a box record is written (status `creating`, owned by its creating process) before anything
 * is set up and removed only after everything is torn down. When a runtime gets ready it removes every box
 * whose creating process is gone, every box directory without a record and every engine container without
 * one, and marks boxes whose init process died as stopped (removing them when created with `autoRemove`).
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { freezeBox, freezerState, thawBox } from '../engine/freezer.ts';
import type { Engine } from '../engine/types.ts';
import { BoxError, conflict, notFound } from '../errors.ts';
import type { BoxLifecycle } from './context.ts';
import { launchBox } from './local-launch.ts';
import type { LocalParts } from './local-parts.ts';
import type { NormalizedBoxOptions } from './options.ts';
import { ensureReaper, execsRunningIn, type ReaperHost } from './reaper.ts';
import { type BoxRecord, ownerAlive } from './state.ts';

/** The conflict of restarting a box whose secret values only the runtime that created it holds. */
function secretsNotHeld(record: BoxRecord, remedy: string): BoxError {
  return conflict(
    `box ${record.name ?? record.id} has secrets whose values are only held by the runtime that created it; ${remedy}`,
  );
}

/** Lifecycle operations on the boxes of one local runtime, by box id. */
export class LocalLifecycle {
  readonly #parts: LocalParts;
  #ready: Promise<void> | null = null;

  /** @param parts the runtime's shared parts. */
  constructor(parts: LocalParts) {
    this.#parts = parts;
  }

  /**
   * Resolves once the engine is ready and crash leftovers are cleaned (once per runtime instance; a
   * failure is forgotten, so the next call tries again). Lifetimes stored by earlier runs get the reaper.
   */
  whenReady(): Promise<void> {
    this.#ready ??= (async () => {
      await this.#parts.engines.engine();
      await this.#recover();
      if (this.#parts.lifetimes.needsReaper()) ensureReaper(this.#parts.homeDir);
    })();
    this.#ready.catch(() => {
      this.#ready = null;
    });
    return this.#ready;
  }

  /** The record of box `id` reconciled with the engine (see `reconcile`); null when the box is gone. */
  async refresh(id: string): Promise<BoxRecord | null> {
    await this.whenReady();
    const record = this.#parts.db.getBox(id);
    return record ? this.reconcile(record) : null;
  }

  /** Removes what crashed processes left behind (see the module comment). */
  async #recover(): Promise<void> {
    const { db, engines, poolTable } = this.#parts;
    const records = db.listBoxes();
    const known = new Set(records.map((r) => r.id));
    await Promise.all(records.map((record) => this.reconcile(record)));
    let dirs: string[] = [];
    try {
      dirs = readdirSync(join(this.#parts.homeDir, 'boxes'));
    } catch {}
    const engine = await engines.engine();
    for (const dir of dirs) {
      // A record is inserted before its directory is made and deleted after it is removed, so a directory
      // without a record is always a leftover.
      if (known.has(dir) || db.getBox(dir)) continue;
      await engine.remove(dir, engines.boxDir(dir)).catch(() => {});
      rmSync(engines.boxDir(dir), { recursive: true, force: true });
    }
    // Pooled boxes of a process that is gone: nobody can hand them out any more.
    const pooled = poolTable.ids();
    for (const record of records) {
      if (pooled.has(record.id) && !ownerAlive(record.owner)) await this.teardown(record.id).catch(() => {});
    }
    // Containers the engine knows (its state lives in this homeDir) but no record names: only their
    // state is read (one runtime call each), not that of every recorded box.
    const lister = engine as Engine & {
      list?: (include?: (id: string) => boolean) => Promise<{ id: string; boxDir?: string }[]>;
    };
    const unrecorded = (id: string) => !db.getBox(id);
    for (const box of (await lister.list?.(unrecorded).catch(() => [])) ?? []) {
      if (db.getBox(box.id)) continue;
      await engine.remove(box.id, box.boxDir ?? engines.boxDir(box.id)).catch(() => {});
    }
  }

  /**
   * Brings a record in line with reality: a `creating` box of a dead process is torn down; a `running` box
   * whose init process is gone is marked stopped (and removed when `autoRemove`); a running box whose
   * cgroup is frozen is reported `paused`. Returns the current record, or null when the box is gone.
   */
  async reconcile(record: BoxRecord): Promise<BoxRecord | null> {
    const { db, engines, lifetimes } = this.#parts;
    if (record.status === 'creating') {
      if (ownerAlive(record.owner)) return record;
      await this.teardown(record.id);
      return null;
    }
    if (record.status === 'running' && !(record.init && ownerAlive(record.init))) {
      const engine = await engines.engine();
      const state = await engine.state(record.id).catch(() => ({ status: 'unknown' as const }));
      if (state.status === 'running') return record;
      await engine.stop(record.id, 0).catch(() => {});
      // The engine skips the network hook when the container is already gone (parent-death stop).
      await engines.networking().teardown(record.id);
      db.setStatus(record.id, 'stopped');
      lifetimes.markStopped(record.id);
      if (record.options.autoRemove) {
        await this.teardown(record.id);
        return null;
      }
      return { ...record, status: 'stopped', pid: null };
    }
    if (record.status === 'stopped' && record.options.autoRemove) {
      // Stopped but not yet removed (the stopping process died in between).
      await this.teardown(record.id);
      return null;
    }
    if (record.status === 'running' && record.pid) {
      // Paused is the cgroup's state (engine/freezer.ts), read back on every look, never stored.
      let frozen = false;
      try {
        frozen = freezerState(record.id, record.pid) === 'frozen';
      } catch {}
      if (frozen) return { ...record, status: 'paused' };
    }
    return record;
  }

  /**
   * Pauses a running box (`JsBox.pause`): freezes its cgroup. No-op when paused.
   * @throws BoxError `not_found`, `conflict` (not running), `unsupported` (no freezable cgroup).
   */
  async pause(id: string): Promise<void> {
    const pid = await this.#freezerTarget(id, 'running');
    if (pid !== null) await freezeBox(id, pid);
  }

  /**
   * Resumes a paused box (`JsBox.resume`): thaws its cgroup and restarts its idle clock. No-op when running.
   * @throws BoxError `not_found`, `conflict` (stopped or failed).
   */
  async resume(id: string): Promise<void> {
    const pid = await this.#freezerTarget(id, 'paused');
    if (pid === null) return;
    thawBox(id, pid);
    this.#parts.lifetimes.touch(id);
  }

  /**
   * The init pid of box `id` when it is `from` (`running` to be paused, `paused` to be resumed); null when
   * it already is in the other state.
   * @throws BoxError `not_found` when the box is gone, `conflict` when it is in neither state.
   */
  async #freezerTarget(id: string, from: 'running' | 'paused'): Promise<number | null> {
    const record = await this.refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === (from === 'running' ? 'paused' : 'running')) return null;
    if (record.status !== from || !record.pid) {
      const change = from === 'running' ? 'paused' : 'resumed';
      throw conflict(`box ${record.name ?? id} is ${record.status}; only a ${from} box can be ${change}`);
    }
    return record.pid;
  }

  /**
   * Runs `prepare` on the running or paused box `id` (its disk mounted), then stops it at once and starts
   * it again with its options (snapshot restore); a stopped box only gets `prepare`.
   * @throws BoxError `not_found`, `conflict` (secrets whose values this runtime does not hold), before
   *   `prepare` runs.
   */
  async restart(id: string, prepare: () => Promise<void>): Promise<void> {
    const record = await this.refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status !== 'running' && record.status !== 'paused') return prepare();
    if (record.options.secrets.length > 0 && !this.#parts.secretValues.has(id)) {
      throw secretsNotHeld(record, 'it cannot be restarted here');
    }
    await prepare();
    this.#parts.health.unwatch(id);
    const engine = await this.#parts.engines.engine();
    this.#thawForStop(id);
    await engine.stop(id, 0);
    this.#parts.db.setStatus(id, 'stopped');
    await this.startBox(id);
  }

  /** Thaws a box that may be paused before it is stopped (a frozen process does not die of SIGKILL). */
  #thawForStop(id: string): void {
    const pid = this.#parts.db.getBox(id)?.pid;
    if (!pid) return;
    try {
      thawBox(id, pid);
    } catch {}
  }

  /** Deletes everything of a box: engine state, network, box directory, then (last) its record. */
  async teardown(id: string): Promise<void> {
    const { db, engines, health } = this.#parts;
    health.unwatch(id);
    const engine = await engines.engine();
    this.#thawForStop(id);
    await engine.remove(id, engines.boxDir(id)); // kills the box first when it still runs
    await engines.networking().teardown(id);
    rmSync(engines.boxDir(id), { recursive: true, force: true });
    db.deleteBox(id);
  }

  /**
   * Stops a box (`graceMs` for its commands to exit after SIGTERM), then removes it when `autoRemove`.
   * @throws BoxError `not_found` when the box was removed.
   */
  async stopBox(id: string, graceMs?: number): Promise<void> {
    const { db, engines, health, lifetimes } = this.#parts;
    await this.whenReady();
    const record = db.getBox(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === 'running' || record.status === 'creating') {
      health.unwatch(id);
      const engine = await engines.engine();
      this.#thawForStop(id);
      await engine.stop(id, graceMs);
      db.setStatus(id, 'stopped');
      lifetimes.markStopped(id);
      if (lifetimes.get(id)?.autoDelete != null) ensureReaper(this.#parts.homeDir);
    }
    if (record.options.autoRemove) {
      await this.teardown(id);
      this.#parts.secretValues.delete(id);
    }
  }

  /**
   * Starts a stopped box again (BoxLite `box.start()`): same writable layer, volumes and options; a
   * running box is left as it is.
   * @throws BoxError `not_found` when it was removed, `conflict` when it is being created or failed, or
   *   when it has secrets whose values this runtime instance does not hold (they are never stored).
   */
  async startBox(id: string): Promise<void> {
    await this.whenReady();
    const record = await this.refresh(id);
    if (!record) throw notFound(`box ${id} no longer exists`);
    if (record.status === 'running') return;
    if (record.status !== 'stopped') {
      throw conflict(`box ${record.name ?? id} is ${record.status}; only a stopped box can be started`);
    }
    const secrets = record.options.secrets.length > 0 ? this.#parts.secretValues.get(id) : [];
    if (!secrets) throw secretsNotHeld(record, 'create a new box');
    const options = { ...record.options, secrets } as NormalizedBoxOptions;
    try {
      await launchBox(this.#parts, id, record.name, options, performance.now());
      this.#parts.lifetimes.markStarted(id);
    } catch (error) {
      await (await this.#parts.engines.engine()).stop(id, 0).catch(() => {});
      await this.#parts.engines.networking().teardown(id);
      this.#parts.db.setStatus(id, 'stopped');
      if (error instanceof BoxError) throw error;
      throw new BoxError(`cannot start box ${record.name ?? id}: ${(error as Error).message}`, {
        cause: error,
        code: 'internal',
      });
    }
  }

  /** The pause, resume and lifetime services box handles get (`RuntimeContext.lifecycle`). */
  boxLifecycle(): BoxLifecycle {
    const { homeDir, lifetimes } = this.#parts;
    return {
      pause: (id) => this.pause(id),
      resume: (id) => this.resume(id),
      autoResume: async (id) => {
        if (!lifetimes.get(id)?.autoResume) return false;
        await this.resume(id);
        return true;
      },
      setTimeout: async (id, ms, action) => {
        if (!(await this.refresh(id))) throw notFound(`box ${id} no longer exists`);
        lifetimes.setTimeout(id, ms, action);
        ensureReaper(homeDir);
      },
      touch: (id) => lifetimes.touch(id),
    };
  }

  /**
   * The services the lifetime reaper (`reaper-main.ts`) needs from this runtime: the lifetimes table, each
   * box's reconciled status, whether commands run in it, and pause/stop/remove by id.
   */
  reaperHost(): ReaperHost {
    return {
      lifetimes: this.#parts.lifetimes,
      status: async (id) => (await this.refresh(id))?.status ?? null,
      execsRunning: (id) => execsRunningIn(join(this.#parts.engines.stateRoot(), 'exec'), id),
      pause: (id) => this.pause(id),
      stop: (id) => this.stopBox(id),
      remove: async (id) => {
        await this.whenReady();
        await this.teardown(id);
      },
    };
  }
}
