import { existsSync, mkdirSync, rmdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { BoxError } from '../errors.ts';
import { BoxEngine, type BoxNetworkHooks, type Launched } from './box-engine.ts';
import { readBoxMeta } from './box-files.ts';
import { resolveCapabilities } from './capabilities.ts';
import type { CreateEngineOptions } from './engine-options.ts';
import { alive, endForeignSupervisor, type FileIdentity, sleep, waitForExec } from './host-process.ts';
import { findExecutable } from './host-system.ts';
import type { OpenedHostPath } from './hostpath.ts';
import { HOST_BUSYBOX } from './rootfs.ts';
import {
  checkAccess,
  rootlessSupervisorEnv,
  runSupervisor,
  stageBoxFiles,
  writeBundle,
} from './rootless-bundle.ts';
import { rootlessExec, signalInBox } from './rootless-exec.ts';
import {
  type CgroupDelegation,
  cgroupDelegation,
  cgroupMounts,
  currentUser,
  type HostUser,
  type SubordinateRange,
} from './rootless-host.ts';
import {
  cgroupViewEnv,
  crunInUserns,
  idMapArgs,
  limitsNotDelegatedMessage,
  rootlessPrerequisites,
} from './rootless-ns.ts';
import { boxStats, pidsOfBox, removeAsBoxRoot } from './rootless-proc.ts';
import { ROOTLESS_CRUN_SH, ROOTLESS_SUPERVISOR_SH } from './rootless-scripts.ts';
import { TTY_RELAY_PL } from './scripts.ts';
import type { EngineBoxSpec, EngineExecOptions, EngineProcess, EngineState, EngineStats } from './types.ts';

/** Options of {@link RootlessEngine}: those of `createEngine` that apply (no `runtime`: crun only). */
export type RootlessEngineOptions = Pick<
  CreateEngineOptions,
  'stateRoot' | 'initPath' | 'networkSetup' | 'networkTeardown'
> & {
  /** Reads the delegated cgroup subtree (default: the host's, {@link cgroupDelegation}); tests replace it. */
  delegation?: () => CgroupDelegation;
  /** Subordinate id files (tests). */
  subuidPath?: string;
  subgidPath?: string;
};

/** Per-box facts other processes need (`<boxDir>/bundle/engine.json`). */
interface RootlessMeta {
  id: string;
  env: string[];
  user?: string;
  workingDir: string;
  cpus: number;
  capabilities: string[];
  /** False when the box runs without cpu, memory and pids limits (`allowUnlimited`). */
  limitsEnforced: boolean;
}

/** What a rootless start works out before the host paths are opened: the delegated cgroups. */
interface RootlessPrepared {
  delegation: CgroupDelegation;
  /** False when the box runs without limits (`allowUnlimited` and no delegated subtree). */
  enforce: boolean;
}

type RootlessBoxMeta = RootlessMeta & { boxDir: string };

/**
 * An `Engine` for an ordinary account (see the module comment); its life cycle is the shared one of
 * box-engine.ts, with crun in a user namespace where the caller is root and the delegated cgroups.
 */
export class RootlessEngine extends BoxEngine<RootlessBoxMeta, RootlessPrepared> {
  readonly name = 'crun-rootless';
  readonly user: HostUser;
  readonly stateRoot: string;
  protected readonly boxesDir: string;
  protected readonly networkHooks: BoxNetworkHooks;
  protected readonly supervisorScript = undefined;
  readonly #opts: RootlessEngineOptions;
  readonly #uids: SubordinateRange;
  readonly #gids: SubordinateRange;
  readonly #crunRoot: string;
  readonly #execDir: string;
  readonly #supervisorPath: string;
  readonly #crunScript: string;
  readonly #cgsave: string;
  readonly #initPath: string;
  readonly #ttyRelay?: { perl: string; script: string };

  /**
   * @throws BoxError `unsupported` when run as root, or when the caller has no subordinate ids, or crun,
   *   catatonit or newuidmap is missing (the message names the fix: `sandbox setup <user>`).
   */
  constructor(options: RootlessEngineOptions) {
    super();
    this.user = currentUser();
    this.#initPath = options.initPath ?? '/usr/bin/catatonit';
    const { uids, gids } = rootlessPrerequisites(
      this.user,
      { subuid: options.subuidPath ?? '/etc/subuid', subgid: options.subgidPath ?? '/etc/subgid' },
      this.#initPath,
    );
    this.#opts = options;
    this.networkHooks = options;
    this.checkHostPath = (o, m, i) => checkAccess(o, m, i, this.user.name);
    this.#uids = uids;
    this.#gids = gids;
    this.stateRoot = options.stateRoot ?? join(this.user.home, '.sandbox', 'engine');
    if (/\s/.test(this.stateRoot))
      throw new BoxError(`stateRoot: '${this.stateRoot}' must not contain spaces`, {
        field: 'stateRoot',
        code: 'invalid_option',
      });
    this.#crunRoot = join(this.stateRoot, 'crun');
    this.boxesDir = join(this.stateRoot, 'boxes');
    this.#execDir = join(this.stateRoot, 'exec');
    this.#cgsave = join(this.stateRoot, 'cgsave');
    const bin = join(this.stateRoot, 'bin');
    for (const d of [this.#crunRoot, this.boxesDir, this.#execDir, this.#cgsave, bin])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    this.#supervisorPath = join(bin, 'rootless-supervisor.sh');
    this.#crunScript = join(bin, 'rootless-crun.sh');
    writeFileSync(this.#supervisorPath, ROOTLESS_SUPERVISOR_SH, { mode: 0o700 });
    writeFileSync(this.#crunScript, ROOTLESS_CRUN_SH, { mode: 0o700 });
    const perl = findExecutable('perl');
    if (perl && existsSync(HOST_BUSYBOX)) {
      const script = join(bin, 'tty-relay.pl');
      writeFileSync(script, TTY_RELAY_PL, { mode: 0o700 });
      this.#ttyRelay = { perl, script };
    }
  }

  /** The cgroup subtree delegated to the caller, read now (it may be set up after the engine starts). */
  delegation(): CgroupDelegation {
    return this.#opts.delegation?.() ?? cgroupDelegation(this.user, cgroupMounts());
  }

  /** The gVisor tier is refused for ordinary accounts. @throws BoxError `unsupported`, always. */
  async gvisorPlatform(): Promise<never> {
    throw new BoxError(
      'isolation: the gvisor tier needs root on this host (runsc --rootless is not supported here); use isolation: "container"',
      { field: 'isolation', code: 'unsupported' },
    );
  }

  #cgroupEnv(delegation: CgroupDelegation, enforce: boolean): Record<string, string> {
    return cgroupViewEnv(this.#crunRoot, this.#cgsave, delegation, enforce);
  }

  /**
   * Refuses what an ordinary account cannot have (the gVisor tier, `diskSizeGb`, limits without a
   * delegated cgroup subtree unless `allowUnlimited`) before anything is opened or made.
   * @throws BoxError `unsupported` naming the field or the fix.
   */
  protected override async prepare(
    spec: EngineBoxSpec & { allowUnlimited?: boolean },
  ): Promise<RootlessPrepared> {
    if (spec.isolation === 'gvisor') await this.gvisorPlatform();
    if (spec.diskSizeGb !== undefined) {
      throw new BoxError(
        'diskSizeGb: not available to an ordinary account (no loop devices in a user namespace); the writable layer is bounded by your file system quota',
        { field: 'diskSizeGb', code: 'unsupported' },
      );
    }
    const delegation = this.delegation();
    const enforce = delegation.missing.length === 0;
    if (!enforce && spec.allowUnlimited !== true)
      throw new BoxError(limitsNotDelegatedMessage(this.user.name, delegation), { code: 'unsupported' });
    return { delegation, enforce };
  }

  /** Launches a box with crun in the caller's user namespace (rootless-bundle.ts, rootless-scripts.ts). */
  protected async launch(
    spec: EngineBoxSpec,
    opened: OpenedHostPath[],
    { delegation, enforce }: RootlessPrepared,
  ): Promise<Launched> {
    const log = join(spec.boxDir, 'runtime.log');
    if (this.runningPid(spec.id) !== undefined)
      throw new BoxError(`box ${spec.id}: already running`, { code: 'conflict' });
    if (existsSync(join(this.#crunRoot, spec.id)))
      await this.#crun(['delete', '--force', spec.id], delegation, enforce);
    const tConfig0 = performance.now();
    const meta: RootlessMeta = {
      id: spec.id,
      env: spec.env,
      user: spec.user,
      workingDir: spec.workingDir,
      cpus: spec.cpus,
      capabilities: resolveCapabilities(spec.capabilities),
      limitsEnforced: enforce,
    };
    writeBundle(spec, meta, {
      initPath: this.#initPath,
      ...(this.#ttyRelay ? { ttyHelper: HOST_BUSYBOX } : {}),
      cgroupsPath: enforce ? `${delegation.path}/${spec.id}` : undefined,
    });
    const stageBoxConfigMs = performance.now() - tConfig0;

    const tFs0 = performance.now();
    const link = join(this.boxesDir, spec.id);
    rmSync(link, { force: true });
    symlinkSync(spec.boxDir, link);
    const binds = stageBoxFiles(spec.boxDir, opened);
    const env = rootlessSupervisorEnv(spec, binds, opened, this.#cgroupEnv(delegation, enforce));
    this.#endSupervisor(spec.id, spec.boxDir);
    const { child, tMounted, tStarted } = await runSupervisor(
      spec.id,
      [...idMapArgs(this.#uids, this.#gids), '--', '/bin/sh', this.#supervisorPath],
      env,
      opened.map((o) => o.fd),
      log,
    );
    this.supervisors.keep(spec.id, child, spec.detach);
    this.metas.set(spec.id, { ...meta, boxDir: spec.boxDir });
    const pid = this.runningPid(spec.id);
    // Until the init has exec'd catatonit it is still crun's own non-dumpable process, which crun 1.8.1's
    // exec cannot join (host-process.ts `waitForExec`; ENGINE.md "Start path").
    if (pid === undefined || !(await waitForExec(pid, this.#initIdentity()))) {
      await this.stop(spec.id, 0).catch(() => {});
      throw new BoxError(`box ${spec.id}: init process exited right after start`, { code: 'internal' });
    }
    return { pid, clock: { configMs: stageBoxConfigMs, fs0: tFs0, mounted: tMounted, started: tStarted } };
  }

  /** Runs crun in a namespace where the caller is root, with the delegated cgroups in view. */
  #crun(args: string[], delegation = this.delegation(), enforce = delegation.missing.length === 0) {
    return crunInUserns(this.#crunScript, this.#cgroupEnv(delegation, enforce), args);
  }

  protected readMeta(id: string): RootlessBoxMeta | undefined {
    return readBoxMeta<RootlessMeta>(this.boxesDir, id);
  }

  protected placeholderMeta(id: string, boxDir: string): RootlessBoxMeta {
    return { id, env: [], workingDir: '/', cpus: 1, capabilities: [], limitsEnforced: true, boxDir };
  }

  /** Device and inode of the init binary: a started box's init runs it once it has exec'd. */
  #initIdentity(): FileIdentity {
    const st = statSync(this.#initPath);
    return { dev: st.dev, ino: st.ino };
  }

  /** Whether the box's cpu, memory and pids limits are enforced (false: created with `allowUnlimited`). */
  limitsEnforced(id: string): boolean | undefined {
    return this.meta(id)?.limitsEnforced;
  }

  /** Runs a command with `crun exec` in the box's user namespace (rootless-exec.ts). */
  protected execIn(
    meta: RootlessBoxMeta,
    initPid: number,
    options: EngineExecOptions,
  ): Promise<EngineProcess> {
    return rootlessExec(
      {
        id: meta.id,
        initPid,
        env: meta.env,
        ...(meta.user !== undefined ? { user: meta.user } : {}),
        workingDir: meta.workingDir,
        capabilities: meta.capabilities,
        crun: { root: this.#crunRoot },
        execDir: this.#execDir,
        ...(this.#ttyRelay ? { ttyRelay: this.#ttyRelay } : {}),
        seq: ++this.execSeq,
      },
      options,
    );
  }

  /** SIGTERM to the box's commands (up to `graceMs`), then SIGKILL to its init. */
  protected async halt(id: string, graceMs: number): Promise<void> {
    const init = this.runningPid(id);
    if (init === undefined) return;
    const others = () => pidsOfBox(init).filter((p) => p !== init);
    if (graceMs > 0 && others().length > 0) {
      await signalInBox(init, others(), 'SIGTERM');
      const deadline = performance.now() + graceMs;
      while (others().length > 0 && performance.now() < deadline) await sleep(10);
    }
    try {
      process.kill(init, 'SIGKILL');
    } catch {}
    for (let i = 0; i < 500 && alive(init); i++) await sleep(10);
  }

  protected runtimeKnows(id: string): boolean {
    return existsSync(join(this.#crunRoot, id));
  }

  /** Every stop tears the box's network down (slirp4netns), whether crun still knows the box or not. */
  protected override tearsDownNetwork(): boolean {
    return true;
  }

  /** `crun delete --force`. @throws BoxError when crun fails and still knows the box. */
  protected async deleteContainer(id: string): Promise<void> {
    if (!this.runtimeKnows(id)) return;
    const del = await this.#crun(['delete', '--force', id]);
    if (del.code !== 0 && this.runtimeKnows(id))
      throw new BoxError(`box ${id}: deleting the container failed: ${del.stderr.trim()}`, {
        code: 'internal',
      });
  }

  /** crun leaves nothing in the delegated subtree; a box killed in the middle of its start might. */
  protected async releaseHost(id: string): Promise<void> {
    for (const dir of this.delegation().dirs.values()) {
      try {
        rmdirSync(join(dir, id));
      } catch {}
    }
  }

  /** Tells this process's supervisor of `id` to let go, or ends another process's with SIGTERM. */
  #endSupervisor(id: string, boxDir: string): void {
    if (!this.supervisors.release(id)) endForeignSupervisor(id, boxDir);
  }

  /** Deletes the box's files, writable layer files of any box uid included (as the box's root). */
  protected async removeFiles(_id: string, boxDir: string): Promise<void> {
    const paths = ['bundle', 'rootfs', 'binds', 'upper', 'work', 'runtime.log']
      .map((n) => join(boxDir, n))
      .filter((p) => existsSync(p));
    await removeAsBoxRoot(idMapArgs(this.#uids, this.#gids), paths);
  }

  /** `running` while the init lives (a zombie counts as gone); undefined (`stopped`/`unknown`) otherwise. */
  protected async runtimeState(id: string): Promise<EngineState | undefined> {
    const pid = this.runningPid(id);
    return pid !== undefined ? { status: 'running', pid } : undefined;
  }

  /** Memory from the box's cgroup, CPU from its processes, network from its namespace. */
  protected override usage(id: string, meta: RootlessBoxMeta, pid: number): Promise<EngineStats> {
    return boxStats(id, pid, meta.cpus);
  }

  /** The rootless engine keeps no runtime list beyond its index. */
  protected async runtimeIds(): Promise<string[]> {
    return [];
  }
}
