/**
 * The REST box backend (`BoxBackend`, `runtime/box-backend.ts`): a box on a `sandbox serve` server, every
 * call a request to it (`box-routes.ts`, `lifecycle-routes.ts`, `files-routes.ts`, `snapshot-routes.ts`,
 * `tunnel-routes.ts`; commands over the exec streams of `exec-sockets.ts`). `JsBox` wraps it as it wraps
 * the local backend, so a REST box is a `JsBox` with the same arguments checked the same way.
 *
 * Spec rule for REST: `info()` fetches the current server record, so `startedAt` is present when the
 * server recorded it and `publishedPorts` is what the server knows.
 */

import { BoxError } from '../errors.ts';
import { JsBox } from '../runtime/box.ts';
import type { BoxBackend, ExecOptions } from '../runtime/box-backend.ts';
import { JsExecution } from '../runtime/execution.ts';
import type { FilesBackend } from '../runtime/files/types.ts';
import type { SnapshotOps } from '../runtime/snapshots.ts';
import type { JsBoxInfo, JsBoxMetrics, JsNetworkHandle, TimeoutAction } from '../types.ts';
import { RestCodeInterpreter } from './code-client.ts';
import type { Connection } from './connection.ts';
import { RestFiles } from './files-client.ts';
import { RemoteProcess } from './process.ts';
import { restExport, restSnapshotOps } from './snapshot-client.ts';
import { RestNetworkHandle } from './tunnel-client.ts';

/** The server path of a box, `/v1/boxes/<id>`. */
export function boxPath(id: string): string {
  return `/v1/boxes/${encodeURIComponent(id)}`;
}

/** A box on a REST server (`BoxBackend`). */
export class RestBoxBackend implements BoxBackend {
  readonly id: string;
  readonly name: string | null;
  readonly #conn: Connection;
  readonly #path: string;

  /** @param info the server's record of the box (from create, clone, import or get). */
  constructor(conn: Connection, info: JsBoxInfo) {
    this.#conn = conn;
    this.id = info.id;
    this.name = info.name ?? null;
    this.#path = boxPath(info.id);
  }

  /** Tunnels prepared on the server and opened with HTTP `CONNECT` (`tunnel-client.ts`). */
  network(): JsNetworkHandle {
    return new RestNetworkHandle(this.#conn, this.id);
  }

  /** Code contexts and executions over the server's code routes (`code-client.ts`). */
  interpreter(): RestCodeInterpreter {
    return new RestCodeInterpreter(this.#conn, this.#path);
  }

  /** Files over the files routes, contents streamed both ways (`files-client.ts`). */
  files(): FilesBackend {
    return new RestFiles(this.#conn, this.#path);
  }

  /** The server's current record. @throws BoxError `not_found` when it was removed. */
  async info(): Promise<JsBoxInfo> {
    const info = await this.#conn.call<JsBoxInfo | null>('GET', this.#path, undefined, true);
    if (!info) throw new BoxError(`box ${this.id} no longer exists`, { code: 'not_found' });
    return info;
  }

  /**
   * Starts the command on the runtime's multiplexed exec stream (`process.ts`); resolves once the server
   * reports it started. @throws BoxError as the server refuses it (`conflict`, `exec`, …).
   */
  async exec(cmd: string, args: string[], env: string[], options: ExecOptions): Promise<JsExecution> {
    const entries = env.map((entry) => {
      const eq = entry.indexOf('=');
      return { key: entry.slice(0, eq), value: entry.slice(eq + 1) };
    });
    const path = `${this.#path}/executions`;
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

  /** `POST …/start`. */
  async start(): Promise<void> {
    await this.#conn.call('POST', `${this.#path}/start`);
  }

  /** `POST …/stop`, with `?timeout=` (seconds) when `graceMs` is given. */
  async stop(graceMs?: number): Promise<void> {
    const query = graceMs === undefined ? '' : `?timeout=${graceMs / 1000}`;
    await this.#conn.call('POST', `${this.#path}/stop${query}`);
  }

  /** `POST …/pause`. */
  async pause(): Promise<void> {
    await this.#conn.call('POST', `${this.#path}/pause`);
  }

  /** `POST …/resume`. */
  async resume(): Promise<void> {
    await this.#conn.call('POST', `${this.#path}/resume`);
  }

  /** `POST …/timeout` with `{ timeoutMs, onTimeout? }`. */
  async setTimeout(ms: number, action?: TimeoutAction): Promise<void> {
    await this.#conn.call('POST', `${this.#path}/timeout`, {
      timeoutMs: ms,
      ...(action !== undefined ? { onTimeout: action } : {}),
    });
  }

  /** `GET …/metrics`. */
  metrics(): Promise<JsBoxMetrics> {
    return this.#conn.call<JsBoxMetrics>('GET', `${this.#path}/metrics`);
  }

  /** The snapshot routes of the box (`snapshot-client.ts`). */
  snapshots(): SnapshotOps {
    return restSnapshotOps(this.#conn, this.#path);
  }

  /** Streams the box's archive from the server into the local file `path`. */
  async export(path: string): Promise<void> {
    await restExport(this.#conn, this.#path, path);
  }
}

/**
 * A `JsBox` of a REST runtime: the facade over a `RestBoxBackend` (what `JsRuntime.create`, `get`,
 * `cloneBox` and `importBox` of a REST runtime return); it adds nothing to `JsBox`.
 */
export class RestBox extends JsBox {
  /** @internal Use `JsRuntime.create` or `get` of a REST runtime. */
  constructor(conn: Connection, info: JsBoxInfo) {
    super(new RestBoxBackend(conn, info));
  }
}

/**
 * A `JsExecution` of a REST box: the execution over a `RemoteProcess` (its streams carried by the exec
 * WebSocket), with the server's execution id.
 */
export class RestExecution extends JsExecution {
  readonly #process: RemoteProcess;

  /** @internal Created by `RestBoxBackend.exec`; `serverId` is the server's execution id. */
  constructor(process: RemoteProcess, serverId: string) {
    super(process, () => {}, serverId);
    this.#process = process;
  }

  /** @internal The transport (tests drop its WebSocket to exercise reconnection). */
  get transport(): RemoteProcess {
    return this.#process;
  }
}
