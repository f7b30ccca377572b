/**
 * The executions a REST runtime server started (`ExecSession`s by execution id): started from a
 * validated `ExecRequest` body, looked up by box and id, kept {@link FINISHED_TTL_MS} after they end so
 * that clients can read their status and reattach, terminated with their box or with the server.
 */

import { notFound } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import type { RestMetrics } from './metrics.ts';
import { ExecSession } from './sessions.ts';
import { bodyValidator } from './validation.ts';
import { HttpError, isObject } from './wire.ts';

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

/**
 * Validates an exec request body against the `ExecRequest` schema.
 * @throws HttpError 400 `invalid_body` (not an object) or naming the field and rule.
 */
export function execRequestOf(body: unknown): ExecRequest {
  if (!isObject(body)) {
    throw new HttpError(
      'invalid_body',
      'the body must be a JSON object { cmd, args?, env?, tty?, cwd?, user? }',
    );
  }
  return checkExecRequest(body);
}

/** The executions started over REST, by execution id. */
export class ExecRegistry {
  /** Executions started over REST, by execution id. */
  readonly sessions = new Map<string, ExecSession>();
  readonly #backlogBytes: number;
  readonly #later: (ms: number, fn: () => void) => void;

  /**
   * @param backlogBytes output kept per execution for reconnecting clients, bytes.
   * @param later runs a function after a delay in ms unless the server closes first.
   */
  constructor(backlogBytes: number, later: (ms: number, fn: () => void) => void) {
    this.#backlogBytes = backlogBytes;
    this.#later = later;
  }

  /** The execution `executionId` of box `boxId`. @throws BoxError `not_found`. */
  get(boxId: string, executionId: string): ExecSession {
    const session = this.sessions.get(executionId);
    if (!session || session.boxId !== boxId) {
      throw notFound(`no execution '${executionId}' in box ${boxId}`);
    }
    return session;
  }

  /**
   * Starts `request` in `box` and registers its session; `release` is called once the command has
   * ended or failed to start (it frees the tenant's running-executions slot).
   * @throws what `JsBox.execWith` throws (after calling `release`).
   */
  async start(
    box: JsBox,
    request: ExecRequest,
    release: () => void,
    metrics: RestMetrics | undefined,
  ): Promise<ExecSession> {
    const { cmd, args, env, tty, cwd, user } = request;
    let execution: Awaited<ReturnType<JsBox['execWith']>>;
    try {
      execution = await box.execWith(cmd, args ?? [], env, {
        tty: tty === true,
        ...(cwd !== undefined ? { cwd } : {}),
        ...(user !== undefined ? { user } : {}),
      });
    } catch (error) {
      release();
      throw error;
    }
    const session = new ExecSession(box.id, execution, this.#backlogBytes);
    session.done.then(release, release);
    this.sessions.set(session.id, session);
    metrics?.executionStarted(session);
    session.done.then(() => this.#later(FINISHED_TTL_MS, () => this.sessions.delete(session.id)));
    return session;
  }

  /** Terminates and drops every execution of box `boxId` (the box is gone). */
  forgetBox(boxId: string): void {
    for (const session of this.sessions.values()) {
      if (session.boxId === boxId) {
        session.terminate().catch(() => {});
        this.sessions.delete(session.id);
      }
    }
  }

  /** Terminates and drops every execution (the server is closing). */
  async close(): Promise<void> {
    await Promise.all([...this.sessions.values()].map((s) => s.terminate()));
    this.sessions.clear();
  }
}
