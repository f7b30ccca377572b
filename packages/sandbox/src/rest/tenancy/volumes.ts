/**
 * Managed volumes seen through tenants: the operator's volumes keep their runtime
 * names; a tenant's are created unnamed in the runtime and named in `Owners`, unique per tenant, so that
 * tenant B naming `data` never reaches tenant A's `data`. Every lookup of another tenant's volume is
 * `not_found`.
 */
import { BoxError, notFound } from '../../errors.ts';
import type { JsRuntime } from '../../js-runtime.ts';
import { validateBoxName } from '../../runtime/options.ts';
import type { VolumeRecord } from '../../runtime/state.ts';
import type { JsBoxOptions } from '../../types.ts';
import type { Principal } from '../auth.ts';
import type { Owners } from './owners.ts';

/** A volume as its tenant sees it: the tenant's name in place of the runtime's. */
export function volumeView(owners: Owners, volume: VolumeRecord): VolumeRecord {
  const record = owners.get('volume', volume.id);
  return record && record.name !== null ? { ...volume, name: record.name } : volume;
}

/** The volume `idOrName` of `principal`'s tenant (any volume for the operator), or null. */
export async function findVolume(
  runtime: JsRuntime,
  owners: Owners,
  principal: Principal,
  idOrName: string,
): Promise<VolumeRecord | null> {
  const named = owners.byName('volume', principal.tenant, idOrName);
  if (named) return runtime.volumes.get(named);
  const found = await runtime.volumes.get(idOrName);
  if (!found) return null;
  if (principal.operator || owners.tenantOf('volume', found.id) === principal.tenant) return found;
  return null;
}

/**
 * Creates `principal`'s volume named `name` (an existing one of that name is answered, as locally).
 * @throws BoxError `invalid_option` naming `name` for an invalid name.
 */
export async function createVolume(
  runtime: JsRuntime,
  owners: Owners,
  principal: Principal,
  name: string | undefined,
): Promise<VolumeRecord> {
  validateBoxName(name);
  if (principal.operator) {
    const volume = await runtime.volumes.create(name);
    if (!owners.get('volume', volume.id))
      owners.set('volume', volume.id, { tenant: principal.tenant, name: null });
    return volume;
  }
  if (name !== undefined) {
    const existing = await findVolume(runtime, owners, principal, name);
    if (existing && owners.byName('volume', principal.tenant, name) === existing.id) return existing;
  }
  const volume = await runtime.volumes.create();
  owners.set('volume', volume.id, { tenant: principal.tenant, name: name ?? null });
  return volume;
}

/** Every volume `principal` sees, oldest first. */
export async function listVolumes(
  runtime: JsRuntime,
  owners: Owners,
  principal: Principal,
): Promise<VolumeRecord[]> {
  const all = await runtime.volumes.list();
  return principal.operator ? all : all.filter((v) => owners.tenantOf('volume', v.id) === principal.tenant);
}

/** Deletes `principal`'s volume `idOrName`. @throws BoxError `not_found`, `conflict` while mounted. */
export async function removeVolume(
  runtime: JsRuntime,
  owners: Owners,
  principal: Principal,
  idOrName: string,
): Promise<void> {
  const volume = await findVolume(runtime, owners, principal, idOrName);
  if (!volume) throw notFound(`no volume with id or name '${idOrName}'`);
  await runtime.volumes.remove(volume.id);
  owners.delete('volume', volume.id);
}

/**
 * `options` with every `managedVolume` named as the runtime knows it: a tenant's names become the ids of
 * its volumes (created for it when it has none of that name), so that a box never mounts another
 * tenant's volume. The operator's options are unchanged.
 * @throws BoxError `invalid_option` naming `volumes[i].managedVolume` for an invalid new name.
 */
export async function tenantVolumeOptions<T extends Pick<JsBoxOptions, 'volumes'>>(
  runtime: JsRuntime,
  owners: Owners,
  principal: Principal,
  options: T,
): Promise<T> {
  if (principal.operator || !Array.isArray(options.volumes)) return options;
  const volumes = [];
  for (const [i, spec] of options.volumes.entries()) {
    if (typeof spec?.managedVolume !== 'string') {
      volumes.push(spec);
      continue;
    }
    let volume = await findVolume(runtime, owners, principal, spec.managedVolume);
    if (!volume) {
      try {
        validateBoxName(spec.managedVolume);
      } catch {
        const field = `volumes[${i}].managedVolume`;
        throw new BoxError(
          `invalid box option ${field}: no volume '${spec.managedVolume}', and it is not a valid name for a new volume`,
          { field },
        );
      }
      volume = await createVolume(runtime, owners, principal, spec.managedVolume);
    }
    volumes.push({ ...spec, managedVolume: volume.id });
  }
  return { ...options, volumes };
}
