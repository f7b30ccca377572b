/**
 * Launching a box of a local runtime: its image, volumes, environment and network are prepared and the
 * engine starts it; the record is then marked running with its stage timings (spec 002 `JsBoxMetrics`
 * `stage*Ms`, `totalCreateDurationMs`). `create` launches a new box and `start` a stopped one (same box
 * directory, same writable layer).
 */
import { mkdirSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { EngineBoxSpec, EngineMount } from '../engine/types.ts';
import { BoxError } from '../errors.ts';
import type { PreparedImage } from '../images/index.ts';
import { secretsEnv } from '../network/index.ts';
import { checkArgv } from './health.ts';
import { prepareImage } from './local-images.ts';
import type { LocalParts } from './local-parts.ts';
import { resolveVolume } from './local-volumes.ts';
import { DEFAULT_PIDS_LIMIT, mainProcessArgv, type NormalizedBoxOptions } from './options.ts';
import { type BoxTimings, processIdentity } from './state.ts';

/** Milliseconds since `start` (a `performance.now()` time), to the microsecond. */
function ms(start: number): number {
  return Math.round((performance.now() - start) * 1000) / 1000;
}

/**
 * The engine mounts of a box's volumes: a managed volume's data directory (created with its record when
 * the name is new) or a host path. Returns them with the ids of the managed volumes, in option order.
 * @throws BoxError naming `volumes[i].managedVolume` for a new volume whose name is invalid.
 */
function boxMounts(
  parts: LocalParts,
  volumes: NormalizedBoxOptions['volumes'],
): { mounts: EngineMount[]; volumeIds: string[] } {
  const mounts: EngineMount[] = [];
  const volumeIds: string[] = [];
  volumes.forEach((volume, i) => {
    if (volume.managedVolume !== undefined) {
      const { volume: record, dataDir } = resolveVolume(
        parts.homeDir,
        parts.db,
        volume.managedVolume,
        `volumes[${i}].managedVolume`,
      );
      volumeIds.push(record.id);
      mounts.push({ hostPath: dataDir, guestPath: volume.guestPath, readOnly: false, ownedByBox: true });
    } else {
      mounts.push({
        hostPath: volume.hostPath!,
        guestPath: volume.guestPath,
        readOnly: volume.readOnly === true,
      });
    }
  });
  return { mounts, volumeIds };
}

/**
 * The environment of a box as `KEY=value` entries: the image's, overridden by the box's `env`, plus the
 * placeholders and proxy/CA settings of its secrets (the box never sees a secret's value) where `env`
 * does not set the same key.
 */
function boxEnv(image: PreparedImage, normalized: NormalizedBoxOptions): string[] {
  const env = new Map<string, string>();
  for (const entry of image.config.env) {
    const eq = entry.indexOf('=');
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  for (const { key, value } of normalized.env) env.set(key, value);
  for (const [key, value] of Object.entries(secretsEnv(normalized.secrets))) {
    if (!normalized.env.some((e) => e.key === key)) env.set(key, value);
  }
  return [...env].map(([k, v]) => `${k}=${v}`);
}

/**
 * Prepares the image, volumes, environment and network of box `id` and starts it in the engine, then
 * records it as running with its stage timings counted from `t0` (a `performance.now()` time); starts
 * its main process (`entrypoint`/`cmd`) and its health checks when it has them. The caller cleans up
 * after a failure.
 * @throws BoxError code `image` (image not available), `unsupported` (a main process on the gVisor tier),
 *   `exec` (the main process cannot start), naming the volume field of an invalid new volume name; the
 *   engine's errors as they are.
 */
export async function launchBox(
  parts: LocalParts,
  id: string,
  boxName: string | null,
  normalized: NormalizedBoxOptions,
  t0: number,
): Promise<void> {
  const tImage = performance.now();
  const image = await prepareImage(parts.store, normalized);
  const stageImagePrepareMs = ms(tImage);
  const { mounts, volumeIds } = boxMounts(parts, normalized.volumes);
  parts.db.linkVolumes(id, volumeIds);
  const boxDir = parts.engines.boxDir(id);
  mkdirSync(boxDir, { recursive: true, mode: 0o700 });
  const spec: EngineBoxSpec = {
    id,
    hostname: boxName ?? id.toLowerCase(),
    layerDirs: image.layerDirs,
    boxDir,
    env: boxEnv(image, normalized),
    workingDir: normalized.workingDir,
    cpus: normalized.cpus,
    memoryMib: normalized.memoryMib,
    pidsLimit: DEFAULT_PIDS_LIMIT,
    mounts,
    capabilities: normalized.capabilities,
    network: normalized.network,
    detach: normalized.detach,
    isolation: normalized.isolation,
  };
  const user = normalized.user ?? image.config.user;
  if (user) spec.user = user;
  const main = mainProcessArgv(normalized, image.config);
  const mainField = normalized.entrypoint !== undefined ? 'entrypoint' : 'cmd';
  if (main && normalized.isolation === 'gvisor') {
    throw new BoxError('entrypoint/cmd: a main process is not supported by the gvisor isolation tier', {
      code: 'unsupported',
      field: mainField,
    });
  }
  if (normalized.diskSizeGb !== undefined) spec.diskSizeGb = normalized.diskSizeGb;
  if (normalized.limitsEnforced === false) spec.allowUnlimited = true;
  const engine = await parts.engines.engine();
  parts.engines.networking().prepare(id, {
    ports: normalized.ports,
    secrets: normalized.secrets,
    detach: normalized.detach,
    // The network's host side starts beside the box's mounts (manager.ts `prepare`).
    network: normalized.network,
  });
  const started = await engine.start(spec);
  const timings: BoxTimings = {
    stageImagePrepareMs,
    ...started.timings,
    totalCreateDurationMs: ms(t0),
  };
  parts.db.markRunning(id, started.pid, processIdentity(started.pid), new Date().toISOString(), timings);
  if (main) {
    // The main process: in the background, as the box's user, in its working directory.
    await engine
      .exec(id, { cmd: main[0]!, args: main.slice(1), env: [], tty: false, detach: true })
      .catch((error: Error) => {
        throw new BoxError(
          `cannot start the main process ${JSON.stringify(main)} of box ${boxName ?? id} (is ${main[0]} an executable of the image, runnable by its user?): ${error.message}`,
          { cause: error, code: 'exec', field: mainField },
        );
      });
  }
  if (normalized.healthCheck) {
    const argv = checkArgv(normalized.healthCheck.command, image.config.healthcheck);
    parts.health.watch(id, normalized.healthCheck, argv, Date.now());
  }
}
