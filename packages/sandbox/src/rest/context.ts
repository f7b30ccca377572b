/**
 * What the REST runtime server's route plugins share: the exposed runtime, the handles of the boxes
 * created through the server, the executions started over REST (`ExecSession`s, kept a while after they
 * end so that clients can read their status and reattach), timers that die with the server, and the
 * shared service's tenancy: who owns each box (`tenancy/owners.ts`), quotas and admission
 * (`tenancy/admission.ts`), managed keys and preview URLs.
 *
 * CONTRACT for every route plugin (the `/v1` routes, the E2B routes, MCP): boxes are created, listed,
 * looked up and removed ONLY through {@link ServerContext.createBox}, {@link ServerContext.listBoxes},
 * {@link ServerContext.box} and {@link ServerContext.removeBox} with the caller's `Principal`, so that
 * tenancy, quotas and names per tenant hold on every route. Commands are started with
 * {@link ServerContext.startExecution}, or admitted with {@link ServerContext.admitExecution} by a plugin
 * that starts them itself, so that the tenant's exec rate and running-executions quota hold. Another
 * tenant's box is `not_found` (404), never 403: its existence is not disclosed.
 *
 * The executions live in `exec-registry.ts`, audit entries of raw requests in `audit-events.ts` and
 * preview links in `preview-links.ts`; this module is the tenant's view of boxes and the wiring.
 */
import { join } from 'node:path';
import { BoxError, notFound } from '../errors.ts';
import type { JsRuntime } from '../js-runtime.ts';
import type { JsBox } from '../runtime/box.ts';
import { validateBoxName } from '../runtime/options.ts';
import { withHandOutPools } from '../runtime/pool.ts';
import type { SnapshotInfo } from '../runtime/snapshots.ts';
import type { JsBoxInfo, JsBoxOptions } from '../types.ts';
import { type RawAttempt, writeAuditEvent, writeAuditRefused } from './audit-events.ts';
import type { Principal } from './auth.ts';
import { ExecRegistry, execRequestOf } from './exec-registry.ts';
import type { RestMetrics } from './metrics.ts';
import { type PreviewUrl, previewLink } from './preview-links.ts';
import type { ExecSession } from './sessions.ts';
import { Admission, boxRequestOf } from './tenancy/admission.ts';
import { type AuditEntry, AuditLog } from './tenancy/audit.ts';
import { ExecutionSlots } from './tenancy/executions.ts';
import { KeyStore } from './tenancy/keys.ts';
import { LimitsFile } from './tenancy/limits.ts';
import { Owners } from './tenancy/owners.ts';
import { type PreviewInfo, PreviewStore } from './tenancy/previews.ts';
import { TenantRates } from './tenancy/rates.ts';
import { tenantVolumeOptions } from './tenancy/volumes.ts';
import { HttpError, toSnake } from './wire.ts';

export type { RawAttempt } from './audit-events.ts';
export { type ExecRequest, FINISHED_TTL_MS } from './exec-registry.ts';
export type { PreviewUrl } from './preview-links.ts';

/** Where the shared service keeps its state and what it is configured with. */
export interface TenancyOptions {
  /** Directory of `keys.json`, `owners.json`, `previews.json` and `audit.jsonl` (created 0700). */
  stateDir: string;
  /** The limits file (`tenancy/limits.ts`), re-read on change; absent: the default limits. */
  limitsFile?: string;
  /** Told when a changed limits file is invalid (the last valid limits stay). */
  onLimitsError?: (error: Error) => void;
  /** Base URL preview URLs start with (e.g. `https://sandbox.example.com`); default the server's URL. */
  publicUrl?: string;
  /** Wildcard domain of Host-routed preview URLs (`<port>-<boxId>.<domain>`); absent: path URLs. */
  previewDomain?: string;
}

/** The state of one REST runtime server, shared by its route plugins. */
export class ServerContext {
  /** The local runtime the server exposes. */
  readonly runtime: JsRuntime;
  /** Output kept per execution for reconnecting clients, bytes. */
  readonly backlogBytes: number;
  /** Executions started over REST, by execution id. */
  readonly sessions: Map<string, ExecSession>;
  /** The server's metrics (absent when turned off). */
  metrics: RestMetrics | undefined;
  /** Owners of boxes, volumes and pools (persisted). */
  readonly owners: Owners;
  /** Managed API keys (persisted). */
  readonly keys: KeyStore;
  /** Signed preview URLs (persisted). */
  readonly previews: PreviewStore;
  /** Per-tenant quotas and rates, node margins (re-read on change). */
  readonly limits: LimitsFile;
  /** Quota and node admission of box creation. */
  readonly admission: Admission;
  /** Per-tenant rate limits of create, exec and files. */
  readonly rates: TenantRates;
  /** Per-tenant count and quota of running executions. */
  readonly executions: ExecutionSlots;
  /** The audit log (JSON lines). */
  readonly audit: AuditLog;
  /** Base URL of preview URLs; set by the server once listening unless configured. */
  publicUrl: string | null;
  /** Wildcard domain of Host-routed preview URLs, or null. */
  readonly previewDomain: string | null;
  /**
   * Runtime ids (`JsBoxPool.id`) of the warm pools of a tenant, the only pools a box creation of that
   * tenant may take a ready box from; set by the server's pool routes (`pool-routes.ts`). Default: none.
   */
  tenantPools: (tenant: string) => ReadonlySet<string> = () => new Set();
  /** Handles of boxes created through this server (they know their port publications: none). */
  readonly #handles = new Map<string, JsBox>();
  readonly #timers = new Set<NodeJS.Timeout>();
  /** Names being created, `tenant NUL name`: two creations of one name never both pass. */
  readonly #creatingNames = new Set<string>();
  readonly #executions: ExecRegistry;

  /**
   * @param backlogBytes output kept per execution, bytes.
   * @throws Error when the limits file exists and is invalid.
   */
  constructor(runtime: JsRuntime, backlogBytes: number, tenancy: TenancyOptions) {
    this.runtime = runtime;
    this.backlogBytes = backlogBytes;
    this.#executions = new ExecRegistry(backlogBytes, (ms, fn) => this.later(ms, fn));
    this.sessions = this.#executions.sessions;
    this.owners = new Owners(join(tenancy.stateDir, 'owners.json'));
    this.keys = new KeyStore(join(tenancy.stateDir, 'keys.json'));
    this.previews = new PreviewStore(join(tenancy.stateDir, 'previews.json'));
    this.limits = new LimitsFile(tenancy.limitsFile ?? null, tenancy.onLimitsError);
    this.admission = new Admission(
      this.limits,
      this.owners,
      () => this.runtime.listInfo(),
      () => this.runtime.homeDir,
    );
    this.rates = new TenantRates(this.limits);
    this.executions = new ExecutionSlots(this.limits);
    this.audit = new AuditLog(join(tenancy.stateDir, 'audit.jsonl'));
    this.publicUrl = tenancy.publicUrl?.replace(/\/+$/, '') ?? null;
    this.previewDomain = tenancy.previewDomain ?? null;
  }

  /** Runs `fn` after `ms` milliseconds unless the server closes first (the timer never holds the process). */
  later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  /**
   * The tenant owning box `boxId`: the tenant recorded when it was created over REST, else `operator`
   * (boxes made outside the server, e.g. `sandbox run`).
   */
  ownerOf(boxId: string): string {
    return this.owners.tenantOf('box', boxId);
  }

  /** True when `principal` may see box `boxId` (its tenant's, or any for the operator). */
  sees(principal: Principal, boxId: string): boolean {
    return principal.operator || this.ownerOf(boxId) === principal.tenant;
  }

  /**
   * The box `idOrName` as `principal` sees it: by id (ULID), or by name — the tenant's own name for its
   * boxes, the runtime's name for the operator. Another tenant's box is not found.
   * @throws BoxError `not_found` (404).
   */
  async box(idOrName: string, principal: Principal): Promise<JsBox> {
    const missing = () => notFound(`no box with id or name '${idOrName}'`);
    // A tenant's own names first; then ids and runtime names (the operator tenant's names).
    let id = principal.operator ? undefined : this.owners.byName('box', principal.tenant, idOrName);
    id ??=
      this.#handles.get(idOrName)?.id ??
      (await this.runtime.getInfo(idOrName))?.id ??
      this.owners.byName('box', principal.tenant, idOrName);
    if (!id || !this.sees(principal, id)) throw missing();
    const handle = this.#handles.get(id) ?? (await this.runtime.get(id));
    if (!handle) {
      // Removed outside the server (CLI, `autoRemove`): its record goes too.
      this.owners.delete('box', id);
      throw missing();
    }
    return handle;
  }

  /** `info` with the name its tenant gave the box (tenant boxes are unnamed in the runtime). */
  view(info: JsBoxInfo): JsBoxInfo {
    const record = this.owners.get('box', info.id);
    if (record?.name == null) return info;
    return { ...info, name: record.name };
  }

  /** Every box `principal` sees (its tenant's; all for the operator), oldest first, as {@link view}. */
  async listBoxes(principal: Principal): Promise<JsBoxInfo[]> {
    const all = await this.runtime.listInfo();
    return all.filter((info) => this.sees(principal, info.id)).map((info) => this.view(info));
  }

  /**
   * Creates and starts a box for `principal`: `options` as `JsRuntime.create` takes them (already
   * validated by the caller), `name` unique per tenant. Applies the tenant's quotas and the node's
   * admission (`tenancy/admission.ts`), maps managed volume names to the tenant's volumes, records the
   * owner (persisted) and returns the box.
   * @throws BoxError `invalid_option` (field `name`, `cpus`, `memoryMib`, a volume), `conflict` (the
   *   tenant has a box of that name), `quota_exceeded` (429), `capacity` (503), or what `create` throws.
   */
  async createBox(principal: Principal, options: JsBoxOptions, name?: string): Promise<JsBox> {
    return this.createWith(principal, options, name, (runtimeName, resolved) =>
      this.runtime.create(resolved, runtimeName),
    );
  }

  /**
   * The common part of every box creation (create, clone, import; `createBox` uses it): the name is
   * checked and held for the tenant, quotas and admission are applied to what `options` ask for, and
   * `make` creates the box with its runtime name (the operator's name; none for a tenant box) and the
   * options with the tenant's volumes, taking a ready box only from the tenant's own warm pools
   * ({@link tenantPools}; the operator's pools for the operator); the box is then recorded as the tenant's.
   * @throws as {@link createBox}.
   */
  async createWith<O extends Pick<JsBoxOptions, 'cpus' | 'memoryMib' | 'diskSizeGb' | 'volumes'>>(
    principal: Principal,
    options: O,
    name: string | undefined,
    make: (runtimeName: string | undefined, options: O) => Promise<JsBox>,
  ): Promise<JsBox> {
    validateBoxName(name);
    await this.rates.consume('create', principal);
    const key = name === undefined || principal.operator ? null : `${principal.tenant}\0${name}`;
    if (key !== null) {
      if (this.#creatingNames.has(key) || this.owners.byName('box', principal.tenant, name!)) {
        throw new HttpError('conflict', `a box named '${name}' exists`, 'name');
      }
      this.#creatingNames.add(key);
    }
    try {
      const request = boxRequestOf(options);
      const box = await this.admission.admit(principal.tenant, principal.operator, request, async () => {
        const resolved = await tenantVolumeOptions(this.runtime, this.owners, principal, options);
        const made = await withHandOutPools(this.tenantPools(principal.tenant), () =>
          make(principal.operator ? name : undefined, resolved),
        );
        this.owners.set('box', made.id, {
          tenant: principal.tenant,
          name: principal.operator ? null : (name ?? null),
          cpus: request.cpus,
          memoryMib: request.memoryMib,
          diskGb: request.diskGb,
        });
        return made;
      });
      this.#handles.set(box.id, box);
      return box;
    } finally {
      if (key !== null) this.#creatingNames.delete(key);
    }
  }

  /** Bytes held by the snapshots of `tenant`'s boxes (each snapshot's `sizeBytes`, summed). */
  async snapshotBytes(tenant: string): Promise<number> {
    let total = 0;
    for (const info of await this.runtime.listInfo()) {
      if (this.ownerOf(info.id) !== tenant) continue;
      const box = this.#handles.get(info.id) ?? (await this.runtime.get(info.id));
      try {
        for (const snapshot of (await box?.snapshot.list()) ?? []) total += snapshot.sizeBytes;
      } catch {
        // A box whose disk takes no snapshots (ext4, gVisor) holds none.
      }
    }
    return total;
  }

  /**
   * Takes a snapshot of `principal`'s box `idOrName` under its tenant's `snapshot_bytes` quota (checked
   * against what its snapshots hold before this one; the operator is not bound).
   * @throws BoxError `not_found`, `quota_exceeded` (field `snapshot_bytes`), or as `BoxSnapshots.create`.
   */
  async takeSnapshot(principal: Principal, idOrName: string, name?: string): Promise<SnapshotInfo> {
    const box = await this.box(idOrName, principal);
    if (!principal.operator) {
      const max = this.limits.tenant(principal.tenant).snapshot_bytes;
      const used = max === null ? 0 : await this.snapshotBytes(principal.tenant);
      if (max !== null && used >= max) {
        throw new BoxError(
          `quota exceeded: snapshot_bytes (tenant ${principal.tenant} holds ${used} of ${max} bytes in snapshots)`,
          { code: 'quota_exceeded', field: 'snapshot_bytes' },
        );
      }
    }
    return box.snapshot.create(name);
  }

  /**
   * Starts `principal`'s stopped box `idOrName` again under its tenant's quotas and the node's admission
   * (a running box is left as is, without a check).
   * @throws BoxError `not_found`, `quota_exceeded`, `capacity`, or as `JsBox.start`.
   */
  async startBox(principal: Principal, idOrName: string): Promise<JsBox> {
    const box = await this.box(idOrName, principal);
    const info = await box.info();
    if (info.state.running) return box;
    const record = this.owners.get('box', box.id);
    const request = { cpus: info.cpus, memoryMib: info.memoryMib, diskGb: 0 };
    await this.admission.admit(record?.tenant ?? this.ownerOf(box.id), principal.operator, request, () =>
      box.start(),
    );
    return box;
  }

  /**
   * Removes `principal`'s box `idOrName` (`force`: a running one too): the box, its executions
   * (terminated), its preview URLs and its ownership record.
   * @throws BoxError `not_found`, `conflict` (running without `force`).
   */
  async removeBox(principal: Principal, idOrName: string, force = false): Promise<void> {
    const box = await this.box(idOrName, principal);
    await this.runtime.remove(box.id, force);
    this.forget(box.id);
  }

  /**
   * Issues a signed preview URL for `port` of `principal`'s box `boxId` (id or name), valid `expiresInMs`
   * (default 1 hour, at most 7 days): path form `<publicUrl>/preview/<token>/`, or with a preview domain
   * `<scheme>://<port>-<boxId>.<domain>/?preview_token=<token>`.
   * @throws BoxError `not_found` (another tenant's box), `invalid_option` naming `port` or `expires_in_ms`.
   */
  async previewUrl(
    principal: Principal,
    boxId: string,
    port: number,
    options: { expiresInMs?: number } = {},
  ): Promise<PreviewUrl> {
    const box = await this.box(boxId, principal);
    const { token, info } = this.previews.create(this.ownerOf(box.id), box.id, port, options.expiresInMs);
    return { url: this.previewLink(info, token), token, expiresAt: info.expiresAt, id: info.id };
  }

  /** The URL of preview `info` carrying `token` (see {@link previewUrl}). */
  previewLink(info: PreviewInfo, token: string): string {
    return previewLink(this.publicUrl, this.previewDomain, info, token);
  }

  /** `JsBoxInfo` as the server answers it (snake_case, tenant name): boxes created here have no publications (`[]`), others null. */
  info(info: JsBoxInfo): unknown {
    const viewed = this.view(info);
    if (this.#handles.has(info.id) && viewed.network) viewed.network.publishedPorts = [];
    return toSnake(viewed);
  }

  /** Forgets a removed box: its handle, its executions (terminated), its previews and its owner record. */
  forget(boxId: string): void {
    this.#handles.delete(boxId);
    this.#executions.forgetBox(boxId);
    this.previews.revokeBox(boxId);
    this.owners.delete('box', boxId);
  }

  /** The execution `executionId` of box `boxId`. @throws BoxError `not_found`. */
  session(boxId: string, executionId: string): ExecSession {
    return this.#executions.get(boxId, executionId);
  }

  /**
   * The execution named by route params `box` (id or name) and `execution`, of `principal`'s box.
   * @throws BoxError `not_found`.
   */
  async execution(params: { box: string; execution: string }, principal: Principal): Promise<ExecSession> {
    const box = await this.box(params.box, principal);
    return this.session(box.id, params.execution);
  }

  /**
   * Validates an exec request against the `ExecRequest` schema and starts its session in `principal`'s
   * box `idOrName`, under the tenant's `exec_per_second` rate and `running_executions` quota (the slot
   * is held until the command ends).
   * @throws HttpError 400 naming the field; BoxError `not_found`, `quota_exceeded` (field
   *   `exec_per_second` with `retryAfterMs`, or `running_executions`), or as `JsBox.execWith`.
   */
  async startExecution(idOrName: string, body: unknown, principal: Principal): Promise<ExecSession> {
    const request = execRequestOf(body);
    const box = await this.box(idOrName, principal);
    const release = await this.admitExecution(principal);
    return this.#executions.start(box, request, release, this.metrics);
  }

  /**
   * Admits one command of `principal`'s tenant: takes one `exec_per_second` point and one
   * `running_executions` slot. Every route plugin that starts commands in a tenant's box calls it first
   * and calls the returned function once the command has ended (or failed to start).
   * @throws BoxError `quota_exceeded` naming `exec_per_second` (with `retryAfterMs`) or
   *   `running_executions`.
   */
  async admitExecution(principal: Principal): Promise<() => void> {
    await this.rates.consume('exec', principal);
    return this.executions.take(principal);
  }

  /**
   * Writes an audit entry for a request of `principal` outside Fastify's routing (WebSocket upgrades,
   * CONNECT tunnels, preview URLs); the routes' own entries are written by the server's hooks.
   */
  auditEvent(
    principal: Pick<Principal, 'tenant' | 'subject' | 'keyId'>,
    what: Pick<AuditEntry, 'method' | 'route' | 'resource' | 'status' | 'error'>,
  ): void {
    writeAuditEvent(this.audit, principal, what);
  }

  /**
   * Writes the audit entry of a refused upgrade or CONNECT (`attempt` as far as it got): the caller's
   * tenant, or `-` when its credential was refused, and the status and code it was answered with.
   */
  auditRefused(attempt: RawAttempt, error: HttpError): void {
    writeAuditRefused(this.audit, attempt, error);
  }

  /** Ends every execution and timer (the server is closing). */
  async close(): Promise<void> {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    await this.#executions.close();
    await this.audit.flush();
  }
}
