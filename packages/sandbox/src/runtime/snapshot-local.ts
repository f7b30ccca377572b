/**
 * Snapshots, clones and exports of a local runtime's boxes, over the engine's btrfs box disks
 * (`engine/snapshot.ts`) and the cgroup freezer (`engine/freezer.ts`). `LocalRuntime` gives it a
 * `SnapshotHost` (records, box directories, restart, seeded create) and hands it to box handles as
 * `RuntimeContext.snapshots`.
 */
import { createReadStream, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { ulid } from 'ulid';
import { freezeBox, thawBox } from '../engine/freezer.ts';
import { ensureSandboxIdRange } from '../engine/idmap.ts';
import {
  assertSnapshots,
  checkSnapshotName,
  diskMounted,
  diskPaths,
  flushDisk,
  getSnapshot,
  listSnapshots,
  purgeOldLayers,
  removeSnapshot,
  restoreLayer,
  seedLayer,
  takeSnapshot,
  withDisk,
} from '../engine/snapshot.ts';
import { BoxError, conflict, notFound } from '../errors.ts';
import { type ImageLimits, UnpackBudget } from '../images/limits.ts';
import type { PreparedImage } from '../images/store.ts';
import { extractLayer } from '../images/unpack.ts';
import type { JsBoxOptions } from '../types.ts';
import { writeBoxArchive } from './archive.ts';
import { readBoxArchive } from './archive-import.ts';
import {
  type ImportedBox,
  type ImportOptions,
  importOptionsOf,
  untrustedOptions,
} from './archive-options.ts';
import { type IdShift, shiftTar } from './archive-tar.ts';
import type { JsBox } from './box.ts';
import {
  boxOptionsOf,
  type CloneOptions,
  defaultSnapshotName,
  type SnapshotInfo,
  type SnapshotService,
} from './snapshots.ts';
import type { BoxRecord } from './state.ts';

/** What the snapshot service needs from `LocalRuntime`. */
export interface SnapshotHost {
  /** The box's reconciled record (`paused` when frozen). @throws BoxError `not_found`. */
  record(idOrName: string): Promise<BoxRecord>;
  /** `<homeDir>/boxes/<id>`. */
  boxDir(id: string): string;
  /**
   * Runs `prepare` on the running or paused box `id`, then stops it at once (SIGKILL) and starts it again
   * with the same options; a stopped box only gets `prepare`.
   */
  restart(id: string, prepare: () => Promise<void>): Promise<void>;
  /** Creates a box whose writable layer `seed(boxDir)` fills before its first start. */
  createSeeded(
    options: JsBoxOptions,
    name: string | undefined,
    seed: (boxDir: string) => Promise<void>,
  ): Promise<JsBox>;
  /** The image of a box (unpacked layers and runtime settings). */
  prepareImage(record: BoxRecord): Promise<PreparedImage>;
  /** The runtime's base directory (imports live in `<homeDir>/imports`). */
  homeDir: string;
  /** Bounds of imports (`maxImportBytes`) and of the box layer (`maxLayerBytes`, `maxLayerEntries`). */
  imageLimits: ImageLimits;
}

/** The user-namespace mapping recorded for a box by the engine (`bundle/engine.json`), or null. */
function boxIdMap(boxDir: string): IdShift | null {
  try {
    const meta = JSON.parse(readFileSync(join(boxDir, 'bundle', 'engine.json'), 'utf8')) as {
      idMap?: IdShift | null;
    };
    return meta.idMap ?? null;
  } catch {
    return null;
  }
}

/** Why a record's box cannot have snapshots, before looking at its disk. */
function tierCheck(record: BoxRecord): void {
  if (record.options.isolation === 'gvisor') {
    throw new BoxError(
      `snapshots: not supported by the gvisor isolation tier (box ${record.name ?? record.id}); use isolation 'container'`,
      { code: 'unsupported' },
    );
  }
}

/** The local `SnapshotService` plus `cloneBox` (see the module comment). */
export class LocalSnapshots implements SnapshotService {
  readonly #host: SnapshotHost;

  /** @param host what the service needs from its `LocalRuntime`. */
  constructor(host: SnapshotHost) {
    this.#host = host;
  }

  async #checked(idOrName: string): Promise<{ record: BoxRecord; boxDir: string }> {
    const record = await this.#host.record(idOrName);
    tierCheck(record);
    const boxDir = this.#host.boxDir(record.id);
    assertSnapshots(boxDir, record.name ?? record.id);
    return { record, boxDir };
  }

  /**
   * Runs `fn` with the box's layer consistent: a running box is frozen around it (its dirty pages written
   * back first, so the frozen window stays short) and thawed after; a paused box stays paused; a stopped
   * box has its disk mounted for the call.
   */
  async #consistent<T>(record: BoxRecord, boxDir: string, fn: () => Promise<T>): Promise<T> {
    if (record.status === 'running' && record.pid) {
      await flushDisk(boxDir);
      await freezeBox(record.id, record.pid);
      try {
        return await fn();
      } finally {
        thawBox(record.id, record.pid);
      }
    }
    if (record.status === 'paused' || record.status === 'running') return fn();
    if (record.status === 'stopped') return withDisk(boxDir, fn);
    throw conflict(`box ${record.name ?? record.id} is ${record.status}; it has no layer to snapshot yet`);
  }

  /** Takes snapshot `name` (see `BoxSnapshots.create`). */
  async create(id: string, name?: string): Promise<SnapshotInfo> {
    const { record, boxDir } = await this.#checked(id);
    const snapName = name ?? defaultSnapshotName();
    const taken = await this.#consistent(record, boxDir, () => takeSnapshot(boxDir, snapName));
    return (await getSnapshot(boxDir, snapName)) ?? taken;
  }

  /** The box's snapshots, oldest first (see `BoxSnapshots.list`). */
  async list(id: string): Promise<SnapshotInfo[]> {
    const { boxDir } = await this.#checked(id);
    return listSnapshots(boxDir);
  }

  /** Snapshot `name` of the box, or null (see `BoxSnapshots.get`). */
  async get(id: string, name: string): Promise<SnapshotInfo | null> {
    const { boxDir } = await this.#checked(id);
    return getSnapshot(boxDir, name);
  }

  /** Deletes snapshot `name` of the box (see `BoxSnapshots.remove`). @throws BoxError `not_found`. */
  async remove(id: string, name: string): Promise<void> {
    const { boxDir } = await this.#checked(id);
    await removeSnapshot(boxDir, name);
  }

  /** Restores snapshot `name` (see `BoxSnapshots.restore`). */
  async restore(id: string, name: string): Promise<void> {
    const { record, boxDir } = await this.#checked(id);
    if (!(await getSnapshot(boxDir, name)))
      throw notFound(`box ${record.name ?? record.id} has no snapshot '${name}'`);
    await this.#host.restart(record.id, () => restoreLayer(boxDir, name));
    // The replaced layer of a running box goes once the box runs on the restored one (disk mounted).
    if (diskMounted(boxDir)) await purgeOldLayers(boxDir);
  }

  /**
   * Runs `fn` with a read-only view of the box's layer: snapshot `snapshot` when given, else a temporary
   * snapshot of its current state (taken consistently, deleted after).
   */
  async #withLayer<T>(
    record: BoxRecord,
    boxDir: string,
    snapshot: string | undefined,
    fn: (layerDir: string) => Promise<T>,
  ): Promise<T> {
    const dirOf = (name: string) => join(diskPaths(boxDir).snapshots, name);
    if (snapshot !== undefined) {
      if (!(await getSnapshot(boxDir, snapshot))) {
        throw notFound(`box ${record.name ?? record.id} has no snapshot '${snapshot}'`);
      }
      return withDisk(boxDir, () => fn(dirOf(snapshot)));
    }
    const temp = `.tmp-${ulid().toLowerCase()}`;
    await this.#consistent(record, boxDir, () => takeSnapshot(boxDir, temp));
    try {
      return await withDisk(boxDir, () => fn(dirOf(temp)));
    } finally {
      await removeSnapshot(boxDir, temp).catch(() => {});
    }
  }

  /**
   * A new box started from box `idOrName`'s current state, or from its snapshot `options.snapshot`
   * (`runtime.cloneBox`). Its options are the source's, labels included (without secrets and port
   * publications), overridden by `options`. The layer is copied into the new box's own disk (`cp -a`; two box disks share no extents).
   * @throws BoxError `not_found`, `unsupported` (see `BoxSnapshots`), `invalid_option` for bad options.
   */
  async clone(idOrName: string, options: CloneOptions = {}, name?: string): Promise<JsBox> {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('clone options must be an object', { field: 'options' });
    }
    const { snapshot, ...overrides } = options;
    if (snapshot !== undefined) checkSnapshotName(snapshot, 'snapshot');
    const { record, boxDir } = await this.#checked(idOrName);
    const merged: JsBoxOptions = { ...boxOptionsOf(record.options, true), ...overrides };
    if (merged.diskSizeGb === undefined && record.options.diskSizeGb !== undefined) {
      merged.diskSizeGb = record.options.diskSizeGb;
    }
    if (merged.isolation === 'gvisor') {
      throw new BoxError(
        'clone: a clone cannot run on the gvisor isolation tier (its disk format); use isolation container',
        {
          code: 'unsupported',
          field: 'isolation',
        },
      );
    }
    return this.#withLayer(record, boxDir, snapshot, (layerDir) =>
      this.#host.createSeeded(merged, name, (newBoxDir) => seedLayer(newBoxDir, layerDir)),
    );
  }

  /** Writes box `id` as an OCI image layout archive at `path` (`box.export`; `archive.ts`). */
  async export(id: string, path: string): Promise<void> {
    if (typeof path !== 'string' || path === '') {
      throw new BoxError('invalid export path: must be a file path', { field: 'path' });
    }
    const { record, boxDir } = await this.#checked(id);
    const image = await this.#host.prepareImage(record);
    await this.#withLayer(record, boxDir, undefined, (layerDir) =>
      writeBoxArchive(
        {
          imageLayers: image.layerDirs,
          imageConfig: image.config,
          boxLayer: join(layerDir, 'upper'),
          idMap: boxIdMap(boxDir),
          options: boxOptionsOf(record.options, false),
          image: record.image,
        },
        path,
      ),
    );
  }

  /**
   * A new box from an archive of `export` (`runtime.importBox`): the image part becomes an OCI layout in
   * `<homeDir>/imports` (the box's `rootfsPath`, unpacked by the image store), the box layer is unpacked
   * into the new box's disk with owners mapped into this host's user-namespace range (bounded by
   * `maxLayerBytes` / `maxLayerEntries`), and the box starts with the archive's options less what an
   * archive may not bring unless `options` passes it again (`archive-options.ts`); `droppedOptions` of the
   * answer lists it.
   * @throws BoxError `not_found` / `invalid_option` (field `path`) for a missing or foreign archive,
   *   `image` for an archive or box layer over its bounds or with hostile content, `unsupported` for an
   *   ordinary account.
   */
  async importBox(path: string, nameOrOptions?: string | ImportOptions): Promise<ImportedBox> {
    if (typeof path !== 'string' || path === '') {
      throw new BoxError('invalid import path: must be a file path', { field: 'path' });
    }
    const given = importOptionsOf(nameOrOptions);
    if (given.options !== undefined && (given.options === null || typeof given.options !== 'object')) {
      throw new BoxError('invalid import options: options must be an object of box options', {
        field: 'options',
      });
    }
    if (process.getuid?.() !== 0) {
      throw new BoxError(
        'importBox: not available to an ordinary account (the box layer goes onto a loop-mounted box disk); import as root',
        { code: 'unsupported' },
      );
    }
    const limits = this.#host.imageLimits;
    const archive = await readBoxArchive(path, join(this.#host.homeDir, 'imports'), limits.maxImportBytes);
    const { image: _image, rootfsPath: _rootfs, ...passed } = given.options ?? {};
    const { options, dropped } = untrustedOptions(archive.options, passed);
    const userns = process.env.SEED_SANDBOX_USERNS !== '0';
    const map = userns ? ensureSandboxIdRange() : null;
    const budget = new UnpackBudget(
      { name: 'maxLayerBytes', max: limits.maxLayerBytes },
      { name: 'maxLayerEntries', max: limits.maxLayerEntries },
    );
    try {
      const box = await this.#host.createSeeded(
        { ...options, rootfsPath: archive.layoutDir },
        given.name,
        (boxDir) =>
          withDisk(boxDir, async () => {
            await extractLayer(shiftOwners(archive.boxLayer, map), diskPaths(boxDir).upper, {
              budgets: [budget],
            });
          }),
      );
      return Object.assign(box, { droppedOptions: Object.freeze(dropped) });
    } finally {
      await rm(archive.cleanup, { recursive: true, force: true });
    }
  }
}

/** The box layer tar at `path` with owners moved into the host range `map` (box id k → host id base + k). */
function shiftOwners(path: string, map: IdShift | null): Readable {
  const source = createReadStream(path);
  return map ? shiftTar(source, map) : source;
}
