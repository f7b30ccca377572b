/**
 * E2B snapshots and forks over the box snapshots of the engine (btrfs, `runtime/snapshots.ts`): a
 * snapshot of sandbox S is a box snapshot of S's box, with snapshot id `<S>.<name>`; creating a sandbox
 * from that id clones the box from the snapshot (`JsRuntime.cloneBox`), and fork clones the current state.
 * A snapshot lives as long as its sandbox's box (E2B keeps snapshots after the sandbox is killed).
 */
import { randomBytes } from 'node:crypto';
import { BoxError, notFound } from '../errors.ts';
import type { Principal } from '../rest/auth.ts';
import type { ServerContext } from '../rest/context.ts';
import type { JsBox } from '../runtime/box.ts';
import type { CreateRequest, E2bSandbox, E2bSandboxes } from './sandboxes.ts';

/** One E2B snapshot. */
export interface E2bSnapshot {
  /** `<sandboxId>.<box snapshot name>`. */
  snapshotId: string;
  /** Names it is known by (its id). */
  names: string[];
  sandboxId: string;
  boxId: string;
  /** The box snapshot's name. */
  name: string;
  tenant: string;
  templateId: string;
}

/** Snapshots and forks of one server. */
export class E2bSnapshots {
  readonly #ctx: ServerContext;
  readonly #sandboxes: E2bSandboxes;
  readonly #snapshots = new Map<string, E2bSnapshot>();

  constructor(ctx: ServerContext, sandboxes: E2bSandboxes) {
    this.#ctx = ctx;
    this.#sandboxes = sandboxes;
  }

  /** Snapshots sandbox `sandboxId` (its box pauses for the copy-on-write snapshot). */
  async create(principal: Principal, sandboxId: string, name?: string): Promise<E2bSnapshot> {
    const { record, box } = await this.#sandboxes.get(principal, sandboxId);
    const taken = await box.snapshot.create(name ?? `s${randomBytes(6).toString('hex')}`);
    const snapshot: E2bSnapshot = {
      snapshotId: `${record.sandboxId}.${taken.name}`,
      names: [`${record.sandboxId}.${taken.name}`],
      sandboxId: record.sandboxId,
      boxId: record.boxId,
      name: taken.name,
      tenant: record.tenant,
      templateId: record.templateId,
    };
    this.#snapshots.set(snapshot.snapshotId, snapshot);
    return snapshot;
  }

  /** The snapshot `snapshotId` visible to `principal`, or null. */
  get(principal: Principal, snapshotId: string): E2bSnapshot | null {
    const snapshot = this.#snapshots.get(snapshotId);
    if (!snapshot || (!principal.operator && snapshot.tenant !== principal.tenant)) return null;
    return snapshot;
  }

  /** Snapshots `principal` sees, of one sandbox when `sandboxId` is given. */
  list(principal: Principal, sandboxId?: string): E2bSnapshot[] {
    return [...this.#snapshots.values()].filter(
      (s) =>
        (principal.operator || s.tenant === principal.tenant) &&
        (sandboxId === undefined || s.sandboxId === sandboxId),
    );
  }

  /** Deletes a snapshot. @throws BoxError `not_found`. */
  async remove(principal: Principal, snapshotId: string): Promise<void> {
    const snapshot = this.get(principal, snapshotId);
    if (!snapshot) throw notFound(`snapshot ${snapshotId} not found`);
    this.#snapshots.delete(snapshotId);
    const box = await this.#ctx.box(snapshot.boxId, principal).catch(() => null);
    await box?.snapshot.remove(snapshot.name).catch((error: unknown) => {
      if (!(error instanceof BoxError && error.code === 'not_found')) throw error;
    });
  }

  /** A sandbox cloned from a snapshot, with the create's timeout, metadata and lifecycle. */
  async createFrom(
    principal: Principal,
    snapshot: E2bSnapshot,
    request: CreateRequest,
  ): Promise<{ record: E2bSandbox; box: JsBox }> {
    return this.#sandboxes.clone(
      principal,
      snapshot.boxId,
      { ...request, templateId: snapshot.templateId },
      snapshot.name,
    );
  }

  /** `count` clones of sandbox `sandboxId`'s current state; each result is a sandbox or its error. */
  async fork(
    principal: Principal,
    sandboxId: string,
    timeoutS: number,
    count: number,
  ): Promise<({ record: E2bSandbox } | { error: unknown })[]> {
    const { record } = await this.#sandboxes.get(principal, sandboxId);
    const out: ({ record: E2bSandbox } | { error: unknown })[] = [];
    for (let i = 0; i < count; i++) {
      try {
        const request: CreateRequest = {
          templateId: record.templateId,
          timeoutS,
          metadata: { ...record.metadata },
          envVars: { ...record.envVars },
          autoPause: record.autoPause,
          autoResume: record.autoResume,
          allowInternetAccess: record.allowInternetAccess,
        };
        out.push({ record: (await this.#sandboxes.clone(principal, record.boxId, request)).record });
      } catch (error) {
        out.push({ error });
      }
    }
    return out;
  }
}
