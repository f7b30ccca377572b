/**
 * The gVisor isolation tier: each box is one OCI container run by `runsc` (Debian package), whose
 * user-space kernel (the Sentry) answers the box's system calls, so box processes never make system
 * calls to the host kernel directly (Modal's and GKE Sandbox's isolation).
 *
 * The box is built as in the container tier (engine.ts): the same overlay root mounted by the same
 * `supervisor.sh` (parent-death watch included), the same `config.json` from `buildOciConfig` with
 * the changes of `gvisorOciConfig`, run as `runsc --root <stateRoot>/runsc --platform=<ptrace|kvm>
 * --network=<sandbox|none> run --detach` through the launcher of gvisor-launcher.ts. The platform
 * is chosen once per boot (gvisor-platform.ts).
 *
 * Host privileges: every runsc call runs in the gVisor user namespace (gvisor-userns.ts), which maps
 * ids `0..65535` to the sandbox's subordinate range (default host 100000..165535). The gofer (which
 * opens the box's files for the Sentry) is that namespace's root, host uid/gid 100000, chrooted to the
 * box root, with a seccomp filter and no_new_privs; with `--network=sandbox` or `none` runsc runs the Sentry
 * (which runs the box's code) and its stubs as `nobody` of that namespace (host uid/gid 165534) in a
 * user namespace of its own that maps only that id, chrooted, with a seccomp filter. No process in a
 * box's cgroup is host root (SECURITY.md "gVisor tier"). The box root is an overlay over idmapped
 * layer clones (idmap.ts), so the gofer reads image files owned by host root as its own; the
 * launcher (gvisor-launcher.ts) makes, limits and joins the box's cgroup as host root, and runsc
 * runs with `--ignore-cgroups`.
 *
 * Network: the box's network namespace is made before runsc runs (`<bundle>/netns`, `lo` up) and
 * the `networkPrepare` hook links it to its gateway (`eth0`, gateway.ts); runsc copies `lo` and
 * `eth0` into netstack, the Sentry's own TCP/IP stack, which sends and receives `eth0`'s frames
 * through packet sockets runsc opened for it. The policy of `allowNet` (nftables in the gateway
 * namespace, on the far side of the veth link), the DNS resolver, the secrets proxy and published
 * ports apply as in the container tier. runsc boots the sandbox while the link is made: config.json's
 * prestart hook holds it before its network set-up until the start gate (gvisor-launcher.ts) says the
 * link is there. The launcher removes `<bundle>/netns` once runsc runs the sandbox. A network `disabled` box runs with `--network=none`: netstack's loopback only, in a network
 * namespace runsc makes itself (no namespace file, link or `/proc/sys` view).
 *
 * This module holds what the gVisor tier plugs into the shared box life cycle (box-engine.ts). The box's files are
 * laid out as the container tier's (box-files.ts), its bundle in gvisor-bundle.ts, the runsc
 * subcommands in gvisor-runsc.ts, commands (`exec`) in gvisor-exec.ts; resource usage is read from
 * the sandbox's cgroup as for a container (cgroup-stats.ts).
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { BoxEngine, type BoxNetworkHooks, type Launched, removeRootBoxFiles } from './box-engine.ts';
import { boxDiskSizeGb, readLivePid, stageBoxFiles } from './box-files.ts';
import type { CreateGVisorEngineOptions } from './engine-options.ts';
import {
  type GVisorBoxMeta,
  type GVisorBoxPaths,
  gvisorBoxPaths,
  gvisorSupervisorEnv,
  readGVisorMeta,
  writeGVisorBundle,
} from './gvisor-bundle.ts';
import { cleanStaleExecFiles, gvisorExec } from './gvisor-exec.ts';
import { installRunscLauncher, openStartGate, START_GATE, type StartGate } from './gvisor-launcher.ts';
import { prepareBoxNetns, removeBoxNetns } from './gvisor-netns.ts';
import { chooseGVisorPlatform, type GVisorPlatformChoice } from './gvisor-platform.ts';
import { Runsc } from './gvisor-runsc.ts';
import { forgetSandbox, registerSandbox } from './gvisor-tunnel.ts';
import {
  ensureGVisorNamespaces,
  type GVisorNamespaces,
  inGVisorNamespaces,
  prepareStateForNamespace,
  removeBoxCgroups,
  stageForNamespace,
} from './gvisor-userns.ts';
import { type SupervisorStart, startSupervisor, supervisorFailure, writeIfChanged } from './host-process.ts';
import { findExecutable, mountsUnder, unmountBoxDir } from './host-system.ts';
import type { OpenedHostPath } from './hostpath.ts';
import { ensureSandboxIdRange } from './idmap.ts';
import { HOST_BUSYBOX } from './rootfs.ts';
import { SUPERVISOR_SH } from './scripts.ts';
import type { EngineBoxSpec, EngineExecOptions, EngineProcess, EngineState } from './types.ts';

export type { CreateGVisorEngineOptions } from './engine-options.ts';

/** A gVisor box's network namespace in the making (`GVisorEngine.startNetns`). */
interface BoxNetns {
  /** Resolves once the namespace file exists; rejects when it cannot be made. */
  made: Promise<void>;
  /** Resolves once the `networkPrepare` hook has linked it; rejects with the namespace's or the hook's error. */
  linked: Promise<void>;
  /** Answers the launcher `go` or `stop` when `linked` settles. */
  gate: StartGate;
}

export { gvisorOciConfig, SENTRY_TASKS } from './gvisor-bundle.ts';

const DEFAULT_STATE_ROOT = '/run/seed-sandbox';

/**
 * Creates the gVisor engine: finds `runsc`, chooses the platform (probe at most once per boot),
 * makes the gVisor user namespace of the sandbox id range (gvisor-userns.ts), creates the state
 * directories and the supervisor script.
 * @throws BoxError when runsc or the init binary is missing, the platform option is invalid, the
 *   sandbox id range is missing, or the namespaces cannot be made.
 */
export async function createGVisorEngine(options: CreateGVisorEngineOptions = {}): Promise<GVisorEngine> {
  const runsc = findExecutable('runsc');
  if (!runsc)
    throw new BoxError("isolation: 'gvisor' needs runsc on the host (apt-get install runsc)", {
      code: 'unsupported',
    });
  const stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
  mkdirSync(stateRoot, { recursive: true, mode: 0o700 });
  const choice = await chooseGVisorPlatform(runsc, stateRoot, options.platform);
  const ns = await ensureGVisorNamespaces(ensureSandboxIdRange());
  return new GVisorEngine(runsc, choice, options, ns);
}

/** An `Engine` running each box under gVisor (`runsc`). Construct with `createGVisorEngine()`. */
export class GVisorEngine extends BoxEngine<GVisorBoxMeta> {
  /** Always `runsc`. */
  readonly name = 'runsc';
  /** The gVisor platform of this engine's boxes and why it was chosen. */
  readonly platform: GVisorPlatformChoice;
  /** The engine's state directory. */
  readonly stateRoot: string;
  /** runsc with this engine's root and platform. */
  private readonly rs: Runsc;
  /**
   * The supervisor's runsc command lines: `rs.runtime` through the launcher (gvisor-launcher.ts), for
   * a box with a network (`--network=sandbox`) and without one (`--network=none`).
   */
  private readonly rtLaunch: { sandbox: string[]; none: string[] };
  protected readonly boxesDir: string;
  protected readonly networkHooks: BoxNetworkHooks;
  private readonly execDir: string;
  private readonly supervisorPath: string;
  private readonly initPath: string;
  private readonly busybox: string | undefined;
  private readonly opts: CreateGVisorEngineOptions;
  /** The gVisor user namespace every runsc call runs in (undefined: runsc runs as host root). */
  private readonly ns: GVisorNamespaces | undefined;
  /** `[perl, idmap-mount.pl, hostUid, hostGid, size]` when `ns` is set. */
  private readonly idmapHelper: string[] | undefined;

  /**
   * Use `createGVisorEngine()`. With `ns`, every runsc call runs in that user namespace.
   * @throws BoxError when the init binary or perl is missing or stateRoot is invalid.
   */
  constructor(
    runsc: string,
    platform: GVisorPlatformChoice,
    options: CreateGVisorEngineOptions = {},
    ns?: GVisorNamespaces,
  ) {
    super();
    this.opts = options;
    this.networkHooks = options;
    this.ns = ns;
    this.platform = platform;
    this.stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
    if (!this.stateRoot.startsWith('/') || /\s/.test(this.stateRoot)) {
      throw new BoxError(`stateRoot: '${this.stateRoot}' must be an absolute path without spaces`, {
        field: 'stateRoot',
        code: 'invalid_option',
      });
    }
    const init = findExecutable(options.initPath ?? '/usr/bin/catatonit');
    if (!init)
      throw new BoxError(`initPath: '${options.initPath ?? '/usr/bin/catatonit'}' not found`, {
        field: 'initPath',
        code: 'invalid_option',
      });
    this.initPath = init;
    this.busybox = existsSync(HOST_BUSYBOX) ? HOST_BUSYBOX : undefined;
    const rtRoot = join(this.stateRoot, 'runsc');
    this.boxesDir = join(this.stateRoot, 'boxes');
    this.execDir = join(this.stateRoot, 'exec');
    const binDir = join(this.stateRoot, 'bin');
    for (const d of [rtRoot, this.boxesDir, this.execDir, binDir])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    this.supervisorPath = join(binDir, 'supervisor.sh');
    writeIfChanged(this.supervisorPath, SUPERVISOR_SH);
    cleanStaleExecFiles(this.execDir);
    if (ns) this.idmapHelper = prepareStateForNamespace(ns, this.stateRoot, [rtRoot, this.execDir], binDir);
    this.rs = new Runsc(runsc, rtRoot, platform.platform, ns ? inGVisorNamespaces(ns) : []);
    const perl = findExecutable('perl');
    if (!perl)
      throw new BoxError("isolation: 'gvisor' needs perl on the host (perl-base)", { code: 'unsupported' });
    const launcher = installRunscLauncher(binDir, perl);
    this.rtLaunch = {
      sandbox: [...launcher, ...this.rs.runtime],
      none: [...launcher, ...this.rs.withNetwork('none')],
    };
  }

  /** The supervisor script (another process's supervisor of a box is recognised by it). */
  protected get supervisorScript(): string {
    return this.supervisorPath;
  }

  /**
   * Launches a box under gVisor once its host paths are open (`opened[i]` is the host object of
   * `spec.mounts[i]`): bundle, files, the box's network namespace, the supervisor that mounts and runs it.
   * @throws BoxError naming the field or the failed stage (with runsc's log).
   */
  protected async launch(spec: EngineBoxSpec, opened: OpenedHostPath[]): Promise<Launched> {
    const diskSizeGb = boxDiskSizeGb(spec);
    const p = gvisorBoxPaths(spec.boxDir, diskSizeGb);
    if (this.rs.known(spec.id)) {
      const st = await this.state(spec.id);
      if (st.status === 'running' || st.status === 'created')
        throw new BoxError(`box ${spec.id}: already running`, { code: 'conflict' });
      await this.rs.call(['delete', '--force', spec.id]);
    }
    if (mountsUnder(p.rootfs).length > 0) await unmountBoxDir(spec.boxDir);

    const tConfig0 = performance.now();
    // A box without a network gets netstack's loopback only (`--network=none`): runsc makes its
    // network namespace itself, and no namespace file, link or /proc/sys view is needed.
    const withNetwork = spec.network.mode !== 'disabled';
    const meta = writeGVisorBundle(spec, p, diskSizeGb, {
      init: this.initPath,
      ...(this.busybox ? { busybox: this.busybox } : {}),
      platform: this.platform.platform,
      netns: withNetwork,
      ...(withNetwork ? { startGate: join(p.bundle, START_GATE) } : {}),
    });
    const stageBoxConfigMs = performance.now() - tConfig0;

    const tFs0 = performance.now();
    // runsc and its gofer look the bind targets up as the gVisor namespace's root: traverse, not list.
    const binds = await stageBoxFiles(this.stateRoot, this.boxesDir, spec, p, diskSizeGb, opened, {
      snapshots: false,
      bindsMode: 0o711,
    });
    if (this.ns) stageForNamespace(this.ns, spec, p.bundle, opened);

    // The box's network namespace and link are made while the supervisor mounts the root. runsc boots
    // the sandbox once the namespace exists and the root is mounted, and takes the interfaces over once
    // the link is made: config.json's prestart hook waits on the start gate in between.
    const net = withNetwork ? await this.startNetns(spec, p.netns) : undefined;
    const netnsReady = net?.linked;
    const { child, outcome, tMounted, tStarted } = await this.runSupervisor(
      spec,
      p,
      diskSizeGb,
      opened,
      binds,
      net,
    ).finally(() => net?.gate.close());
    if (outcome !== 'started') {
      child.stdin?.destroy();
      // prepareBoxNetns undoes its own work when it fails: its error is the one to report.
      const netnsError = await netnsReady?.then(
        () => undefined,
        (err: unknown) => err,
      );
      if (netnsError !== undefined) {
        // runsc may have booted the sandbox before the link failed.
        if (this.rs.known(spec.id)) {
          await this.rs.call(['delete', '--force', spec.id]);
          await removeBoxCgroups(spec.id);
        }
        await unmountBoxDir(spec.boxDir).catch(() => {});
        throw netnsError;
      }
      const error = await supervisorFailure(
        spec.id,
        outcome,
        p.log,
        ` (runsc, platform ${this.platform.platform})`,
      );
      // The supervisor's own cleanup can lose the race with runsc's gofer for the root mount.
      await this.rs.call(['delete', '--force', spec.id]);
      await removeBoxCgroups(spec.id);
      await this.opts.networkTeardown?.(spec.id).catch(() => {});
      await removeBoxNetns(p.netns);
      await unmountBoxDir(spec.boxDir).catch(() => {});
      throw error;
    }
    this.supervisors.keep(spec.id, child, spec.detach);

    const pid = readLivePid(p.pidFile);
    if (pid === undefined) {
      await this.stop(spec.id, 0).catch(() => {});
      throw new BoxError(`box ${spec.id}: the gVisor sandbox exited right after start`, { code: 'internal' });
    }
    // The sandbox holds the namespace from now on (it lives exactly as long as the box): the launcher
    // has removed its file, unless its unmount failed.
    if (existsSync(p.netns)) await removeBoxNetns(p.netns);
    registerSandbox(pid, this.rs.runtime, spec.id);
    this.metas.set(spec.id, { ...meta, boxDir: spec.boxDir, rootfs: p.rootfs });
    return { pid, clock: { configMs: stageBoxConfigMs, fs0: tFs0, mounted: tMounted, started: tStarted } };
  }

  /**
   * Starts the box's supervisor (scripts.ts) with the runsc command line of the box's network mode;
   * with `net`, the supervisor runs runsc once the namespace file exists (`net.made`) and the launcher
   * relays the start gate to the prestart hook. Never throws for a failed start (see `startSupervisor`).
   * @throws the fs error when the bundle's `config.json` cannot be read.
   */
  private runSupervisor(
    spec: EngineBoxSpec,
    p: GVisorBoxPaths,
    diskSizeGb: number | undefined,
    opened: OpenedHostPath[],
    binds: string[],
    net: BoxNetns | undefined,
  ): Promise<SupervisorStart> {
    const env = {
      ...gvisorSupervisorEnv(
        spec,
        p,
        diskSizeGb,
        net ? this.rtLaunch.sandbox : this.rtLaunch.none,
        binds,
        this.idmapHelper ? { helper: this.idmapHelper } : undefined,
      ),
      SB_NETNS: [...(this.opts.networkFiles?.(spec.id) ?? []), ...(net ? [p.netns] : [])].join(' '),
      // The launcher removes the namespace file once runsc has run the sandbox (which holds it then).
      ...(net
        ? { SB_GV_NETNS: p.netns, SB_GV_GATE: net.gate.name, SB_GV_FIFO: join(p.bundle, START_GATE) }
        : {}),
    };
    this.supervisors.release(spec.id);
    return startSupervisor(
      '/bin/sh',
      [this.supervisorPath],
      env,
      opened.map((o) => o.fd),
      net?.made,
    );
  }

  /**
   * Opens the box's start gate, then starts making its network namespace at `netns` and its link
   * (`prepareBoxNetns`), whose settling the gate answers.
   * @throws the socket error when the start gate cannot listen (nothing is made then).
   */
  private async startNetns(spec: EngineBoxSpec, netns: string): Promise<BoxNetns> {
    // The gate answers what the link does; it listens before anything is made.
    const answer = Promise.withResolvers<void>();
    const gate = await openStartGate(answer.promise);
    const hook = this.opts.networkPrepare;
    const madeSignal = Promise.withResolvers<void>();
    const linked = prepareBoxNetns(
      spec,
      netns,
      async (ctx) => {
        madeSignal.resolve();
        await hook?.(ctx);
      },
      this.opts.networkTeardown,
      this.ns,
    );
    linked.catch(() => {});
    answer.resolve(linked);
    const made = Promise.race([madeSignal.promise, linked]);
    made.catch(() => {});
    return { made, linked, gate };
  }

  /** Undefined for a box not of this tier (the index is shared with the container tier). */
  protected readMeta(id: string): GVisorBoxMeta | undefined {
    return readGVisorMeta(this.boxesDir, id);
  }

  protected placeholderMeta(id: string, boxDir: string): GVisorBoxMeta {
    return {
      id,
      isolation: 'gvisor',
      platform: this.platform.platform,
      env: [],
      workingDir: '/',
      cpus: 1,
      boxDir,
      rootfs: join(boxDir, 'rootfs'),
    };
  }

  /**
   * Runs a command with `runsc exec` (gvisor-exec.ts). The exit code is the command's, 128 + signal when
   * a signal ended it, or 255 when it could not be started (runsc's message on stderr).
   * @throws BoxError when `user` is unknown, `cwd`, `env` or `ttySize` is malformed, or `tty` is asked
   *   without script(1) on the host.
   */
  protected async execIn(
    meta: GVisorBoxMeta,
    _pid: number,
    options: EngineExecOptions,
  ): Promise<EngineProcess> {
    return gvisorExec(
      { runtime: this.rs.runtime, execDir: this.execDir, seq: ++this.execSeq },
      meta,
      options,
    );
  }

  /** runsc's view of the box; its `pid` is the host pid of the sandbox process. */
  protected runtimeState(id: string): Promise<EngineState | undefined> {
    return this.rs.state(id);
  }

  protected override observedRunning(id: string, pid: number): void {
    registerSandbox(pid, this.rs.runtime, id);
  }

  /**
   * SIGTERM to every command (not the init: its exit would end the sandbox at once) and up to
   * `graceMs` for them to exit, then SIGKILL to the init, which ends the sandbox.
   */
  protected async halt(id: string, graceMs: number): Promise<void> {
    const st = await this.state(id);
    if (st.status === 'running' && st.pid) await this.rs.stopSandbox(id, st.pid, graceMs);
  }

  protected runtimeKnows(id: string): boolean {
    return this.rs.known(id);
  }

  /** `runsc delete --force`. */
  protected async deleteContainer(id: string): Promise<void> {
    if (this.rs.known(id)) await this.rs.delete(id);
  }

  /** The box's cgroup (made by the launcher when runsc runs in the gVisor namespace) and its mounts. */
  protected async releaseHost(id: string, meta: GVisorBoxMeta | undefined): Promise<void> {
    if (this.ns) await removeBoxCgroups(id);
    if (meta) await unmountBoxDir(meta.boxDir);
  }

  protected override stopped(id: string): void {
    forgetSandbox(id);
  }

  protected removeFiles(id: string, boxDir: string): Promise<void> {
    return removeRootBoxFiles(id, boxDir);
  }

  /** Only the index entries of this tier's boxes. */
  protected override listsIndexEntry(id: string): boolean {
    return this.meta(id) !== undefined;
  }

  protected runtimeIds(): Promise<string[]> {
    return this.rs.list();
  }
}
