/**
 * What the computer and browser tools share: a box that this process makes itself (its ports are forwarded
 * or relayed from here, so it needs the runtime provider of `sandbox mcp`), started within the session's
 * limits and adopted by the session, and the look-up of such a box by id or name.
 */

import { BoxError } from '../errors.ts';
import type { JsRuntime } from '../js-runtime.ts';
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
}

/** A box class of this kind: started by `ready`, named by `getId`, stopped on failure. */
interface GuiBox {
  getId(): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Makes a box of `kind` for `session` with `make` (given the runtime and the resolved vCPUs and MiB), waits
 * for `ready`, and adopts it in the session; a box whose start fails is stopped.
 * @param why what the kind needs this process for (the `unsupported` message without a runtime provider).
 * @returns the box and its id.
 * @throws BoxError `unsupported` (field `kind`) without a runtime provider, `quota_exceeded` over the
 * session limits; what `ready` throws.
 */
export async function startGuiBox<B extends GuiBox>(
  session: McpSession,
  kind: 'computer' | 'browser',
  request: GuiBoxRequest,
  defaults: { cpus: number; memoryMib: number },
  why: string,
  make: (runtime: JsRuntime, cpus: number, memoryMib: number) => B | Promise<B>,
  ready: (box: B) => Promise<void>,
): Promise<{ id: string; box: B }> {
  const runtime = session.provider.runtime;
  if (!runtime) {
    throw new BoxError(`${kind} boxes need the stdio server (sandbox mcp), which ${why}`, {
      code: 'unsupported',
      field: 'kind',
    });
  }
  const cpus = request.cpus ?? defaults.cpus;
  const memoryMib = request.memoryMib ?? defaults.memoryMib;
  const release = session.reserve(cpus, memoryMib);
  try {
    const box = await make(runtime, cpus, memoryMib);
    try {
      await ready(box);
    } catch (error) {
      await box.stop().catch(() => {});
      throw error;
    }
    const id = await box.getId();
    session.adopt(await session.provider.get(id), { id, kind, cpus, memoryMib, persist: request.persist });
    return { id, box };
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
