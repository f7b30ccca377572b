/**
 * `box.snapshot` (BoxLite #205 / E2B naming): named, copy-on-write snapshots of a
 * box's filesystem state (its writable layer; managed volumes are not included). The handle is the same
 * for local and REST boxes; a `SnapshotOps` does the work (`snapshot-local.ts` on this host, REST calls in
 * `rest/snapshot-client.ts`).
 */
import { checkSnapshotName } from '../engine/snapshot.ts';
import type { JsBoxOptions, JsVolumeSpec } from '../types.ts';
import type { StoredBoxOptions } from './state.ts';

/** A snapshot (`box.snapshot.list()` entries). */
export interface SnapshotInfo {
  /** Name, unique per box: 1–64 letters, digits, `.`, `_`, `-`, not starting with `.` or `-`. */
  name: string;
  /** When it was taken, RFC 3339 (UTC). */
  createdAt: string;
  /**
   * Bytes in use on the box's disk when it was taken: its layer plus data of earlier snapshots it does not
   * share (an upper bound of what it holds; blocks are shared with the box until they diverge).
   */
  sizeBytes: number;
}

/** Options of `runtime.cloneBox` beyond the box options: which state to start from. */
export interface CloneOptions extends JsBoxOptions {
  /** Start from this snapshot of the source box; default its current state. */
  snapshot?: string;
}

/**
 * What the snapshot handle of one box calls (local or REST); names are checked by the handle first.
 * Semantics and errors as `BoxSnapshots`.
 */
export interface SnapshotOps {
  /** Takes a snapshot (the default name when `name` is undefined). */
  create(name?: string): Promise<SnapshotInfo>;
  /** Every snapshot, oldest first. */
  list(): Promise<SnapshotInfo[]>;
  /** One snapshot, or null. */
  get(name: string): Promise<SnapshotInfo | null>;
  /** Makes snapshot `name` the box's writable layer (a running box restarts). */
  restore(name: string): Promise<void>;
  /** Deletes snapshot `name`. */
  remove(name: string): Promise<void>;
}

/**
 * The snapshot services a local runtime gives its box handles (`RuntimeContext.snapshots`): the
 * `SnapshotOps` of box `id`, plus its export. Errors as `BoxSnapshots`.
 */
export interface SnapshotService {
  /** Takes a snapshot of box `id`. */
  create(id: string, name?: string): Promise<SnapshotInfo>;
  /** Box `id`'s snapshots, oldest first. */
  list(id: string): Promise<SnapshotInfo[]>;
  /** One snapshot of box `id`, or null. */
  get(id: string, name: string): Promise<SnapshotInfo | null>;
  /** Restores snapshot `name` of box `id`. */
  restore(id: string, name: string): Promise<void>;
  /** Deletes snapshot `name` of box `id`. */
  remove(id: string, name: string): Promise<void>;
  /** Writes the box as an OCI image layout archive at `path` (`archive.ts`). */
  export(id: string, path: string): Promise<void>;
}

function checkName(name: unknown, optional: boolean): void {
  if (optional && (name === undefined || name === null)) return;
  checkSnapshotName(name);
}

/**
 * `box.snapshot`: snapshots of one box's writable layer.
 * - `create(name?)` takes one (default name `snap-<time>`) while the box keeps running: the box is frozen
 *   for the few milliseconds it takes (copy-on-write: nothing is copied), then thawed (a paused box stays
 *   paused). Also works on a stopped box.
 * - `list()` (oldest first), `get(name)` (null when absent).
 * - `restore(name)` makes the box's writable layer that snapshot again: a running box is restarted (its
 *   processes are killed, it keeps its id, name, options, volumes and snapshots, and runs again; a
 *   paused box comes back running); a stopped box stays stopped.
 * - `remove(name)` deletes one.
 * Errors: `BoxError` `invalid_option` (field `name`), `not_found` (no such snapshot or box), `conflict`
 * (name taken), `unsupported` (a box whose disk cannot have snapshots: gVisor tier, ext4 disk, rootless;
 * the message says why).
 */
export class BoxSnapshots {
  readonly #ops: SnapshotOps;

  /** @internal Obtained as `box.snapshot`. */
  constructor(ops: SnapshotOps) {
    this.#ops = ops;
  }

  /** Takes a snapshot named `name` (default `snap-<UTC time>`); resolves its record. */
  async create(name?: string): Promise<SnapshotInfo> {
    checkName(name, true);
    return this.#ops.create(name ?? undefined);
  }

  /** Every snapshot of the box, oldest first. */
  list(): Promise<SnapshotInfo[]> {
    return this.#ops.list();
  }

  /** The snapshot `name`, or null. */
  async get(name: string): Promise<SnapshotInfo | null> {
    checkName(name, false);
    return this.#ops.get(name);
  }

  /** Brings the box's filesystem back to snapshot `name` (see the class comment: a running box restarts). */
  async restore(name: string): Promise<void> {
    checkName(name, false);
    await this.#ops.restore(name);
  }

  /** Deletes snapshot `name`. */
  async remove(name: string): Promise<void> {
    checkName(name, false);
    await this.#ops.remove(name);
  }
}

/** Default name of a snapshot taken without one: `snap-<UTC time to the millisecond>`. */
export function defaultSnapshotName(now = new Date()): string {
  return `snap-${now.toISOString().replace(/[-:]/g, '').replace('T', '-').replace('.', '-').replace('Z', '')}`;
}

/**
 * The options a box was created with, as `JsBoxOptions` again (for clones and exports), its labels
 * included. Secrets are left out (their values are never stored), and so are port publications (a clone
 * would clash on the host ports) and host bind mounts (`keepHostBinds` false: they do not travel to
 * another machine).
 */
export function boxOptionsOf(o: StoredBoxOptions, keepHostBinds: boolean): JsBoxOptions {
  const volumes: JsVolumeSpec[] = o.volumes.filter((v) => keepHostBinds || v.managedVolume !== undefined);
  const out: JsBoxOptions = {
    ...(o.image !== undefined ? { image: o.image } : {}),
    ...(o.rootfsPath !== undefined ? { rootfsPath: o.rootfsPath } : {}),
    cpus: o.cpus,
    memoryMib: o.memoryMib,
    ...(o.diskSizeGb !== undefined ? { diskSizeGb: o.diskSizeGb } : {}),
    workingDir: o.workingDir,
    env: o.env.map((e) => ({ ...e })),
    volumes: volumes.map((v) => ({ ...v })),
    network: {
      mode: o.network.mode,
      ...(o.network.mode === 'enabled' ? { allowNet: [...o.network.allowNet] } : {}),
    },
    advanced: { capabilities: { add: [...o.capabilities.add], drop: [...o.capabilities.drop] } },
    autoRemove: o.autoRemove,
    detach: o.detach,
    isolation: o.isolation,
    ...(o.entrypoint !== undefined ? { entrypoint: [...o.entrypoint] } : {}),
    ...(o.cmd !== undefined ? { cmd: [...o.cmd] } : {}),
    ...(o.user !== undefined ? { user: o.user } : {}),
    ...(o.healthCheck !== undefined ? { healthCheck: { ...o.healthCheck } } : {}),
    ...(o.labels !== undefined ? { labels: { ...o.labels } } : {}),
  };
  return out;
}
