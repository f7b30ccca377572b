/**
 * The files of a rootless box (rootless.ts) and the run of its supervisor: `bundle/config.json` from
 * `buildOciConfig` adapted to a box that lives in the caller's user namespace, the box's `hosts`,
 * `hostname`, `resolv.conf` and `engine.json`, the writable layer directories and the staging points
 * of host binds (each host path checked against the account's access), and the environment and spawn
 * of `rootless-supervisor.sh` up to its `started` line.
 */
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { startSupervisor, supervisorFailure } from './host-process.ts';
import { DEFAULT_PATH } from './host-system.ts';
import type { OpenedHostPath } from './hostpath.ts';
import { buildOciConfig, etcHosts } from './oci.ts';
import type { EngineBoxSpec, EngineMount } from './types.ts';

/** What the config needs besides the spec. */
export interface RootlessConfigOptions {
  /** Host path of the static init (catatonit). */
  initPath: string;
  /** Host path of the static busybox for tty commands, when available. */
  ttyHelper?: string;
  /** Cgroup path of the box under the delegated subtree; undefined: no cgroup, no limits. */
  cgroupsPath: string | undefined;
}

/** Address of slirp4netns's DNS forwarder, the box's nameserver. */
export const ROOTLESS_DNS = '10.0.2.3';

/**
 * Writes `<boxDir>/bundle`: `config.json` (no user namespace entry, since crun runs inside the one the
 * supervisor made; no devices cgroup rule; without `cgroupsPath` no cgroup and no resources; a
 * `/etc/resolv.conf` bind when the network is enabled), the box's `hosts`, `hostname`,
 * `resolv.conf`, and `engine.json` (`meta`).
 * @throws BoxError for an unknown capability name (buildOciConfig).
 */
export function writeBundle(spec: EngineBoxSpec, meta: object, options: RootlessConfigOptions): void {
  const bundle = join(spec.boxDir, 'bundle');
  const mounts = spec.mounts.map((m, i) => ({ ...m, hostPath: join(spec.boxDir, 'binds', String(i)) }));
  const config = buildOciConfig(
    { ...spec, mounts },
    {
      rootfs: join(spec.boxDir, 'rootfs'),
      init: options.initPath,
      initArgs: ['-P'],
      ...(options.ttyHelper ? { ttyHelper: options.ttyHelper } : {}),
      cgroupsPath: options.cgroupsPath ?? '',
      etcFiles: { hosts: join(bundle, 'hosts'), hostname: join(bundle, 'hostname') },
    },
  ) as { process: { cwd: string }; mounts: object[]; linux: Record<string, unknown> };
  config.process.cwd = spec.workingDir;
  const linux = config.linux;
  if (options.cgroupsPath !== undefined) {
    // The devices controller is not delegated; a user namespace cannot create device nodes anyway.
    delete (linux.resources as Record<string, unknown>).devices;
  } else {
    delete linux.resources;
    delete linux.cgroupsPath;
  }
  if (spec.network.mode === 'enabled') {
    config.mounts.push({
      destination: '/etc/resolv.conf',
      type: 'bind',
      source: join(bundle, 'resolv.conf'),
      options: ['bind', 'rw', 'nosuid', 'nodev', 'noexec'],
    });
  }
  mkdirSync(bundle, { recursive: true });
  writeFileSync(join(bundle, 'hosts'), etcHosts(spec.hostname));
  writeFileSync(join(bundle, 'hostname'), `${spec.hostname}\n`);
  writeFileSync(join(bundle, 'resolv.conf'), `nameserver ${ROOTLESS_DNS}\noptions attempts:1 timeout:2\n`);
  writeFileSync(join(bundle, 'config.json'), JSON.stringify(config));
  writeFileSync(join(bundle, 'engine.json'), JSON.stringify(meta));
}

/**
 * Checks that the account `user` may use the opened host object `o` of mount `m` (`mounts[i]`) as
 * the mount asks: read (and search, for a directory), and write unless it is read-only. Checked on
 * the descriptor's magic link, so on the very object that will be bound.
 * @throws BoxError naming `mounts[i].hostPath` otherwise.
 */
export function checkAccess(o: OpenedHostPath, m: EngineMount, i: number, user: string): void {
  try {
    accessSync(
      `/proc/self/fd/${o.fd}`,
      constants.R_OK | (m.readOnly ? 0 : constants.W_OK) | (o.isDirectory ? constants.X_OK : 0),
    );
  } catch {
    throw new BoxError(
      `mounts[${i}].hostPath: '${m.hostPath}' is not ${m.readOnly ? 'readable' : 'readable and writable'} by ${user}`,
      { field: `mounts[${i}].hostPath` },
    );
  }
}

/**
 * Makes the writable layer directories, a fresh log, and one staging point per host path
 * (`binds/<i>`, a directory or an empty file); forgets a previous run's pid files.
 * @returns the supervisor's `SB_BINDS` entries (`<fd>:<target>`; the opened paths are fds 3…).
 */
export function stageBoxFiles(boxDir: string, opened: OpenedHostPath[]): string[] {
  for (const d of ['rootfs', 'upper', 'work']) mkdirSync(join(boxDir, d), { recursive: true });
  rmSync(join(boxDir, 'bundle', 'init.pid'), { force: true });
  rmSync(join(boxDir, 'bundle', 'slirp.pid'), { force: true });
  writeFileSync(join(boxDir, 'runtime.log'), '');
  const bindsDir = join(boxDir, 'binds');
  rmSync(bindsDir, { recursive: true, force: true }); // never mounted on the host: plain files
  if (opened.length > 0) mkdirSync(bindsDir, { mode: 0o700 });
  return opened.map((o, i) => {
    const target = join(bindsDir, String(i));
    if (o.isDirectory) mkdirSync(target);
    else writeFileSync(target, '');
    return `${3 + i}:${target}`;
  });
}

/**
 * The environment of `rootless-supervisor.sh` (rootless-scripts.ts) for a box: its files under
 * `spec.boxDir`, the bind list from `stageBoxFiles` with each host path's checked path
 * (`SB_BIND_SRC_<i>`), and `cgroupEnv`, the delegated cgroups' view (rootless-ns.ts `cgroupViewEnv`).
 */
export function rootlessSupervisorEnv(
  spec: EngineBoxSpec,
  binds: string[],
  opened: OpenedHostPath[],
  cgroupEnv: Record<string, string>,
): Record<string, string> {
  const bundle = join(spec.boxDir, 'bundle');
  return {
    PATH: process.env.PATH ?? DEFAULT_PATH,
    ...cgroupEnv,
    SB_ID: spec.id,
    SB_BUNDLE: bundle,
    SB_ROOTFS: join(spec.boxDir, 'rootfs'),
    SB_LOWER: [...spec.layerDirs].reverse().join(':'),
    SB_UPPER: join(spec.boxDir, 'upper'),
    SB_WORK: join(spec.boxDir, 'work'),
    SB_LOG: join(spec.boxDir, 'runtime.log'),
    SB_PIDFILE: join(bundle, 'init.pid'),
    SB_BINDS: binds.join(' '),
    ...Object.fromEntries(opened.map((o, i) => [`SB_BIND_SRC_${i}`, o.path])),
    SB_WATCH: spec.detach ? '0' : '1',
  };
}

/**
 * Spawns the supervisor (`unshare <argv>`, own session) with `fds` as descriptors 3…, and waits for
 * its `started` line.
 * @returns the supervisor (its stdin is the parent-death pipe) and when it mounted and started.
 * @throws BoxError with the stage that failed and the end of `log`.
 */
export async function runSupervisor(
  id: string,
  argv: string[],
  env: Record<string, string>,
  fds: number[],
  log: string,
): Promise<{ child: ChildProcess; tMounted: number; tStarted: number }> {
  const { child, outcome, tMounted, tStarted } = await startSupervisor('unshare', argv, env, fds);
  if (outcome !== 'started') {
    child.stdin?.destroy();
    throw await supervisorFailure(id, outcome, log);
  }
  return { child, tMounted, tStarted };
}
