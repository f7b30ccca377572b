/**
 * `sandbox doctor`: checks every prerequisite of the sandbox for one account — the caller by
 * default — and says, for each missing one, the exact command that fixes it. Rootless prerequisites
 * (user namespaces, `newuidmap`, subordinate ids, a delegated cgroup subtree, overlayfs inside a user
 * namespace) are checked for an ordinary account; root runs boxes with the root engine and only needs
 * the host packages.
 *
 * Live probes (a user namespace, an overlay mount inside one) run only when the checked account is the
 * caller's: they create a namespace and a temporary directory and leave nothing behind.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { cgroupMounts as cgroupMountOptions } from '../engine/cgroup-tuning.ts';
import {
  cgroupDelegation,
  cgroupMounts,
  currentUser,
  type HostUser,
  kernelAtLeast,
  kernelVersion,
  ROOTLESS_RANGE_SIZE,
  readSysctl,
  subordinateRanges,
  systemdIsInit,
  unprivilegedPortStart,
  usableRange,
} from '../engine/rootless-host.ts';

/** Outcome of one check: `ok`, `missing` (a required prerequisite), `warn` (optional feature off). */
export type CheckStatus = 'ok' | 'missing' | 'warn';

/** One prerequisite and its state. */
export interface DoctorCheck {
  /** Stable identifier, e.g. `subuid`, `cgroup`, `overlay-userns`. */
  id: string;
  /** What is checked, one line. */
  title: string;
  status: CheckStatus;
  /** False for optional features (the gVisor tier, tty helper): `warn` instead of `missing`. */
  required: boolean;
  /** What was found. */
  detail: string;
  /** Exact command that fixes it (when not `ok`). */
  fix?: string;
}

/** A whole report (`sandbox doctor --json` prints this). */
export interface DoctorReport {
  user: string;
  uid: number;
  /** `rootless` for an ordinary account, `root` for uid 0. */
  mode: 'rootless' | 'root';
  /** True when no required check is missing. */
  ok: boolean;
  checks: DoctorCheck[];
}

/** Inputs of {@link runDoctor}; every field defaults to this host and the caller. */
export interface DoctorOptions {
  /** Account checked (default: the caller). */
  user?: HostUser;
  /** Image store / runtime data directory checked for writing (default `<home>/.sandbox`). */
  homeDir?: string;
  /** Alternative subordinate id files (tests). */
  subuidPath?: string;
  subgidPath?: string;
}

/** Reads an account from the password database with `getent passwd`. */
export function lookupUser(name: string): HostUser | undefined {
  const r = spawnSync('getent', ['passwd', name], { encoding: 'utf8' });
  const fields = r.status === 0 ? r.stdout.trim().split(':') : [];
  if (fields.length < 7) return undefined;
  return { name: fields[0]!, uid: Number(fields[2]), gid: Number(fields[3]), home: fields[5]! };
}

/** Absolute path of an executable on the standard search path, if installed. */
export function which(name: string): string | undefined {
  for (const dir of ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    try {
      const path = join(dir, name);
      if (statSync(path).isFile()) return path;
    } catch {}
  }
  return undefined;
}

function check(
  id: string,
  title: string,
  good: boolean,
  detail: string,
  fix: string,
  required = true,
): DoctorCheck {
  return {
    id,
    title,
    status: good ? 'ok' : required ? 'missing' : 'warn',
    required,
    detail,
    ...(good ? {} : { fix }),
  };
}

function apt(pkg: string): string {
  return `sudo apt-get install -y ${pkg}`;
}

/** A user namespace and, inside it, an overlay mount over a temporary directory (caller's account). */
function probeOverlayInUserns(): { userns: boolean; overlay: boolean; detail: string } {
  const userns = spawnSync('unshare', ['--user', '--map-root-user', 'true'], { encoding: 'utf8' });
  if (userns.status !== 0) {
    return { userns: false, overlay: false, detail: (userns.stderr || 'unshare --user failed').trim() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-doctor-'));
  try {
    for (const d of ['lower', 'upper', 'work', 'merged']) mkdirSync(join(dir, d));
    const r = spawnSync(
      'unshare',
      [
        '--user',
        '--map-root-user',
        '--mount',
        'mount',
        '-t',
        'overlay',
        'overlay',
        '-o',
        `lowerdir=${dir}/lower,upperdir=${dir}/upper,workdir=${dir}/work,userxattr`,
        `${dir}/merged`,
      ],
      { encoding: 'utf8' },
    );
    return {
      userns: true,
      overlay: r.status === 0,
      detail: r.status === 0 ? 'mounted in a user namespace' : (r.stderr || 'mount failed').trim(),
    };
  } finally {
    // overlayfs leaves `work/work` mode 000 behind.
    spawnSync('chmod', ['-R', 'u+rwx', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
}

function setuidRoot(path: string | undefined): boolean {
  if (!path) return false;
  const st = statSync(path);
  if (st.uid === 0 && st.mode & 0o4000) return true;
  // File capabilities instead of the setuid bit (some distributions).
  const caps = spawnSync('getcap', [path], { encoding: 'utf8' });
  return /cap_setuid/.test(caps.stdout ?? '');
}

function writableOrCreatable(dir: string): boolean {
  let probe = dir;
  for (;;) {
    try {
      statSync(probe);
      accessSync(probe, constants.W_OK | constants.X_OK);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return false;
      const parent = dirname(probe);
      if (parent === probe) return false;
      probe = parent;
    }
  }
}

/**
 * Checks every prerequisite (see the module comment) and returns the report.
 * @throws never: each failure becomes a check with status `missing` or `warn`.
 */
export function runDoctor(options: DoctorOptions = {}): DoctorReport {
  const user = options.user ?? currentUser();
  const self = user.uid === process.getuid?.();
  const rootless = user.uid !== 0;
  const setup = `sudo sandbox setup ${user.name}`;
  const checks: DoctorCheck[] = [];
  const [major, minor] = kernelVersion();
  checks.push(
    check(
      'kernel',
      'kernel ≥ 5.11 (overlayfs inside a user namespace)',
      kernelAtLeast(5, 11),
      `Linux ${major}.${minor}`,
      'sudo apt-get install -y linux-image-amd64   (then reboot: Debian 12 ships 6.1)',
    ),
  );
  for (const [id, pkg, title] of [
    ['crun', 'crun', 'OCI runtime crun'],
    ['catatonit', 'catatonit', 'box init catatonit'],
  ] as const) {
    const path = which(id);
    checks.push(check(id, title, path !== undefined, path ?? 'not installed', apt(pkg)));
  }
  const slirp = which('slirp4netns') ?? which('passt');
  checks.push(
    check(
      'network',
      'user-mode networking (slirp4netns or passt)',
      slirp !== undefined,
      slirp ?? 'neither slirp4netns nor passt is installed',
      apt('slirp4netns'),
    ),
  );
  if (rootless) {
    let tunMode = 0;
    try {
      tunMode = statSync('/dev/net/tun').mode & 0o777;
    } catch {}
    checks.push(
      check(
        'tun',
        '/dev/net/tun usable by ordinary accounts (slirp4netns)',
        (tunMode & 0o006) === 0o006,
        tunMode ? `mode 0${tunMode.toString(8)}` : 'missing',
        tunMode ? setup : 'sudo modprobe tun',
      ),
    );
  }
  if (!rootless) {
    const btrfs = which('mkfs.btrfs');
    checks.push(
      check(
        'btrfs',
        'btrfs box disks (snapshots, clone, export)',
        btrfs !== undefined,
        btrfs ?? 'not installed: new boxes get ext4 disks and refuse snapshots (unsupported)',
        apt('btrfs-progs'),
        false,
      ),
    );
    const cgroups = cgroupMountOptions(readFileSync('/proc/self/mountinfo', 'utf8'));
    const v1 = cgroups.filter((m) => m.type === 'cgroup');
    if (v1.length > 0) {
      const set = cgroups.some((m) => m.superOptions.includes('favordynmods'));
      const target = (cgroups.find((m) => m.type === 'cgroup2') ?? v1[0])?.mountPoint ?? '/sys/fs/cgroup';
      checks.push(
        check(
          'favordynmods',
          'cgroup favordynmods (fast exec on cgroup v1 and hybrid hosts)',
          set,
          set ? 'set' : 'not set: an exec can wait ≈ 10 ms for an RCU grace period to join the box cgroups',
          `sudo mount -o remount,favordynmods ${target}`,
          false,
        ),
      );
    }
  }
  checks.push(
    check(
      'busybox',
      'static busybox (tty exec helper)',
      which('busybox') !== undefined,
      which('busybox') ?? 'not installed',
      apt('busybox-static'),
      false,
    ),
  );
  const runsc = which('runsc');
  checks.push(
    check(
      'runsc',
      rootless ? 'gVisor tier (runsc; refused for ordinary accounts)' : 'gVisor tier (runsc)',
      runsc !== undefined && !rootless,
      runsc ? (rootless ? `${runsc} installed; the gVisor tier needs root here` : runsc) : 'not installed',
      rootless ? 'run gVisor boxes as root (isolation: "gvisor" is refused rootless)' : apt('runsc'),
      false,
    ),
  );
  if (rootless) {
    const clone = readSysctl('/proc/sys/kernel/unprivileged_userns_clone');
    const maxNs = readSysctl('/proc/sys/user/max_user_namespaces');
    const probe = self ? probeOverlayInUserns() : undefined;
    const usernsOn = clone !== 0 && maxNs !== 0 && (probe?.userns ?? true);
    checks.push(
      check(
        'userns',
        'unprivileged user namespaces',
        usernsOn,
        `kernel.unprivileged_userns_clone=${clone ?? 'absent'}, user.max_user_namespaces=${maxNs ?? 'absent'}${probe && !probe.userns ? `; ${probe.detail}` : ''}`,
        clone === 0
          ? 'sudo sysctl -w kernel.unprivileged_userns_clone=1'
          : 'sudo sysctl -w user.max_user_namespaces=65536',
      ),
    );
    checks.push(
      check(
        'overlay-userns',
        'overlayfs mount inside a user namespace',
        probe ? probe.overlay : kernelAtLeast(5, 11),
        probe ? probe.detail : 'not probed (another account); kernel supports it',
        'use a kernel ≥ 5.11 with overlayfs (modprobe overlay)',
      ),
    );
    for (const tool of ['newuidmap', 'newgidmap']) {
      const path = which(tool);
      checks.push(
        check(
          tool,
          `${tool} installed and setuid root`,
          setuidRoot(path),
          path ? (setuidRoot(path) ? `${path} (setuid)` : `${path} is not setuid root`) : 'not installed',
          path ? `sudo chmod u+s ${path}` : apt('uidmap'),
        ),
      );
    }
    for (const [id, file] of [
      ['subuid', options.subuidPath ?? '/etc/subuid'],
      ['subgid', options.subgidPath ?? '/etc/subgid'],
    ] as const) {
      const ranges = subordinateRanges(file, user);
      const range = usableRange(ranges);
      checks.push(
        check(
          id,
          `subordinate ${id === 'subuid' ? 'user' : 'group'} ids for ${user.name} in ${file} (≥ ${ROOTLESS_RANGE_SIZE})`,
          range !== undefined,
          range
            ? `${range.start}-${range.start + range.count - 1}`
            : ranges.length > 0
              ? `only ${ranges.map((r) => r.count).join('+')} ids`
              : 'no range',
          setup,
        ),
      );
    }
    const mounts = cgroupMounts();
    const delegation = cgroupDelegation(user, mounts);
    const how =
      mounts.layout === 'v2' && systemdIsInit()
        ? 'systemd user@.service delegation'
        : `${mounts.layout} cgroups without systemd: ${delegation.path} in each controller`;
    checks.push(
      check(
        'cgroup',
        'delegated cgroup subtree (cpu, memory, pids limits)',
        delegation.missing.length === 0,
        `${how}; delegated: ${delegation.controllers.join(', ') || 'none'}${delegation.missing.length ? `; missing: ${delegation.missing.join(', ')}` : ''}`,
        `${setup}   (or create boxes with allowUnlimited: true: limits are then not enforced)`,
      ),
    );
    const portStart = unprivilegedPortStart();
    checks.push(
      check(
        'ports',
        'published host ports below 1024',
        portStart <= 80,
        `net.ipv4.ip_unprivileged_port_start=${portStart}: host ports below ${portStart} are refused`,
        'sudo sysctl -w net.ipv4.ip_unprivileged_port_start=80',
        false,
      ),
    );
  }
  const homeDir = options.homeDir ?? join(user.home, '.sandbox');
  checks.push(
    check(
      'store',
      `image store and runtime data directory ${homeDir} writable`,
      self ? writableOrCreatable(homeDir) : true,
      self ? homeDir : `${homeDir} (not probed: another account)`,
      `sudo install -d -o ${user.name} -m 0700 ${homeDir}`,
    ),
  );
  return {
    user: user.name,
    uid: user.uid,
    mode: rootless ? 'rootless' : 'root',
    ok: checks.every((c) => c.status !== 'missing'),
    checks,
  };
}

/** Human-readable report: one line per check, the fix indented under each one that is not ok. */
export function formatDoctorReport(report: DoctorReport): string {
  const lines = [`sandbox doctor: ${report.user} (uid ${report.uid}, ${report.mode})`];
  for (const c of report.checks) {
    lines.push(`${c.status.padEnd(7)} ${c.title}: ${c.detail}`);
    if (c.fix) lines.push(`        fix: ${c.fix}`);
  }
  lines.push(report.ok ? 'ready' : 'not ready: run the fix commands above');
  return `${lines.join('\n')}\n`;
}
