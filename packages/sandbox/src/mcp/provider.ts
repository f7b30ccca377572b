/**
 * Where the MCP tools find boxes: a `JsRuntime` (`sandbox mcp`, local or `--url`
 * remote), or the `sandbox serve` context of one authenticated caller (`/mcp`), whose boxes are its
 * tenant's and under its tenant's quotas.
 */
import { BoxError } from '../errors.ts';
import type { PullProgress } from '../images/image-types.ts';
import type { JsRuntime } from '../js-runtime.ts';
import type { Principal } from '../rest/auth.ts';
import type { ServerContext } from '../rest/context.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsBoxInfo, JsBoxOptions } from '../types.ts';
import { BoxTags } from './tags.ts';

/** A signed URL of a box port (`preview_url`). */
export interface PreviewLink {
  url: string;
  /** RFC 3339. */
  expiresAt: string;
}

/**
 * Makes a box on `runtime` under `runtimeName` (undefined: unnamed in the runtime, as tenant boxes are)
 * and returns its handle once it is started.
 */
export type BoxMaker = (runtime: JsRuntime, runtimeName: string | undefined) => Promise<JsBox>;

/** The box operations the MCP tools use. */
export interface BoxProvider {
  /**
   * A local runtime in this process, on which box classes that run helpers here (the desktop
   * forwarders of a computer box, the endpoint relay of a browser box) are made; absent: such boxes are
   * `unsupported`.
   */
  readonly runtime?: JsRuntime;
  /**
   * Makes a box with `make` on {@link runtime}, counted and recorded as the caller's like `create` (on a
   * `sandbox serve` node: the tenant's quotas and admission for `request`, the box owned by the tenant
   * under `name`).
   * @throws BoxError as `create`; what `make` throws.
   */
  createWith(request: { cpus: number; memoryMib: number }, name: string, make: BoxMaker): Promise<JsBox>;
  /** Creates and starts a box. @throws BoxError as `JsRuntime.create` (and the tenant's quotas). */
  create(options: JsBoxOptions, name?: string): Promise<JsBox>;
  /**
   * Pulls `reference` into the local image store (at once when stored), reporting per-layer byte progress
   * to `onProgress`; absent for a remote runtime (its `create` pulls on the server, without progress).
   * @throws BoxError `image` as `images.pull` (unknown image, registry refusal, abort through `signal`).
   */
  pull?(reference: string, onProgress: (p: PullProgress) => void, signal: AbortSignal): Promise<void>;
  /** Session tags of persisted boxes (a local runtime's home); absent: boxes carry no tag. */
  readonly tags?: BoxTags;
  /** Ids of every box of the runtime (the caller's or not), to drop tags of removed boxes. */
  allIds?(): Promise<Set<string>>;
  /**
   * Admits one command of the caller (on a `sandbox serve` node: its tenant's exec rate and
   * running-executions quota, `ServerContext.admitExecution`); the returned function gives the slot back
   * once the command has ended. Absent: commands are not counted here (a remote runtime's server counts them).
   * @throws BoxError `quota_exceeded` naming the quota.
   */
  admitExecution?(): Promise<() => void>;
  /** Every box the caller sees, oldest first. */
  list(): Promise<JsBoxInfo[]>;
  /** The box with this id or name. @throws BoxError `not_found`. */
  get(idOrName: string): Promise<JsBox>;
  /** Removes the box (killed when running). @throws BoxError `not_found`. */
  remove(idOrName: string): Promise<void>;
  /** A signed URL of `port` valid `expiresInMs`. @throws BoxError `unsupported` on a local runtime. */
  previewUrl(box: JsBox, port: number, expiresInMs?: number): Promise<PreviewLink>;
}

/** The `pull`, `tags` and `allIds` of a local runtime (none for a remote one). */
function localParts(runtime: JsRuntime): Pick<BoxProvider, 'pull' | 'tags' | 'allIds'> {
  if (runtime.url !== null) return {};
  return {
    tags: new BoxTags(runtime.homeDir),
    allIds: async () => new Set((await runtime.listInfo()).map((info) => info.id)),
    async pull(reference, onProgress, signal) {
      await runtime.images.pull(reference, { onProgress, signal });
    },
  };
}

/** Boxes of a runtime (local, or remote over REST). */
export function runtimeProvider(runtime: JsRuntime): BoxProvider {
  return {
    // A remote runtime's boxes run elsewhere: no computer or browser boxes through it.
    ...(runtime.url === null ? { runtime } : {}),
    ...localParts(runtime),
    create: (options, name) => runtime.create(options, name),
    createWith: (_request, name, make) => make(runtime, name),
    list: () => runtime.listInfo(),
    async get(idOrName) {
      const box = await runtime.get(idOrName);
      if (!box) throw new BoxError(`no box with id or name '${idOrName}'`, { code: 'not_found' });
      return box;
    },
    remove: (idOrName) => runtime.remove(idOrName, true),
    async previewUrl(box, port, expiresInMs) {
      const link = await box.network.previewUrl(port, expiresInMs ? { expiresIn: expiresInMs } : {});
      return { url: link.url, expiresAt: link.expiresAt };
    },
  };
}

/** Boxes of `principal` on a `sandbox serve` node (its tenant's boxes, quotas and preview URLs). */
export function contextProvider(ctx: ServerContext, principal: Principal): BoxProvider {
  return {
    // The node's runtime is local to this process: computer and browser boxes run their helpers here.
    ...(ctx.runtime.url === null ? { runtime: ctx.runtime } : {}),
    ...localParts(ctx.runtime),
    create: (options, name) => ctx.createBox(principal, options, name),
    createWith: (request, name, make) =>
      ctx.createWith(principal, request, name, (runtimeName) => make(ctx.runtime, runtimeName)),
    admitExecution: () => ctx.admitExecution(principal),
    list: () => ctx.listBoxes(principal),
    get: (idOrName) => ctx.box(idOrName, principal),
    remove: (idOrName) => ctx.removeBox(principal, idOrName, true),
    async previewUrl(box, port, expiresInMs) {
      const link = await ctx.previewUrl(principal, box.id, port, expiresInMs ? { expiresInMs } : {});
      return { url: link.url, expiresAt: link.expiresAt };
    },
  };
}
