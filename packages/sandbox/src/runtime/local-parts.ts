/**
 * The parts one `LocalRuntime` (`local.ts`) shares with its modules (`local-launch.ts`,
 * `local-lifecycle.ts`, `local-create.ts`): the state database, image store, lifetimes, pool table, health
 * monitor and secret values, and the choice of engine and networking (`LocalEngines`).
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { createTieredEngine, type TieredEngine } from '../engine/gvisor-tiers.ts';
import { RootlessEngine } from '../engine/rootless.ts';
import type { ImageStore } from '../images/index.ts';
import { BoxNetworking } from '../network/index.ts';
import { RootlessNetworking } from '../network/rootless.ts';
import type { HealthMonitor } from './health.ts';
import type { LifetimeStore } from './lifetimes.ts';
import type { NormalizedSecret } from './options.ts';
import type { PoolTable } from './pool.ts';
import type { StateDb } from './state.ts';

/** True when this process is not root: boxes then run on the rootless engine (engine/rootless.ts). */
export function rootless(): boolean {
  return process.getuid?.() !== 0;
}

/** Runtime counters of one `JsRuntime` instance since it was constructed (spec 002 `JsRuntimeMetrics`). */
export interface RuntimeCounters {
  /** Boxes created (`boxesCreatedTotal`). */
  created: number;
  /** Box creations that failed (`boxesFailedTotal`). */
  failed: number;
  /** Commands started (`totalCommandsExecuted`). */
  commands: number;
  /** Commands that ended with an exit code other than 0 (`totalExecErrors`). */
  execErrors: number;
}

/**
 * The engine and the networking of the boxes of one `homeDir`, each created on first use: root gets the
 * engine of both isolation tiers (`createTieredEngine`), an ordinary account the rootless one
 * (`RootlessEngine`, user namespace from its subordinate ids), with the matching networking.
 */
export class LocalEngines {
  /** Absolute base directory of the runtime's data. */
  readonly homeDir: string;
  #engine: Promise<TieredEngine | RootlessEngine> | null = null;
  #net: BoxNetworking | RootlessNetworking | null = null;

  /** @param homeDir the runtime's absolute base directory. */
  constructor(homeDir: string) {
    this.homeDir = homeDir;
  }

  /**
   * The engine's state directory: `<homeDir>/engine`, shared by every process on this homeDir. The OCI
   * runtimes refuse paths with whitespace; such a homeDir gets a directory under /run keyed by its hash.
   */
  stateRoot(): string {
    if (!/\s/.test(this.homeDir)) return join(this.homeDir, 'engine');
    return join('/run/seed-sandbox', createHash('sha256').update(this.homeDir).digest('hex').slice(0, 16));
  }

  /** The directory of box `id`: `<homeDir>/boxes/<id>` (owned by the engine). */
  boxDir(id: string): string {
    return join(this.homeDir, 'boxes', id);
  }

  /** Networking of the runtime's boxes; per-box network state in `<engine state root>/net`. */
  networking(): BoxNetworking | RootlessNetworking {
    const stateDir = join(this.stateRoot(), 'net');
    this.#net ??= rootless() ? new RootlessNetworking({ stateDir }) : new BoxNetworking({ stateDir });
    return this.#net;
  }

  /**
   * The engine of both isolation tiers (the gVisor one is created on the first gVisor box), or the
   * rootless engine for an ordinary account. A failed creation is forgotten, so the next call tries again.
   */
  engine(): Promise<TieredEngine | RootlessEngine> {
    this.#engine ??= rootless()
      ? (async () => new RootlessEngine({ stateRoot: this.stateRoot(), ...this.networking().hooks() }))()
      : createTieredEngine({ stateRoot: this.stateRoot(), ...this.networking().hooks() });
    this.#engine.catch(() => {
      this.#engine = null;
    });
    return this.#engine;
  }
}

/** The parts of one `LocalRuntime` that its launch, lifecycle and creation modules use. */
export interface LocalParts {
  /** Absolute base directory of the runtime's data. */
  readonly homeDir: string;
  /** Box and volume records (`<homeDir>/state.db`). */
  readonly db: StateDb;
  /** The image store of `homeDir`. */
  readonly store: ImageStore;
  /** Engine, networking and box directories. */
  readonly engines: LocalEngines;
  /** Stored box lifetimes (`lifetimes.ts`), enforced by the reaper process (`reaper.ts`). */
  readonly lifetimes: LifetimeStore;
  /** Boxes held by warm pools (`pool.ts`), shared by every process on `homeDir`. */
  readonly poolTable: PoolTable;
  /** Health checks of the boxes this instance created, started or took over (`health.ts`). */
  readonly health: HealthMonitor;
  /** Secret values of boxes this instance created (never stored), for `start` after `stop`. */
  readonly secretValues: Map<string, NormalizedSecret[]>;
  /** What this instance did since it was constructed. */
  readonly counters: RuntimeCounters;
}
