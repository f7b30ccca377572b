/**
 * The REST flavour of the runtime (issue 10; spec 002 "remote through a REST runtime"): the same methods
 * as the local `JsRuntime`, returning `JsBox` and `JsExecution` objects (subclasses) that behave like the
 * local ones, over the server in `server.ts`.
 *
 * Spec rules for REST: host bind mounts (and `rootfsPath`) are refused before any request leaves
 * (rejection 4); port publication is refused (local runtime only); `info()` fetches the current server
 * record, so `startedAt` is present when the server recorded it and `publishedPorts` is what the server
 * knows (`[]` for boxes created through it, null otherwise); tunnels use HTTP `CONNECT`.
 */

import { rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer, type Server, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { BoxError } from '../errors.ts';
import { checkReadSize, listenAddress, listenOn, validateListen, writeTunnel } from '../network/tunnel.ts';
import type { RuntimeBackend, RuntimeImages, RuntimeVolumes } from '../runtime/backend.ts';
import { type ExecEnv, type ExecOptions, envEntries, JsBox, validateExecRequest } from '../runtime/box.ts';
import type { RuntimeContext } from '../runtime/context.ts';
import { JsExecution, signalName } from '../runtime/execution.ts';
import { BoxFiles } from '../runtime/files/files.ts';
import { type ChunkSink, streamSink } from '../runtime/files/pump.ts';
import { checkTimeoutAction, checkTimeoutMs } from '../runtime/lifetimes.ts';
import { validateBoxName, validateBoxOptions } from '../runtime/options.ts';
import type { JsBoxPool, PoolSpec } from '../runtime/pool.ts';
import { BoxSnapshots, type CloneOptions } from '../runtime/snapshots.ts';
import type { BoxRecord } from '../runtime/state.ts';
import type {
  JsBoxInfo,
  JsBoxMetrics,
  JsBoxOptions,
  JsBoxTunnel,
  JsNetworkHandle,
  JsRuntimeMetrics,
  JsTunnelConnection,
  TimeoutAction,
  TunnelForwarder,
  TunnelListen,
} from '../types.ts';
import { RestFiles } from './files-client.ts';
import { ExecMux } from './mux.ts';
import { RestPool } from './pool-client.ts';
import { RemoteProcess } from './process.ts';
import { restExport, restImport, restSnapshotOps } from './snapshot-client.ts';
import { boxErrorOf, codeOfStatus, toCamel, toSnake } from './wire.ts';

/** Where the REST runtime is and how to authenticate (fields of `JsOptions` for a remote runtime). */
export interface RestRuntimeOptions {
  /** Base URL of the server, e.g. `http://127.0.0.1:8100`. */
  url: string;
  /** API key of the server (`SANDBOX_API_KEY`). */
  apiKey?: string;
  /** Access token (JWT) of the auth service with sandbox permissions (`SANDBOX_ACCESS_TOKEN`). */
  accessToken?: string;
}

/**
 * Decides whether runtime options select the REST runtime: `url` given, or `SANDBOX_URL` set while no
 * `homeDir` was given (an explicit `homeDir` always means local). Credentials: `apiKey`, `accessToken`,
 * then `SANDBOX_API_KEY`, `SANDBOX_ACCESS_TOKEN`. Returns null for a local runtime.
 * @throws BoxError naming `url` when it is not an http(s) URL, or `homeDir` when both are given.
 */
export function restOptionsFrom(
  options: { homeDir?: unknown; url?: unknown; apiKey?: unknown; accessToken?: unknown },
  env: NodeJS.ProcessEnv = process.env,
): RestRuntimeOptions | null {
  let url = options.url;
  if (url === undefined || url === null) {
    if (options.homeDir !== undefined || !env.SANDBOX_URL) return null;
    url = env.SANDBOX_URL;
  } else if (options.homeDir !== undefined) {
    throw new BoxError('invalid runtime option homeDir: a REST runtime (url) has no local homeDir', {
      field: 'homeDir',
    });
  }
  if (typeof url !== 'string' || !/^https?:\/\/[^\s/]+/.test(url)) {
    throw new BoxError(`invalid runtime option url: must be an http(s) URL such as http://127.0.0.1:8100`, {
      field: 'url',
    });
  }
  for (const field of ['apiKey', 'accessToken'] as const) {
    const value = options[field];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new BoxError(`invalid runtime option ${field}: must be a non-empty string`, { field });
    }
  }
  const apiKey = (options.apiKey as string | undefined) ?? env.SANDBOX_API_KEY;
  const accessToken = (options.accessToken as string | undefined) ?? env.SANDBOX_ACCESS_TOKEN;
  return {
    url: url.replace(/\/+$/, ''),
    ...(apiKey ? { apiKey } : {}),
    ...(accessToken ? { accessToken } : {}),
  };
}

/** HTTP plumbing shared by the runtime, its boxes and executions. */
export class Connection {
  readonly url: string;
  readonly headers: Record<string, string>;
  /** The multiplexed exec stream every execution of this runtime starts on (opened on first use). */
  readonly mux: ExecMux;

  constructor(options: RestRuntimeOptions) {
    this.url = options.url;
    const credential = options.apiKey ?? options.accessToken;
    this.headers = credential ? { authorization: `Bearer ${credential}` } : {};
    this.mux = new ExecMux(this.url.replace(/^http/, 'ws'), this.headers);
  }

  /** A JSON request; resolves with the camelCase body (undefined for 204), null for 404 when `nullOn404`. */
  async call<T>(method: string, path: string, body?: unknown, nullOn404 = false): Promise<T> {
    let response: Response;
    try {
      response = await fetch(this.url + path, {
        method,
        headers: body === undefined ? this.headers : { ...this.headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(toSnake(body)) }),
      });
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause?.message ?? (error as Error).message;
      throw new BoxError(`cannot reach the REST runtime at ${this.url}: ${cause}`, {
        cause: error,
        code: 'unavailable',
      });
    }
    return this.parse<T>(response, method, path, nullOn404);
  }

  /**
   * A request whose response is raw (file contents, event streams): resolves with the `Response` once
   * its status is 2xx; the body is read as it arrives.
   * @throws BoxError mapped from the error body (`boxErrorOf`), or `unavailable` when unreachable.
   */
  async raw(method: string, path: string, signal?: AbortSignal): Promise<Response> {
    let response: Response;
    try {
      response = await fetch(this.url + path, {
        method,
        headers: this.headers,
        ...(signal ? { signal } : {}),
      });
    } catch (error) {
      const cause = (error as Error & { cause?: Error }).cause?.message ?? (error as Error).message;
      throw new BoxError(`cannot reach the REST runtime at ${this.url}: ${cause}`, {
        cause: error,
        code: 'unavailable',
      });
    }
    if (!response.ok) await this.parse(response, method, path, false);
    return response;
  }

  /**
   * GETs a raw body with `node:http` and hands it to `sink` chunk by chunk as it arrives, waiting for each
   * (fewer intermediate objects per chunk than a fetch body's web stream).
   * @throws BoxError mapped from the error body, `unavailable` when unreachable, or what `sink` throws.
   */
  download(path: string, sink: ChunkSink): Promise<void> {
    const target = new URL(this.url + path);
    return new Promise<void>((resolve, reject) => {
      const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
        method: 'GET',
        headers: this.headers,
      });
      request.on('error', (error) =>
        reject(
          new BoxError(`cannot reach the REST runtime at ${this.url}: ${error.message}`, {
            cause: error,
            code: 'unavailable',
          }),
        ),
      );
      request.on('response', async (response) => {
        const status = response.statusCode ?? 500;
        try {
          if (status < 200 || status >= 300) {
            let text = '';
            response.setEncoding('utf8');
            for await (const chunk of response) text += chunk;
            let parsed: unknown = null;
            try {
              parsed = text ? JSON.parse(text) : null;
            } catch {}
            throw boxErrorOf(status, parsed, `GET ${path}`);
          }
          for await (const chunk of response) await sink(chunk as Buffer);
          if (!response.complete) {
            throw new BoxError(`the REST runtime ended the body of GET ${path} early`, {
              code: 'unavailable',
            });
          }
          resolve();
        } catch (error) {
          response.destroy();
          reject(error);
        }
      });
      request.end();
    });
  }

  /**
   * Sends `source` as a raw request body (`application/octet-stream`, chunked) with `node:http`, whose
   * pipe waits for the socket to drain (bounded memory, unlike a fetch body), or lets the producer
   * `source(sink)` write it chunk by chunk (each write resolves once sent; with a known `length` in
   * bytes the body is sent with a `content-length`, not chunked, so no chunk is copied); resolves with the
   * camelCase JSON answer. An early error answer (the server refused the path) ends the upload.
   * @throws BoxError mapped from the error body, `unavailable` when unreachable.
   */
  upload<T>(
    method: string,
    path: string,
    source: Readable | ((sink: ChunkSink) => Promise<unknown>),
    length?: number,
  ): Promise<T> {
    const target = new URL(this.url + path);
    const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(target, {
      method,
      headers: {
        ...this.headers,
        'content-type': 'application/octet-stream',
        ...(length !== undefined ? { 'content-length': String(length) } : {}),
      },
    });
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const settle = (fn: () => void) => {
        if (settled) return;
        settled = true;
        fn();
      };
      request.on('response', async (response) => {
        let text = '';
        response.setEncoding('utf8');
        try {
          for await (const chunk of response) text += chunk;
        } catch {}
        let parsed: unknown = null;
        try {
          parsed = text ? JSON.parse(text) : null;
        } catch {}
        const status = response.statusCode ?? 500;
        if (status >= 200 && status < 300) settle(() => resolve(toCamel<T>(parsed)));
        else {
          if (typeof source !== 'function') source.unpipe(request);
          request.destroy();
          settle(() => reject(boxErrorOf(status, parsed, `${method} ${path}`)));
        }
      });
      request.on('error', (error) =>
        settle(() =>
          reject(
            new BoxError(`cannot reach the REST runtime at ${this.url}: ${error.message}`, {
              cause: error,
              code: 'unavailable',
            }),
          ),
        ),
      );
      const failed = (error: Error) => {
        request.destroy(error);
        settle(() =>
          reject(
            error instanceof BoxError
              ? error
              : new BoxError(`reading the upload failed: ${error.message}`, { cause: error }),
          ),
        );
      };
      if (typeof source === 'function') {
        // A refused upload destroys the request, which fails the pending write; the answer has settled.
        source(streamSink(request)).then(() => request.end(), failed);
      } else {
        source.on('error', failed);
        source.pipe(request);
      }
    });
  }

  /** Body of a finished response: camelCase JSON, undefined for 204, null for 404 with `nullOn404`. */
  async parse<T>(response: Response, method: string, path: string, nullOn404: boolean): Promise<T> {
    if (response.status === 204) return undefined as T;
    const text = await response.text();
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {}
    if (response.status === 404 && nullOn404) return null as T;
    if (!response.ok) throw boxErrorOf(response.status, parsed, `${method} ${path}`);
    return toCamel<T>(parsed);
  }
}

const NO_CONTEXT: RuntimeContext = {
  engine: () => Promise.reject(new BoxError('a REST box has no local engine', { code: 'unsupported' })),
  refresh: () => Promise.reject(new BoxError('a REST box has no local state', { code: 'unsupported' })),
  countCommand: () => {},
  countExecEnd: () => {},
  stopBox: () => Promise.reject(new BoxError('a REST box has no local state', { code: 'unsupported' })),
  startBox: () => Promise.reject(new BoxError('a REST box has no local state', { code: 'unsupported' })),
};

function boxPath(id: string): string {
  return `/v1/boxes/${encodeURIComponent(id)}`;
}

/** A command started over REST (spec 002 `JsExecution`); `id()` is the server's execution id. */
export class RestExecution extends JsExecution {
  readonly #serverId: string;
  readonly #process: RemoteProcess;

  /** @internal Created by `RestBox.exec`. */
  constructor(process: RemoteProcess, serverId: string) {
    super(process, () => {});
    this.#serverId = serverId;
    this.#process = process;
  }

  /** Execution id (ULID, assigned by the server). */
  override id(): Promise<string> {
    return Promise.resolve(this.#serverId);
  }

  /** Sends a signal (`SIGTERM`, or a number such as 15) to the command. @throws BoxError for an unknown signal. */
  override async signal(signal: NodeJS.Signals | number): Promise<void> {
    return this.#process.kill(signalName(signal));
  }

  /** @internal The transport (tests drop its WebSocket to exercise reconnection). */
  get transport(): RemoteProcess {
    return this.#process;
  }
}

/** A box of a REST runtime (spec 002 `JsBox`): every call goes to the server. */
export class RestBox extends JsBox {
  readonly #conn: Connection;
  #files: BoxFiles | null = null;
  #snapshot: BoxSnapshots | null = null;

  /** @internal Use `JsRuntime.create` or `get` of a REST runtime. */
  constructor(conn: Connection, info: JsBoxInfo) {
    super(NO_CONTEXT, { id: info.id, name: info.name ?? null } as BoxRecord, null);
    this.#conn = conn;
    // `box.network` (spec 002 "Network tunnels"): tunnels prepared on the server, consumed with CONNECT.
    // Defined on the instance so that it replaces the local handle whatever form the base class gives it.
    Object.defineProperty(this, 'network', {
      value: new RestNetworkHandle(conn, info.id),
      enumerable: true,
      writable: false,
    });
  }

  /** The server's current record of the box (spec 002 REST rule). @throws BoxError when it was removed. */
  override async info(): Promise<JsBoxInfo> {
    const info = await this.#conn.call<JsBoxInfo | null>('GET', boxPath(this.id), undefined, true);
    if (!info) throw new BoxError(`box ${this.id} no longer exists`, { code: 'not_found' });
    return info;
  }

  /** @internal `exec` with per-command `cwd` and `user` (used by the wrapper boxes). */
  override async execWith(
    cmd: string,
    args: string[] = [],
    env: ExecEnv | undefined,
    options: ExecOptions,
  ): Promise<JsExecution> {
    validateExecRequest(cmd, args, options);
    const entries = envEntries(env).map((entry) => {
      const eq = entry.indexOf('=');
      return { key: entry.slice(0, eq), value: entry.slice(eq + 1) };
    });
    const path = `${boxPath(this.id)}/executions`;
    const conn = this.#conn;
    const process = new RemoteProcess(
      {
        executionsUrl: `${conn.url.replace(/^http/, 'ws')}${path}`,
        headers: conn.headers,
        mux: { mux: conn.mux, box: this.id },
        signal: async (id, signal) => {
          await conn.call('POST', `${path}/${id}/signal`, { signal });
        },
        resize: async (id, cols, rows) => {
          await conn.call('POST', `${path}/${id}/resize`, { cols, rows });
        },
      },
      {
        cmd,
        args,
        env: entries,
        tty: options.tty === true,
        ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
        ...(options.user !== undefined ? { user: options.user } : {}),
      },
    );
    return new RestExecution(process, await process.ready);
  }

  /** Starts a stopped box again on the server (see `JsBox.start`). */
  override async start(): Promise<void> {
    await this.#conn.call('POST', `${boxPath(this.id)}/start`);
  }

  /** @internal `stop()` with `graceMs` for the commands after SIGTERM (the stop route's `timeout`). */
  override async stopWithin(graceMs: number): Promise<void> {
    await this.#conn.call('POST', `${boxPath(this.id)}/stop?timeout=${graceMs / 1000}`);
  }

  /** Stops the box on the server (removed there when created with `autoRemove`). */
  override async stop(): Promise<void> {
    await this.#conn.call('POST', `${boxPath(this.id)}/stop`);
  }

  /** Pauses the box on the server (see `JsBox.pause`; `lifecycle-routes.ts`). */
  override async pause(): Promise<void> {
    await this.#conn.call('POST', `${boxPath(this.id)}/pause`);
  }

  /** Resumes the paused box on the server (see `JsBox.resume`). */
  override async resume(): Promise<void> {
    await this.#conn.call('POST', `${boxPath(this.id)}/resume`);
  }

  /** Sets the box's timeout on the server (see `JsBox.setTimeout`); checked here before the request. */
  override async setTimeout(timeoutMs: number, onTimeout?: TimeoutAction): Promise<void> {
    const body: Record<string, unknown> = { timeoutMs: checkTimeoutMs(timeoutMs, 'timeoutMs') };
    if (onTimeout !== undefined) body.onTimeout = checkTimeoutAction(onTimeout, 'onTimeout');
    await this.#conn.call('POST', `${boxPath(this.id)}/timeout`, body);
  }

  /** Box metrics from the server (spec 002 `JsBoxMetrics`). */
  override metrics(): Promise<JsBoxMetrics> {
    return this.#conn.call<JsBoxMetrics>('GET', `${boxPath(this.id)}/metrics`);
  }

  /** The box's snapshots on the server (see `JsBox.snapshot`; `snapshot-routes.ts`). */
  override get snapshot(): BoxSnapshots {
    this.#snapshot ??= new BoxSnapshots(restSnapshotOps(this.#conn, boxPath(this.id)));
    return this.#snapshot;
  }

  /** Writes the box's archive, streamed from the server, to the local file `path` (see `JsBox.export`). */
  override async export(path: string): Promise<void> {
    await restExport(this.#conn, boxPath(this.id), path);
  }

  /** A box's files on the server (`files-routes.ts`; streamed both ways). */
  override get files(): BoxFiles {
    this.#files ??= new BoxFiles(new RestFiles(this.#conn, boxPath(this.id)));
    return this.#files;
  }
}

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
    if (Array.isArray(options.ports) && options.ports.length > 0) {
      throw new BoxError(
        'invalid box option ports: port publication is refused by a REST runtime (local runtime only)',
        { field: 'ports' },
      );
    }
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

  /** Uploads a box archive (local file `path`) and starts it on the server (see `JsRuntime.importBox`). */
  async importBox(path: string, name?: string): Promise<JsBox> {
    if (typeof path !== 'string' || path === '') {
      throw new BoxError('invalid import path: must be a file path', { field: 'path' });
    }
    const info = await restImport(this.#conn, path, validateBoxName(name));
    return new RestBox(this.#conn, info);
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

/* ---------------------------------------------------------------- tunnels over HTTP CONNECT */

/** Opens the CONNECT stream of a prepared tunnel. */
function connectTunnel(conn: Connection, connectPath: string): Promise<Socket> {
  const target = new URL(conn.url);
  const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)({
    host: target.hostname.replace(/^\[|\]$/g, ''),
    port: target.port || (target.protocol === 'https:' ? 443 : 80),
    method: 'CONNECT',
    path: connectPath,
    headers: conn.headers,
  });
  return new Promise((resolve, reject) => {
    request.on('connect', (response, socket: Socket, head: Buffer) => {
      if (response.statusCode === 200) {
        if (head.length > 0) socket.unshift(head);
        resolve(socket);
        return;
      }
      let body = head.toString('utf8');
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        body += chunk;
      });
      socket.on('close', () => {
        let message = `HTTP ${response.statusCode}`;
        try {
          message = JSON.parse(body).error.message;
        } catch {}
        reject(new BoxError(`tunnel: ${message}`, { code: codeOfStatus(response.statusCode ?? 500) }));
      });
    });
    request.on('error', (error) =>
      reject(
        new BoxError(`tunnel: cannot reach the REST runtime at ${conn.url}: ${error.message}`, {
          code: 'unavailable',
        }),
      ),
    );
    request.end();
  });
}

/** `JsTunnelConnection` over a CONNECT socket. */
class SocketConnection implements JsTunnelConnection {
  readonly #socket: Socket;
  readonly #chunks: Buffer[] = [];
  #ended = false;
  #waiter: (() => void) | null = null;

  constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      socket.pause();
      this.#wake();
    });
    const end = () => {
      this.#ended = true;
      this.#wake();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  async read(maxBytes = 65536): Promise<Buffer> {
    checkReadSize(maxBytes);
    while (this.#chunks.length === 0) {
      if (this.#ended) return Buffer.alloc(0);
      this.#socket.resume();
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
    const chunk = this.#chunks[0]!;
    if (chunk.length <= maxBytes) {
      this.#chunks.shift();
      return chunk;
    }
    this.#chunks[0] = chunk.subarray(maxBytes);
    return chunk.subarray(0, maxBytes);
  }

  write(data: Buffer | Uint8Array | string): Promise<void> {
    return writeTunnel(this.#socket, data);
  }

  async close(): Promise<void> {
    this.#socket.destroy();
    this.#ended = true;
    this.#wake();
  }
}

interface PreparedTunnel {
  id: string;
  connectPath: string;
}

function prepare(conn: Connection, boxId: string, port: number): Promise<PreparedTunnel> {
  return conn.call<PreparedTunnel>('POST', `${boxPath(boxId)}/tunnels`, { port });
}

/** A one-shot tunnel of a REST box (spec 002 `JsBoxTunnel`); `uri()` is its CONNECT URL on the server. */
class RestBoxTunnel implements JsBoxTunnel {
  readonly #conn: Connection;
  readonly #boxId: string;
  readonly #port: number;
  readonly #prepared: PreparedTunnel;
  #used = false;

  constructor(conn: Connection, boxId: string, port: number, prepared: PreparedTunnel) {
    this.#conn = conn;
    this.#boxId = boxId;
    this.#port = port;
    this.#prepared = prepared;
  }

  #consume(): void {
    if (this.#used)
      throw new BoxError('this tunnel was already used; tunnels are one-shot (call tunnel(port) again)', {
        code: 'conflict',
      });
    this.#used = true;
  }

  uri(): string {
    return `${this.#conn.url}${this.#prepared.connectPath}`;
  }

  async connect(): Promise<JsTunnelConnection> {
    this.#consume();
    return new SocketConnection(await connectTunnel(this.#conn, this.#prepared.connectPath));
  }

  async forward(listen: TunnelListen): Promise<TunnelForwarder> {
    const spec = validateListen(listen);
    this.#consume();
    let first: PreparedTunnel | null = this.#prepared;
    const server = createServer((client) => {
      client.pause();
      client.on('error', () => {});
      const prepared = first ?? null;
      first = null;
      (prepared ? Promise.resolve(prepared) : prepare(this.#conn, this.#boxId, this.#port))
        .then((p) => connectTunnel(this.#conn, p.connectPath))
        .then(
          (upstream) => {
            upstream.on('error', () => client.destroy());
            client.on('close', () => upstream.destroy());
            client.pipe(upstream).pipe(client);
            client.resume();
          },
          () => client.destroy(),
        );
    });
    await listenOn(server, spec);
    return new RestForwarder(server, spec);
  }
}

class RestForwarder implements TunnelForwarder {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #address: string;
  readonly #unixPath: string | null;
  readonly #closed: Promise<void>;

  constructor(server: Server, spec: TunnelListen) {
    this.#server = server;
    server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    this.#unixPath = spec.type === 'unix' ? spec.path : null;
    this.#address = listenAddress(server, spec);
    this.#closed = new Promise((resolve) => server.once('close', () => resolve()));
  }

  localAddr(): string {
    return this.#address;
  }

  wait(): Promise<void> {
    return this.#closed;
  }

  async close(): Promise<void> {
    if (this.#server.listening) {
      this.#server.close();
      for (const socket of this.#sockets) socket.destroy();
    }
    await this.#closed;
    if (this.#unixPath) rmSync(this.#unixPath, { force: true });
  }
}

/** `box.network` of a REST box: tunnels prepared on the server, consumed with HTTP CONNECT. */
class RestNetworkHandle implements JsNetworkHandle {
  readonly #conn: Connection;
  readonly #boxId: string;

  constructor(conn: Connection, boxId: string) {
    this.#conn = conn;
    this.#boxId = boxId;
  }

  /** Prepares a one-shot tunnel to TCP `port` (1–65535). @throws BoxError naming `port`. */
  async tunnel(port: number): Promise<JsBoxTunnel> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new BoxError('invalid tunnel option port: must be an integer from 1 to 65535', { field: 'port' });
    }
    return new RestBoxTunnel(this.#conn, this.#boxId, port, await prepare(this.#conn, this.#boxId, port));
  }
}
