/**
 * `sandbox setup <user>` (run once as root): prepares the host so that `user` can run boxes
 * rootless, and prints what it did. Idempotent: a second run changes nothing and says so.
 *
 * 1. Installs the missing Debian packages of the rootless runtime ({@link ROOTLESS_PACKAGES}, apt-get).
 * 2. Reserves the root sandbox's own id range first (`seed-sandbox` in `/etc/subuid` and `/etc/subgid`,
 *    idmap.ts), then gives `user` a free block of 65536 subordinate uids and gids overlapping no other
 *    entry (`usermod --add-subuids/--add-subgids`, the same start in both files).
 * 3. Makes `/dev/net/tun` usable by every account (mode 0666, Debian's udev default; slirp4netns opens
 *    it in the box's namespace, where the user holds `CAP_NET_ADMIN`). Hosts without udev rules keep
 *    whatever mode the kernel gave the node (0600 here).
 * 4. Delegates a cgroup subtree for the cpu, memory and pids limits:
 *    - v2 host with systemd as PID 1: `Delegate=cpu cpuset io memory pids` in
 *      `/etc/systemd/system/user@.service.d/seed-sandbox-delegate.conf`, `systemctl daemon-reload`;
 *    - otherwise (no systemd, or a v1/hybrid host): `mkdir <controller root>/seed-sandbox-users/<user>`
 *      in each limit controller's hierarchy (on v2: the controllers enabled in `cgroup.subtree_control`
 *      of `/` and `/seed-sandbox-users`), owned by the user (`chown -R`). cgroup directories do not
 *      survive a reboot: run `sandbox setup <user>` again at boot (e.g. from rc.local or a unit).
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { ensureSandboxIdRange, SUBID_FIRST, SUBID_NAME } from '../engine/idmap.ts';
import {
  CGROUP_ROOT,
  cgroupDelegation,
  cgroupMounts,
  freeRange,
  type HostUser,
  LIMIT_CONTROLLERS,
  ROOTLESS_RANGE_SIZE,
  readSubordinateFile,
  subordinateRanges,
  systemdIsInit,
  USER_CGROUP_PARENT,
  usableRange,
} from '../engine/rootless-host.ts';
import { BoxError } from '../errors.ts';
import { lookupUser } from './doctor.ts';

/** Debian packages the rootless runtime needs (uidmap: newuidmap/newgidmap). */
export const ROOTLESS_PACKAGES = ['uidmap', 'crun', 'slirp4netns', 'passt', 'catatonit', 'busybox-static'];

/** Options of {@link runSetup}. */
export interface SetupOptions {
  /** Print what would be done and change nothing. */
  dryRun?: boolean;
  /** Subordinate id files (tests point them elsewhere). Default `/etc/subuid`, `/etc/subgid`. */
  subuidPath?: string;
  subgidPath?: string;
  /** Skip the package step (tests on a prepared host). */
  skipPackages?: boolean;
  /** Skip the `/dev/net/tun` step. */
  skipTun?: boolean;
  /** Skip the cgroup step (tests of the id ranges alone). */
  skipCgroups?: boolean;
}

/** One step of a setup run. */
export interface SetupAction {
  /** `packages`, `root-range`, `subuid`, `subgid`, `tun` or `cgroup`. */
  step: string;
  /** True when the step changed the host (or would, in a dry run). */
  changed: boolean;
  /** What was (or would be) done, or why nothing was needed. */
  message: string;
}

/** Result of {@link runSetup}. */
export interface SetupReport {
  user: string;
  dryRun: boolean;
  actions: SetupAction[];
}

function run(file: string, args: string[]): void {
  const r = spawnSync(file, args, {
    encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (r.status !== 0) {
    throw new BoxError(`${file} ${args.join(' ')} failed: ${(r.stderr || r.error?.message || '').trim()}`, {
      code: 'internal',
    });
  }
}

function missingPackages(): string[] {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax
  const format = '-f=${Package} ${db:Status-Status}\n';
  const r = spawnSync('dpkg-query', ['-W', format, ...ROOTLESS_PACKAGES], { encoding: 'utf8' });
  const installed = new Set(
    (r.stdout ?? '')
      .split('\n')
      .filter((l) => l.endsWith(' installed'))
      .map((l) => l.split(' ')[0]),
  );
  return ROOTLESS_PACKAGES.filter((p) => !installed.has(p));
}

function packagesStep(dryRun: boolean): SetupAction {
  const missing = missingPackages();
  if (missing.length === 0) {
    return { step: 'packages', changed: false, message: `installed already: ${ROOTLESS_PACKAGES.join(' ')}` };
  }
  const command = `apt-get install -y ${missing.join(' ')}`;
  if (!dryRun) {
    try {
      run('apt-get', ['install', '-y', ...missing]);
    } catch {
      run('apt-get', ['update']);
      run('apt-get', ['install', '-y', ...missing]);
    }
  }
  return { step: 'packages', changed: true, message: `${dryRun ? 'would run' : 'ran'}: ${command}` };
}

function rangesStep(user: HostUser, options: SetupOptions): SetupAction[] {
  const dryRun = options.dryRun === true;
  const files = { subuid: options.subuidPath ?? '/etc/subuid', subgid: options.subgidPath ?? '/etc/subgid' };
  const actions: SetupAction[] = [];
  const hasRoot = (path: string) =>
    readSubordinateFile(path).some((e) => e.name === SUBID_NAME && e.count >= ROOTLESS_RANGE_SIZE);
  if (hasRoot(files.subuid) && hasRoot(files.subgid)) {
    actions.push({ step: 'root-range', changed: false, message: `${SUBID_NAME} range present already` });
  } else if (dryRun) {
    actions.push({ step: 'root-range', changed: true, message: `would reserve the ${SUBID_NAME} range` });
  } else {
    const m = ensureSandboxIdRange(true, files);
    actions.push({
      step: 'root-range',
      changed: true,
      message: `reserved ${SUBID_NAME}:${m.hostUid}:${m.size} for root-run boxes`,
    });
  }
  const taken = [...readSubordinateFile(files.subuid), ...readSubordinateFile(files.subgid)];
  // In a dry run the root range is not written yet: keep its default place free.
  if (dryRun) taken.push({ name: SUBID_NAME, start: SUBID_FIRST, count: ROOTLESS_RANGE_SIZE });
  const block = freeRange(taken, ROOTLESS_RANGE_SIZE);
  const last = block.start + block.count - 1;
  for (const [step, path, flag] of [
    ['subuid', files.subuid, '--add-subuids'],
    ['subgid', files.subgid, '--add-subgids'],
  ] as const) {
    const have = usableRange(subordinateRanges(path, user));
    if (have) {
      actions.push({
        step,
        changed: false,
        message: `${user.name} has ${have.start}-${have.start + have.count - 1} in ${path} already`,
      });
      continue;
    }
    if (!dryRun) {
      if (path === `/etc/${step}`) run('usermod', [flag, `${block.start}-${last}`, user.name]);
      else writeFileSync(path, `${user.name}:${block.start}:${block.count}\n`, { flag: 'a' });
    }
    actions.push({
      step,
      changed: true,
      message: `${dryRun ? 'would add' : 'added'} ${user.name}:${block.start}:${block.count} to ${path}`,
    });
  }
  return actions;
}

/** The TUN/TAP clone device slirp4netns opens. */
export const TUN_DEVICE = '/dev/net/tun';

function tunStep(dryRun: boolean): SetupAction {
  let mode: number;
  try {
    mode = statSync(TUN_DEVICE).mode & 0o777;
  } catch {
    throw new BoxError(`${TUN_DEVICE} is missing: load the tun module (modprobe tun)`, {
      code: 'unsupported',
    });
  }
  if ((mode & 0o006) === 0o006) {
    return { step: 'tun', changed: false, message: `${TUN_DEVICE} is usable by every account already` };
  }
  if (!dryRun) chmodSync(TUN_DEVICE, 0o666);
  return {
    step: 'tun',
    changed: true,
    message: `${dryRun ? 'would chmod' : 'chmod'} 0666 ${TUN_DEVICE} (was 0${mode.toString(8)}; Debian's udev default, re-run at boot without udev)`,
  };
}

const SYSTEMD_DROPIN = '/etc/systemd/system/user@.service.d/seed-sandbox-delegate.conf';
const SYSTEMD_DELEGATE = '[Service]\nDelegate=cpu cpuset io memory pids\n';

function chownTree(dir: string, user: HostUser): void {
  chownSync(dir, user.uid, user.gid);
  for (const name of readdirSync(dir)) chownSync(join(dir, name), user.uid, user.gid);
}

function cgroupStep(user: HostUser, dryRun: boolean): SetupAction {
  const mounts = cgroupMounts();
  if (mounts.layout === 'v2' && systemdIsInit()) {
    const current = existsSync(SYSTEMD_DROPIN) ? readFileSync(SYSTEMD_DROPIN, 'utf8') : '';
    if (current === SYSTEMD_DELEGATE) {
      return { step: 'cgroup', changed: false, message: `systemd delegation in ${SYSTEMD_DROPIN} already` };
    }
    if (!dryRun) {
      mkdirSync(join(SYSTEMD_DROPIN, '..'), { recursive: true });
      writeFileSync(SYSTEMD_DROPIN, SYSTEMD_DELEGATE);
      run('systemctl', ['daemon-reload']);
    }
    return {
      step: 'cgroup',
      changed: true,
      message: `${dryRun ? 'would write' : 'wrote'} ${SYSTEMD_DROPIN} (Delegate=cpu cpuset io memory pids) and reload systemd; ${user.name} must log in again`,
    };
  }
  const before = cgroupDelegation(user, mounts);
  if (before.missing.length === 0) {
    return {
      step: 'cgroup',
      changed: false,
      message: `${before.path} delegated to ${user.name} already (${before.controllers.join(', ')})`,
    };
  }
  const dirs: string[] = [];
  if (mounts.layout === 'v2') {
    const root = mounts.unified ?? CGROUP_ROOT;
    const enable = LIMIT_CONTROLLERS.map((c) => `+${c}`).join(' ');
    dirs.push(join(root, before.path));
    if (!dryRun) {
      writeFileSync(join(root, 'cgroup.subtree_control'), enable);
      mkdirSync(join(root, USER_CGROUP_PARENT), { recursive: true });
      writeFileSync(join(root, USER_CGROUP_PARENT, 'cgroup.subtree_control'), enable);
      mkdirSync(dirs[0]!, { recursive: true });
      chownTree(dirs[0]!, user);
    }
  } else {
    for (const c of before.missing) {
      const mount = mounts.v1.get(c);
      if (!mount)
        throw new BoxError(`cgroup controller ${c} is not mounted; limits cannot be delegated`, {
          code: 'unsupported',
        });
      const dir = join(mount, before.path);
      dirs.push(dir);
      if (!dryRun) {
        mkdirSync(dir, { recursive: true });
        chownTree(dir, user);
      }
    }
  }
  return {
    step: 'cgroup',
    changed: true,
    message: `${dryRun ? 'would create' : 'created'} ${dirs.join(', ')} owned by ${user.name} (no systemd as PID 1: re-run at boot)`,
  };
}

/**
 * Prepares the host for `userName` (see the module comment).
 * @throws BoxError `invalid_option` (field `user`) for an unknown account or root, `permission_denied`
 *   when not run as root (unless `dryRun`), or naming the failed command.
 */
export function runSetup(userName: string, options: SetupOptions = {}): SetupReport {
  const user = lookupUser(userName);
  if (!user) throw new BoxError(`user: no account named '${userName}'`, { field: 'user' });
  if (user.uid === 0) throw new BoxError('user: root needs no rootless setup', { field: 'user' });
  const dryRun = options.dryRun === true;
  if (!dryRun && process.getuid?.() !== 0) {
    throw new BoxError('sandbox setup changes /etc/subuid and cgroups: run it as root (or use --dry-run)', {
      code: 'permission_denied',
    });
  }
  const actions: SetupAction[] = [];
  if (!options.skipPackages) actions.push(packagesStep(dryRun));
  actions.push(...rangesStep(user, options));
  if (!options.skipTun) actions.push(tunStep(dryRun));
  if (!options.skipCgroups) actions.push(cgroupStep(user, dryRun));
  return { user: user.name, dryRun, actions };
}

/** Human-readable lines of a report: `changed`/`ok` per step. */
export function formatSetupReport(report: SetupReport): string {
  const lines = report.actions.map(
    (a) => `${(a.changed ? (report.dryRun ? 'plan' : 'done') : 'ok').padEnd(5)} ${a.step}: ${a.message}`,
  );
  const changed = report.actions.some((a) => a.changed);
  lines.push(
    changed
      ? report.dryRun
        ? `dry run: nothing changed for ${report.user}`
        : `${report.user} is set up; check with: su ${report.user} -c 'sandbox doctor'`
      : `nothing to do: ${report.user} is set up`,
  );
  return `${lines.join('\n')}\n`;
}
