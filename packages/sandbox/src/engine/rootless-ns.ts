/**
 * Namespace helpers of the rootless engine (rootless.ts): the host prerequisites of an account, the
 * `unshare` arguments of a box's user namespace, the environment that gives crun its view of the
 * delegated cgroups (rootless-scripts.ts), and crun run in such a namespace.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { BoxError } from '../errors.ts';
import { findExecutable } from './host-system.ts';
import {
  type CgroupDelegation,
  cgroupMounts,
  type HostUser,
  ROOTLESS_RANGE_SIZE,
  type SubordinateRange,
  subordinateRanges,
  usableRange,
} from './rootless-host.ts';

/**
 * Checks what a rootless box needs of the host for `user`: a block of subordinate uids and gids,
 * crun, newuidmap/newgidmap, unshare, nsenter and the init.
 * @returns the subordinate blocks box ids 1…65536 map to.
 * @throws BoxError `unsupported` for root or anything missing, naming the fix (`sandbox setup <user>`).
 */
export function rootlessPrerequisites(
  user: HostUser,
  files: { subuid: string; subgid: string },
  initPath: string,
): { uids: SubordinateRange; gids: SubordinateRange } {
  if (user.uid === 0)
    throw new BoxError('the rootless engine is for ordinary accounts', { code: 'unsupported' });
  const fix = `run 'sudo sandbox setup ${user.name}' (check with 'sandbox doctor')`;
  const uids = usableRange(subordinateRanges(files.subuid, user));
  const gids = usableRange(subordinateRanges(files.subgid, user));
  if (!uids || !gids) {
    throw new BoxError(
      `rootless: ${user.name} has no block of ${ROOTLESS_RANGE_SIZE} subordinate ids in ${files.subuid} and ${files.subgid}: ${fix}`,
      { code: 'unsupported' },
    );
  }
  for (const tool of ['crun', 'newuidmap', 'newgidmap', 'unshare', 'nsenter']) {
    if (!findExecutable(tool))
      throw new BoxError(`rootless: ${tool} is not installed: ${fix}`, { code: 'unsupported' });
  }
  if (!existsSync(initPath)) {
    throw new BoxError(`rootless: ${initPath} (catatonit) is missing: ${fix}`, { code: 'unsupported' });
  }
  return { uids, gids };
}

/** The message of a start refused for missing cgroup delegation. */
export function limitsNotDelegatedMessage(user: string, delegation: CgroupDelegation): string {
  return (
    `limits: cpus, memoryMib and the pids limit need a cgroup subtree delegated to ${user} ` +
    `(${delegation.path}; missing controllers: ${delegation.missing.join(', ')}). ` +
    `Run 'sudo sandbox setup ${user}' once, or create the box with advanced.allowUnlimited: true to run it without limits`
  );
}

/**
 * `unshare` arguments of a box's user and mount namespace: the caller's uid and gid are box 0,
 * `uids`/`gids` are box ids 1…65536 (util-linux calls newuidmap/newgidmap).
 */
export function idMapArgs(uids: SubordinateRange, gids: SubordinateRange): string[] {
  return [
    '--user',
    '--mount',
    '--propagation',
    'private',
    `--map-users=${uids.start},1,${ROOTLESS_RANGE_SIZE}`,
    `--map-groups=${gids.start},1,${ROOTLESS_RANGE_SIZE}`,
    '--map-user=0',
    '--map-group=0',
  ];
}

/**
 * Environment of the helper scripts (rootless-scripts.ts): crun's state directory, its cgroup manager
 * (`disabled` for a box without limits), and on v1/hybrid hosts the delegated hierarchies to show it
 * (`SB_CGROUPS`, bound back over a tmpfs; `SB_CGSAVE` is the scratch mount point).
 */
export function cgroupViewEnv(
  crunRoot: string,
  cgsave: string,
  delegation: CgroupDelegation,
  enforce: boolean,
): Record<string, string> {
  const mounts = cgroupMounts();
  const env: Record<string, string> = {
    SB_STATE: crunRoot,
    SB_CGSAVE: '',
    SB_CGROUPS: '',
    SB_CGMGR: enforce ? '--cgroup-manager=cgroupfs' : '--cgroup-manager=disabled',
  };
  if (mounts.layout !== 'v2') {
    env.SB_CGSAVE = cgsave;
    if (enforce) {
      const dirs = new Set<string>();
      for (const c of delegation.controllers) dirs.add(mounts.v1.get(c)!.split('/').pop()!);
      env.SB_CGROUPS = [...dirs].join(' ');
    }
  }
  return env;
}

/** Runs `rootless-crun.sh <args>` in a user namespace where the caller is root (`delete` and the like). */
export function crunInUserns(
  script: string,
  env: Record<string, string>,
  args: string[],
): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      'unshare',
      ['--user', '--map-root-user', '--mount', '--propagation', 'private', '--', '/bin/sh', script, ...args],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', (e) => resolve({ code: 1, stderr: e.message }));
    child.on('exit', (code) => resolve({ code: code ?? 1, stderr }));
  });
}
