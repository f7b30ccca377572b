import {
  existsSync,
  mkdirSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { BoxError, codeOf } from '../errors.ts';
import { checkBoxId, isBoxId, readBoxMeta, readLivePid } from './box-files.ts';
import { resolveCapabilities } from './capabilities.ts';
import type { CreateEngineOptions } from './engine-options.ts';
import {
  alive,
  endForeignSupervisor,
  type FileIdentity,
  Supervisors,
  sleep,
  waitForExec,
} from './host-process.ts';
import { findExecutable } from './host-system.ts';
import { type OpenedHostPath, withOpenedHostPaths } from './hostpath.ts';
import { validateSpec } from './oci.ts';
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
import type {
  Engine,
  EngineBoxRecord,
  EngineBoxSpec,
  EngineExecOptions,
  EngineProcess,
  EngineStarted,
  EngineState,
  EngineStats,
} from './types.ts';

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

/** An `Engine` for an ordinary account (see the module comment). */
export class RootlessEngine implements Engine {
  readonly name = 'crun-rootless';
  readonly user: HostUser;
  readonly stateRoot: string;
  readonly #opts: RootlessEngineOptions;
  readonly #uids: SubordinateRange;
  readonly #gids: SubordinateRange;
  readonly #crunRoot: string;
  readonly #boxesDir: string;
  readonly #execDir: string;
  readonly #supervisorPath: string;
  readonly #crunScript: string;
  readonly #cgsave: string;
  readonly #initPath: string;
  readonly #ttyRelay?: { perl: string; script: string };
  /** Parent-death watches of this process's non-detached boxes. */
  readonly #supervisors = new Supervisors();
  readonly #metas = new Map<string, RootlessMeta & { boxDir: string }>();
  #execSeq = 0;

  /**
   * @throws BoxError `unsupported` when run as root, or when the caller has no subordinate ids, or crun,
   *   catatonit or newuidmap is missing (the message names the fix: `sandbox setup <user>`).
   */
  constructor(options: RootlessEngineOptions) {
    this.user = currentUser();
    this.#initPath = options.initPath ?? '/usr/bin/catatonit';
    const { uids, gids } = rootlessPrerequisites(
      this.user,
      { subuid: options.subuidPath ?? '/etc/subuid', subgid: options.subgidPath ?? '/etc/subgid' },
      this.#initPath,
    );
    this.#opts = options;
    this.#uids = uids;
    this.#gids = gids;
    this.stateRoot = options.stateRoot ?? join(this.user.home, '.sandbox', 'engine');
    if (/\s/.test(this.stateRoot))
      throw new BoxError(`stateRoot: '${this.stateRoot}' must not contain spaces`, {
        field: 'stateRoot',
        code: 'invalid_option',
      });
    this.#crunRoot = join(this.stateRoot, 'crun');
    this.#boxesDir = join(this.stateRoot, 'boxes');
    this.#execDir = join(this.stateRoot, 'exec');
    this.#cgsave = join(this.stateRoot, 'cgsave');
    const bin = join(this.stateRoot, 'bin');
    for (const d of [this.#crunRoot, this.#boxesDir, this.#execDir, this.#cgsave, bin])
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

  /** Starts a box; see `Engine.start` and the module comment. */
  async start(spec: EngineBoxSpec & { allowUnlimited?: boolean }): Promise<EngineStarted> {
    validateSpec(spec);
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
    return withOpenedHostPaths(
      spec.mounts,
      (opened) => this.#startOpened(spec, opened, delegation, enforce),
      (o, m, i) => checkAccess(o, m, i, this.user.name),
    );
  }

  async #startOpened(
    spec: EngineBoxSpec,
    opened: OpenedHostPath[],
    delegation: CgroupDelegation,
    enforce: boolean,
  ): Promise<EngineStarted> {
    const log = join(spec.boxDir, 'runtime.log');
    if (this.#initPid(spec.id) !== undefined)
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
    const link = join(this.#boxesDir, spec.id);
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
    this.#supervisors.keep(spec.id, child, spec.detach);
    this.#metas.set(spec.id, { ...meta, boxDir: spec.boxDir });
    const pid = this.#initPid(spec.id);
    // Until the init has exec'd catatonit it is still crun's own non-dumpable process, which crun 1.8.1's
    // exec cannot join (host-process.ts `waitForExec`; ENGINE.md "Start path").
    if (pid === undefined || !(await waitForExec(pid, this.#initIdentity()))) {
      await this.stop(spec.id, 0).catch(() => {});
      throw new BoxError(`box ${spec.id}: init process exited right after start`, { code: 'internal' });
    }
    if (this.#opts.networkSetup) {
      try {
        await this.#opts.networkSetup({ id: spec.id, pid, boxDir: spec.boxDir, network: spec.network });
      } catch (err) {
        await this.stop(spec.id, 0).catch(() => {});
        if (err instanceof BoxError) throw err;
        throw new BoxError(`box ${spec.id}: network setup failed: ${(err as Error).message}`, {
          cause: err,
          code: codeOf(err),
        });
      }
    }
    const round = (ms: number) => Math.round(ms * 1000) / 1000;
    return {
      pid,
      timings: {
        stageBoxConfigMs: round(stageBoxConfigMs),
        stageFilesystemSetupMs: round(tMounted - tFs0),
        stageBoxSpawnMs: round(tStarted - tMounted),
        stageContainerInitMs: round(performance.now() - tStarted),
      },
    };
  }

  /** Runs crun in a namespace where the caller is root, with the delegated cgroups in view. */
  #crun(args: string[], delegation = this.delegation(), enforce = delegation.missing.length === 0) {
    return crunInUserns(this.#crunScript, this.#cgroupEnv(delegation, enforce), args);
  }

  #meta(id: string): (RootlessMeta & { boxDir: string }) | undefined {
    const known = this.#metas.get(id);
    if (known) return known;
    const read = readBoxMeta<RootlessMeta>(this.#boxesDir, id);
    if (read) this.#metas.set(id, read);
    return read;
  }

  /** Device and inode of the init binary: a started box's init runs it once it has exec'd. */
  #initIdentity(): FileIdentity {
    const st = statSync(this.#initPath);
    return { dev: st.dev, ino: st.ino };
  }

  #initPid(id: string): number | undefined {
    const meta = this.#meta(id);
    return meta ? readLivePid(join(meta.boxDir, 'bundle', 'init.pid')) : undefined;
  }

  /** Whether the box's cpu, memory and pids limits are enforced (false: created with `allowUnlimited`). */
  limitsEnforced(id: string): boolean | undefined {
    return this.#meta(id)?.limitsEnforced;
  }

  /** Runs a command; see `Engine.exec` and rootless-exec.ts. @throws BoxError when the box is not running. */
  async exec(id: string, options: EngineExecOptions): Promise<EngineProcess> {
    checkBoxId(id);
    const meta = this.#meta(id);
    const initPid = this.#initPid(id);
    if (!meta || initPid === undefined) throw new BoxError(`box ${id}: not running`, { code: 'conflict' });
    return rootlessExec(
      {
        id,
        initPid,
        env: meta.env,
        ...(meta.user !== undefined ? { user: meta.user } : {}),
        workingDir: meta.workingDir,
        capabilities: meta.capabilities,
        crun: { root: this.#crunRoot },
        execDir: this.#execDir,
        ...(this.#ttyRelay ? { ttyRelay: this.#ttyRelay } : {}),
        seq: ++this.#execSeq,
      },
      options,
    );
  }

  /** SIGTERM to the box's commands (up to `graceMs`), SIGKILL to its init, then `crun delete`. Idempotent. */
  async stop(id: string, graceMs = 2000): Promise<void> {
    checkBoxId(id);
    const meta = this.#meta(id);
    const init = this.#initPid(id);
    if (init !== undefined) {
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
    if (this.#opts.networkTeardown) await this.#opts.networkTeardown(id).catch(() => {});
    if (existsSync(join(this.#crunRoot, id))) {
      const del = await this.#crun(['delete', '--force', id]);
      if (del.code !== 0 && existsSync(join(this.#crunRoot, id)))
        throw new BoxError(`box ${id}: deleting the container failed: ${del.stderr.trim()}`, {
          code: 'internal',
        });
    }
    // crun leaves nothing in the delegated subtree; a box killed in the middle of its start might.
    for (const dir of this.delegation().dirs.values()) {
      try {
        rmdirSync(join(dir, id));
      } catch {}
    }
    if (meta) rmSync(join(meta.boxDir, 'bundle', 'init.pid'), { force: true });
    this.#endSupervisor(id, meta?.boxDir);
  }

  /** Tells this process's supervisor of `id` to let go, or ends another process's with SIGTERM. */
  #endSupervisor(id: string, boxDir: string | undefined): void {
    if (!this.#supervisors.release(id) && boxDir) endForeignSupervisor(id, boxDir);
  }

  /** Stops the box and deletes its files (writable layer files of any box uid included). Idempotent. */
  async remove(id: string, boxDir: string): Promise<void> {
    checkBoxId(id);
    if (!this.#meta(id))
      this.#metas.set(id, {
        id,
        env: [],
        workingDir: '/',
        cpus: 1,
        capabilities: [],
        limitsEnforced: true,
        boxDir,
      });
    await this.stop(id, 0);
    const paths = ['bundle', 'rootfs', 'binds', 'upper', 'work', 'runtime.log']
      .map((n) => join(boxDir, n))
      .filter((p) => existsSync(p));
    await removeAsBoxRoot(idMapArgs(this.#uids, this.#gids), paths);
    try {
      unlinkSync(join(this.#boxesDir, id));
    } catch {}
    this.#metas.delete(id);
  }

  /** `running` while the init lives (a zombie counts as gone), `stopped` when only the files remain. */
  async state(id: string): Promise<EngineState> {
    checkBoxId(id);
    const pid = this.#initPid(id);
    if (pid !== undefined) return { status: 'running', pid };
    return { status: this.#meta(id) ? 'stopped' : 'unknown' };
  }

  /** Memory from the box's cgroup, CPU from its processes, network from its namespace. */
  async stats(id: string): Promise<EngineStats> {
    checkBoxId(id);
    const pid = this.#initPid(id);
    return pid === undefined ? {} : boxStats(id, pid, this.#meta(id)?.cpus ?? 1);
  }

  /** Every box in the engine's index, with its state (crash recovery). */
  async list(): Promise<EngineBoxRecord[]> {
    const out: EngineBoxRecord[] = [];
    for (const id of await readdir(this.#boxesDir).catch(() => [] as string[])) {
      if (!isBoxId(id)) continue;
      const st = await this.state(id);
      out.push({
        id,
        boxDir: this.#meta(id)?.boxDir,
        status: st.status === 'unknown' ? 'stopped' : st.status,
        pid: st.pid,
        mounts: [],
      });
    }
    return out;
  }
}
