/**
 * Managed volumes of a local runtime (spec 002 `JsVolumeSpec.managedVolume`): records in the state
 * database, data in `<homeDir>/volumes/<id>/data`. `runtime.volumes` and the volumes a box names at
 * creation both come through here.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ulid } from 'ulid';
import { BoxError, conflict, notFound } from '../errors.ts';
import type { RuntimeVolumes } from './backend.ts';
import { validateBoxName } from './options.ts';
import type { StateDb, VolumeRecord } from './state.ts';

/** Records a new volume named `name` (or unnamed: null) and makes its data directory. */
function createVolume(homeDir: string, db: StateDb, name: string | null): VolumeRecord {
  const volume = db.insertVolume({ id: ulid(), name, createdAt: new Date().toISOString() });
  mkdirSync(volumeDataDir(homeDir, volume.id), { recursive: true, mode: 0o755 });
  return volume;
}

/** The data directory of volume `id`: `<homeDir>/volumes/<id>/data` (bind-mounted into boxes). */
function volumeDataDir(homeDir: string, id: string): string {
  return join(homeDir, 'volumes', id, 'data');
}

/**
 * The managed volume `idOrName` of a box's options, created (named `idOrName`) when no volume has this id
 * or name; returns its record and data directory, which exists afterwards.
 * @throws BoxError naming `field` when there is no such volume and `idOrName` is not a valid name.
 */
export function resolveVolume(
  homeDir: string,
  db: StateDb,
  idOrName: string,
  field: string,
): { volume: VolumeRecord; dataDir: string } {
  let volume = db.getVolume(idOrName);
  if (!volume) {
    try {
      validateBoxName(idOrName);
    } catch {
      throw new BoxError(
        `invalid box option ${field}: no volume '${idOrName}', and it is not a valid name for a new volume`,
        { field },
      );
    }
    volume = createVolume(homeDir, db, idOrName);
  }
  const dataDir = volumeDataDir(homeDir, volume.id);
  mkdirSync(dataDir, { recursive: true, mode: 0o755 });
  return { volume, dataDir };
}

/**
 * `runtime.volumes` of a local runtime over `homeDir` and its state database (`RuntimeVolumes`).
 * `create` throws BoxError `invalid_option` (field `name`) for an invalid name; `remove` throws
 * `not_found` for an unknown volume and `conflict` while a box mounts it.
 */
export function localVolumes(homeDir: string, db: StateDb): RuntimeVolumes {
  return {
    create: async (name) => createVolume(homeDir, db, validateBoxName(name) ?? null),
    get: async (idOrName) => db.getVolume(idOrName),
    list: async () => db.listVolumes(),
    remove: async (idOrName) => {
      const volume = db.getVolume(idOrName);
      if (!volume) throw notFound(`no volume with id or name '${idOrName}'`);
      const users = db.volumeUsers(volume.id);
      if (users.length > 0) throw conflict(`volume '${idOrName}' is mounted by box ${users.join(', ')}`);
      db.deleteVolume(volume.id);
      rmSync(join(homeDir, 'volumes', volume.id), { recursive: true, force: true });
    },
  };
}
