/**
 * Where the MCP tools find boxes: a `JsRuntime` (`sandbox mcp`, local or `--url`
 * remote), or the `sandbox serve` context of one authenticated caller (`/mcp`), whose boxes are its
 * tenant's and under its tenant's quotas.
 */
import { BoxError } from '../errors.ts';
import type { JsRuntime } from '../js-runtime.ts';
import type { Principal } from '../rest/auth.ts';
import type { ServerContext } from '../rest/context.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsBoxInfo, JsBoxOptions } from '../types.ts';

/** A signed URL of a box port (`preview_url`). */
export interface PreviewLink {
  url: string;
  /** RFC 3339. */
  expiresAt: string;
}

/** The box operations the MCP tools use. */
export interface BoxProvider {
  /** The runtime itself, when the boxes are a runtime's (computer boxes are made through it). */
  readonly runtime?: JsRuntime;
  /** Creates and starts a box. @throws BoxError as `JsRuntime.create` (and the tenant's quotas). */
  create(options: JsBoxOptions, name?: string): Promise<JsBox>;
  /** Every box the caller sees, oldest first. */
  list(): Promise<JsBoxInfo[]>;
  /** The box with this id or name. @throws BoxError `not_found`. */
  get(idOrName: string): Promise<JsBox>;
  /** Removes the box (killed when running). @throws BoxError `not_found`. */
  remove(idOrName: string): Promise<void>;
  /** A signed URL of `port` valid `expiresInMs`. @throws BoxError `unsupported` on a local runtime. */
  previewUrl(box: JsBox, port: number, expiresInMs?: number): Promise<PreviewLink>;
}

/** Boxes of a runtime (local, or remote over REST). */
export function runtimeProvider(runtime: JsRuntime): BoxProvider {
  return {
    runtime,
    create: (options, name) => runtime.create(options, name),
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
    create: (options, name) => ctx.createBox(principal, options, name),
    list: () => ctx.listBoxes(principal),
    get: (idOrName) => ctx.box(idOrName, principal),
    remove: (idOrName) => ctx.removeBox(principal, idOrName, true),
    async previewUrl(box, port, expiresInMs) {
      const link = await ctx.previewUrl(principal, box.id, port, expiresInMs ? { expiresInMs } : {});
      return { url: link.url, expiresAt: link.expiresAt };
    },
  };
}
