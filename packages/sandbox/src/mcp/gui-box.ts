/**
 * What the computer and browser tools share: a box that this process makes itself (its ports are forwarded
 * or relayed from here, so it needs a provider with a local runtime: `sandbox mcp`, or `/mcp` on a
 * `sandbox serve` node), started within the session's limits (and on a node, as the caller's tenant box),
 * given its lifetime, adopted by the session; and the look-up of such a box by id or name.
 */

import type { SimpleBoxOptions } from '../boxes/simple.ts';
import { BoxError } from '../errors.ts';
import type { NetworkSpec } from '../types.ts';
import type { McpSession } from './session.ts';

/** What `create_box` passes for a computer or browser box. */
export interface GuiBoxRequest {
  name: string;
  /** vCPUs; absent: the kind's default. */
  cpus?: number | undefined;
  /** Memory, MiB; absent: the kind's default. */
  memoryMib?: number | undefined;
  network: NetworkSpec;
  persist: boolean;
  /** The box is removed this long after it started, ms (its `timeoutMs` with `onTimeout` `remove`). */
  lifetimeMs: number;
}

/** A box class of this kind: started by `ready`, named by `getId`, stopped on failure. */
interface GuiBox {
  getId(): Promise<string>;
  stop(): Promise<void>;
}

/** How one kind of GUI box is made and started. */
export interface GuiBoxKind<B extends GuiBox> {
  kind: 'computer' | 'browser';
  /** vCPUs and MiB of a box whose request names none. */
  defaults: { cpus: number; memoryMib: number };
  /** What the kind needs this process for (the `unsupported` message without a local runtime). */
  why: string;
  /**
   * Makes the box from the options every kind shares: the runtime, the runtime name of the box (absent for
   * a tenant box), the resolved vCPUs and MiB, the request's network, and `autoRemove`/`detach` from `persist`.
   */
  make(options: SimpleBoxOptions): B | Promise<B>;
  /** Starts the box and waits until it is ready. */
  ready(box: B): Promise<void>;
}

/**
 * Makes a box of `spec.kind` for `session` with `spec.make`, waits for `spec.ready`, sets its lifetime and
 * adopts it in the session; a box whose start fails is stopped.
 * @returns the box and its id.
 * @throws BoxError `unsupported` (field `kind`) without a local runtime, `quota_exceeded` over the
 * session (or tenant) limits; what `ready` throws.
 */
export async function startGuiBox<B extends GuiBox>(
  session: McpSession,
  request: GuiBoxRequest,
  spec: GuiBoxKind<B>,
): Promise<{ id: string; box: B }> {
  const { kind, defaults, why, make, ready } = spec;
  if (!session.provider.runtime) {
    throw new BoxError(`${kind} boxes need a server with a local runtime, which ${why}`, {
      code: 'unsupported',
      field: 'kind',
    });
  }
  const cpus = request.cpus ?? defaults.cpus;
  const memoryMib = request.memoryMib ?? defaults.memoryMib;
  const release = session.reserve(cpus, memoryMib);
  try {
    let made: B | undefined;
    const handle = await session.provider.createWith(
      { cpus, memoryMib },
      request.name,
      async (runtime, name) => {
        const box = await make({
          runtime,
          ...(name === undefined ? {} : { name }),
          cpus,
          memoryMib,
          network: request.network,
          autoRemove: !request.persist,
          detach: request.persist,
        });
        made = box;
        try {
          await ready(box);
          const started = await runtime.get(await box.getId());
          if (!started) throw new BoxError(`the ${kind} box is gone after its start`, { code: 'not_found' });
          await started.setTimeout(request.lifetimeMs, 'remove');
          return started;
        } catch (error) {
          await box.stop().catch(() => {});
          throw error;
        }
      },
    );
    session.adopt(handle, { id: handle.id, kind, cpus, memoryMib, persist: request.persist });
    if (request.persist) await session.provider.tags?.set(handle.id, session.id);
    return { id: handle.id, box: made as B };
  } finally {
    release();
  }
}

/**
 * The box `idOrName` of this session among `boxes` (the session's boxes of `kind`, by id).
 * @throws BoxError `invalid_option` (field `box`) when it is not one of them; `not_found` as `session.box`.
 */
export async function guiBoxOf<T>(
  session: McpSession,
  boxes: ReadonlyMap<string, T>,
  kind: 'computer' | 'browser',
  idOrName: string,
): Promise<T> {
  const box = await session.box(idOrName);
  const found = boxes.get(box.id);
  if (!found) {
    throw new BoxError(
      `box ${idOrName} is not a ${kind} box of this session (create_box with kind ${kind})`,
      {
        field: 'box',
      },
    );
  }
  return found;
}
