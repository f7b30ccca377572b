/**
 * The REST flavour of the runtime (spec 002 "remote through a REST runtime"): `RestRuntime`,
 * the `RuntimeBackend` of `new JsRuntime({ url })`, over the server in `server.ts`. Its boxes are `JsBox`
 * facades over `RestBoxBackend` (`box-client.ts`), so they behave like local ones.
 *
 * Spec rules for REST: host bind mounts (and `rootfsPath`) are refused before any request leaves
 * (rejection 4); port publication is refused (local runtime only); `info()` fetches the current server
 * record; tunnels use HTTP `CONNECT`.
 *
 * The HTTP plumbing is `connection.ts`, boxes `box-client.ts`, tunnels `tunnel-client.ts`, files
 * `files-client.ts`, warm pools `pool-client.ts`, snapshots `snapshot-client.ts`, exec streams
 * `process.ts` and `mux.ts`.
 */

import { BoxError } from '../errors.ts';
import { type ImportedBox, type ImportOptions, importOptionsOf } from '../runtime/archive-options.ts';
import type { RuntimeBackend, RuntimeImages, RuntimeVolumes } from '../runtime/backend.ts';
import type { JsBox } from '../runtime/box.ts';
import { validateBoxName, validateBoxOptions } from '../runtime/options.ts';
import type { JsBoxPool, PoolSpec } from '../runtime/pool.ts';
import type { CloneOptions } from '../runtime/snapshots.ts';
import type { JsBoxInfo, JsBoxOptions, JsRuntimeMetrics, JsTenantUsage } from '../types.ts';
import { boxPath, RestBox } from './box-client.ts';
import { Connection, type RestRuntimeOptions } from './connection.ts';
import { refuseHostReach } from './host-reach.ts';
import { RestPool } from './pool-client.ts';
import { restImport } from './snapshot-client.ts';

export { RestBox, RestBoxBackend, RestExecution } from './box-client.ts';
export { Connection, type RestRuntimeOptions, restOptionsFrom } from './connection.ts';

/** Managed volumes of a REST runtime (same shape as the local `runtime.volumes`). */
export type RestVolumes = RuntimeVolumes;

/**
 * A runtime on a REST server (spec 002 `JsRuntime` methods; the REST `RuntimeBackend`). Normally reached
 * through `new JsRuntime({ url, apiKey })`; usable directly.
 */
export class RestRuntime implements RuntimeBackend {
  readonly #conn: Connection;
  /** Ids of the non-detached boxes this client created (what `shutdown` stops). */
  readonly #attached = new Set<string>();
  /** Warm pools this client asked the server for (what `shutdown` closes). */
  readonly #pools = new Set<RestPool>();
  /** Always empty: a REST runtime has no local data directory. */
  readonly homeDir = '';

  /** @param options server URL and credential (see {@link restOptionsFrom} for the env fallbacks). */
  constructor(options: RestRuntimeOptions) {
    this.#conn = new Connection(options);
  }

  /** Base URL of the server. */
  get url(): string {
    return this.#conn.url;
  }

  /**
   * Creates a box on the server. Host bind mounts and `rootfsPath` (spec 002 rejection 4) and `ports`
   * (local runtime only) are refused here, before any request leaves.
   * @throws BoxError naming the field; server failures as BoxError with the server's message.
   */
  async create(options: JsBoxOptions, name?: string): Promise<JsBox> {
    validateBoxOptions(options, { allowHostBinds: false });
    refuseHostReach(options as Record<string, unknown>);
    const boxName = validateBoxName(name);
    const info = await this.#conn.call<JsBoxInfo>('POST', '/v1/boxes', {
      ...options,
      ...(boxName !== undefined ? { name: boxName } : {}),
    });
    if (options.detach !== true) this.#attached.add(info.id);
    return new RestBox(this.#conn, info);
  }

  /**
   * Closes the warm pools this client asked for, then stops the non-detached boxes it created (BoxLite
   * `shutdown`), in parallel; boxes already gone are skipped; the server gives their commands `timeoutSecs` after SIGTERM (`…/stop?timeout=`).
   * @throws BoxError `invalid_option` (field `timeout`) for a negative or non-finite timeout.
   */
  async shutdown(timeoutSecs = 10): Promise<void> {
    if (typeof timeoutSecs !== 'number' || !Number.isFinite(timeoutSecs) || timeoutSecs < 0) {
      throw new BoxError('invalid shutdown option timeout: must be a number of seconds ≥ 0', {
        field: 'timeout',
      });
    }
    const pools = [...this.#pools];
    await Promise.all(pools.map((pool) => pool.close().catch(() => {})));
    const ids = [...this.#attached];
    this.#attached.clear();
    await Promise.all(
      ids.map((id) => this.#conn.call('POST', `${boxPath(id)}/stop?timeout=${timeoutSecs}`).catch(() => {})),
    );
  }

  /**
   * Clones a box on the server (see `JsRuntime.cloneBox`; `POST /v1/boxes/{box}/clone`). Port publications
   * are refused as by `create`.
   */
  async cloneBox(idOrName: string, options: CloneOptions = {}, name?: string): Promise<JsBox> {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('clone options must be an object', { field: 'options' });
    }
    const boxName = validateBoxName(name);
    const info = await this.#conn.call<JsBoxInfo>('POST', `${boxPath(idOrName)}/clone`, {
      ...options,
      ...(boxName !== undefined ? { name: boxName } : {}),
    });
    if (options.detach !== true) this.#attached.add(info.id);
    return new RestBox(this.#conn, info);
  }

  /**
   * Uploads a box archive (local file `path`) and starts it on the server (see `JsRuntime.importBox`);
   * `droppedOptions` comes from the server's answer. Options passed again are refused as by `create`
   * (`rootfsPath`, host bind mounts, `ports`) before any byte leaves; managed volumes name the caller's
   * own on the server.
   * @throws BoxError `invalid_option` naming the field; server errors as mapped.
   */
  async importBox(path: string, nameOrOptions?: string | ImportOptions): Promise<ImportedBox> {
    if (typeof path !== 'string' || path === '') {
      throw new BoxError('invalid import path: must be a file path', { field: 'path' });
    }
    const given = importOptionsOf(nameOrOptions);
    if (given.options !== undefined) {
      if (given.options === null || typeof given.options !== 'object' || Array.isArray(given.options)) {
        throw new BoxError('invalid import options: options must be an object of box options', {
          field: 'options',
        });
      }
      refuseHostReach(given.options as Record<string, unknown>);
    }
    const info = await restImport(this.#conn, path, validateBoxName(given.name), given.options);
    const { droppedOptions, ...rest } = info as JsBoxInfo & { droppedOptions?: string[] };
    return Object.assign(new RestBox(this.#conn, rest), {
      droppedOptions: Object.freeze(droppedOptions ?? []),
    });
  }

  /**
   * A warm pool kept by the server (`pool-client.ts`, `POST /v1/pools`): `create()` with the same options
   * (name and lifetimes aside) is handed one of its boxes; `shutdown()` closes it.
   * @throws BoxError `invalid_option` naming the field (checked here, before any request leaves).
   */
  pool(spec: PoolSpec): JsBoxPool {
    const pool = new RestPool(this.#conn, spec, (closed) => this.#pools.delete(closed));
    this.#pools.add(pool);
    return pool;
  }

  /** Every box on the server (spec 002 `listInfo`). */
  listInfo(): Promise<JsBoxInfo[]> {
    return this.#conn.call<JsBoxInfo[]>('GET', '/v1/boxes');
  }

  /** The box with this id or name, or null (spec 002 `getInfo`). */
  getInfo(idOrName: string): Promise<JsBoxInfo | null> {
    if (typeof idOrName !== 'string' || idOrName === '') {
      return Promise.reject(new BoxError('idOrName must be a non-empty string', { field: 'idOrName' }));
    }
    return this.#conn.call<JsBoxInfo | null>('GET', boxPath(idOrName), undefined, true);
  }

  /** A handle to the box with this id or name, or null (spec 002 `get`). */
  async get(idOrName: string): Promise<JsBox | null> {
    const info = await this.getInfo(idOrName);
    return info ? new RestBox(this.#conn, info) : null;
  }

  /** The server runtime's metrics (spec 002 `JsRuntimeMetrics`). */
  metrics(): Promise<JsRuntimeMetrics> {
    return this.#conn.call<JsRuntimeMetrics>('GET', '/v1/metrics');
  }

  /** The caller's tenant usage and limits (`GET /v1/usage`; limit names in camelCase). */
  usage(): Promise<JsTenantUsage> {
    return this.#conn.call<JsTenantUsage>('GET', '/v1/usage');
  }

  /** Removes a box (a running one needs `force`). @throws BoxError when missing or running without force. */
  async remove(idOrName: string, force = false): Promise<void> {
    if (typeof idOrName !== 'string' || idOrName === '') {
      throw new BoxError('idOrName must be a non-empty string', { field: 'idOrName' });
    }
    await this.#conn.call('DELETE', `${boxPath(idOrName)}?force=${force === true}`);
  }

  /**
   * Closes the idle multiplexed exec stream (spec 002 `close`; executions in flight reattach on their own
   * connection). Not needed before exit: an idle connection never keeps the process alive.
   */
  close(): void {
    this.#conn.mux.close();
  }

  /**
   * The server's image store: `pull` (BoxLite's result shape), `list` and `remove` over HTTP. `get` (host
   * layer directories) rejects with code `unsupported`: the layers are on the server's host.
   */
  get images(): RuntimeImages {
    const conn = this.#conn;
    return {
      pull: (reference) => conn.call('POST', '/v1/images/pull', { reference }),
      get: () =>
        Promise.reject(
          new BoxError('images.get: the layers of a REST runtime are on the server host', {
            code: 'unsupported',
          }),
        ),
      list: () => conn.call('GET', '/v1/images'),
      remove: async (reference) => {
        await conn.call('DELETE', `/v1/images?reference=${encodeURIComponent(reference)}`);
      },
    };
  }

  /** Managed volumes on the server. */
  get volumes(): RuntimeVolumes {
    const conn = this.#conn;
    return {
      create: (name) => conn.call('POST', '/v1/volumes', name === undefined ? {} : { name }),
      get: (idOrName) => conn.call('GET', `/v1/volumes/${encodeURIComponent(idOrName)}`, undefined, true),
      list: () => conn.call('GET', '/v1/volumes'),
      remove: async (idOrName) => {
        await conn.call('DELETE', `/v1/volumes/${encodeURIComponent(idOrName)}`);
      },
    };
  }
}
