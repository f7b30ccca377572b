/**
 * E2B sandboxes over the server's boxes (one box, two APIs): a sandbox is a box named by its
 * sandbox id, created from the image its template names; this module keeps what E2B knows of a sandbox
 * beyond the box (template, metadata, end of its timeout, envd access token, lifecycle) and turns boxes
 * into E2B's `Sandbox`/`ListedSandbox`/`SandboxDetail` bodies.
 *
 * Boxes made through `/v1` show up too (their template is their image, their sandbox id the box id);
 * a box removed through `/v1` disappears from E2B's list on the next call. The records are kept on
 * disk (`store.ts`), so a sandbox keeps its template, metadata, token and timeout across a restart.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { dirname, join } from 'node:path';
import { BoxError, notFound } from '../errors.ts';
import { closeInterpreter } from '../interpreter/index.ts';
import { operatorPrincipal, type Principal } from '../rest/auth.ts';
import type { ServerContext } from '../rest/context.ts';
import { OPERATOR_TENANT } from '../rest/tenancy/tenant.ts';
import type { JsBox } from '../runtime/box.ts';
import { LABEL_KEY_RE, MAX_LABEL_VALUE, MAX_LABELS } from '../runtime/options.ts';
import type { JsBoxInfo, JsBoxOptions, NetworkSpec } from '../types.ts';
import { startDefaultContext } from './code-interpreter.ts';
import { E2B_STATE_FILE, E2bStore } from './store.ts';

/** The envd version the server advertises: every feature up to it is served (see README "Coming from E2B"). */
export const ENVD_VERSION = '0.6.4';
/** E2B's default sandbox timeout, seconds. */
export const DEFAULT_TIMEOUT_S = 300;
/** The longest timeout accepted, seconds (E2B Pro's 24 h). */
export const MAX_TIMEOUT_S = 86_400;
/** Default user of commands and files (E2B templates' `user`). */
export const DEFAULT_USER = 'user';
/** Template used when a create names none (E2B's default). */
export const DEFAULT_TEMPLATE = 'base';
/** The `clientID` every sandbox reports (E2B's cluster client; a single machine has one). */
export const CLIENT_ID = 'seed-sandbox';

/** The template whose sandboxes start their code interpreter's default context at create. */
export const CODE_INTERPRETER_TEMPLATE = 'code-interpreter-v1';

/** Templates served by default: name → image (built offline by `npm run sandbox:registry`). */
export const DEFAULT_TEMPLATES: Readonly<Record<string, string>> = {
  base: 'base:latest',
  [CODE_INTERPRETER_TEMPLATE]: 'code-interpreter-v1:latest',
};

/** What E2B knows of one sandbox beyond its box. */
export interface E2bSandbox {
  /** The sandbox id: the box's name (lowercase letters and digits, usable in a host name). */
  sandboxId: string;
  /** The box id. */
  boxId: string;
  templateId: string;
  /** Tenant owning the sandbox (the creator's). */
  tenant: string;
  metadata: Record<string, string>;
  /** Environment variables given at create (also in the box's environment). */
  envVars: Record<string, string>;
  /** The `X-Access-Token` of envd requests and the key of signed URLs. */
  accessToken: string;
  /** When the sandbox's timeout ends, ms since the epoch. */
  endAt: number;
  /** On timeout: pause (true) or kill. */
  autoPause: boolean;
  /** A paused sandbox resumes on the next envd request. */
  autoResume: boolean;
  allowInternetAccess: boolean;
}

/** Options of a create as the control plane checked them. */
export interface CreateRequest {
  templateId: string;
  timeoutS: number;
  metadata: Record<string, string>;
  envVars: Record<string, string>;
  autoPause: boolean;
  autoResume: boolean;
  allowInternetAccess: boolean;
  /** Destinations the box may reach (`network.allowOut`); absent: any. */
  allowOut?: string[];
}

/** Who envd lookups act as: the sandbox's access token was checked instead of a key. */
const SYSTEM: Principal = operatorPrincipal('api_key');

/** The E2B view of the server's boxes; one per server. */
export class E2bSandboxes {
  readonly #ctx: ServerContext;
  readonly #templates: Map<string, string>;
  readonly #records: Map<string, E2bSandbox>;
  readonly #byBox = new Map<string, string>();
  readonly #store: E2bStore;

  /**
   * @param templates template name → image, on top of {@link DEFAULT_TEMPLATES}.
   * @throws Error when the state file (`store.ts`, in the directory of the server's `owners.json`)
   *   exists and is not JSON.
   */
  constructor(ctx: ServerContext, templates: Record<string, string> = {}) {
    this.#ctx = ctx;
    this.#templates = new Map(Object.entries({ ...DEFAULT_TEMPLATES, ...templates }));
    this.#store = new E2bStore(join(dirname(ctx.owners.path), E2B_STATE_FILE));
    this.#records = this.#store.load();
    for (const record of this.#records.values()) this.#byBox.set(record.boxId, record.sandboxId);
  }

  /** Template names served, with their images. */
  get templates(): ReadonlyMap<string, string> {
    return this.#templates;
  }

  /**
   * Creates a sandbox: a box of the template's image, named by a fresh sandbox id, with the E2B defaults
   * (user `user`, working directory `/home/user`), its env vars, network and timeout. A box of the
   * `code-interpreter-v1` template's image starts its default Python context in the background.
   * @throws BoxError `invalid_option` (field `templateID`) for an unknown template; as `JsRuntime.create`.
   */
  async create(principal: Principal, request: CreateRequest): Promise<{ record: E2bSandbox; box: JsBox }> {
    const image = this.#templates.get(request.templateId);
    if (image === undefined) {
      throw new BoxError(
        `unknown template '${request.templateId}': this server serves ${[...this.#templates.keys()].join(', ')} (sandbox serve --template name=image)`,
        { field: 'templateID', code: 'invalid_option' },
      );
    }
    const sandboxId = newSandboxId();
    const box = await this.#ctx.createBox(principal, { image, ...boxOptionsOf(request) }, sandboxId);
    const record = this.#register(principal, request, box, sandboxId);
    if (image === this.#templates.get(CODE_INTERPRETER_TEMPLATE)) startDefaultContext(box);
    return { record, box };
  }

  /**
   * Creates a sandbox as a clone of box `boxId` (its current state, or its snapshot `snapshot`) with the
   * request's timeout, env vars, network and lifecycle (E2B fork and create-from-snapshot).
   * @throws BoxError as `JsRuntime.cloneBox` (`unsupported` off btrfs).
   */
  async clone(
    principal: Principal,
    boxId: string,
    request: CreateRequest,
    snapshot?: string,
  ): Promise<{ record: E2bSandbox; box: JsBox }> {
    const sandboxId = newSandboxId();
    const options = { ...boxOptionsOf(request), ...(snapshot ? { snapshot } : {}) };
    const box = await this.#ctx.createWith(principal, options, sandboxId, (runtimeName, resolved) =>
      this.#ctx.runtime.cloneBox(boxId, resolved, runtimeName),
    );
    return { record: this.#register(principal, request, box, sandboxId), box };
  }

  #register(principal: Principal, request: CreateRequest, box: JsBox, sandboxId: string): E2bSandbox {
    const record: E2bSandbox = {
      sandboxId,
      boxId: box.id,
      templateId: request.templateId,
      tenant: principal.tenant,
      metadata: request.metadata,
      envVars: request.envVars,
      accessToken: randomBytes(24).toString('base64url'),
      endAt: Date.now() + request.timeoutS * 1000,
      autoPause: request.autoPause,
      autoResume: request.autoResume,
      allowInternetAccess: request.allowInternetAccess,
    };
    this.#remember(record);
    return record;
  }

  #remember(record: E2bSandbox): void {
    this.#records.set(record.sandboxId, record);
    this.#byBox.set(record.boxId, record.sandboxId);
    this.#save();
  }

  #forget(record: E2bSandbox): void {
    this.#records.delete(record.sandboxId);
    this.#byBox.delete(record.boxId);
    this.#save();
  }

  #save(): void {
    this.#store.save(this.#records.values());
  }

  /**
   * Admits one command started through envd in `record`'s sandbox against its tenant's exec rate and
   * running-executions quota (`ServerContext.admitExecution`; the operator's sandboxes are not limited).
   * @returns gives the slot back once the command has ended.
   * @throws BoxError `quota_exceeded` naming `exec_per_second` or `running_executions`.
   */
  admitExecution(record: E2bSandbox): Promise<() => void> {
    const operator = record.tenant === OPERATOR_TENANT;
    return this.#ctx.admitExecution({
      kind: 'token',
      subject: `sandbox:${record.sandboxId}`,
      tenant: record.tenant,
      operator,
      permissions: new Set(),
    });
  }

  /**
   * The sandbox `sandboxId` visible to `principal` (its tenant's, or any for an operator; null: any, for
   * envd requests, which the sandbox's access token authorizes).
   * @throws BoxError `not_found` (unknown, removed, or another tenant's).
   */
  async get(principal: Principal | null, sandboxId: string): Promise<{ record: E2bSandbox; box: JsBox }> {
    const record = this.#records.get(sandboxId) ?? (await this.#adopt(sandboxId));
    if (!record) throw notFound(`sandbox ${sandboxId} not found`);
    let box: JsBox;
    try {
      box = await this.#ctx.box(record.boxId, principal ?? SYSTEM);
    } catch (error) {
      if (
        error instanceof BoxError &&
        error.code === 'not_found' &&
        !(await this.#ctx.runtime.getInfo(record.boxId))
      ) {
        this.#forget(record);
      }
      throw notFound(`sandbox ${sandboxId} not found`);
    }
    return { record, box };
  }

  /** A record for a box this module did not create (made through `/v1`, or before a server restart). */
  async #adopt(idOrName: string): Promise<E2bSandbox | null> {
    const info = await this.#ctx.runtime.getInfo(idOrName);
    if (!info) return null;
    const known = this.#byBox.get(info.id);
    if (known) return this.#records.get(known) ?? null;
    const record: E2bSandbox = {
      sandboxId: info.name ?? info.id,
      boxId: info.id,
      templateId: this.#templateOf(info.image),
      tenant: this.#ctx.ownerOf(info.id),
      metadata: {},
      envVars: {},
      accessToken: randomBytes(24).toString('base64url'),
      endAt: Date.now() + DEFAULT_TIMEOUT_S * 1000,
      autoPause: false,
      autoResume: false,
      allowInternetAccess: info.network?.mode !== 'disabled',
    };
    this.#remember(record);
    return record;
  }

  #templateOf(image: string): string {
    for (const [name, templateImage] of this.#templates) if (templateImage === image) return name;
    return image;
  }

  /** The records of the sandboxes known (for signed URLs, which name no sandbox). */
  records(): IterableIterator<E2bSandbox> {
    return this.#records.values();
  }

  /** Every sandbox `principal` sees, newest first, with its box info. */
  async list(principal: Principal): Promise<{ record: E2bSandbox; info: JsBoxInfo }[]> {
    const infos = await this.#ctx.listBoxes(principal);
    const out: { record: E2bSandbox; info: JsBoxInfo }[] = [];
    const present = new Set<string>();
    for (const info of infos) {
      present.add(info.id);
      const sandboxId = this.#byBox.get(info.id);
      const record = (sandboxId && this.#records.get(sandboxId)) || (await this.#adopt(info.id));
      if (!record) continue;
      out.push({ record, info });
    }
    if (principal.operator) {
      const gone = [...this.#records.values()].filter((record) => !present.has(record.boxId));
      for (const record of gone) {
        this.#records.delete(record.sandboxId);
        this.#byBox.delete(record.boxId);
      }
      if (gone.length > 0) this.#save();
    }
    out.sort(
      (a, b) => b.info.createdAt.localeCompare(a.info.createdAt) || b.info.id.localeCompare(a.info.id),
    );
    return out;
  }

  /**
   * Removes the sandbox's box (its open streams end with it; its code interpreter's kernel connections
   * are closed first, so that they end without trying to reconnect). @throws BoxError `not_found`.
   */
  async kill(principal: Principal, sandboxId: string): Promise<void> {
    const { record, box } = await this.get(principal, sandboxId);
    await closeInterpreter(box.id);
    await this.#ctx.removeBox(principal, box.id, true);
    this.#forget(record);
  }

  /**
   * Sets the timeout to `timeoutS` from now (E2B `setTimeout`: may shorten or lengthen). With `extendOnly`
   * (E2B `connect`), a timeout ending later than the new one is kept.
   */
  async setTimeout(record: E2bSandbox, box: JsBox, timeoutS: number, extendOnly = false): Promise<void> {
    const endAt = Date.now() + timeoutS * 1000;
    if (extendOnly && endAt <= record.endAt) return;
    await box.setTimeout(timeoutS * 1000, record.autoPause ? 'pause' : 'remove');
    record.endAt = endAt;
    this.#save();
  }

  /** Whether `token` is the sandbox's envd access token (constant time). */
  static tokenMatches(record: E2bSandbox, token: string): boolean {
    const a = createHash('sha256').update(token).digest();
    const b = createHash('sha256').update(record.accessToken).digest();
    return timingSafeEqual(a, b);
  }

  /** The E2B `Sandbox` body of a create or connect answer. */
  static sandboxBody(record: E2bSandbox, domain: string | null): Record<string, unknown> {
    return {
      sandboxID: record.sandboxId,
      templateID: record.templateId,
      clientID: CLIENT_ID,
      envdVersion: ENVD_VERSION,
      envdAccessToken: record.accessToken,
      domain,
    };
  }

  /** The E2B `ListedSandbox` body (and with `detail`, `SandboxDetail`). */
  static listedBody(
    record: E2bSandbox,
    info: JsBoxInfo,
    domain: string | null,
    detail = false,
  ): Record<string, unknown> {
    const body: Record<string, unknown> = {
      sandboxID: record.sandboxId,
      templateID: record.templateId,
      clientID: CLIENT_ID,
      startedAt: info.startedAt ?? info.createdAt,
      endAt: new Date(record.endAt).toISOString(),
      cpuCount: info.cpus,
      memoryMB: info.memoryMib,
      diskSizeMB: 0,
      state: stateOf(info),
      envdVersion: ENVD_VERSION,
      metadata: record.metadata,
      volumeMounts: [],
    };
    if (detail) {
      body.envdAccessToken = record.accessToken;
      body.domain = domain;
      body.allowInternetAccess = record.allowInternetAccess;
      body.lifecycle = { onTimeout: record.autoPause ? 'pause' : 'kill', autoResume: record.autoResume };
    }
    return body;
  }
}

/** E2B's sandbox state of a box: `paused` when frozen, else `running`. */
export function stateOf(info: JsBoxInfo): 'running' | 'paused' {
  return info.state.status === 'paused' ? 'paused' : 'running';
}

/** A fresh sandbox id: `i` and 20 hex digits (a valid box name and DNS label). */
function newSandboxId(): string {
  return `i${randomBytes(10).toString('hex')}`;
}

/** Label of a sandbox's box naming its template (`JsBoxOptions.labels`). */
export const TEMPLATE_LABEL = 'e2b.template';
/** Prefix of the labels of a sandbox's box that carry its metadata. */
export const METADATA_LABEL_PREFIX = 'e2b.metadata.';

/**
 * The labels of a sandbox's box (shown by `GET /v1/boxes` and `sandbox ps`): `e2b.template=<template>`
 * and `e2b.metadata.<key>=<value>` per metadata entry. A metadata key is lowercased and every character
 * outside `[a-z0-9._/-]` becomes `-` (`userId` → `e2b.metadata.userid`). An entry is left out when its
 * label key would pass 63 characters or repeat an earlier one, when its value passes 256 characters, or
 * past the 64th label; E2B's own metadata (`getInfo`, the list's `metadata` filter) keeps every entry.
 */
export function sandboxLabels(templateId: string, metadata: Record<string, string>): Record<string, string> {
  const labels: Record<string, string> = {};
  if (templateId.length <= MAX_LABEL_VALUE) labels[TEMPLATE_LABEL] = templateId;
  for (const [key, value] of Object.entries(metadata)) {
    if (Object.keys(labels).length >= MAX_LABELS) break;
    const label = METADATA_LABEL_PREFIX + key.toLowerCase().replace(/[^a-z0-9._/-]/g, '-');
    if (key === '' || !LABEL_KEY_RE.test(label) || Object.hasOwn(labels, label)) continue;
    if (value.length > MAX_LABEL_VALUE) continue;
    labels[label] = value;
  }
  return labels;
}

/** Box options of a create: env vars, network, timeout, what happens at its end, and labels. */
function boxOptionsOf(request: CreateRequest): JsBoxOptions {
  const network: NetworkSpec = request.allowInternetAccess
    ? { mode: 'enabled', ...(request.allowOut ? { allowNet: request.allowOut } : {}) }
    : { mode: 'disabled' };
  return {
    env: Object.entries(request.envVars).map(([key, value]) => ({ key, value })),
    network,
    timeoutMs: request.timeoutS * 1000,
    onTimeout: request.autoPause ? 'pause' : 'remove',
    autoResume: request.autoResume,
    labels: sandboxLabels(request.templateId, request.metadata),
  };
}
