/**
 * Isolation tiers of one runtime: an `Engine` that starts each box in the container tier (the OCI
 * engine, crun/runc) or the gVisor tier (gvisor.ts, runsc) as `EngineBoxSpec.isolation` says, and
 * routes every later call for a box to the tier that started it (read from the box's
 * `bundle/engine.json`, so any process on the same state root routes the same way).
 * The gVisor engine is created on the first gVisor box (runsc is not needed otherwise).
 */
import { readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import type { CreateEngineOptions, OciEngine } from './engine.ts';
import { createGVisorEngine, type GVisorEngine } from './gvisor.ts';
import type { GVisorNetnsContext } from './gvisor-netns.ts';
import type { GVisorPlatform, GVisorPlatformChoice } from './gvisor-platform.ts';
import { createEngine } from './index.ts';
import type {
  Engine,
  EngineBoxRecord,
  EngineBoxSpec,
  EngineExecOptions,
  EngineProcess,
  EngineStarted,
  EngineState,
  EngineStats,
} from './types.ts';

/** Isolation tiers: `container` (crun/runc namespaces + seccomp) or `gvisor` (runsc user-space kernel). */
export type IsolationTier = 'container' | 'gvisor';

/** Options of `createTieredEngine`: the OCI engine's, plus the gVisor platform. */
export interface CreateTieredEngineOptions extends CreateEngineOptions {
  /** gVisor platform; default probed once per boot (`kvm` when it boots, else `ptrace`). */
  gvisorPlatform?: GVisorPlatform;
  /** The gVisor tier's `networkPrepare` hook (see `CreateGVisorEngineOptions`). */
  networkPrepare?: (ctx: GVisorNetnsContext) => Promise<void>;
}

/** What a box runs under: its tier, the OCI runtime, and for gVisor the platform. */
export interface TierInfo {
  tier: IsolationTier;
  /** `crun`, `runc` or `runsc`. */
  runtime: string;
  /** gVisor platform (gVisor tier only). */
  platform?: GVisorPlatform;
}

const DEFAULT_STATE_ROOT = '/run/seed-sandbox';

/**
 * Checks an isolation tier name.
 * @throws BoxError naming `field` unless it is `container` or `gvisor`.
 */
export function checkIsolation(value: unknown, field: string): IsolationTier {
  if (value !== 'container' && value !== 'gvisor') {
    throw new BoxError(`invalid option ${field}: '${String(value)}' must be 'container' or 'gvisor'`, {
      field,
    });
  }
  return value;
}

/** An `Engine` over both tiers. Construct with `createTieredEngine()`. */
export class TieredEngine implements Engine {
  /** The container tier's runtime name (`crun` or `runc`). */
  readonly name: string;
  /** The container tier. */
  readonly container: OciEngine;
  readonly #options: CreateTieredEngineOptions;
  readonly #stateRoot: string;
  #gvisor: Promise<GVisorEngine> | null = null;
  readonly #tiers = new Map<string, { tier: IsolationTier; platform?: GVisorPlatform }>();

  /** Use `createTieredEngine()`. */
  constructor(container: OciEngine, options: CreateTieredEngineOptions) {
    this.container = container;
    this.name = container.name;
    this.#options = options;
    this.#stateRoot = options.stateRoot ?? DEFAULT_STATE_ROOT;
  }

  /**
   * The gVisor tier, created on first use (chooses the platform: at most one KVM probe per boot).
   * @throws BoxError when runsc is not installed.
   */
  gvisor(): Promise<GVisorEngine> {
    this.#gvisor ??= createGVisorEngine({
      stateRoot: this.#stateRoot,
      ...(this.#options.initPath ? { initPath: this.#options.initPath } : {}),
      ...(this.#options.gvisorPlatform ? { platform: this.#options.gvisorPlatform } : {}),
      ...(this.#options.networkPrepare ? { networkPrepare: this.#options.networkPrepare } : {}),
      ...(this.#options.networkSetup ? { networkSetup: this.#options.networkSetup } : {}),
      ...(this.#options.networkTeardown ? { networkTeardown: this.#options.networkTeardown } : {}),
      ...(this.#options.networkFiles ? { networkFiles: this.#options.networkFiles } : {}),
    });
    this.#gvisor.catch(() => {
      this.#gvisor = null;
    });
    return this.#gvisor;
  }

  /** The gVisor platform boxes of this engine run on (creates the gVisor tier). */
  async gvisorPlatform(): Promise<GVisorPlatformChoice> {
    return (await this.gvisor()).platform;
  }

  /** The tier of box `id`: remembered from `start`, else from its `bundle/engine.json`; `container` if unknown. */
  tierOf(id: string): IsolationTier {
    return this.#tierMeta(id).tier;
  }

  #tierMeta(id: string): { tier: IsolationTier; platform?: GVisorPlatform } {
    const known = this.#tiers.get(id);
    if (known) return known;
    let found: { tier: IsolationTier; platform?: GVisorPlatform };
    try {
      const boxDir = readlinkSync(join(this.#stateRoot, 'boxes', id));
      const meta = JSON.parse(readFileSync(join(boxDir, 'bundle', 'engine.json'), 'utf8')) as {
        isolation?: string;
        platform?: GVisorPlatform;
      };
      found =
        meta.isolation === 'gvisor' ? { tier: 'gvisor', platform: meta.platform } : { tier: 'container' };
    } catch {
      return { tier: 'container' };
    }
    this.#tiers.set(id, found);
    return found;
  }

  async #engine(id: string): Promise<Engine> {
    return this.tierOf(id) === 'gvisor' ? this.gvisor() : this.container;
  }

  /** Starts the box in the tier `spec.isolation` names (default `container`); see `Engine.start`. */
  async start(spec: EngineBoxSpec): Promise<EngineStarted> {
    if (spec.isolation === 'gvisor') {
      const engine = await this.gvisor();
      this.#tiers.set(spec.id, { tier: 'gvisor', platform: engine.platform.platform });
      return engine.start(spec);
    }
    this.#tiers.set(spec.id, { tier: 'container' });
    return this.container.start(spec);
  }

  /** See `Engine.exec`; routed to the box's tier. */
  async exec(id: string, options: EngineExecOptions): Promise<EngineProcess> {
    return (await this.#engine(id)).exec(id, options);
  }

  /** See `Engine.stop`; routed to the box's tier. */
  async stop(id: string, graceMs?: number): Promise<void> {
    return (await this.#engine(id)).stop(id, graceMs);
  }

  /** See `Engine.remove`; routed to the box's tier. */
  async remove(id: string, boxDir: string): Promise<void> {
    const engine = await this.#engine(id);
    await engine.remove(id, boxDir);
    this.#tiers.delete(id);
  }

  /** See `Engine.state`; routed to the box's tier. */
  async state(id: string): Promise<EngineState> {
    return (await this.#engine(id)).state(id);
  }

  /** See `Engine.stats`; routed to the box's tier. */
  async stats(id: string): Promise<EngineStats> {
    return (await this.#engine(id)).stats(id);
  }

  /**
   * Boxes of both tiers (the gVisor tier is asked only when it was created or a box uses it); with
   * `include`, only the ids it accepts (see `Engine.list`).
   */
  async list(include?: (id: string) => boolean): Promise<EngineBoxRecord[]> {
    const byId = new Map<string, EngineBoxRecord>();
    let anyGVisor = this.#gvisor !== null;
    for (const box of await this.container.list(include)) {
      if (this.tierOf(box.id) === 'container') byId.set(box.id, box);
      else anyGVisor = true;
    }
    if (anyGVisor) {
      const gvisor = await this.gvisor().catch(() => null);
      for (const box of (await gvisor?.list(include)) ?? []) byId.set(box.id, box);
    }
    return [...byId.values()];
  }

  /** The tier, runtime and platform of box `id` (for `JsBoxInfo.isolation`); `container` when unknown. */
  async info(id: string): Promise<TierInfo> {
    const meta = this.#tierMeta(id);
    if (meta.tier !== 'gvisor') return { tier: 'container', runtime: this.container.name };
    return {
      tier: 'gvisor',
      runtime: 'runsc',
      platform: meta.platform ?? (await this.gvisorPlatform()).platform,
    };
  }
}

/**
 * Creates the engine of both tiers: the OCI engine (container tier; see `createEngine`) now, the
 * gVisor engine on the first gVisor box.
 * @throws BoxError as `createEngine` (missing runtime, init or unshare; invalid option).
 */
export async function createTieredEngine(options: CreateTieredEngineOptions = {}): Promise<TieredEngine> {
  return new TieredEngine(await createEngine(options), options);
}
