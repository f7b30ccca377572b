/**
 * The OCI bundle and supervisor environment of a box of the root engines (crun/runc in engine.ts,
 * gVisor in gvisor-bundle.ts): the host paths `buildOciConfig` (oci.ts) is given, the bundle files
 * (`config.json`, the engine's `engine.json`, `hosts` and `hostname` for a box without a disk), and
 * the `SB_*` environment of `supervisor.sh` (scripts.ts) that mounts the box root and runs the runtime.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BoxPaths } from './box-files.ts';
import { diskFsMount, diskMountOptions } from './disk.ts';
import { DEFAULT_PATH } from './host-system.ts';
import type { IdMapping } from './idmap.ts';
import { etcHosts, type OciHostPaths } from './oci.ts';
import type { EngineBoxSpec } from './types.ts';

/** Cgroup parent of every box of the root engines (`/<parent>/<id>`), both isolation tiers. */
export const CGROUP_PARENT = 'seed-sandbox';

/** Host binaries and the user namespace a root engine gives a box (see `ociConfigInput`). */
export interface BundleHost {
  /** The static init bound at `/.sandbox/init` (run with `-P`). */
  init: string;
  /** Host static busybox bound as the tty helper, when the host has one. */
  ttyHelper?: string;
  /** The box's user namespace mapping; absent: none. */
  idMap?: IdMapping;
}

/** Where the box's `/etc/hosts` and `/etc/hostname` live: on its disk when it has one, else in the bundle. */
export function etcDir(p: BoxPaths, diskSizeGb: number | undefined): string {
  return diskSizeGb !== undefined ? p.diskDir : p.bundle;
}

/**
 * The arguments of `buildOciConfig` for the box: `spec` with each host path replaced by its bind
 * target `<boxDir>/binds/<i>` (the supervisor binds the host object there from its descriptor), and
 * the host paths of its root, init, tty helper, cgroup (`/seed-sandbox/<id>`) and /etc files.
 */
export function ociConfigInput(
  spec: EngineBoxSpec,
  p: BoxPaths,
  diskSizeGb: number | undefined,
  host: BundleHost,
): [EngineBoxSpec, OciHostPaths] {
  const etc = etcDir(p, diskSizeGb);
  const mounts = spec.mounts.map((m, i) => ({ ...m, hostPath: join(p.binds, String(i)) }));
  return [
    { ...spec, mounts },
    {
      rootfs: p.rootfs,
      init: host.init,
      initArgs: ['-P'],
      ...(host.ttyHelper ? { ttyHelper: host.ttyHelper } : {}),
      cgroupsPath: `/${CGROUP_PARENT}/${spec.id}`,
      etcFiles: { hosts: join(etc, 'hosts'), hostname: join(etc, 'hostname') },
      ...(host.idMap ? { idMap: host.idMap } : {}),
    },
  ];
}

/**
 * Writes the box's bundle: `config.json` (`config` with `process.cwd` the box's working directory),
 * `engine.json` (`meta`) and, for a box without a disk, its `hosts` and `hostname` files.
 * @throws the file system error when the bundle cannot be written.
 */
export function writeBundle(
  spec: EngineBoxSpec,
  p: BoxPaths,
  diskSizeGb: number | undefined,
  config: Record<string, unknown>,
  meta: object,
): void {
  mkdirSync(p.bundle, { recursive: true });
  if (diskSizeGb === undefined) {
    writeFileSync(join(p.bundle, 'hosts'), etcHosts(spec.hostname));
    writeFileSync(join(p.bundle, 'hostname'), `${spec.hostname}\n`);
  }
  (config.process as { cwd: string }).cwd = spec.workingDir;
  writeFileSync(join(p.bundle, 'config.json'), JSON.stringify(config));
  writeFileSync(join(p.bundle, 'engine.json'), JSON.stringify(meta));
}

/**
 * The environment of `supervisor.sh` for a box: `runtime` is the runtime command line (joined with
 * spaces), `binds` the list from `stageBoxFiles`. The disk's mount options follow its image's format
 * (`diskMountOptions`).
 */
export function supervisorEnv(
  spec: EngineBoxSpec,
  p: BoxPaths,
  diskSizeGb: number | undefined,
  runtime: string[],
  binds: string[],
): Record<string, string> {
  const disk = diskSizeGb !== undefined;
  return {
    PATH: process.env.PATH ?? DEFAULT_PATH,
    SB_ID: spec.id,
    SB_RT: runtime.join(' '),
    SB_BUNDLE: p.bundle,
    SB_ROOTFS: p.rootfs,
    SB_LOWER: [...spec.layerDirs].reverse().join(':'),
    SB_UPPER: p.upper,
    SB_WORK: p.work,
    SB_DISK_IMG: disk ? p.diskImg : '',
    SB_DISK_OPTS: disk ? diskMountOptions(p.diskImg) : '',
    SB_HOSTS: etcHosts(spec.hostname),
    SB_HOSTNAME: `${spec.hostname}\n`,
    SB_DISK_DIR: p.diskDir,
    SB_LOG: p.log,
    SB_PIDFILE: p.pidFile,
    SB_BINDS: binds.join(' '),
    SB_WATCH: spec.detach ? '0' : '1',
    // The box's cgroup under `CGROUP_PARENT` (config.json `cgroupsPath`), killed whole on creator death.
    SB_CGROUP: spec.id,
    SB_SPARE_SRC: p.spare?.source ?? '',
    SB_SPARE: p.spare?.spare ?? '',
  };
}

/**
 * The supervisor's user-namespace environment (idmap.ts): `SB_IDMAP` the helper command
 * (`[perl, idmap-mount.pl, hostUid, hostGid, size]`), `SB_IDMAP_DISK` (a box with a disk) the disk
 * mounted, its `upper`/`work` and /etc files made when missing, all by the helper's one process
 * (the supervisor then runs no `mount` or `mkdir`), `SB_IDMAP_OWN` the writable layer and /etc
 * files handed to the mapped root, `SB_IDMAP_BINDS` each host path bound from its descriptor,
 * idmapped (`1`) or as it is for a managed volume (`ownedByBox`, `0`).
 */
export function idmapSupervisorEnv(
  spec: EngineBoxSpec,
  p: BoxPaths,
  diskSizeGb: number | undefined,
  helper: string[],
  binds: string[],
): Record<string, string> {
  const etc = etcDir(p, diskSizeGb);
  const disk =
    diskSizeGb !== undefined
      ? ['disk', p.diskImg, p.diskDir, ...diskFsMount(p.diskImg), 'mkdir', p.upper, 'mkdir', p.work]
          .concat(['file', join(etc, 'hosts'), 'SB_HOSTS', 'file', join(etc, 'hostname'), 'SB_HOSTNAME'])
          .join(' ')
      : '';
  return {
    SB_IDMAP: helper.join(' '),
    SB_IDMAP_DISK: disk,
    SB_IDMAP_OWN: [p.upper, p.work, join(etc, 'hosts'), join(etc, 'hostname')]
      .flatMap((f) => ['own', f])
      .join(' '),
    SB_IDMAP_BINDS: binds
      .flatMap((b, i) => {
        const [fd, target] = b.split(/:(.*)/s) as [string, string];
        return ['bind', `/proc/self/fd/${fd}`, target, spec.mounts[i]?.ownedByBox === true ? '0' : '1'];
      })
      .join(' '),
  };
}
