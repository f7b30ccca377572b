/**
 * The OCI container engine: one bundle per box run by `crun` or `runc` (Debian packages).
 *
 * Start: the engine writes `<boxDir>/bundle/config.json` (oci.ts, box-bundle.ts), then spawns one
 * `supervisor.sh` (scripts.ts) that mounts the overlay root (image layers read-only as lower dirs,
 * `<boxDir>/upper` as upper dir, or the same on a loop-mounted disk image; box-files.ts) and runs
 * `<runtime> run --detach`. The box init is a static `catatonit -P` bind-mounted read-only at
 * `/.sandbox/init`, so images need no binary of their own. Commands run with `<runtime> exec` and
 * plain pipes (oci-exec.ts). The supervisor of a non-detached box stays behind as the parent-death
 * watch. Resource usage is read from the box's cgroup (cgroup-stats.ts).
 *
 * This module holds what the container tier plugs into the shared box life cycle (box-engine.ts: how a
 * box is launched, stopped and deleted with crun/runc) and re-exports the helpers other modules know it
 * by (`findExecutable`, `mountsUnder`, `boxPaths`, `resolveUser`, …).
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError, codeOf } from '../errors.ts';
import { idmapSupervisorEnv, ociConfigInput, supervisorEnv, writeBundle } from './box-bundle.ts';
import { BoxEngine, type BoxNetworkHooks, type Launched, removeRootBoxFiles } from './box-engine.ts';
import {
  boxDiskSizeGb,
  boxPaths,
  handVolumesToMappedRoot,
  readBoxMeta,
  readBundleMeta,
  stageBoxFiles,
} from './box-files.ts';
import { resolveCapabilities } from './capabilities.ts';
import type { CreateEngineOptions, OciBoxMeta } from './engine-options.ts';
import {
  alive,
  endForeignSupervisor,
  type FileIdentity,
  outcomeFiles,
  startSupervisor,
  supervisorFailure,
  waitForExec,
  waitForOutcomeFiles,
  writeIfChanged,
} from './host-process.ts';
import { allowTraversal, findExecutable, isStaticElf, mountsUnder, unmountBoxDir } from './host-system.ts';
import type { OpenedHostPath } from './hostpath.ts';
import {
  ensureSandboxIdRange,
  type IdMapping,
  type IdmapHelper,
  idmapHelperArgs,
  installIdmapHelper,
} from './idmap.ts';
import { buildOciConfig } from './oci.ts';
import { ociExec } from './oci-exec.ts';
import { OciRuntime, type OciRuntimeName } from './oci-runtime.ts';
import { HOST_BUSYBOX } from './rootfs.ts';
import { NET_LINK_SH, SUPERVISOR_SH, SUPERVISOR_SPARE_SH, TTY_RELAY_PL } from './scripts.ts';
import { SpareSupervisor } from './spare-supervisor.ts';
import type { EngineBoxSpec, EngineExecOptions, EngineProcess, EngineStarted, EngineState } from './types.ts';

export { type BoxPaths, boxPaths } from './box-files.ts';
export { resolveUser } from './box-user.ts';
export type { CreateEngineOptions, EngineNetworkContext } from './engine-options.ts';
export { findExecutable, isHybridCgroupHost, mountsUnder } from './host-system.ts';
export type { OciRuntimeName } from './oci-runtime.ts';

/** `OciBoxMeta` with where the box lives on the host (absolute paths). */
type KnownBox = OciBoxMeta & { boxDir: string; rootfs: string };

const DEFAULT_STATE_ROOT = '/run/seed-sandbox';

/**
 * An `Engine` (types.ts) running each box as an OCI container with crun or runc.
 * Construct with `createEngine()`. Requires root, overlayfs and the runtime binary.
 */
export class OciEngine extends BoxEngine<KnownBox> {
  /** The OCI runtime driving the boxes: `crun` or `runc`. */
  readonly name: OciRuntimeName;
  /** The engine's state directory (see `CreateEngineOptions.stateRoot`). */
  readonly stateRoot: string;
  /** The OCI runtime and its state directory. */
  private readonly rt: OciRuntime;
  protected readonly boxesDir: string;
  protected readonly networkHooks: BoxNetworkHooks;
  private readonly execDir: string;
  private readonly supervisorPath: string;
  /** The supervisor made ahead of need for the next box without host paths (spare-supervisor.ts). */
  private readonly spare: SpareSupervisor;
  /** The `createRuntime` hook that links a box's network while crun sets the box up (scripts.ts `NET_LINK_SH`). */
  private readonly netLinkPath: string;
  /** The terminal relay of `exec` with `tty` (scripts.ts `TTY_RELAY_PL`). */
  private readonly ttyRelayPath: string;
  /** Host static busybox mounted into each box at `TTY_HELPER_PATH`, when there is one. */
  private readonly ttyHelper: string | undefined;
  /** Host `perl` running the terminal relay; undefined when the relay cannot serve (see oci-exec.ts). */
  private readonly ttyPerl: string | undefined;
  private readonly initPath: string;
  /** Device and inode of `initPath`: a started box's init runs it once it has exec'd (`waitForExec`). */
  private readonly initIdentity: FileIdentity;
  /** Mapping and helper for new boxes' user namespaces; undefined when they are turned off. */
  private readonly userns: { mapping: IdMapping; helper: IdmapHelper } | undefined;
  private readonly opts: CreateEngineOptions;

  /** Use `createEngine()`. @throws BoxError when the runtime or init binary is missing. */
  constructor(options: CreateEngineOptions = {}) {
    super();
    this.opts = options;
    this.networkHooks = options;
    this.stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
    if (!this.stateRoot.startsWith('/') || /\s/.test(this.stateRoot)) {
      throw new BoxError(`stateRoot: '${this.stateRoot}' must be an absolute path without spaces`, {
        field: 'stateRoot',
        code: 'invalid_option',
      });
    }
    const binDir = join(this.stateRoot, 'bin');
    mkdirSync(binDir, { recursive: true, mode: 0o700 });
    this.rt = new OciRuntime(options.runtime, this.stateRoot, binDir);
    this.name = this.rt.name;
    const init = findExecutable(options.initPath ?? '/usr/bin/catatonit');
    if (!init)
      throw new BoxError(
        `initPath: '${options.initPath ?? '/usr/bin/catatonit'}' not found (apt-get install catatonit)`,
        { field: 'initPath', code: 'invalid_option' },
      );
    this.initPath = init;
    const initStat = statSync(init);
    this.initIdentity = { dev: initStat.dev, ino: initStat.ino };
    this.boxesDir = join(this.stateRoot, 'boxes');
    this.execDir = join(this.stateRoot, 'exec');
    for (const d of [this.rt.root, this.boxesDir, this.execDir])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    this.supervisorPath = join(binDir, 'supervisor.sh');
    writeIfChanged(this.supervisorPath, SUPERVISOR_SH);
    const spareScript = join(binDir, 'supervisor-spare.sh');
    writeIfChanged(spareScript, SUPERVISOR_SPARE_SH);
    this.spare = new SpareSupervisor(spareScript, this.supervisorPath);
    this.netLinkPath = join(binDir, 'net-link.sh');
    writeIfChanged(this.netLinkPath, NET_LINK_SH);
    this.ttyRelayPath = join(binDir, 'tty-relay.pl');
    writeIfChanged(this.ttyRelayPath, TTY_RELAY_PL);
    this.ttyHelper = isStaticElf(HOST_BUSYBOX) ? HOST_BUSYBOX : undefined;
    const userns = options.userNamespace ?? process.env.SEED_SANDBOX_USERNS !== '0';
    if (userns) {
      const perl = findExecutable('perl');
      if (!perl)
        throw new BoxError('userNamespace: needs perl (perl-base) on the host for idmapped mounts', {
          code: 'unsupported',
        });
      this.userns = { mapping: ensureSandboxIdRange(), helper: installIdmapHelper(binDir, perl) };
    }
    // Exec pid files (`<id>.<node pid>.<n>.pid`) of Node processes that died mid-exec.
    for (const name of readdirSync(this.execDir)) {
      const owner = Number(name.split('.').at(-3));
      if (owner > 0 && owner !== process.pid && !alive(owner))
        rmSync(join(this.execDir, name), { force: true });
    }
    // runc copies a foreground command's plain stdio through pipes: the relay's terminal needs crun.
    this.ttyPerl = this.name === 'crun' && this.ttyHelper ? findExecutable('perl') : undefined;
    // The first spare once the engine has been idle for a moment.
    this.spare.activity();
  }

  /** Starts a box (`BoxEngine.start`); no spare supervisor is made while a start is in flight. */
  override async start(spec: EngineBoxSpec): Promise<EngineStarted> {
    this.spare.startBegins();
    try {
      return await super.start(spec);
    } finally {
      this.spare.startEnds();
    }
  }

  /** Runs a command (`BoxEngine.exec`); the spare supervisor's idle clock restarts. */
  override exec(id: string, options: EngineExecOptions): Promise<EngineProcess> {
    this.spare.activity();
    return super.exec(id, options);
  }

  /** A box was stopped: the spare supervisor is made now when no start is in flight. */
  protected override stopped(_id: string): void {
    this.spare.boxStopped();
  }

  /** The supervisor script (another process's supervisor of a box is recognised by it). */
  protected get supervisorScript(): string {
    return this.supervisorPath;
  }

  /**
   * Launches a box with crun/runc once its host paths are open (`opened[i]` is the host object of
   * `spec.mounts[i]`): config, files, the supervisor that mounts and runs it, the init's exec.
   * @throws BoxError naming the field or the failed stage (with the runtime's log).
   */
  protected async launch(spec: EngineBoxSpec, opened: OpenedHostPath[]): Promise<Launched> {
    // Every box gets a size-limited disk (disk.ts); a box whose writable layer predates that default
    // (an upper dir in boxDir, no disk image) keeps its layer.
    const diskSizeGb = boxDiskSizeGb(spec);
    const p = boxPaths(spec.boxDir, diskSizeGb);
    // A box keeps the user namespace of its first start: its writable layer is owned accordingly.
    const previous = readBundleMeta<OciBoxMeta>(p.bundle);
    const idMap: IdMapping | null = previous ? (previous.idMap ?? null) : (this.userns?.mapping ?? null);
    if (idMap && !this.userns)
      throw new BoxError(`box ${spec.id}: it runs in a user namespace; this engine has them turned off`, {
        code: 'conflict',
      });
    // The runtime keeps a state directory per container: only ask it when one exists (saves a spawn).
    if (this.rt.known(spec.id)) {
      const st = await this.state(spec.id);
      if (st.status === 'running' || st.status === 'created')
        throw new BoxError(`box ${spec.id}: already running`, { code: 'conflict' });
      await this.rt.call(['delete', '--force', spec.id], true);
    }
    // Whatever a previous run left mounted (root, disk, host binds) goes before anything is rewritten.
    if (mountsUnder(spec.boxDir).length > 0) await unmountBoxDir(spec.boxDir);

    // Box config (built first: a bad capability name fails before anything is created).
    const tConfig0 = performance.now();
    const host = { init: this.initPath, ...(this.ttyHelper ? { ttyHelper: this.ttyHelper } : {}) };
    const config = buildOciConfig(...ociConfigInput(spec, p, diskSizeGb, idMap ? { ...host, idMap } : host));
    const meta: OciBoxMeta = {
      id: spec.id,
      env: spec.env,
      user: spec.user,
      workingDir: spec.workingDir,
      cpus: spec.cpus,
      diskSizeGb,
      capabilities: resolveCapabilities(spec.capabilities),
      idMap,
    };
    // The box's link to its network, made by crun's createRuntime hook as soon as the box's network
    // namespace exists (runc: by the network hook once the init runs).
    const link =
      this.name === 'crun' && spec.network.mode !== 'disabled'
        ? this.opts.networkLinkScript?.(spec.id)
        : undefined;
    const linkOutcome = join(p.bundle, 'link');
    if (link) {
      link.ready.catch(() => {});
      const script = join(p.bundle, 'link.sh');
      config.hooks = {
        createRuntime: [{ path: '/bin/sh', args: ['sh', this.netLinkPath, script, linkOutcome] }],
      };
      mkdirSync(p.bundle, { recursive: true });
      writeFileSync(script, link.script, { mode: 0o600 });
      for (const f of outcomeFiles(linkOutcome)) rmSync(f, { force: true });
    }
    if (spec.network.mode !== 'disabled') {
      // ICMP datagram sockets (`ping` without `NET_RAW`) for every group of the box, set by the runtime
      // in the box's network namespace. In a user namespace the kernel takes only groups mapped there.
      (config.linux as Record<string, unknown>).sysctl = {
        'net.ipv4.ping_group_range': `0 ${idMap ? idMap.size - 1 : 2147483647}`,
      };
    }
    writeBundle(spec, p, diskSizeGb, config, meta);
    const stageBoxConfigMs = performance.now() - tConfig0;

    // Filesystem: directories, the disk image (btrfs when the host can: snapshots of the writable
    // layer, snapshot.ts), the index link, bind targets (mounts happen in the supervisor).
    const tFs0 = performance.now();
    const binds = await stageBoxFiles(this.stateRoot, this.boxesDir, spec, p, diskSizeGb, opened, {
      snapshots: true,
      bindsMode: idMap ? 0o711 : 0o700,
    });
    if (idMap) {
      // The runtime looks up the root, binds and /etc files as the box's mapped root: it must be able
      // to traverse (not list) the box directory and the staging directory.
      allowTraversal(spec.boxDir);
      handVolumesToMappedRoot(spec, opened, idMap.hostUid, idMap.hostGid);
    }

    // Spawn: the supervisor mounts and runs the container.
    const env = {
      ...supervisorEnv(spec, p, diskSizeGb, this.rt.full, binds),
      ...(idMap && this.userns
        ? idmapSupervisorEnv(
            spec,
            p,
            diskSizeGb,
            [this.userns.helper.perl, this.userns.helper.script, ...idmapHelperArgs(idMap)],
            binds,
          )
        : { SB_IDMAP: '' }),
      SB_NETNS: (this.opts.networkFiles?.(spec.id) ?? []).join(' '),
    };
    if (!this.supervisors.release(spec.id)) endForeignSupervisor(spec.id, spec.boxDir, this.supervisorPath);
    // A box without host paths is served by the spare supervisor when one is idle (no spawn here).
    const spare = opened.length === 0 ? this.spare.take() : undefined;
    const { child, outcome, tMounted, tStarted } = await startSupervisor(
      '/bin/sh',
      [this.supervisorPath],
      env,
      opened.map((o) => o.fd),
      link?.ready,
      spare ? { child: spare, envFile: join(p.bundle, 'supervisor.env') } : undefined,
    );
    if (outcome !== 'started') {
      child.stdin?.destroy();
      const linkError = await link?.ready.then(
        () => undefined,
        (err: unknown) => err,
      );
      if (linkError !== undefined) {
        // The supervisor unmounts what it mounted after reporting: the box is gone once it has exited.
        if (child.exitCode === null && child.signalCode === null)
          await new Promise((resolve) => child.once('exit', resolve));
        await unmountBoxDir(spec.boxDir).catch(() => {});
        throw new BoxError(`box ${spec.id}: network setup failed: ${(linkError as Error).message}`, {
          cause: linkError,
          code: codeOf(linkError),
        });
      }
      throw await supervisorFailure(spec.id, outcome, p.log);
    }
    this.supervisors.keep(spec.id, child, spec.detach);

    // Container init: the init pid, then the network hook.
    let pid = 0;
    try {
      pid = Number.parseInt(readFileSync(p.pidFile, 'utf8'), 10);
    } catch {}
    // The runtime may return before its init process has exec'd the box init; until then a `crun exec`
    // can fail to join the box's namespaces (host-process.ts `waitForExec`), so the box is not up yet.
    if (!(pid > 0) || !(await waitForExec(pid, this.initIdentity))) {
      await this.stop(spec.id, 0).catch(() => {});
      throw new BoxError(
        `box ${spec.id}: the init process exited (or did not run ${this.initPath}) right after start`,
        { code: 'internal' },
      );
    }
    this.metas.set(spec.id, { ...meta, boxDir: spec.boxDir, rootfs: p.rootfs });
    const clock = { configMs: stageBoxConfigMs, fs0: tFs0, mounted: tMounted, started: tStarted };
    if (!link) return { pid, clock };
    return { pid, clock, linked: waitForOutcomeFiles(linkOutcome, `box ${spec.id}: linking its network`) };
  }

  protected readMeta(id: string): KnownBox | undefined {
    return readBoxMeta<OciBoxMeta>(this.boxesDir, id);
  }

  protected placeholderMeta(id: string, boxDir: string): KnownBox {
    return { id, env: [], workingDir: '/', cpus: 1, boxDir, rootfs: join(boxDir, 'rootfs') };
  }

  /** Runs a command with `<runtime> exec` (oci-exec.ts). */
  protected execIn(meta: KnownBox, initPid: number, options: EngineExecOptions): Promise<EngineProcess> {
    const ctx = {
      runtime: this.rt.fast,
      execDir: this.execDir,
      seq: ++this.execSeq,
      ttyPerl: this.ttyPerl,
      ttyRelayPath: this.ttyRelayPath,
    };
    return ociExec(ctx, { ...meta, initPid }, options);
  }

  protected runtimeState(id: string): Promise<EngineState | undefined> {
    return this.rt.state(id);
  }

  /** SIGTERM to the init, `graceMs`, then SIGKILL (oci-runtime.ts `stopContainer`). */
  protected async halt(id: string, graceMs: number): Promise<void> {
    const st = await this.state(id);
    if (st.status === 'running' && st.pid) await this.rt.stopContainer(id, st.pid, graceMs);
  }

  /** The runtime has a state directory for each container it knows (run → delete). */
  protected runtimeKnows(id: string): boolean {
    return this.rt.known(id);
  }

  protected async deleteContainer(id: string): Promise<void> {
    if (this.rt.known(id)) await this.rt.delete(id);
  }

  /** The box's root, disk and binds are unmounted. */
  protected async releaseHost(_id: string, meta: KnownBox | undefined): Promise<void> {
    if (meta) await unmountBoxDir(meta.boxDir);
  }

  protected removeFiles(id: string, boxDir: string): Promise<void> {
    return removeRootBoxFiles(id, boxDir);
  }

  protected runtimeIds(): Promise<string[]> {
    return this.rt.list();
  }
}
