/**
 * The OCI container engine: one bundle per box run by `crun` or `runc` (Debian packages).
 *
 * Start: the engine writes `<boxDir>/bundle/config.json` (see oci.ts), then spawns one
 * `supervisor.sh` (scripts.ts) that mounts the overlay root (image layers read-only as lower dirs,
 * `<boxDir>/upper` as upper dir, or the same on a loop-mounted ext4 image when `diskSizeGb` is set)
 * and runs `<runtime> run --detach`. The box init is a static `catatonit -P` bind-mounted read-only
 * at `/.sandbox/init`, so images need no binary of their own. Commands run with `<runtime> exec`
 * and plain pipes. The supervisor of a non-detached box stays behind as the parent-death watch.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { dirname, join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import { resolveCapabilities } from './capabilities.ts';
import { lstatInRoot, readFileInRoot } from './confined.ts';
import { DEFAULT_DISK_SIZE_GB, diskLayerDirs, diskMountOptions, ensureDiskImage } from './disk.ts';
import {
  alive,
  drain,
  type FileIdentity,
  processAgeMs,
  type RunResult,
  run,
  sleep,
  startSupervisor,
  supervisorFailure,
  waitForExec,
  waitForPidFile,
  writeIfChanged,
} from './host-process.ts';
import { type OpenedHostPath, openHostPath } from './hostpath.ts';
import {
  ensureSandboxIdRange,
  type IdMapping,
  type IdmapHelper,
  idmapHelperArgs,
  installIdmapHelper,
} from './idmap.ts';
import { readNetworkCounters } from './net-counters.ts';
import { BOX_RLIMITS, buildOciConfig, etcHosts, TTY_HELPER_PATH, validateSpec } from './oci.ts';
import { HOST_BUSYBOX } from './rootfs.ts';
import { CRUN_HYBRID_SH, SUPERVISOR_SH, TTY_RELAY_PL } from './scripts.ts';
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

/** OCI runtimes the engine can drive. */
export type OciRuntimeName = 'crun' | 'runc';

/** Context handed to the network hooks (issue 9): the box and the host pid of its init. */
export interface EngineNetworkContext {
  id: string;
  /** Host pid of the box init; its network namespace is `/proc/<pid>/ns/net`. */
  pid: number;
  boxDir: string;
  network: EngineBoxSpec['network'];
}

/** Options of `createEngine`. */
export interface CreateEngineOptions {
  /**
   * Directory of the engine's own state: runtime state (`<stateRoot>/<runtime>`), the box index
   * (`<stateRoot>/boxes/<id>` → boxDir), helper scripts and exec pid files. Default
   * `/run/seed-sandbox` (tmpfs: it vanishes with the mounts and containers on reboot). No spaces.
   */
  stateRoot?: string;
  /** OCI runtime; default `crun` when installed (faster), else `runc`. Env `SEED_SANDBOX_RUNTIME`. */
  runtime?: OciRuntimeName;
  /** Host path of the static init bound at `/.sandbox/init`; default `/usr/bin/catatonit`. */
  initPath?: string;
  /**
   * Called after the box init runs and before `start` resolves, with its pid (network namespace
   * setup, e.g. slirp4netns; issue 9). A rejection fails the start and the box is torn down.
   */
  networkSetup?: (ctx: EngineNetworkContext) => Promise<void>;
  /** Called when a box stops (before its root is unmounted), for the network's host side. */
  networkTeardown?: (id: string) => Promise<void>;
  /**
   * Run each new box in its own user namespace, box ids `0..65535` mapped to the sandbox's host range
   * (`seed-sandbox` in `/etc/subuid`/`/etc/subgid`, added when missing; idmap.ts). Default true;
   * env `SEED_SANDBOX_USERNS=0` turns it off. A box keeps the setting it was first started with.
   */
  userNamespace?: boolean;
}

/** Persisted per-box facts another process needs to drive the box (`<boxDir>/bundle/engine.json`). */
interface BoxMeta {
  id: string;
  /** The box's `KEY=value` environment. */
  env: string[];
  user?: string;
  workingDir: string;
  cpus: number;
  diskSizeGb?: number;
  /** Capability names of the box (bounding set); commands as uid 0 get them effective, others none. */
  capabilities?: string[];
  /**
   * The box's user namespace mapping, `null` for a box without one; absent in boxes first started
   * before user namespaces (their writable layer is owned by host ids as is: they keep running
   * without one).
   */
  idMap?: IdMapping | null;
}

const DEFAULT_STATE_ROOT = '/run/seed-sandbox';

/** Absolute host paths of one box's files in its box directory (both isolation tiers; see `boxPaths`). */
export interface BoxPaths {
  /** The OCI bundle: `config.json`, `init.pid` (and `hosts`, `hostname` when the box has no disk). */
  bundle: string;
  /** Where the supervisor mounts the box's overlay root. */
  rootfs: string;
  /** `<i>`: the bind target of `spec.mounts[i]`. */
  binds: string;
  /** The overlay's writable layer and work directory (on the disk when the box has one). */
  upper: string;
  work: string;
  /** The box's disk image and where it is mounted. */
  diskImg: string;
  diskDir: string;
  /** The runtime's and the supervisor's log. */
  log: string;
  /** Host pid of the box's init (crun) or sandbox process (runsc), written by `--pid-file`. */
  pidFile: string;
}

/** The files of the box in `boxDir`; `diskSizeGb` absent puts the writable layer in `boxDir` itself. */
export function boxPaths(boxDir: string, diskSizeGb?: number): BoxPaths {
  const diskDir = join(boxDir, 'disk');
  const base = diskSizeGb !== undefined ? diskDir : boxDir;
  return {
    bundle: join(boxDir, 'bundle'),
    rootfs: join(boxDir, 'rootfs'),
    binds: join(boxDir, 'binds'),
    upper: join(base, 'upper'),
    work: join(base, 'work'),
    diskImg: join(boxDir, 'disk.img'),
    diskDir,
    log: join(boxDir, 'runtime.log'),
    pidFile: join(boxDir, 'bundle', 'init.pid'),
  };
}
/** Default search path (as execvp(3)'s): the host's when `PATH` is unset, a box's for tty commands. */
const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const CGROUP_PARENT = 'seed-sandbox';
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** Finds an executable on PATH (or returns the absolute path given if it exists). */
export function findExecutable(name: string): string | undefined {
  if (name.startsWith('/')) return existsSync(name) ? name : undefined;
  for (const dir of (process.env.PATH ?? DEFAULT_PATH).split(':')) {
    const p = join(dir, name);
    try {
      if (statSync(p).isFile()) return p;
    } catch {}
  }
  return undefined;
}

/** True when `path` is an ELF executable without a program interpreter (statically linked). */
function isStaticElf(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const head = Buffer.alloc(4096);
    const n = readSync(fd, head, 0, head.length, 0);
    // ELF64 little-endian only (x86_64, arm64): e_phoff at 32, e_phentsize at 54, e_phnum at 56.
    if (n < 64 || head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1) return false;
    const phoff = Number(head.readBigUInt64LE(32));
    const phentsize = head.readUInt16LE(54);
    const phnum = head.readUInt16LE(56);
    if (phoff + phentsize * phnum > n) return false;
    for (let i = 0; i < phnum; i++) if (head.readUInt32LE(phoff + i * phentsize) === 3) return false; // PT_INTERP
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Checks a terminal size in character cells: `cols` and `rows` must be positive integers.
 * @throws BoxError naming `field` (`ttySize` or `resize`) otherwise.
 */
function checkTerminalSize(field: string, cols: number, rows: number): void {
  if (!(Number.isInteger(cols) && cols > 0 && Number.isInteger(rows) && rows > 0)) {
    throw new BoxError(`${field}: cols ${cols} and rows ${rows} must be positive integers`);
  }
}

/**
 * Resolves `cmd` the way execvp(3) would inside a box, through the box root `root` (a
 * `/proc/<pid>/root` path): a name with a slash is kept; otherwise the first `PATH` directory with an
 * entry of that name (a file, or a symlink, which is not followed from the host) wins.
 * Returns the path inside the box, or undefined when nothing matches.
 */
function resolveInBox(root: string, cmd: string, path: string): string | undefined {
  if (cmd.includes('/')) return cmd;
  for (const dir of path.split(':')) {
    if (!dir.startsWith('/')) continue;
    const inBox = join(dir, cmd);
    try {
      const st = lstatInRoot(root, inBox);
      if (st && (st.isSymbolicLink() || (st.isFile() && (st.mode & 0o111) !== 0))) return inBox;
    } catch {}
  }
  return undefined;
}

/** True when the host mounts cgroup v1 controllers and a cgroup2 hierarchy at `/sys/fs/cgroup/unified`. */
export function isHybridCgroupHost(): boolean {
  try {
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    return / \/sys\/fs\/cgroup\/unified .* - cgroup2 /.test(mounts) && / - cgroup cgroup /.test(mounts);
  } catch {
    return false;
  }
}

/** Host mount points at or under `dir`, deepest first (from `/proc/self/mountinfo`). */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const out: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const mp = line.split(' ')[4];
    if (!mp) continue;
    const target = mp.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
    if (target === dir || target.startsWith(prefix)) out.push(target);
  }
  return out.sort((a, b) => b.length - a.length);
}

/** Entries of the box's `/etc/passwd` or `/etc/group` by name, read confined to the box root. */
function parseIdFile(rootfs: string, inBoxPath: string, field: string): Map<string, string[]> {
  const map = new Map<string, string[]>();
  let text: string;
  try {
    text = readFileInRoot(rootfs, inBoxPath)?.toString('utf8') ?? '';
  } catch (err) {
    throw new BoxError(`${field}: cannot read the image's ${inBoxPath}: ${(err as Error).message}`);
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f[0]) map.set(f[0], f);
  }
  return map;
}

/**
 * Resolves `user` (`uid[:gid]` or `name[:group]`) against the box root's `/etc/passwd` and
 * `/etc/group`, to the `uid:gid` form OCI runtimes take. The files are read confined to `rootfs`
 * (confined.ts): symlinks in the box resolve inside it, never to host files.
 * @throws BoxError naming `field` when a name is not in the image or the files cannot be read.
 */
export function resolveUser(rootfs: string, user: string, field: string): string {
  const [u = '', g] = user.split(':', 2);
  let uid: string;
  let gid: string | undefined;
  if (/^\d+$/.test(u)) {
    uid = u;
    const entry = [...parseIdFile(rootfs, '/etc/passwd', field).values()].find((f) => f[2] === u);
    gid = entry?.[3];
  } else {
    const entry = parseIdFile(rootfs, '/etc/passwd', field).get(u);
    if (!entry || entry[2] === undefined)
      throw new BoxError(`${field}: user '${u}' is not in the image's /etc/passwd`);
    uid = entry[2];
    gid = entry[3];
  }
  if (g !== undefined && g !== '') {
    if (/^\d+$/.test(g)) gid = g;
    else {
      const entry = parseIdFile(rootfs, '/etc/group', field).get(g);
      if (!entry || entry[2] === undefined)
        throw new BoxError(`${field}: group '${g}' is not in the image's /etc/group`);
      gid = entry[2];
    }
  }
  return `${uid}:${gid ?? '0'}`;
}

/**
 * An `Engine` (types.ts) running each box as an OCI container with crun or runc.
 * Construct with `createEngine()`. Requires root, overlayfs and the runtime binary.
 */
export class OciEngine implements Engine {
  /** The OCI runtime driving the boxes: `crun` or `runc`. */
  readonly name: OciRuntimeName;
  /** The engine's state directory (see `CreateEngineOptions.stateRoot`). */
  readonly stateRoot: string;
  private readonly rtRoot: string;
  private readonly boxesDir: string;
  private readonly execDir: string;
  private readonly supervisorPath: string;
  /** The terminal relay of `exec` with `tty` (scripts.ts `TTY_RELAY_PL`). */
  private readonly ttyRelayPath: string;
  /** Host static busybox mounted into each box at `TTY_HELPER_PATH`, when there is one. */
  private readonly ttyHelper: string | undefined;
  /** Host `perl` running the terminal relay; undefined when the relay cannot serve (see `exec`). */
  private readonly ttyPerl: string | undefined;
  /** Runtime command for operations that touch cgroups (crun on hybrid hosts goes through unshare). */
  private readonly rtFull: string[];
  /** Runtime command for exec/state/kill. */
  private readonly rtFast: string[];
  private readonly initPath: string;
  /** Device and inode of `initPath`: a started box's init runs it once it has exec'd (`waitForExec`). */
  private readonly initIdentity: FileIdentity;
  /** Mapping and helper for new boxes' user namespaces; undefined when they are turned off. */
  private readonly userns: { mapping: IdMapping; helper: IdmapHelper } | undefined;
  private readonly opts: CreateEngineOptions;
  private readonly supervisors = new Map<string, ChildProcess>();
  private readonly metas = new Map<string, BoxMeta & { boxDir: string; rootfs: string }>();
  private readonly cpuSamples = new Map<string, { t: number; usageNs: number }>();
  private execSeq = 0;

  /** Use `createEngine()`. @throws BoxError when the runtime or init binary is missing. */
  constructor(options: CreateEngineOptions = {}) {
    this.opts = options;
    this.stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
    if (!this.stateRoot.startsWith('/') || /\s/.test(this.stateRoot)) {
      throw new BoxError(`stateRoot: '${this.stateRoot}' must be an absolute path without spaces`);
    }
    const wanted = options.runtime ?? (process.env.SEED_SANDBOX_RUNTIME as OciRuntimeName | undefined);
    if (wanted !== undefined && wanted !== 'crun' && wanted !== 'runc') {
      throw new BoxError(`runtime: '${wanted}' must be 'crun' or 'runc'`);
    }
    const name: OciRuntimeName = wanted ?? (findExecutable('crun') ? 'crun' : 'runc');
    const bin = findExecutable(name);
    if (!bin) throw new BoxError(`runtime: '${name}' is not installed (apt-get install ${name})`);
    this.name = name;
    const init = findExecutable(options.initPath ?? '/usr/bin/catatonit');
    if (!init)
      throw new BoxError(
        `initPath: '${options.initPath ?? '/usr/bin/catatonit'}' not found (apt-get install catatonit)`,
      );
    this.initPath = init;
    const initStat = statSync(init);
    this.initIdentity = { dev: initStat.dev, ino: initStat.ino };
    this.rtRoot = join(this.stateRoot, name);
    this.boxesDir = join(this.stateRoot, 'boxes');
    this.execDir = join(this.stateRoot, 'exec');
    const binDir = join(this.stateRoot, 'bin');
    for (const d of [this.rtRoot, this.boxesDir, this.execDir, binDir])
      mkdirSync(d, { recursive: true, mode: 0o700 });
    this.supervisorPath = join(binDir, 'supervisor.sh');
    writeIfChanged(this.supervisorPath, SUPERVISOR_SH);
    this.ttyRelayPath = join(binDir, 'tty-relay.pl');
    writeIfChanged(this.ttyRelayPath, TTY_RELAY_PL);
    this.ttyHelper = isStaticElf(HOST_BUSYBOX) ? HOST_BUSYBOX : undefined;
    const userns = options.userNamespace ?? process.env.SEED_SANDBOX_USERNS !== '0';
    if (userns) {
      const perl = findExecutable('perl');
      if (!perl) throw new BoxError('userNamespace: needs perl (perl-base) on the host for idmapped mounts');
      this.userns = { mapping: ensureSandboxIdRange(), helper: installIdmapHelper(binDir, perl) };
    }
    // Exec pid files (`<id>.<node pid>.<n>.pid`) of Node processes that died mid-exec.
    for (const name of readdirSync(this.execDir)) {
      const owner = Number(name.split('.').at(-3));
      if (owner > 0 && owner !== process.pid && !alive(owner))
        rmSync(join(this.execDir, name), { force: true });
    }
    this.rtFast = [bin, '--root', this.rtRoot];
    // runc copies a foreground command's plain stdio through pipes: the relay's terminal needs crun.
    this.ttyPerl = name === 'crun' && this.ttyHelper ? findExecutable('perl') : undefined;
    if (name === 'crun' && isHybridCgroupHost()) {
      const hybrid = join(binDir, 'crun-hybrid.sh');
      writeIfChanged(hybrid, CRUN_HYBRID_SH);
      const unshare = findExecutable('unshare');
      if (!unshare) throw new BoxError('runtime: crun on a hybrid cgroup host needs unshare (util-linux)');
      this.rtFull = [unshare, '-m', hybrid, '--root', this.rtRoot];
    } else {
      this.rtFull = this.rtFast;
    }
  }

  private rt(args: string[], full = false): Promise<RunResult> {
    const cmd = full ? this.rtFull : this.rtFast;
    return run(cmd[0] as string, [...cmd.slice(1), ...args]);
  }

  /**
   * Starts a box; see `Engine.start`. Host paths of `mounts` are opened first (hostpath.ts: a symlink
   * anywhere on one is refused) and bound through their descriptors.
   * @throws BoxError naming the field (`mounts[i].hostPath: … passes through the symlink …`) or the
   *   failed stage (with the runtime's log).
   */
  async start(spec: EngineBoxSpec): Promise<EngineStarted> {
    validateSpec(spec);
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
    // Every box gets a size-limited disk (disk.ts); a box whose writable layer predates that default
    // (an upper dir in boxDir, no disk image) keeps its layer.
    const legacy =
      spec.diskSizeGb === undefined &&
      existsSync(join(spec.boxDir, 'upper')) &&
      !existsSync(join(spec.boxDir, 'disk.img'));
    const diskSizeGb = spec.diskSizeGb ?? (legacy ? undefined : DEFAULT_DISK_SIZE_GB);
    const p = boxPaths(spec.boxDir, diskSizeGb);
    // /etc/hosts and /etc/hostname live on the box disk, inside its limit.
    const etcDir = diskSizeGb !== undefined ? p.diskDir : p.bundle;
    // A box keeps the user namespace of its first start: its writable layer is owned accordingly.
    const previous = readMeta(p.bundle);
    const idMap: IdMapping | null = previous ? (previous.idMap ?? null) : (this.userns?.mapping ?? null);
    if (idMap && !this.userns)
      throw new BoxError(`box ${spec.id}: it runs in a user namespace; this engine has them turned off`);
    // The runtime keeps a state directory per container: only ask it when one exists (saves a spawn).
    if (existsSync(join(this.rtRoot, spec.id))) {
      const st = await this.state(spec.id);
      if (st.status === 'running' || st.status === 'created')
        throw new BoxError(`box ${spec.id}: already running`);
      await this.rt(['delete', '--force', spec.id], true);
    }
    // Whatever a previous run left mounted (root, disk, host binds) goes before anything is rewritten.
    if (mountsUnder(spec.boxDir).length > 0) await this.unmountAll(spec.boxDir);

    // Box config (written first: a bad capability name fails before anything is created).
    const tConfig0 = performance.now();
    // Host paths are bound by the supervisor from their descriptors onto staging points
    // (<boxDir>/binds/<i>), which the runtime binds into the box.
    const mounts = spec.mounts.map((m, i) => ({ ...m, hostPath: join(p.binds, String(i)) }));
    const config = buildOciConfig(
      { ...spec, mounts },
      {
        rootfs: p.rootfs,
        init: this.initPath,
        initArgs: ['-P'],
        ...(this.ttyHelper ? { ttyHelper: this.ttyHelper } : {}),
        cgroupsPath: `/${CGROUP_PARENT}/${spec.id}`,
        etcFiles: { hosts: join(etcDir, 'hosts'), hostname: join(etcDir, 'hostname') },
        ...(idMap ? { idMap } : {}),
      },
    );
    mkdirSync(p.bundle, { recursive: true });
    if (diskSizeGb === undefined) {
      writeFileSync(join(p.bundle, 'hosts'), etcHosts(spec.hostname));
      writeFileSync(join(p.bundle, 'hostname'), `${spec.hostname}\n`);
    }
    (config.process as { cwd: string }).cwd = spec.workingDir;
    writeFileSync(join(p.bundle, 'config.json'), JSON.stringify(config));
    const meta: BoxMeta = {
      id: spec.id,
      env: spec.env,
      user: spec.user,
      workingDir: spec.workingDir,
      cpus: spec.cpus,
      diskSizeGb,
      capabilities: resolveCapabilities(spec.capabilities),
      idMap,
    };
    writeFileSync(join(p.bundle, 'engine.json'), JSON.stringify(meta));
    const stageBoxConfigMs = performance.now() - tConfig0;

    // Filesystem: directories, the disk image, the index link (mounts happen in the supervisor).
    const tFs0 = performance.now();
    mkdirSync(p.rootfs, { recursive: true });
    if (diskSizeGb !== undefined) {
      mkdirSync(p.diskDir, { recursive: true });
      // btrfs when the host can: snapshots of the writable layer (snapshot.ts).
      await ensureDiskImage(this.stateRoot, spec.id, p.diskImg, diskSizeGb, { snapshots: true });
      Object.assign(p, diskLayerDirs(p.diskImg, p.diskDir));
    } else {
      mkdirSync(p.upper, { recursive: true });
      mkdirSync(p.work, { recursive: true });
    }
    const link = join(this.boxesDir, spec.id);
    try {
      unlinkSync(link);
    } catch {}
    symlinkSync(spec.boxDir, link);
    rmSync(p.pidFile, { force: true });
    writeFileSync(p.log, '');
    // Staging points only, never recursively: a bind still mounted there would be host files.
    for (const name of existsSync(p.binds) ? readdirSync(p.binds) : []) {
      const target = join(p.binds, name);
      if (mountsUnder(target).length > 0) throw new BoxError(`box ${spec.id}: ${target} is still mounted`);
      if (lstatSync(target).isDirectory()) rmdirSync(target);
      else unlinkSync(target);
    }
    try {
      rmdirSync(p.binds);
    } catch {}
    // The runtime looks up the root, binds and /etc files as the box's mapped root: it must be able to
    // traverse (not list) the box directory and the staging directory.
    if (idMap) allowTraversal(spec.boxDir);
    if (opened.length > 0) mkdirSync(p.binds, { mode: idMap ? 0o711 : 0o700 });
    const binds: string[] = [];
    const idmapBinds: string[] = [];
    for (const [i, o] of opened.entries()) {
      const target = join(p.binds, String(i));
      if (o.isDirectory) mkdirSync(target);
      else writeFileSync(target, '');
      binds.push(`${3 + i}:${target}`);
      const ownedByBox = spec.mounts[i]?.ownedByBox === true;
      // A fresh managed volume (host root's) becomes the mapped root's; chown follows the magic link
      // to the opened object, never a path the box controls.
      if (idMap && ownedByBox) {
        const st = fstatSync(o.fd);
        if (st.uid === 0 && st.gid === 0) chownSync(`/proc/self/fd/${o.fd}`, idMap.hostUid, idMap.hostGid);
      }
      idmapBinds.push('bind', `/proc/self/fd/${3 + i}`, target, ownedByBox ? '0' : '1');
    }
    const owned = [p.upper, p.work, join(etcDir, 'hosts'), join(etcDir, 'hostname')].flatMap((f) => [
      'own',
      f,
    ]);

    // Spawn: the supervisor mounts and runs the container.
    const lower = [...spec.layerDirs].reverse().join(':');
    const env = {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      SB_ID: spec.id,
      SB_RT: this.rtFull.join(' '),
      SB_BUNDLE: p.bundle,
      SB_ROOTFS: p.rootfs,
      SB_LOWER: lower,
      SB_UPPER: p.upper,
      SB_WORK: p.work,
      SB_DISK_IMG: diskSizeGb !== undefined ? p.diskImg : '',
      SB_DISK_OPTS: diskSizeGb !== undefined ? diskMountOptions(p.diskImg) : '',
      SB_HOSTS: etcHosts(spec.hostname),
      SB_HOSTNAME: `${spec.hostname}\n`,
      SB_DISK_DIR: p.diskDir,
      SB_LOG: p.log,
      SB_PIDFILE: p.pidFile,
      SB_BINDS: binds.join(' '),
      SB_WATCH: spec.detach ? '0' : '1',
      SB_IDMAP:
        idMap && this.userns
          ? [this.userns.helper.perl, this.userns.helper.script, ...idmapHelperArgs(idMap)].join(' ')
          : '',
      SB_IDMAP_OWN: owned.join(' '),
      SB_IDMAP_BINDS: idmapBinds.join(' '),
    };
    const old = this.supervisors.get(spec.id);
    if (old) this.release(spec.id, old);
    else endForeignSupervisor(spec.id, spec.boxDir, this.supervisorPath);
    const { child, outcome, tMounted, tStarted } = await startSupervisor(
      '/bin/sh',
      [this.supervisorPath],
      env,
      opened.map((o) => o.fd),
    );
    if (outcome !== 'started') {
      child.stdin?.destroy();
      throw await supervisorFailure(spec.id, outcome, p.log);
    }
    if (!spec.detach) {
      this.supervisors.set(spec.id, child);
      (child.stdin as unknown as { unref?: () => void }).unref?.();
    } else {
      child.stdin?.destroy();
    }
    child.unref();

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
      );
    }
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

  private meta(id: string): (BoxMeta & { boxDir: string; rootfs: string }) | undefined {
    const known = this.metas.get(id);
    if (known) return known;
    try {
      const boxDir = readlinkSync(join(this.boxesDir, id));
      const meta = JSON.parse(readFileSync(join(boxDir, 'bundle', 'engine.json'), 'utf8')) as BoxMeta;
      const full = { ...meta, boxDir, rootfs: join(boxDir, 'rootfs') };
      this.metas.set(id, full);
      return full;
    } catch {
      return undefined;
    }
  }

  private initPid(id: string): number | undefined {
    const meta = this.meta(id);
    if (!meta) return undefined;
    try {
      const pid = Number.parseInt(readFileSync(join(meta.boxDir, 'bundle', 'init.pid'), 'utf8'), 10);
      return pid > 0 && alive(pid) ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /** Runs a command; see `Engine.exec`. @throws BoxError when the box is not running or `user` is unknown. */
  async exec(id: string, options: EngineExecOptions): Promise<EngineProcess> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const meta = this.meta(id);
    const initPid = meta ? this.initPid(id) : undefined;
    if (!meta || initPid === undefined) throw new BoxError(`box ${id}: not running`);
    if (typeof options.cmd !== 'string' || options.cmd.length === 0)
      throw new BoxError('cmd: must be a non-empty string');
    const seq = ++this.execSeq;
    const pidFile = join(this.execDir, `${id}.${process.pid}.${seq}.pid`);
    const user = options.user ?? meta.user;
    const [uid, gid] = (user !== undefined && user !== '' ? resolveUser(meta.rootfs, user, 'user') : '0:0')
      .split(':')
      .map(Number);
    const cwd = options.cwd ?? meta.workingDir;
    if (!cwd.startsWith('/')) throw new BoxError(`cwd: '${cwd}' must be an absolute path`);
    // The full environment: box env overlaid with the command's, one entry per key.
    const env = new Map<string, string>();
    for (const e of meta.env) env.set(e.slice(0, e.indexOf('=')), e);
    for (const e of options.env) {
      if (!e.includes('=') || e.startsWith('=')) throw new BoxError(`env: '${e}' must be KEY=value`);
      env.set(e.slice(0, e.indexOf('=')), e);
    }
    // The command is given as an OCI process (`exec --process`): the runtime's command-line form
    // would leave out the box's rlimits and `noNewPrivileges`, and give the command the caller's limits.
    const processFile = join(this.execDir, `${id}.${process.pid}.${seq}.json`);
    const ociProcess = {
      terminal: false,
      user: { uid, gid },
      args: [options.cmd, ...options.args],
      env: [...env.values()],
      cwd,
      noNewPrivileges: true,
      rlimits: BOX_RLIMITS,
      // As Docker does: a command of another user than root keeps the bounding set only.
      ...(meta.capabilities
        ? {
            capabilities: {
              bounding: meta.capabilities,
              effective: uid === 0 ? meta.capabilities : [],
              permitted: uid === 0 ? meta.capabilities : [],
            },
          }
        : {}),
    };
    let file = this.rtFast[0] as string;
    let argv = [...this.rtFast.slice(1), 'exec', '--pid-file', pidFile, '--process', processFile, id];
    let resizeAfterStart: { cols: number; rows: number } | undefined;
    let ttyEnv: NodeJS.ProcessEnv | undefined;
    if (options.tty) {
      const size = options.ttySize ?? { cols: 80, rows: 24 };
      checkTerminalSize('ttySize', size.cols, size.rows);
      const boxRoot = `/proc/${initPid}/root`;
      const perl = this.ttyPerl;
      if (perl && existsSync(join(boxRoot, TTY_HELPER_PATH))) {
        // The terminal is made by tty-relay.pl in the box's own devpts (so the command sees
        // /dev/pts/<n> of its box), sized before anything runs; the runtime passes it on as plain
        // stdio and busybox `setsid -c` makes the command a session leader owning it (Ctrl-C, job
        // control). The runtime's own `exec --tty` is not used: it sizes its terminal only after the
        // command has started, and crun 1.8.1 prints output still unread when the command exits as
        // its own red error line.
        // The command is resolved on the box's PATH here: busybox would run its own applet of that
        // name instead. One not found is left to the runtime, which reports it.
        const inBox = resolveInBox(boxRoot, options.cmd, env.get('PATH')?.slice(5) ?? DEFAULT_PATH);
        if (inBox) ociProcess.args = [TTY_HELPER_PATH, 'setsid', '-c', inBox, ...options.args];
        if (meta.idMap) ttyEnv = { ...process.env, SB_TTY_UID: String(meta.idMap.hostUid + (uid ?? 0)) };
        argv = [
          this.ttyRelayPath,
          join(boxRoot, 'dev/pts'),
          String(size.cols),
          String(size.rows),
          file,
          ...argv,
        ];
        file = perl;
      } else {
        // runc (which copies a foreground command's plain stdio through pipes) or boxes started
        // without the helper: the runtime's `exec --tty` under script(1), whose terminal it needs on
        // its stdin. The box terminal gets its size from script's only after the command started.
        const script = findExecutable('script');
        if (!script) throw new BoxError('tty: needs script(1) from util-linux on the host');
        ociProcess.terminal = true;
        const line = [file, ...argv].map(shellQuote).join(' ');
        file = script;
        argv = [
          '-q',
          '-e',
          '-f',
          '-c',
          `stty cols ${size.cols} rows ${size.rows} && exec ${line}`,
          '/dev/null',
        ];
        resizeAfterStart = size;
      }
    }
    writeFileSync(processFile, JSON.stringify(ociProcess));
    if (options.detach) {
      if (options.tty) throw new BoxError('detach: a background command cannot have a tty');
      argv.splice(argv.indexOf('exec') + 1, 0, '--detach');
      return this.execDetached(id, file, argv, pidFile, processFile);
    }
    const child = spawn(file, argv, { stdio: ['pipe', 'pipe', 'pipe'], ...(ttyEnv ? { env: ttyEnv } : {}) });
    const exited = new Promise<number>((resolve, reject) => {
      child.on('error', (err) =>
        reject(new BoxError(`box ${id}: exec failed: ${err.message}`, { cause: err })),
      );
      child.on('exit', (code, signal) => {
        rm(pidFile, { force: true }).catch(() => {});
        rm(processFile, { force: true }).catch(() => {});
        resolve(code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0));
      });
    });
    exited.catch(() => {});
    let done = false;
    exited.then(
      () => {
        done = true;
      },
      () => {
        done = true;
      },
    );
    /** The command's host pid from the runtime's pid file (waits up to 1 s for it to appear). */
    const commandPid = () => waitForPidFile(pidFile, 1000, () => done);
    const kill = async (signal: NodeJS.Signals = 'SIGKILL'): Promise<void> => {
      const pid = await commandPid();
      if (pid === undefined || done) return;
      try {
        process.kill(pid, signal);
      } catch {}
    };
    child.stdin.on('error', () => {});
    const proc: EngineProcess = {
      stdin: child.stdin,
      stdout: drain(child.stdout),
      stderr: drain(child.stderr),
      exited,
      kill,
    };
    if (options.tty) {
      // Sets the size of the command's own terminal (opened through /proc/<pid>/fd/0 from the
      // host); the kernel then sends SIGWINCH to its foreground process group.
      const setSize = async (cols: number, rows: number): Promise<void> => {
        checkTerminalSize('resize', cols, rows);
        const pid = await commandPid();
        if (pid === undefined || done) return;
        const r = await run('stty', ['-F', `/proc/${pid}/fd/0`, 'cols', String(cols), 'rows', String(rows)]);
        if (r.code !== 0 && !done) throw new BoxError(`resize: ${r.stderr.trim()}`);
      };
      // Resizes run one after the other, so the last request wins.
      let queue: Promise<void> = Promise.resolve();
      proc.resize = (cols: number, rows: number): Promise<void> => {
        const next = queue.then(() => setSize(cols, rows));
        queue = next.catch(() => {});
        return next;
      };
      if (resizeAfterStart) proc.resize(resizeAfterStart.cols, resizeAfterStart.rows).catch(() => {});
    }
    return proc;
  }

  /**
   * `exec` with `detach`: the runtime starts the command in the background, with /dev/null as its stdio,
   * and returns; the command is then a child of the box init and outlives this process.
   * @throws BoxError code `exec` when the runtime could not start it (e.g. no such program).
   */
  private async execDetached(
    id: string,
    file: string,
    argv: string[],
    pidFile: string,
    processFile: string,
  ): Promise<EngineProcess> {
    // The runtime's own error goes to a log file: its stderr becomes the command's.
    const logFile = `${pidFile.slice(0, -'.pid'.length)}.log`;
    argv.splice(argv.indexOf('exec'), 0, `--log=${logFile}`);
    let pid: number | undefined;
    // A failed start whose command is not running is tried once more (a transient runtime failure); a
    // command that cannot start fails both times.
    for (let attempt = 1; ; attempt++) {
      const code = await new Promise<number>((resolve) => {
        const child = spawn(file, argv, { stdio: 'ignore' });
        child.on('error', () => resolve(-1));
        child.on('exit', (c, signal) =>
          resolve(c ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0)),
        );
      });
      try {
        pid = Number.parseInt(readFileSync(pidFile, 'utf8'), 10) || undefined;
      } catch {}
      const log = await readFile(logFile, 'utf8').catch(() => '');
      await Promise.all([pidFile, logFile].map((f) => rm(f, { force: true }).catch(() => {})));
      if (code === 0 || (pid !== undefined && alive(pid))) break;
      if (attempt < 2) {
        await sleep(100);
        continue;
      }
      await rm(processFile, { force: true }).catch(() => {});
      const why = log.trim().split('\n').slice(-3).join('; ').slice(-600);
      throw new BoxError(
        `box ${id}: the background command could not be started (runtime exit ${code}${why ? `: ${why}` : ''})`,
        { code: 'exec' },
      );
    }
    await rm(processFile, { force: true }).catch(() => {});
    const stdin = new PassThrough();
    stdin.resume();
    return {
      stdin,
      stdout: PassThrough.from([]) as Readable,
      stderr: PassThrough.from([]) as Readable,
      exited: Promise.resolve(0),
      kill: async (signal: NodeJS.Signals = 'SIGKILL') => {
        if (pid !== undefined && alive(pid)) process.kill(pid, signal);
      },
    };
  }

  /** Stops the box and unmounts its root; see `Engine.stop`. Idempotent. */
  async stop(id: string, graceMs = 2000): Promise<void> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const meta = this.meta(id);
    const st = await this.state(id);
    if (st.status === 'running' && st.pid) {
      // SIGTERM to the box's commands, up to graceMs for them to exit; then SIGKILL to the init,
      // which makes the kernel kill everything left in the box's pid namespace.
      const init = st.pid;
      const others = (): number[] => boxPids(init).filter((p) => p !== init && alive(p));
      if (graceMs > 0 && others().length > 0) {
        await this.rt(['kill', '--all', id, 'TERM']);
        const deadline = performance.now() + graceMs;
        while (others().length > 0 && performance.now() < deadline) await sleep(10);
      }
      if (alive(init)) await this.rt(['kill', id, 'KILL']);
      for (let i = 0; i < 500 && alive(st.pid); i++) await sleep(10);
    }
    // The runtime has a state directory for each container it knows (run → delete).
    const inRuntime = existsSync(join(this.rtRoot, id));
    if (inRuntime && this.opts.networkTeardown) await this.opts.networkTeardown(id).catch(() => {});
    if (inRuntime) {
      const del = await this.rt(['delete', '--force', id], true);
      if (del.code !== 0 && !/does not exist|not exist|No such file/i.test(del.stderr)) {
        throw new BoxError(`box ${id}: deleting the container failed: ${del.stderr.trim()}`);
      }
    }
    if (meta) {
      // A stale pid could be reused by an unrelated host process: forget it once the box is down.
      rmSync(join(meta.boxDir, 'bundle', 'init.pid'), { force: true });
      await this.unmountAll(meta.boxDir);
    }
    const sup = this.supervisors.get(id);
    if (sup) this.release(id, sup);
    else if (meta) endForeignSupervisor(id, meta.boxDir, this.supervisorPath);
    this.cpuSamples.delete(id);
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
      if (r.code !== 0 && mountsUnder(m).includes(m)) {
        throw new BoxError(`unmounting ${m} failed: ${r.stderr.trim()}`);
      }
    }
  }

  /** Deletes the container, its mounts and the engine's files under `boxDir`; see `Engine.remove`. Idempotent. */
  async remove(id: string, boxDir: string): Promise<void> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    if (!this.meta(id))
      this.metas.set(id, { id, env: [], workingDir: '/', cpus: 1, boxDir, rootfs: join(boxDir, 'rootfs') });
    await this.stop(id, 0);
    await this.unmountAll(boxDir);
    if (mountsUnder(boxDir).length > 0) throw new BoxError(`box ${id}: ${boxDir} is still mounted`);
    for (const name of [
      'bundle',
      'rootfs',
      'binds',
      'upper',
      'work',
      'disk',
      'disk.img',
      'disk.img.tmp',
      'runtime.log',
    ]) {
      await rm(join(boxDir, name), { recursive: true, force: true });
    }
    try {
      unlinkSync(join(this.boxesDir, id));
    } catch {}
    this.metas.delete(id);
  }

  /** The runtime's view of a box; see `Engine.state`. `unknown` when neither the runtime nor the index knows it. */
  async state(id: string): Promise<EngineState> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const r = await this.rt(['state', id]);
    if (r.code !== 0) return { status: this.meta(id) ? 'stopped' : 'unknown' };
    try {
      const s = JSON.parse(r.stdout) as { status: string; pid?: number };
      const status =
        s.status === 'running' || s.status === 'created' || s.status === 'stopped' ? s.status : 'unknown';
      if (status === 'running' && s.pid && !alive(s.pid)) return { status: 'stopped' };
      return s.pid && status !== 'stopped' ? { status, pid: s.pid } : { status };
    } catch {
      return { status: 'unknown' };
    }
  }

  /** Resource usage from the box's cgroup and network namespace; see `Engine.stats`. Empty when not running. */
  async stats(id: string): Promise<EngineStats> {
    if (!ID_RE.test(id)) throw new BoxError(`id: '${id}' is not a box id`);
    const pid = this.initPid(id);
    if (pid === undefined) return {};
    const cg = readCgroupPaths(pid);
    const out: EngineStats = {};
    const read = async (file: string): Promise<string | undefined> =>
      readFile(file, 'utf8').catch(() => undefined);
    // Memory: v1 memory.usage_in_bytes, v2 memory.current.
    const mem = cg.memory
      ? await read(join('/sys/fs/cgroup/memory', cg.memory, 'memory.usage_in_bytes'))
      : cg.unified
        ? await read(join('/sys/fs/cgroup', cg.unified, 'memory.current'))
        : undefined;
    if (mem !== undefined) out.memoryBytes = Number(mem.trim());
    // CPU usage (ns) and allowance (cores).
    let usageNs: number | undefined;
    let cores: number | undefined;
    if (cg.cpuacct) {
      const u = await read(join('/sys/fs/cgroup/cpuacct', cg.cpuacct, 'cpuacct.usage'));
      if (u !== undefined) usageNs = Number(u.trim());
    } else if (cg.unified) {
      const s = await read(join('/sys/fs/cgroup', cg.unified, 'cpu.stat'));
      const m = s?.match(/usage_usec (\d+)/);
      if (m) usageNs = Number(m[1]) * 1000;
    }
    if (cg.cpu) {
      const q = await read(join('/sys/fs/cgroup/cpu', cg.cpu, 'cpu.cfs_quota_us'));
      const per = await read(join('/sys/fs/cgroup/cpu', cg.cpu, 'cpu.cfs_period_us'));
      if (q && per && Number(q) > 0) cores = Number(q) / Number(per);
    } else if (cg.unified) {
      const m = (await read(join('/sys/fs/cgroup', cg.unified, 'cpu.max')))?.match(/^(\d+) (\d+)/);
      if (m) cores = Number(m[1]) / Number(m[2]);
    }
    cores ??= this.meta(id)?.cpus ?? 1;
    if (usageNs !== undefined) {
      const now = performance.now();
      const prev = this.cpuSamples.get(id) ?? { t: now - processAgeMs(pid), usageNs: 0 };
      this.cpuSamples.set(id, { t: now, usageNs });
      const dt = now - prev.t;
      if (dt > 0) {
        const pct = ((usageNs - prev.usageNs) / 1e6 / dt / cores) * 100;
        out.cpuPercent = Math.min(100, Math.max(0, Math.round(pct * 10) / 10));
      }
    }
    // Network counters of the box's namespace.
    Object.assign(out, await readNetworkCounters(pid));
    return out;
  }

  /**
   * Every box this engine's state root knows — from the box index, the OCI runtime's container list
   * and the host mount table — so a runtime can garbage-collect boxes it has no record of (e.g. a
   * crash mid-create): call `remove(id, boxDir)` for each unwanted one.
   */
  async list(): Promise<EngineBoxRecord[]> {
    const ids = new Set<string>();
    for (const name of await readdir(this.boxesDir).catch(() => [] as string[])) ids.add(name);
    const r = await this.rt(['list', '--format', 'json']);
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

/**
 * Ends the parent-death watch of box `id` that another process's engine started (its
 * `supervisor.sh`, pid in `<boxDir>/bundle/supervisor.pid`), with SIGTERM: the box was stopped or
 * removed by this process, so the watch has nothing left to guard. The pid is only signalled when
 * it still runs that script for that box (command line and `SB_ID` in its environment).
 */
function endForeignSupervisor(id: string, boxDir: string, script: string): void {
  const file = join(boxDir, 'bundle', 'supervisor.pid');
  let pid: number;
  try {
    pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
  } catch {
    return;
  }
  rmSync(file, { force: true });
  if (!(pid > 0) || pid === process.pid) return;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    if (cmdline[1] !== script || !environ.includes(`SB_ID=${id}`)) return;
    process.kill(pid, 'SIGTERM');
  } catch {}
}

/** The `engine.json` a previous start of the box left in `bundle`, or undefined. */
function readMeta(bundle: string): BoxMeta | undefined {
  try {
    return JSON.parse(readFileSync(join(bundle, 'engine.json'), 'utf8')) as BoxMeta;
  } catch {
    return undefined;
  }
}

/**
 * Gives everyone search permission (`o+x`, not read) on `dir` and each of its ancestors lacking it,
 * as Docker's user-namespace remapping does for its data root: the OCI runtime looks up the box root
 * and bind sources as the box's mapped root, which owns none of them.
 */
function allowTraversal(dir: string): void {
  for (let d = dir; ; d = dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, (mode & 0o7777) | 0o001);
    if (d === '/') return;
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./=:@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

interface CgroupPaths {
  memory?: string;
  cpu?: string;
  cpuacct?: string;
  pids?: string;
  unified?: string;
}

/** The cgroup path of each controller for `pid` (`unified` for the v2 hierarchy). */
function readCgroupPaths(pid: number): CgroupPaths {
  const out: CgroupPaths = {};
  let text = '';
  try {
    text = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return out;
  }
  const v1 = existsSync('/sys/fs/cgroup/memory');
  for (const line of text.split('\n')) {
    const [, ctrls, path] = line.split(':', 3) as [string, string | undefined, string | undefined];
    if (ctrls === undefined || path === undefined) continue;
    if (ctrls === '' && !v1) out.unified = path;
    for (const c of ctrls.split(',')) {
      if (c === 'memory') out.memory = path;
      if (c === 'cpu') out.cpu = path;
      if (c === 'cpuacct') out.cpuacct = path;
      if (c === 'pids') out.pids = path;
    }
  }
  return out;
}

/** Host pids of every process in the box of init `pid` (its pids cgroup), empty when unreadable. */
function boxPids(pid: number): number[] {
  const cg = readCgroupPaths(pid);
  const file = cg.pids
    ? join('/sys/fs/cgroup/pids', cg.pids, 'cgroup.procs')
    : cg.unified
      ? join('/sys/fs/cgroup', cg.unified, 'cgroup.procs')
      : undefined;
  if (!file) return [];
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
