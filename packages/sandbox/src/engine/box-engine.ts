/**
 * The one box life cycle of the three engines (container tier `engine.ts`, gVisor tier `gvisor.ts`,
 * rootless `rootless.ts`): `start`, `exec`, `stop`, `remove`, `state`, `stats` and `list` are written
 * once here, in the order every engine follows, and each engine plugs in only what differs — how a box
 * is launched, how its processes are ended, how its container is deleted, what of the host it holds
 * after its processes are gone, how commands run in it. testcontainers-node's `GenericContainer` is the
 * model: one life cycle, specialised by what its subclasses supply.
 *
 * Order of `stop` (every engine): end the box's processes (`halt`) → the network hook's teardown (when
 * the runtime still knows the box) → delete the runtime's container (`deleteContainer`) → forget the
 * init's pid → release what the box held on the host (`releaseHost`: mounts, cgroups) → end the
 * parent-death supervisor (this process's by its pipe, another process's by SIGTERM).
 */
import { rmSync, unlinkSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { BoxError } from '../errors.ts';
import { BOX_FILES, checkBoxId, readLivePid } from './box-files.ts';
import { boxRecords, type StartClock, setUpNetwork, startTimings } from './box-lifecycle.ts';
import { type CpuSample, cgroupStats } from './cgroup-stats.ts';
import type { EngineNetworkContext } from './engine-options.ts';
import { alive, endForeignSupervisor, Supervisors } from './host-process.ts';
import { mountsUnder, unmountBoxDir } from './host-system.ts';
import { type OpenedHostPath, withOpenedHostPaths } from './hostpath.ts';
import { validateSpec } from './oci.ts';
import type {
  Engine,
  EngineBoxRecord,
  EngineBoxSpec,
  EngineExecOptions,
  EngineMount,
  EngineProcess,
  EngineStarted,
  EngineState,
  EngineStats,
} from './types.ts';

/** What every engine keeps about a box (its `engine.json` plus where it lives on the host). */
export interface BoxEngineMeta {
  id: string;
  /** The box directory (absolute). */
  boxDir: string;
  /** CPUs of the box: the allowance its CPU percentage is measured against. */
  cpus: number;
}

/** The network hooks of an engine (`CreateEngineOptions.networkSetup` / `networkTeardown`). */
export interface BoxNetworkHooks {
  networkSetup?: (ctx: EngineNetworkContext) => Promise<void>;
  networkTeardown?: (id: string) => Promise<void>;
}

/** What `launch` hands back once the box's init runs: its host pid and the start's clock readings. */
export interface Launched {
  /** Host pid of the box init (container tiers) or of the sandbox process (gVisor). */
  pid: number;
  /** `performance.now()` readings of the start (ms); `end` is taken after the network hook. */
  clock: Omit<StartClock, 'end'>;
  /** The box's network link made during the start (`EngineNetworkContext.linked`), when there is one. */
  linked?: Promise<void>;
}

/** The pid file a box's runtime writes (`--pid-file`), the same name in every engine. */
export function initPidFile(boxDir: string): string {
  return join(boxDir, 'bundle', 'init.pid');
}

/**
 * The engine's files of a root engine's box under `boxDir` (`BOX_FILES`), once nothing is mounted
 * there any more; `boxDir` itself stays (the runtime's).
 * @throws BoxError `internal` when something is still mounted under `boxDir` after unmounting.
 */
export async function removeRootBoxFiles(id: string, boxDir: string): Promise<void> {
  await unmountBoxDir(boxDir);
  if (mountsUnder(boxDir).length > 0)
    throw new BoxError(`box ${id}: ${boxDir} is still mounted`, { code: 'internal' });
  for (const name of BOX_FILES) await rm(join(boxDir, name), { recursive: true, force: true });
}

/**
 * An `Engine` whose life cycle is this module's; `M` is the engine's box meta, `P` what `prepare`
 * works out before the box's host paths are opened (nothing by default).
 */
export abstract class BoxEngine<M extends BoxEngineMeta, P = void> implements Engine {
  /** The runtime driving the boxes (`crun`, `runc`, `runsc`, `crun-rootless`). */
  abstract readonly name: string;
  /** The engine's state directory. */
  abstract readonly stateRoot: string;
  /** Parent-death watches of this process's non-detached boxes. */
  protected readonly supervisors = new Supervisors();
  /** Box metas read or written by this process, by id. */
  protected readonly metas = new Map<string, M>();
  /** The previous CPU reading of each box, for `stats`. */
  protected readonly cpuSamples = new Map<string, CpuSample>();
  /** Serial number of the last exec of this engine (names its pid file). */
  protected execSeq = 0;

  /** `<stateRoot>/boxes`: one link per box to its box directory (the index). */
  protected abstract readonly boxesDir: string;
  /** The engine's network hooks. */
  protected abstract readonly networkHooks: BoxNetworkHooks;
  /** The supervisor script, to recognise another process's supervisor of a box (`endForeignSupervisor`). */
  protected abstract readonly supervisorScript: string | undefined;

  /** The box's meta from its files (through the index link), or undefined when there is none. */
  protected abstract readMeta(id: string): M | undefined;
  /** A meta for a box the engine has no record of, so that `remove` can still clear `boxDir`. */
  protected abstract placeholderMeta(id: string, boxDir: string): M;
  /**
   * Makes the box run: bundle, files, supervisor, the init's pid, its meta in `metas`. The host
   * objects of `spec.mounts` are `opened` (in order); `prepared` is what `prepare` returned.
   * @throws BoxError naming the field or the failed stage; nothing of the box runs after a rejection.
   */
  protected abstract launch(spec: EngineBoxSpec, opened: OpenedHostPath[], prepared: P): Promise<Launched>;
  /** Runs a command in box `meta` whose init (sandbox) is host pid `pid`; see `Engine.exec`. */
  protected abstract execIn(meta: M, pid: number, options: EngineExecOptions): Promise<EngineProcess>;
  /** The OCI runtime's answer for the box, before the pid is checked; undefined when it does not know it. */
  protected abstract runtimeState(id: string): Promise<EngineState | undefined>;
  /** Ends the box's processes: SIGTERM to its commands and up to `graceMs` ms, then SIGKILL. */
  protected abstract halt(id: string, graceMs: number): Promise<void>;
  /** True while the OCI runtime keeps a container for the box (from run to delete). */
  protected abstract runtimeKnows(id: string): boolean;
  /** Deletes the runtime's container of the box (idempotent). @throws BoxError when that fails. */
  protected abstract deleteContainer(id: string): Promise<void>;
  /** Releases what the stopped box holds on the host (mounts, cgroups); `meta` undefined for an unknown box. */
  protected abstract releaseHost(id: string, meta: M | undefined): Promise<void>;
  /** Deletes the engine's files of the stopped box under `boxDir`. */
  protected abstract removeFiles(id: string, boxDir: string): Promise<void>;
  /** Ids of the containers the OCI runtime knows (for `list`). */
  protected abstract runtimeIds(): Promise<string[]>;

  /** Checks done before the host paths are opened; returns what `launch` needs of them. */
  protected async prepare(_spec: EngineBoxSpec): Promise<P> {
    return undefined as P;
  }
  /** Checks each opened host path of a mount (rootless: that the caller may use it); none by default. */
  protected checkHostPath: ((o: OpenedHostPath, m: EngineMount, i: number) => void) | undefined;
  /** Whether the network hook's teardown runs on `stop`: while the runtime knows the box, by default. */
  protected tearsDownNetwork(id: string): boolean {
    return this.runtimeKnows(id);
  }
  /** Called by `state` for a running box whose pid lives. */
  protected observedRunning(_id: string, _pid: number): void {}
  /** Called at the end of `stop`. */
  protected stopped(_id: string): void {}
  /** Resource usage of box `meta` whose init is `pid`: the box cgroup's, by default (cgroup-stats.ts). */
  protected usage(id: string, meta: M, pid: number): Promise<EngineStats> {
    return cgroupStats(pid, meta.cpus, this.cpuSamples.get(id), (sample) => this.cpuSamples.set(id, sample));
  }
  /** Whether `list` reports index entry `id` (gVisor: only its own boxes; the index is shared). */
  protected listsIndexEntry(_id: string): boolean {
    return true;
  }

  /** The box's meta, cached; read through its index link otherwise. */
  protected meta(id: string): M | undefined {
    const known = this.metas.get(id);
    if (known) return known;
    const read = this.readMeta(id);
    if (read) this.metas.set(id, read);
    return read;
  }

  /** Host pid of the box init (gVisor: the sandbox process) while it runs. */
  protected runningPid(id: string): number | undefined {
    const meta = this.meta(id);
    return meta ? readLivePid(initPidFile(meta.boxDir)) : undefined;
  }

  /**
   * Starts a box; see `Engine.start`. Host paths of `mounts` are opened first (hostpath.ts: a symlink
   * anywhere on one is refused) and bound through their descriptors; once the init runs the network
   * hook runs (the box is stopped when it fails) and the four stage timings are reported.
   * @throws BoxError naming the field (`mounts[i].hostPath: …`) or the failed stage (with the runtime's
   *   log), or `box <id>: network setup failed: …`.
   */
  async start(spec: EngineBoxSpec): Promise<EngineStarted> {
    validateSpec(spec);
    const prepared = await this.prepare(spec);
    return withOpenedHostPaths(
      spec.mounts,
      async (opened) => {
        const { pid, clock, linked } = await this.launch(spec, opened, prepared);
        this.cpuSamples.delete(spec.id);
        const ctx = {
          id: spec.id,
          pid,
          boxDir: spec.boxDir,
          network: spec.network,
          ...(linked ? { linked } : {}),
        };
        await setUpNetwork(this.networkHooks.networkSetup, ctx, () => this.stop(spec.id, 0));
        return { pid, timings: startTimings({ ...clock, end: performance.now() }) };
      },
      this.checkHostPath,
    );
  }

  /** Runs a command; see `Engine.exec`. @throws BoxError `conflict` when the box is not running, or the engine's option errors. */
  async exec(id: string, options: EngineExecOptions): Promise<EngineProcess> {
    checkBoxId(id);
    const meta = this.meta(id);
    const pid = meta ? this.runningPid(id) : undefined;
    if (!meta || pid === undefined) throw new BoxError(`box ${id}: not running`, { code: 'conflict' });
    return this.execIn(meta, pid, options);
  }

  /** Stops the box (see the module comment for the order); see `Engine.stop`. Idempotent. */
  async stop(id: string, graceMs = 2000): Promise<void> {
    checkBoxId(id);
    const meta = this.meta(id);
    await this.halt(id, graceMs);
    const hooks = this.networkHooks;
    if (hooks.networkTeardown && this.tearsDownNetwork(id)) await hooks.networkTeardown(id).catch(() => {});
    await this.deleteContainer(id);
    // A stale pid could be reused by an unrelated host process: forget it once the box is down.
    if (meta) rmSync(initPidFile(meta.boxDir), { force: true });
    await this.releaseHost(id, meta);
    if (!this.supervisors.release(id) && meta) endForeignSupervisor(id, meta.boxDir, this.supervisorScript);
    this.cpuSamples.delete(id);
    this.stopped(id);
  }

  /** Stops the box and deletes its engine files under `boxDir`; see `Engine.remove`. Idempotent. */
  async remove(id: string, boxDir: string): Promise<void> {
    checkBoxId(id);
    if (!this.meta(id)) this.metas.set(id, this.placeholderMeta(id, boxDir));
    await this.stop(id, 0);
    await this.removeFiles(id, boxDir);
    try {
      unlinkSync(join(this.boxesDir, id));
    } catch {}
    this.metas.delete(id);
  }

  /**
   * The runtime's view of a box; see `Engine.state`: `stopped` when the runtime reports a dead pid or
   * only the engine's files remain, `unknown` when neither knows it.
   */
  async state(id: string): Promise<EngineState> {
    checkBoxId(id);
    const s = await this.runtimeState(id);
    if (!s) return { status: this.meta(id) ? 'stopped' : 'unknown' };
    if (s.status === 'running' && s.pid && !alive(s.pid)) return { status: 'stopped' };
    if (s.status === 'running' && s.pid) this.observedRunning(id, s.pid);
    return s;
  }

  /** Resource usage; see `Engine.stats`. Empty when the box is not running. */
  async stats(id: string): Promise<EngineStats> {
    checkBoxId(id);
    const meta = this.meta(id);
    const pid = meta ? this.runningPid(id) : undefined;
    if (!meta || pid === undefined) return {};
    return this.usage(id, meta, pid);
  }

  /**
   * Every box the engine's index or its OCI runtime knows, with its state and host mounts, so a
   * runtime can garbage-collect boxes it has no record of (e.g. a crash mid-create): call
   * `remove(id, boxDir)` for each unwanted one. With `include`, only the ids it accepts (their state
   * alone is read).
   */
  async list(include: (id: string) => boolean = () => true): Promise<EngineBoxRecord[]> {
    const ids = new Set<string>();
    for (const name of await readdir(this.boxesDir).catch(() => [] as string[]))
      if (include(name) && this.listsIndexEntry(name)) ids.add(name);
    for (const id of await this.runtimeIds()) if (include(id)) ids.add(id);
    return boxRecords(
      ids,
      (id) => this.meta(id)?.boxDir,
      (id) => this.state(id),
    );
  }
}
