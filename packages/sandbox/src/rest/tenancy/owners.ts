/**
 * Ownership of the shared service's resources: which tenant owns each box, managed
 * volume and warm pool created over the REST runtime, under which per-tenant name, and the resources a
 * box was granted at creation (vCPUs, memory, disk: what quotas count). Kept in `owners.json` of the
 * server's state directory, written atomically after every change, so that a restart keeps it.
 *
 * Names: the operator's boxes and volumes keep their runtime name (unique per server, as `sandbox ps`
 * shows it); a tenant's are created unnamed in the runtime and named here, unique per tenant.
 * A resource without a record belongs to the operator (boxes made outside the server, `sandbox run`).
 */
import { readJson, writeJsonAtomic } from './state-file.ts';
import { OPERATOR_TENANT } from './tenant.ts';

/** The kinds of owned resources. */
export type OwnedKind = 'box' | 'volume' | 'pool';

/** One owned resource. */
export interface OwnerRecord {
  tenant: string;
  /** The tenant's name for it (tenant resources only; operator resources use the runtime's name). */
  name: string | null;
  /** What the box was granted at creation (boxes only): vCPUs, memory MiB, disk GiB. */
  cpus?: number;
  memoryMib?: number;
  diskGb?: number;
}

interface OwnersFile {
  version: 1;
  box: Record<string, OwnerRecord>;
  volume: Record<string, OwnerRecord>;
  pool: Record<string, OwnerRecord>;
}

/** The persisted ownership of one server (see the module comment). */
export class Owners {
  /** Path of the state file. */
  readonly path: string;
  #file: OwnersFile | null = null;

  /** @param path the state file; read on first use. */
  constructor(path: string) {
    this.path = path;
  }

  #data(): OwnersFile {
    if (!this.#file) {
      const read = readJson<Partial<OwnersFile>>(this.path, {});
      this.#file = { version: 1, box: read.box ?? {}, volume: read.volume ?? {}, pool: read.pool ?? {} };
    }
    return this.#file;
  }

  #save(): void {
    writeJsonAtomic(this.path, this.#data());
  }

  /** The record of resource `id`, or undefined (an operator resource). */
  get(kind: OwnedKind, id: string): OwnerRecord | undefined {
    return Object.hasOwn(this.#data()[kind], id) ? this.#data()[kind][id] : undefined;
  }

  /** The tenant owning resource `id`: its record's, else {@link OPERATOR_TENANT}. */
  tenantOf(kind: OwnedKind, id: string): string {
    return this.get(kind, id)?.tenant ?? OPERATOR_TENANT;
  }

  /** The id of `tenant`'s resource named `name`, or undefined. */
  byName(kind: OwnedKind, tenant: string, name: string): string | undefined {
    for (const [id, record] of Object.entries(this.#data()[kind])) {
      if (record.tenant === tenant && record.name === name) return id;
    }
    return undefined;
  }

  /** Every `[id, record]` of `kind` (of `tenant` when given). */
  entries(kind: OwnedKind, tenant?: string): [string, OwnerRecord][] {
    return Object.entries(this.#data()[kind]).filter(([, r]) => tenant === undefined || r.tenant === tenant);
  }

  /** Records (or replaces) the owner of resource `id` and saves. */
  set(kind: OwnedKind, id: string, record: OwnerRecord): void {
    this.#data()[kind][id] = record;
    this.#save();
  }

  /** Forgets resource `id` and saves (nothing when it has no record). */
  delete(kind: OwnedKind, id: string): void {
    if (!Object.hasOwn(this.#data()[kind], id)) return;
    delete this.#data()[kind][id];
    this.#save();
  }
}
