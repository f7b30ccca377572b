/**
 * `JsRuntime` (spec 002 "Runtime (`JsRuntime`)"): the public runtime class, a thin facade over one
 * `RuntimeBackend` (`runtime/backend.ts`) — `LocalRuntime` (`runtime/local.ts`: boxes on this host, state
 * in `<homeDir>/state.db`) or `RestRuntime` (`rest/client.ts`: boxes on a `sandbox serve` server). The
 * facade validates the runtime options, picks the backend and forwards every call; it holds the
 * process-wide default runtime. It sits above both backends (imports point one way: this facade →
 * rest → runtime → engine/images/network), so the runtime layer never loads the REST client.
 */
import { BoxError } from './errors.ts';
import type { ImageLimits } from './images/limits.ts';
import { RestRuntime, restOptionsFrom } from './rest/client.ts';
import { type Credential, RuntimeRestOptions } from './rest/credential.ts';
import type { ImportedBox, ImportOptions } from './runtime/archive-options.ts';
import type { RuntimeBackend, RuntimeImages, RuntimeVolumes } from './runtime/backend.ts';
import type { JsBox } from './runtime/box.ts';
import { LocalRuntime } from './runtime/local.ts';
import type { JsBoxPool, PoolSpec } from './runtime/pool.ts';
import type { CloneOptions } from './runtime/snapshots.ts';
import type {
  IsolationTier,
  JsBoxInfo,
  JsBoxOptions,
  JsOptions,
  JsRuntimeMetrics,
  JsTenantUsage,
} from './types.ts';

export type { RuntimeBackend, RuntimeImages, RuntimeVolumes } from './runtime/backend.ts';
export { defaultHomeDir } from './runtime/local.ts';

/**
 * A runtime (spec 002 `JsRuntime`): local over one `homeDir` (several runtimes, in one process or in
 * several, may share it and see the same boxes), or remote over a REST server.
 */
export class JsRuntime {
  static #default: JsRuntime | null = null;
  static #defaultOptions: JsOptions = {};

  /** The flavour every call is forwarded to. */
  readonly #backend: RuntimeBackend;
  /** Default isolation tier of boxes created without `isolation` (`JsOptions.isolation`). */
  readonly #isolation: IsolationTier | undefined;
  /** Set by `shutdown()`: creating boxes, pools and pulling images are refused from then on. */
  #shutDown = false;
  /** `images` with `pull` refused after `shutdown()`. */
  #images: RuntimeImages | null = null;

  /**
   * A runtime with custom options (spec 002 `new JsRuntime(options)`). With `url` (or `SANDBOX_URL` and
   * no `homeDir`) it is a REST runtime: the same methods, served by `sandbox serve` (src/rest/).
   * @throws BoxError (code `invalid_option`) when `homeDir` is not a non-empty string, `imageRegistries`
   *   not an array, or `url` not an http(s) URL.
   */
  constructor(options: JsOptions = {}) {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('runtime options must be an object', { field: 'options' });
    }
    if (options.homeDir !== undefined && (typeof options.homeDir !== 'string' || options.homeDir === '')) {
      throw new BoxError('invalid runtime option homeDir: must be a non-empty path', { field: 'homeDir' });
    }
    if (options.imageRegistries !== undefined && !Array.isArray(options.imageRegistries)) {
      throw new BoxError('invalid runtime option imageRegistries: must be an array', {
        field: 'imageRegistries',
      });
    }
    if (
      options.isolation !== undefined &&
      options.isolation !== 'container' &&
      options.isolation !== 'gvisor'
    ) {
      throw new BoxError("invalid runtime option isolation: must be 'container' or 'gvisor'", {
        field: 'isolation',
      });
    }
    this.#isolation = options.isolation;
    const rest = restOptionsFrom(options);
    this.#backend = rest ? new RestRuntime(rest) : new LocalRuntime(options);
  }

  /**
   * A REST runtime (BoxLite `JsBoxlite.rest(new BoxliteRestOptions({ url, credential }))`, renamed by
   * spec 002's rule): the same as `new JsRuntime({ url, apiKey })`, with the credential's token as key.
   * The token is read once (API keys do not expire).
   * @throws BoxError `invalid_option` for options that are not `RuntimeRestOptions`-shaped.
   */
  static rest(
    options: RuntimeRestOptions | { url: string; credential?: Credential; prefix?: string },
  ): JsRuntime {
    const checked = options instanceof RuntimeRestOptions ? options : new RuntimeRestOptions(options);
    const token = checked.credential?.getToken().token;
    return new JsRuntime({ url: checked.url, ...(token ? { apiKey: token } : {}) });
  }

  /** The default runtime (`~/.sandbox`, or the options given to `initDefault`), created on first call. */
  static withDefaultConfig(): JsRuntime {
    JsRuntime.#default ??= new JsRuntime(JsRuntime.#defaultOptions);
    return JsRuntime.#default;
  }

  /**
   * Sets the options of the default runtime (spec 002 `initDefault`).
   * @throws BoxError (code `conflict`) when the default runtime was already created.
   */
  static initDefault(options: JsOptions): void {
    if (JsRuntime.#default) {
      throw new BoxError(
        'the default runtime is already initialized; call initDefault before withDefaultConfig',
        { code: 'conflict' },
      );
    }
    JsRuntime.#default = new JsRuntime(options);
    JsRuntime.#defaultOptions = options;
  }

  /** Absolute base directory of this runtime's data (empty for a REST runtime). */
  get homeDir(): string {
    return this.#backend.homeDir;
  }

  /** Image and import bounds of a local runtime (`JsOptions.imageLimits` over the defaults); null over REST. */
  get imageLimits(): ImageLimits | null {
    return this.#backend.imageLimits ?? null;
  }

  /** Base URL of the REST runtime server, or null for a local runtime. */
  get url(): string | null {
    return this.#backend.url;
  }

  /**
   * Creates and starts a box (spec 002 `create`). Defaults per `JsBoxOptions`; `name` must be unique.
   * @throws BoxError `invalid_option` naming the field (the four rejections of spec 002 included),
   *   `conflict` for a taken name or after `shutdown()`, `image` when the image cannot be prepared,
   *   `internal` for an engine failure. Nothing of a failed box remains.
   */
  create(options: JsBoxOptions, name?: string): Promise<JsBox> {
    if (this.#shutDown) return Promise.reject(shutDownError('create'));
    if (
      this.#isolation &&
      typeof options === 'object' &&
      options !== null &&
      options.isolation === undefined
    ) {
      return this.#backend.create({ ...options, isolation: this.#isolation }, name);
    }
    return this.#backend.create(options, name);
  }

  /** Metadata of every box, oldest first (spec 002 `listInfo`). */
  listInfo(): Promise<JsBoxInfo[]> {
    return this.#backend.listInfo();
  }

  /** Metadata of the box with this id or name, or null (spec 002 `getInfo`). */
  getInfo(idOrName: string): Promise<JsBoxInfo | null> {
    return this.#backend.getInfo(idOrName);
  }

  /** A handle to the box with this id or name, or null (spec 002 `get`). Works across processes. */
  get(idOrName: string): Promise<JsBox | null> {
    return this.#backend.get(idOrName);
  }

  /**
   * Runtime metrics (spec 002 `JsRuntimeMetrics`): the totals count what this runtime (the server's, over
   * REST) did since it was constructed; `numRunningBoxes` counts every running box.
   */
  metrics(): Promise<JsRuntimeMetrics> {
    return this.#backend.metrics();
  }

  /**
   * The caller's tenant usage and limits on a `sandbox serve` node (`GET /v1/usage`).
   * @throws BoxError `unsupported` on a local runtime.
   */
  usage(): Promise<JsTenantUsage> {
    if (!this.#backend.usage) {
      return Promise.reject(
        new BoxError('usage() needs a REST runtime (sandbox serve)', { code: 'unsupported' }),
      );
    }
    return this.#backend.usage();
  }

  /**
   * Removes a box and everything it owns (spec 002 `remove`). A running box needs `force` (it is killed).
   * @throws BoxError `not_found` when no box has this id or name, `conflict` when it runs without `force`.
   */
  remove(idOrName: string, force = false): Promise<void> {
    return this.#backend.remove(idOrName, force);
  }

  /**
   * Spec 002 `close`: writes pending exec counters (local) or closes the idle exec stream (REST); boxes
   * keep running per their `detach` option.
   */
  close(): void {
    this.#backend.close();
  }

  /**
   * The box named `name` when it exists, else a new one created with `options` under that name (BoxLite
   * `getOrCreate`). `created` tells which. Two callers racing on one name get the same box.
   * Without a name it always creates.
   * @throws BoxError as `create`.
   */
  async getOrCreate(options: JsBoxOptions, name?: string): Promise<{ box: JsBox; created: boolean }> {
    if (this.#shutDown) throw shutDownError('getOrCreate');
    if (name !== undefined) {
      const existing = await this.#backend.get(name);
      if (existing) return { box: existing, created: false };
    }
    try {
      return { box: await this.#backend.create(options, name), created: true };
    } catch (error) {
      if (
        name !== undefined &&
        error instanceof BoxError &&
        error.code === 'conflict' &&
        error.field === 'name'
      ) {
        const existing = await this.#backend.get(name);
        if (existing) return { box: existing, created: false };
      }
      throw error;
    }
  }

  /**
   * Stops every non-detached box this runtime created (BoxLite `runtime.shutdown(timeout?)`): their
   * commands get SIGTERM, then SIGKILL after `timeout` seconds (default 10); `autoRemove` boxes are
   * removed. Detached boxes keep running. From the call on, as in BoxLite, the runtime refuses to make
   * anything new: `create`, `getOrCreate`, `cloneBox`, `importBox`, `pool` and `images.pull` reject with
   * `conflict`; reading, stopping and removing boxes still work. Calling it again is allowed.
   * @throws BoxError `invalid_option` (field `timeout`; the runtime then stays open).
   */
  async shutdown(timeout?: number): Promise<void> {
    const wasOpen = !this.#shutDown;
    this.#shutDown = true;
    try {
      await this.#backend.shutdown(timeout);
    } catch (error) {
      if (wasOpen && error instanceof BoxError && error.code === 'invalid_option') this.#shutDown = false;
      throw error;
    }
  }

  /**
   * Starts a new box from box `idOrName`'s current state, or from its snapshot `options.snapshot`. The
   * clone gets the source's options, its labels included (without secrets and port publications),
   * overridden by `options`, and its own copy of the source's writable layer.
   * @throws BoxError `not_found` (box or snapshot), `unsupported` (a box that cannot have snapshots:
   *   gVisor tier, ext4 disk), `invalid_option` naming the option.
   */
  cloneBox(idOrName: string, options?: CloneOptions, name?: string): Promise<JsBox> {
    if (this.#shutDown) return Promise.reject(shutDownError('cloneBox'));
    return this.#backend.cloneBox(idOrName, options, name);
  }

  /**
   * Brings back a box written by `box.export(path)` as a new box, on this or another machine:
   * its files, owners, modes and options. Its image is the archive's image part, kept as an OCI layout in
   * `<homeDir>/imports` (the box's `rootfsPath`). The archive's options are not trusted: capabilities
   * beyond the defaults, `allowNet` entries, volumes, ports and secrets are dropped unless
   * `{ options }` passes them again; the answer's `droppedOptions` lists what was dropped.
   * @param nameOrOptions the new box's name, or `{ name?, options? }` (`ImportOptions`).
   * @throws BoxError `not_found` / `invalid_option` (field `path`) for a missing or foreign archive,
   *   `image` for an archive over `maxImportBytes` or a box layer over its bounds or with hostile content.
   */
  importBox(path: string, nameOrOptions?: string | ImportOptions): Promise<ImportedBox> {
    if (this.#shutDown) return Promise.reject(shutDownError('importBox'));
    return this.#backend.importBox(path, nameOrOptions);
  }

  /**
   * Keeps `size` boxes of `image` and `options` created and running (warm pools; `pool.ts`):
   * `create()` with the same options (name and lifetimes aside) hands one out at once and the pool refills
   * in the background; `shutdown()` drains it, `pool.close()` too. On a REST runtime the server keeps the
   * pool (`rest/pool-routes.ts`) and hands its boxes to this runtime's `create()`; `ready()` is the count
   * the server last reported (`filled()` refreshes it).
   * @throws BoxError `invalid_option` naming `image`, `size`, `options` or the box option at fault;
   *   `unsupported` for a runtime flavour that keeps no pools.
   */
  pool(spec: PoolSpec): JsBoxPool {
    if (this.#shutDown) throw shutDownError('pool');
    if (!this.#backend.pool) {
      throw new BoxError('warm pools are kept by a local runtime', { code: 'unsupported' });
    }
    const options = spec?.options;
    if (this.#isolation && (options === undefined || (typeof options === 'object' && options !== null))) {
      if (options?.isolation === undefined) {
        return this.#backend.pool({ ...spec, options: { ...options, isolation: this.#isolation } });
      }
    }
    return this.#backend.pool(spec);
  }

  /**
   * Image operations (a REST runtime serves them through the server's image routes). After `shutdown()`
   * `pull` rejects with `conflict`; `get`, `list` and `remove` still work.
   */
  get images(): RuntimeImages {
    if (!this.#images) {
      const images = this.#backend.images;
      this.#images = {
        pull: (reference, options) =>
          this.#shutDown ? Promise.reject(shutDownError('images.pull')) : images.pull(reference, options),
        get: (...args) => images.get(...args),
        list: () => images.list(),
        remove: (...args) => images.remove(...args),
      };
    }
    return this.#images;
  }

  /** Managed volumes of this runtime. */
  get volumes(): RuntimeVolumes {
    return this.#backend.volumes;
  }
}

/** The `conflict` error of an operation called after `runtime.shutdown()` (BoxLite refuses it too). */
function shutDownError(operation: string): BoxError {
  return new BoxError(`${operation}: the runtime has been shut down (runtime.shutdown())`, {
    code: 'conflict',
  });
}
