/**
 * The gVisor isolation tier: each box is one OCI container run by `runsc` (Debian package), whose
 * user-space kernel (the Sentry) answers the box's system calls, so box processes never make system
 * calls to the host kernel directly (Modal's and GKE Sandbox's isolation).
 *
 * The box is built as in the container tier (engine.ts): the same overlay root mounted by the same
 * `supervisor.sh` (parent-death watch included), the same `config.json` from `buildOciConfig` with
 * the changes of `gvisorOciConfig`, run as `runsc --root <stateRoot>/runsc --platform=<ptrace|kvm>
 * --network=sandbox run --detach` through the launcher of gvisor-netns.ts. The platform is chosen
 * once per boot (gvisor-platform.ts).
 *
 * Host privileges: with `--network=sandbox` runsc runs the Sentry (which runs the box's code) as
 * `nobody` (host uid/gid 65534) in a user namespace of its own that maps only that id, chrooted, with
 * a seccomp filter; the gofer (which opens the box's files for it) stays host root, chrooted to the
 * box root, with a seccomp filter and no_new_privs (SECURITY.md "gVisor tier").
 *
 * Network: the box's network namespace is made before runsc runs (`<bundle>/netns`, `lo` up) and
 * the `networkPrepare` hook links it to its gateway (`eth0`, gateway.ts); runsc copies `lo` and
 * `eth0` into netstack, the Sentry's own TCP/IP stack, which sends and receives `eth0`'s frames
 * through packet sockets runsc opened for it. The policy of `allowNet` (nftables in the gateway
 * namespace, on the far side of the veth link), the DNS resolver, the secrets proxy and published
 * ports apply as in the container tier. A network `disabled` box has netstack's loopback only.
 *
 * Commands: `runsc exec --internal-pid-file` with three pipes; `kill` signals the command's pid in
 * the sandbox with `runsc kill --pid`. No terminal (`tty`): runsc 20221219 has no `exec --tty`.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { DEFAULT_DISK_SIZE_GB, DISK_MOUNT_OPTIONS, ensureDiskImage } from './disk.ts';
import { type EngineNetworkContext, findExecutable, mountsUnder, resolveUser } from './engine.ts';
import {
  createBoxNetns,
  forgetSandbox,
  type GVisorNetnsContext,
  RUNSC_NETNS_SH,
  registerSandbox,
  removeBoxNetns,
} from './gvisor-netns.ts';
import { chooseGVisorPlatform, type GVisorPlatform, type GVisorPlatformChoice } from './gvisor-platform.ts';
import { alive, drain, sleep, startSupervisor, supervisorFailure, writeIfChanged } from './host-process.ts';
import { type OpenedHostPath, openHostPath } from './hostpath.ts';
import { readNetworkCounters } from './net-counters.ts';
import { buildOciConfig, etcHosts, validateSpec } from './oci.ts';
import { HOST_BUSYBOX } from './rootfs.ts';
import { SUPERVISOR_SH } from './scripts.ts';
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

/**
 * Host tasks the Sentry, the gofer and their Go runtimes use besides the box's own processes
 * (measured: 29 for an idle box, 56 after its first command).
 */
export const SENTRY_TASKS = 96;

/** Options of `createGVisorEngine`. */
export interface CreateGVisorEngineOptions {
  /** The engine state directory (shared with the container tier); default `/run/seed-sandbox`. */
  stateRoot?: string;
  /** Host path of the static init bound at `/.sandbox/init`; default `/usr/bin/catatonit`. */
  initPath?: string;
  /** gVisor platform; default: probed (gvisor-platform.ts), env `SEED_SANDBOX_GVISOR_PLATFORM`. */
  platform?: GVisorPlatform;
  /**
   * Runs before runsc starts the box, with the box's network namespace file: makes the interfaces
   * netstack will take over (runsc copies them at start only). Not called for a `disabled` network.
   */
  networkPrepare?: (ctx: GVisorNetnsContext) => Promise<void>;
  /** As `CreateEngineOptions.networkSetup`: runs once the sandbox runs, with its host pid. */
  networkSetup?: (ctx: EngineNetworkContext) => Promise<void>;
  /** As `CreateEngineOptions.networkTeardown`. */
  networkTeardown?: (id: string) => Promise<void>;
}

/** Per-box facts in `<boxDir>/bundle/engine.json` (the tier reads `isolation` to route calls). */
interface GVisorMeta {
  id: string;
  isolation: 'gvisor';
  platform: GVisorPlatform;
  env: string[];
  user?: string;
  workingDir: string;
  cpus: number;
  diskSizeGb?: number;
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

const DEFAULT_STATE_ROOT = '/run/seed-sandbox';
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const CGROUP_PARENT = 'seed-sandbox';
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/** Exit code of a command that could not be started (as in the container tier). */
const EXEC_START_FAILED = 255;

function run(file: string, args: string[], timeoutMs = 30_000): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({
        code,
        stdout: String(stdout),
        stderr: String(stderr || (err && !stderr ? err.message : '')),
      });
    });
  });
}

/**
 * The `config.json` of a gVisor box: `buildOciConfig` with three changes.
 * - No `/sys/fs/cgroup` mount (gVisor 20221219 has no cgroupfs for boxes).
 * - No `seccomp` section: runsc ignores it (without `--oci-seccomp`, which would not cover `exec`
 *   processes either); the Sentry's own host seccomp filter and its syscall emulation take its place.
 * - `pids.limit` is the box's `pidsLimit` twice over (ptrace: a host thread per box thread plus the
 *   Sentry's tracer thread) plus `SENTRY_TASKS`: runsc applies the limit to its host processes.
 * @throws BoxError as `buildOciConfig` (unknown capability name).
 */
export function gvisorOciConfig(
  spec: EngineBoxSpec,
  paths: Parameters<typeof buildOciConfig>[1],
): Record<string, unknown> {
  const config = buildOciConfig(spec, paths);
  config.mounts = (config.mounts as { destination: string }[]).filter(
    (m) => m.destination !== '/sys/fs/cgroup',
  );
  const linux = config.linux as { seccomp?: unknown; resources: { pids: { limit: number } } };
  delete linux.seccomp;
  linux.resources.pids.limit = spec.pidsLimit * 2 + SENTRY_TASKS;
  return config;
}

/**
 * Creates the gVisor engine: finds `runsc`, chooses the platform (probe at most once per boot),
 * creates the state directories and the supervisor script.
 * @throws BoxError when runsc or the init binary is missing, or the platform option is invalid.
 */
export async function createGVisorEngine(options: CreateGVisorEngineOptions = {}): Promise<GVisorEngine> {
  const runsc = findExecutable('runsc');
  if (!runsc) throw new BoxError("isolation: 'gvisor' needs runsc on the host (apt-get install runsc)");
  const stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
  mkdirSync(stateRoot, { recursive: true, mode: 0o700 });
  const choice = await chooseGVisorPlatform(runsc, stateRoot, options.platform);
  return new GVisorEngine(runsc, choice, options);
}

/** An `Engine` running each box under gVisor (`runsc`). Construct with `createGVisorEngine()`. */
export class GVisorEngine implements Engine {
  /** Always `runsc`. */
  readonly name = 'runsc';
  /** The gVisor platform of this engine's boxes and why it was chosen. */
  readonly platform: GVisorPlatformChoice;
  /** The engine's state directory. */
  readonly stateRoot: string;
  private readonly rt: string[];
  /** `rt` through the launcher that hides `/proc/sys/net` (gvisor-netns.ts), for `run`. */
  private readonly rtNetns: string[];
  private readonly rtRoot: string;
  private readonly boxesDir: string;
  private readonly execDir: string;
  private readonly supervisorPath: string;
  private readonly initPath: string;
  private readonly busybox: string | undefined;
  private readonly opts: CreateGVisorEngineOptions;
  private readonly supervisors = new Map<string, ChildProcess>();
  private readonly metas = new Map<string, GVisorMeta & { boxDir: string; rootfs: string }>();
  private readonly cpuSamples = new Map<string, { t: number; usageNs: number }>();
  private execSeq = 0;

  /** Use `createGVisorEngine()`. @throws BoxError when the init binary is missing or stateRoot is invalid. */
  constructor(runsc: string, platform: GVisorPlatformChoice, options: CreateGVisorEngineOptions = {}) {
    this.opts = options;
    this.platform = platform;
    this.stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
    if (!this.stateRoot.startsWith('/') || /\s/.test(this.stateRoot)) {
      throw new BoxError(`stateRoot: '${this.stateRoot}' must be an absolute path without spaces`);
    }
    const init = findExecutable(options.initPath ?? '/usr/bin/catatonit');
    if (!init) throw new BoxError(`initPath: '${options.initPath ?? '/usr/bin/catatonit'}' not found`);
    this.initPath = init;
    this.busybox = existsSync(HOST_BUSYBOX) ? HOST_BUSYBOX : undefined;
    this.rtRoot = join(this.stateRoot, 'runsc');
    this.boxesDir = join(this.stateRoot, 'boxes');
    this.execDir = join(this.stateRoot, 'exec');
    const binDir = join(this.stateRoot, 'bin');
    for (const d of [this.rtRoot, this.boxesDir, this.execDir, binDir])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    this.supervisorPath = join(binDir, 'supervisor.sh');
    writeIfChanged(this.supervisorPath, SUPERVISOR_SH);
    const launcher = join(binDir, 'runsc-netns.sh');
    writeIfChanged(launcher, RUNSC_NETNS_SH);
    cleanStaleExecFiles(this.execDir);
    this.rt = [runsc, '--root', this.rtRoot, `--platform=${platform.platform}`, '--network=sandbox'];
    const unshare = findExecutable('unshare');
    if (!unshare) throw new BoxError("isolation: 'gvisor' needs unshare on the host (util-linux)");
    this.rtNetns = [unshare, '-m', '--', '/bin/sh', launcher, ...this.rt];
  }

  /** True while runsc keeps state for box `id` (`<rtRoot>/<id>_sandbox:<id>.state`, from run to delete). */
  private known(id: string): boolean {
    return existsSync(join(this.rtRoot, `${id}_sandbox:${id}.state`));
  }

  private runsc(args: string[]): Promise<RunResult> {
    return run(this.rt[0] as string, [...this.rt.slice(1), ...args]);
  }

  private paths(boxDir: string, diskSizeGb?: number) {
    const diskDir = join(boxDir, 'disk');
    const base = diskSizeGb !== undefined ? diskDir : boxDir;
    return {
      bundle: join(boxDir, 'bundle'),
      rootfs: join(boxDir, 'rootfs'),
      upper: join(base, 'upper'),
      work: join(base, 'work'),
      diskImg: join(boxDir, 'disk.img'),
      diskDir,
      log: join(boxDir, 'runtime.log'),
      pidFile: join(boxDir, 'bundle', 'init.pid'),
      binds: join(boxDir, 'binds'),
      netns: join(boxDir, 'bundle', 'netns'),
    };
  }

  /** Starts a box under gVisor; see `Engine.start`. @throws BoxError naming the field or the failed stage (with runsc's log). */
  async start(spec: EngineBoxSpec): Promise<EngineStarted> {
    validateSpec(spec);
    // Host paths are opened first (hostpath.ts: a symlink anywhere on one is refused) and bound from
    // their descriptors, as in the container tier.
    const opened: OpenedHostPath[] = [];
    try {
      for (const [i, m] of spec.mounts.entries())
        opened.push(openHostPath(m.hostPath, `mounts[${i}].hostPath`));
      return await this.startOpened(spec, opened);
    } finally {
      for (const o of opened) o.close();
    }
  }

  /** `start` once the host paths are open; `opened[i]` is the host object of `spec.mounts[i]`. */
  private async startOpened(spec: EngineBoxSpec, opened: OpenedHostPath[]): Promise<EngineStarted> {
    // Every box gets a size-limited disk (disk.ts) holding its writable layer and /etc files; a box
    // whose layer predates that default (an upper dir in boxDir, no disk image) keeps its layer.
    const legacy =
      spec.diskSizeGb === undefined &&
      existsSync(join(spec.boxDir, 'upper')) &&
      !existsSync(join(spec.boxDir, 'disk.img'));
    const diskSizeGb = spec.diskSizeGb ?? (legacy ? undefined : DEFAULT_DISK_SIZE_GB);
    const p = this.paths(spec.boxDir, diskSizeGb);
    const etcDir = diskSizeGb !== undefined ? p.diskDir : p.bundle;
    if (this.known(spec.id)) {
      const st = await this.state(spec.id);
      if (st.status === 'running' || st.status === 'created')
        throw new BoxError(`box ${spec.id}: already running`);
      await this.runsc(['delete', '--force', spec.id]);
    }
    if (mountsUnder(p.rootfs).length > 0) await this.unmountAll(spec.boxDir);

    const tConfig0 = performance.now();
    // The supervisor binds each host path from its descriptor onto <boxDir>/binds/<i>.
    const mounts = spec.mounts.map((m, i) => ({ ...m, hostPath: join(p.binds, String(i)) }));
    const config = gvisorOciConfig(
      { ...spec, mounts },
      {
        rootfs: p.rootfs,
        init: this.initPath,
        initArgs: ['-P'],
        ...(this.busybox ? { ttyHelper: this.busybox } : {}),
        cgroupsPath: `/${CGROUP_PARENT}/${spec.id}`,
        etcFiles: { hosts: join(etcDir, 'hosts'), hostname: join(etcDir, 'hostname') },
      },
    );
    mkdirSync(p.bundle, { recursive: true });
    if (diskSizeGb === undefined) {
      writeFileSync(join(p.bundle, 'hosts'), etcHosts(spec.hostname));
      writeFileSync(join(p.bundle, 'hostname'), `${spec.hostname}\n`);
    }
    (config.process as { cwd: string }).cwd = spec.workingDir;
    // The network namespace made (and linked) before runsc runs: runsc copies its interfaces at start.
    const linux = config.linux as { namespaces: { type: string; path?: string }[] };
    linux.namespaces = linux.namespaces.map((n) => (n.type === 'network' ? { ...n, path: p.netns } : n));
    writeFileSync(join(p.bundle, 'config.json'), JSON.stringify(config));
    const meta: GVisorMeta = {
      id: spec.id,
      isolation: 'gvisor',
      platform: this.platform.platform,
      env: spec.env,
      user: spec.user,
      workingDir: spec.workingDir,
      cpus: spec.cpus,
      diskSizeGb,
    };
    writeFileSync(join(p.bundle, 'engine.json'), JSON.stringify(meta));
    const stageBoxConfigMs = performance.now() - tConfig0;

    const tFs0 = performance.now();
    mkdirSync(p.rootfs, { recursive: true });
    if (diskSizeGb !== undefined) {
      mkdirSync(p.diskDir, { recursive: true });
      await ensureDiskImage(this.stateRoot, spec.id, p.diskImg, diskSizeGb);
    } else {
      mkdirSync(p.upper, { recursive: true });
      mkdirSync(p.work, { recursive: true });
    }
    const link = join(this.boxesDir, spec.id);
    rmSync(link, { force: true });
    symlinkSync(spec.boxDir, link);
    rmSync(p.pidFile, { force: true });
    writeFileSync(p.log, '');
    rmSync(p.binds, { recursive: true, force: true });
    if (opened.length > 0) mkdirSync(p.binds, { mode: 0o700 });
    const binds: string[] = [];
    for (const [i, o] of opened.entries()) {
      const target = join(p.binds, String(i));
      if (o.isDirectory) mkdirSync(target);
      else writeFileSync(target, '');
      binds.push(`${3 + i}:${target}`);
    }

    await createBoxNetns(p.netns);
    if (this.opts.networkPrepare && spec.network.mode !== 'disabled') {
      try {
        await this.opts.networkPrepare({ id: spec.id, netns: p.netns, network: spec.network });
      } catch (err) {
        await this.opts.networkTeardown?.(spec.id).catch(() => {});
        await removeBoxNetns(p.netns);
        throw new BoxError(`box ${spec.id}: network setup failed: ${(err as Error).message}`, { cause: err });
      }
    }

    const env = {
      PATH: process.env.PATH ?? DEFAULT_PATH,
      SB_ID: spec.id,
      SB_RT: this.rtNetns.join(' '),
      SB_BUNDLE: p.bundle,
      SB_ROOTFS: p.rootfs,
      SB_LOWER: [...spec.layerDirs].reverse().join(':'),
      SB_UPPER: p.upper,
      SB_WORK: p.work,
      SB_DISK_IMG: diskSizeGb !== undefined ? p.diskImg : '',
      SB_DISK_OPTS: DISK_MOUNT_OPTIONS,
      SB_HOSTS: etcHosts(spec.hostname),
      SB_HOSTNAME: `${spec.hostname}\n`,
      SB_DISK_DIR: p.diskDir,
      SB_LOG: p.log,
      SB_PIDFILE: p.pidFile,
      SB_BINDS: binds.join(' '),
      SB_WATCH: spec.detach ? '0' : '1',
    };
    const old = this.supervisors.get(spec.id);
    if (old) this.release(spec.id, old);
    const { child, outcome, tMounted, tStarted } = await startSupervisor(
      '/bin/sh',
      [this.supervisorPath],
      env,
      opened.map((o) => o.fd),
    );
    if (outcome !== 'started') {
      child.stdin?.destroy();
      const error = await supervisorFailure(
        spec.id,
        outcome,
        p.log,
        ` (runsc, platform ${this.platform.platform})`,
      );
      // The supervisor's own cleanup can lose the race with runsc's gofer for the root mount.
      await this.runsc(['delete', '--force', spec.id]);
      await this.opts.networkTeardown?.(spec.id).catch(() => {});
      await removeBoxNetns(p.netns);
      await this.unmountAll(spec.boxDir).catch(() => {});
      throw error;
    }
    if (!spec.detach) {
      this.supervisors.set(spec.id, child);
      (child.stdin as unknown as { unref?: () => void }).unref?.();
    } else {
      child.stdin?.destroy();
    }
    child.unref();

    let pid = 0;
    try {
      pid = Number.parseInt(readFileSync(p.pidFile, 'utf8'), 10);
    } catch {}
    if (!(pid > 0) || !alive(pid)) {
      await this.stop(spec.id, 0).catch(() => {});
      throw new BoxError(`box ${spec.id}: the gVisor sandbox exited right after start`);
    }
    // The sandbox holds the namespace from now on: it lives exactly as long as the box.
    await removeBoxNetns(p.netns);
    registerSandbox(pid, this.rt, spec.id);
    this.metas.set(spec.id, { ...meta, boxDir: spec.boxDir, rootfs: p.rootfs });
    this.cpuSamples.delete(spec.id);
    if (this.opts.networkSetup) {
      try {
        await this.opts.networkSetup({ id: spec.id, pid, boxDir: spec.boxDir, network: spec.network });
      } catch (err) {
        await this.stop(spec.id, 0).catch(() => {});
        throw new BoxError(`box ${spec.id}: network setup failed: ${(err as Error).message}`, { cause: err });
      }
    }
    const tEnd = performance.now();
    const round = (ms: number) => Math.round(ms * 100) / 100;
    return {
      pid,
      timings: {
        stageBoxConfigMs: round(stageBoxConfigMs),
        stageFilesystemSetupMs: round(tMounted - tFs0),
        stageBoxSpawnMs: round(tStarted - tMounted),
        stageContainerInitMs: round(tEnd - tStarted),
      },
    };
  }

  private meta(id: string): (GVisorMeta & { boxDir: string; rootfs: string }) | undefined {
    const known = this.metas.get(id);
    if (known) return known;
    try {
      const boxDir = readlinkSync(join(this.boxesDir, id));
      const meta = JSON.parse(readFileSync(join(boxDir, 'bundle', 'engine.json'), 'utf8')) as GVisorMeta;
      if (meta.isolation !== 'gvisor') return undefined;
      const full = { ...meta, boxDir, rootfs: join(boxDir, 'rootfs') };
      this.metas.set(id, full);
      return full;
    } catch {
      return undefined;
    }
  }

  /** Host pid of the box's sandbox process (the Sentry) while it runs. */
  private sandboxPid(id: string): number | undefined {
    const meta = this.meta(id);
    if (!meta) return undefined;
    try {
      const pid = Number.parseInt(readFileSync(join(meta.boxDir, 'bundle', 'init.pid'), 'utf8'), 10);
      return pid > 0 && alive(pid) ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Runs a command in the box; see `Engine.exec`. The exit code is the command's, 128 + signal when
   * a signal ended it, or 255 when it could not be started (runsc's message on stderr).
   * @throws BoxError when the box is not running, `user` is unknown, `cwd` or `env` is malformed, or
   *   `tty` is requested (not supported by the gVisor tier).
   */
  async exec(id: string, options: EngineExecOptions): Promise<EngineProcess> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    if (options.tty) {
      throw new BoxError(
        "tty: not supported by the gvisor isolation tier (runsc 20221219 has no exec --tty); use isolation 'container'",
        { code: 'unsupported' },
      );
    }
    const meta = this.meta(id);
    if (!meta || this.sandboxPid(id) === undefined) throw new BoxError(`box ${id}: not running`);
    if (typeof options.cmd !== 'string' || options.cmd.length === 0)
      throw new BoxError('cmd: must be a non-empty string');
    const pidFile = join(this.execDir, `${id}.${process.pid}.${++this.execSeq}.ipid`);
    const args = ['exec', '--internal-pid-file', pidFile];
    const user = options.user ?? meta.user;
    if (user !== undefined && user !== '') args.push('--user', resolveUser(meta.rootfs, user, 'user'));
    const cwd = options.cwd ?? meta.workingDir;
    if (!cwd.startsWith('/')) throw new BoxError(`cwd: '${cwd}' must be an absolute path`);
    args.push('--cwd', cwd);
    const env = new Map<string, string>();
    for (const e of meta.env) env.set(e.slice(0, e.indexOf('=')), e);
    for (const e of options.env) {
      if (!e.includes('=') || e.startsWith('=')) throw new BoxError(`env: '${e}' must be KEY=value`);
      env.set(e.slice(0, e.indexOf('=')), e);
    }
    for (const e of env.values()) args.push('--env', e);
    args.push(id, options.cmd, ...options.args);
    const child = spawn(this.rt[0] as string, [...this.rt.slice(1), ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let done = false;
    const exited = new Promise<number>((resolve, reject) => {
      child.on('error', (err) => {
        done = true;
        reject(new BoxError(`box ${id}: exec failed: ${err.message}`, { cause: err }));
      });
      child.on('exit', (code, signal) => {
        done = true;
        // runsc writes the command's pid once the command runs: without it, it never started.
        const started = existsSync(pidFile);
        rm(pidFile, { force: true }).catch(() => {});
        if (!started && code === 128) resolve(EXEC_START_FAILED);
        else resolve(code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0));
      });
    });
    exited.catch(() => {});
    /** The command's pid inside the sandbox (waits up to 2 s for runsc to write it). */
    const commandPid = async (): Promise<number | undefined> => {
      for (let i = 0; i < 400 && !done; i++) {
        try {
          const pid = Number.parseInt(await readFile(pidFile, 'utf8'), 10);
          if (pid > 0) return pid;
        } catch {}
        await sleep(5);
      }
      return undefined;
    };
    const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
      const pid = await commandPid();
      if (pid === undefined || done) return;
      await this.runsc(['kill', '--pid', String(pid), id, signal.replace(/^SIG/, '')]);
    };
    child.stdin.on('error', () => {});
    return { stdin: child.stdin, stdout: drain(child.stdout), stderr: drain(child.stderr), exited, kill };
  }

  /** Pids (inside the sandbox) of the box's processes, from `runsc ps`; empty when it is not running. */
  private async guestPids(id: string): Promise<number[]> {
    const r = await this.runsc(['ps', '--format', 'json', id]);
    if (r.code !== 0) return [];
    try {
      return (JSON.parse(r.stdout) as number[] | null) ?? [];
    } catch {
      return [];
    }
  }

  /**
   * Stops the box; see `Engine.stop`. SIGTERM to every command (not the init: its exit would end the
   * sandbox at once) and up to `graceMs` for them to exit, then SIGKILL to the init, which ends the
   * sandbox; then `runsc delete --force` and the root is unmounted. Idempotent.
   */
  async stop(id: string, graceMs = 2000): Promise<void> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const meta = this.meta(id);
    const st = await this.state(id);
    if (st.status === 'running' && st.pid) {
      if (graceMs > 0) {
        const others = async () => (await this.guestPids(id)).filter((p) => p !== 1);
        let pids = await others();
        if (pids.length > 0) {
          await Promise.all(pids.map((p) => this.runsc(['kill', '--pid', String(p), id, 'TERM'])));
          const deadline = performance.now() + graceMs;
          while (pids.length > 0 && performance.now() < deadline) {
            await sleep(50);
            pids = await others();
          }
        }
      }
      if (alive(st.pid)) await this.runsc(['kill', id, 'KILL']);
      for (let i = 0; i < 500 && alive(st.pid); i++) await sleep(10);
    }
    const inRuntime = this.known(id);
    if (inRuntime && this.opts.networkTeardown) await this.opts.networkTeardown(id).catch(() => {});
    if (inRuntime) {
      const del = await this.runsc(['delete', '--force', id]);
      if (del.code !== 0 && !/does not exist|not exist|No such file|not found/i.test(del.stderr)) {
        throw new BoxError(`box ${id}: deleting the gVisor sandbox failed: ${del.stderr.trim()}`);
      }
    }
    if (meta) {
      rmSync(join(meta.boxDir, 'bundle', 'init.pid'), { force: true });
      await this.unmountAll(meta.boxDir);
    }
    const sup = this.supervisors.get(id);
    if (sup) this.release(id, sup);
    this.cpuSamples.delete(id);
    forgetSandbox(id);
  }

  private release(id: string, child: ChildProcess): void {
    this.supervisors.delete(id);
    try {
      child.stdin?.end('release\n');
    } catch {}
  }

  private async unmountAll(boxDir: string): Promise<void> {
    for (const m of mountsUnder(boxDir)) {
      let r = await run('/bin/umount', [m]);
      if (r.code !== 0) r = await run('/bin/umount', ['-l', m]);
      if (r.code !== 0 && mountsUnder(m).includes(m))
        throw new BoxError(`unmounting ${m} failed: ${r.stderr.trim()}`);
    }
  }

  /** Deletes the sandbox, its mounts and the engine's files under `boxDir`; see `Engine.remove`. Idempotent. */
  async remove(id: string, boxDir: string): Promise<void> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    if (!this.meta(id)) {
      this.metas.set(id, {
        id,
        isolation: 'gvisor',
        platform: this.platform.platform,
        env: [],
        workingDir: '/',
        cpus: 1,
        boxDir,
        rootfs: join(boxDir, 'rootfs'),
      });
    }
    await this.stop(id, 0);
    await this.unmountAll(boxDir);
    if (mountsUnder(boxDir).length > 0) throw new BoxError(`box ${id}: ${boxDir} is still mounted`);
    for (const name of [
      'bundle',
      'rootfs',
      'upper',
      'work',
      'disk',
      'disk.img',
      'disk.img.tmp',
      'binds',
      'runtime.log',
    ]) {
      await rm(join(boxDir, name), { recursive: true, force: true });
    }
    try {
      unlinkSync(join(this.boxesDir, id));
    } catch {}
    this.metas.delete(id);
  }

  /** runsc's view of the box; see `Engine.state`. `pid` is the host pid of the sandbox process. */
  async state(id: string): Promise<EngineState> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const r = await this.runsc(['state', id]);
    if (r.code !== 0) return { status: this.meta(id) ? 'stopped' : 'unknown' };
    try {
      const s = JSON.parse(r.stdout) as { status: string; pid?: number };
      const status =
        s.status === 'running' || s.status === 'created' || s.status === 'stopped' ? s.status : 'unknown';
      if (status === 'running' && s.pid && !alive(s.pid)) return { status: 'stopped' };
      if (status === 'running' && s.pid) registerSandbox(s.pid, this.rt, id);
      return s.pid && status !== 'stopped' ? { status, pid: s.pid } : { status };
    } catch {
      return { status: 'unknown' };
    }
  }

  /**
   * Resource usage; see `Engine.stats`. Memory and CPU are the whole sandbox's (box processes plus
   * the Sentry and gofer, one cgroup); network counters are those of the box's namespace, where the
   * Sentry's host sockets carry all of the box's traffic. Empty when the box is not running.
   */
  async stats(id: string): Promise<EngineStats> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const pid = this.sandboxPid(id);
    if (pid === undefined) return {};
    const read = (file: string) => readFile(file, 'utf8').catch(() => undefined);
    const cg = new Map<string, string>();
    for (const line of ((await read(`/proc/${pid}/cgroup`)) ?? '').split('\n')) {
      const [, ctrls, path] = line.split(':', 3);
      if (ctrls === undefined || path === undefined) continue;
      for (const c of ctrls.split(',')) cg.set(c, path);
    }
    const v1 = existsSync('/sys/fs/cgroup/memory');
    const out: EngineStats = {};
    const unified = cg.get('');
    const mem = v1
      ? await read(join('/sys/fs/cgroup/memory', cg.get('memory') ?? '/', 'memory.usage_in_bytes'))
      : unified !== undefined
        ? await read(join('/sys/fs/cgroup', unified, 'memory.current'))
        : undefined;
    if (mem !== undefined) out.memoryBytes = Number(mem.trim());
    let usageNs: number | undefined;
    if (v1) {
      const u = await read(join('/sys/fs/cgroup/cpuacct', cg.get('cpuacct') ?? '/', 'cpuacct.usage'));
      if (u !== undefined) usageNs = Number(u.trim());
    } else if (unified !== undefined) {
      const m = (await read(join('/sys/fs/cgroup', unified, 'cpu.stat')))?.match(/usage_usec (\d+)/);
      if (m) usageNs = Number(m[1]) * 1000;
    }
    if (usageNs !== undefined) {
      const cores = this.meta(id)?.cpus ?? 1;
      const now = performance.now();
      const prev = this.cpuSamples.get(id) ?? { t: now - processAgeMs(pid), usageNs: 0 };
      this.cpuSamples.set(id, { t: now, usageNs });
      const dt = now - prev.t;
      if (dt > 0) {
        const pct = ((usageNs - prev.usageNs) / 1e6 / dt / cores) * 100;
        out.cpuPercent = Math.min(100, Math.max(0, Math.round(pct * 10) / 10));
      }
    }
    Object.assign(out, await readNetworkCounters(pid));
    return out;
  }

  /** Every gVisor box the index or runsc knows (for crash GC); see `Engine.list`. */
  async list(): Promise<EngineBoxRecord[]> {
    const ids = new Set<string>();
    for (const name of await readdir(this.boxesDir).catch(() => [] as string[]))
      if (this.meta(name)) ids.add(name);
    const r = await this.runsc(['list', '--format', 'json']);
    if (r.code === 0 && r.stdout.trim()) {
      for (const c of (JSON.parse(r.stdout) as { id: string }[] | null) ?? []) ids.add(c.id);
    }
    const out: EngineBoxRecord[] = [];
    for (const id of ids) {
      if (!ID_RE.test(id)) continue;
      const meta = this.meta(id);
      const st = await this.state(id);
      out.push({
        id,
        boxDir: meta?.boxDir,
        status: st.status === 'unknown' && meta ? 'stopped' : st.status,
        pid: st.pid,
        mounts: meta ? mountsUnder(meta.boxDir) : [],
      });
    }
    return out;
  }
}

/** How long `pid` has been running, ms (from its start time in `/proc/<pid>/stat`). */
function processAgeMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const startTicks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    const uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    return Math.max(1, (uptime - startTicks / 100) * 1000);
  } catch {
    return 1000;
  }
}

/** Removes exec pid files of Node processes that died mid-exec (`<id>.<node pid>.<n>.ipid`). */
function cleanStaleExecFiles(execDir: string): void {
  for (const name of readdirSync(execDir)) {
    if (!name.endsWith('.ipid')) continue;
    const owner = Number(name.split('.').at(-3));
    if (owner > 0 && owner !== process.pid && !alive(owner)) rmSync(join(execDir, name), { force: true });
  }
}
