/**
 * What the REST runtime server's route plugins share: the exposed runtime, the handles of the boxes
 * created through the server, the executions started over REST (`ExecSession`s, kept a while after they
 * end so that clients can read their status and reattach), and timers that die with the server.
 */
import { notFound } from '../errors.ts';
import type { JsRuntime } from '../js-runtime.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsBoxInfo } from '../types.ts';
import type { RestMetrics } from './metrics.ts';
import { ExecSession } from './sessions.ts';
import { bodyValidator } from './validation.ts';
import { HttpError, isObject, toSnake } from './wire.ts';

/** How long a finished execution stays queryable (status, reattach for its backlog), ms. */
export const FINISHED_TTL_MS = 5 * 60_000;

/** A command to start, as the `ExecRequest` schema admits it. */
export interface ExecRequest {
  cmd: string;
  args?: string[];
  env?: { key: string; value: string }[];
  tty?: boolean;
  cwd?: string;
  user?: string;
}

const checkExecRequest = bodyValidator<ExecRequest>('ExecRequest');

/** The state of one REST runtime server, shared by its route plugins. */
export class ServerContext {
  /** The local runtime the server exposes. */
  readonly runtime: JsRuntime;
  /** Output kept per execution for reconnecting clients, bytes. */
  readonly backlogBytes: number;
  /** Executions started over REST, by execution id. */
  readonly sessions = new Map<string, ExecSession>();
  /** The server's metrics (absent when turned off). */
  metrics: RestMetrics | undefined;
  /** Handles of boxes created through this server (they know their port publications: none). */
  readonly #handles = new Map<string, JsBox>();
  readonly #timers = new Set<NodeJS.Timeout>();

  /** @param backlogBytes output kept per execution, bytes. */
  constructor(runtime: JsRuntime, backlogBytes: number) {
    this.runtime = runtime;
    this.backlogBytes = backlogBytes;
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

  /** The box with this id or name. @throws BoxError `not_found`. */
  async box(idOrName: string): Promise<JsBox> {
    // Fast path: a box this server created, addressed by id (its handle reads fresh state on every call).
    const known = this.#handles.get(idOrName);
    if (known) return known;
    const info = await this.runtime.getInfo(idOrName);
    if (!info) throw notFound(`no box with id or name '${idOrName}'`);
    const handle = this.#handles.get(info.id) ?? (await this.runtime.get(info.id));
    if (!handle) throw notFound(`no box with id or name '${idOrName}'`);
    return handle;
  }

  /** `JsBoxInfo` as the server answers it (snake_case): boxes created here have no publications (`[]`), others null. */
  info(info: JsBoxInfo): unknown {
    if (this.#handles.has(info.id) && info.network) info.network.publishedPorts = [];
    return toSnake(info);
  }

  /** Remembers the handle of a box created through the server. */
  created(box: JsBox): void {
    this.#handles.set(box.id, box);
  }

  /** Forgets a removed box: its handle, and its executions (terminated). */
  forget(boxId: string): void {
    this.#handles.delete(boxId);
    for (const session of this.sessions.values()) {
      if (session.boxId === boxId) {
        session.terminate().catch(() => {});
        this.sessions.delete(session.id);
      }
    }
  }

  /** The execution `executionId` of box `boxId`. @throws BoxError `not_found`. */
  session(boxId: string, executionId: string): ExecSession {
    const session = this.sessions.get(executionId);
    if (!session || session.boxId !== boxId) {
      throw notFound(`no execution '${executionId}' in box ${boxId}`);
    }
    return session;
  }

  /** The execution named by route params `box` (id or name) and `execution`. @throws BoxError `not_found`. */
  async execution(params: { box: string; execution: string }): Promise<ExecSession> {
    const box = await this.box(params.box);
    return this.session(box.id, params.execution);
  }

  /**
   * Validates an exec request against the `ExecRequest` schema and starts its session in box `idOrName`.
   * @throws HttpError 400 naming the field; BoxError as `JsBox.execWith`.
   */
  async startExecution(idOrName: string, body: unknown): Promise<ExecSession> {
    if (!isObject(body)) {
      throw new HttpError(
        400,
        'invalid_request_error',
        'invalid_body',
        'the body must be a JSON object { cmd, args?, env?, tty?, cwd?, user? }',
      );
    }
    const { cmd, args, env, tty, cwd, user } = checkExecRequest(body);
    const box = await this.box(idOrName);
    const execution = await box.execWith(cmd, args ?? [], env, {
      tty: tty === true,
      ...(cwd !== undefined ? { cwd } : {}),
      ...(user !== undefined ? { user } : {}),
    });
    const session = new ExecSession(box.id, execution, this.backlogBytes);
    this.sessions.set(session.id, session);
    this.metrics?.executionStarted(session);
    session.done.then(() => this.later(FINISHED_TTL_MS, () => this.sessions.delete(session.id)));
    return session;
  }

  /** Ends every execution and timer (the server is closing). */
  async close(): Promise<void> {
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    await Promise.all([...this.sessions.values()].map((s) => s.terminate()));
    this.sessions.clear();
  }
}
