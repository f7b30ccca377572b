/**
 * Box tools: `create_box`, `list_boxes`, `box_info`, `stop_box`, `remove_box`,
 * `snapshot_box`, `restore_box`, `preview_url`. New boxes count against the session limits and have
 * no network unless the call asks for destinations the operator allows (`McpConfig.allowNet`).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { BROWSERBOX_IMAGES } from '../boxes/browser.ts';
import { COMPUTERBOX_IMAGE } from '../boxes/computer.ts';
import { SIMPLEBOX_DEFAULT_IMAGE } from '../boxes/simple.ts';
import { BoxError } from '../errors.ts';
import type { PullProgress } from '../images/image-types.ts';
import type { JsBoxInfo, JsBoxOptions, NetworkSpec } from '../types.ts';
import type { McpConfig } from './config.ts';
import type { McpSession } from './session.ts';
import { defineTool, type ProgressReporter, progressReporter, type ToolExtra } from './tool.ts';
import { createBrowser } from './tools-browser.ts';
import { createComputer } from './tools-computer.ts';

/** Default vCPUs and memory (MiB) of a box created without them. */
const DEFAULT_CPUS = 1;
const DEFAULT_MEMORY_MIB = 512;

/** The structured form of a box (`box_info`, `list_boxes`, `create_box`). */
export const boxShape = {
  id: z.string().describe('box id (use it, or the name, as `box` in other tools)'),
  name: z.string().nullable(),
  image: z.string(),
  status: z.string().describe('configured, running, paused, stopped…'),
  running: z.boolean(),
  cpus: z.number(),
  memory_mib: z.number(),
  created_at: z.string(),
  network: z.object({ mode: z.string(), allow_net: z.array(z.string()) }).nullable(),
  isolation: z.string().nullable(),
  session_box: z.boolean().describe('created by this MCP session (removed when it ends unless persist)'),
  persist: z.boolean(),
  mcp_session: z
    .string()
    .nullable()
    .describe('the MCP session that created the box (kept on persisted boxes after it ended), else null'),
};

/**
 * `info` in the structured form of {@link boxShape}; `tags` holds the session tags of persisted boxes of
 * other sessions by box id.
 */
export function boxView(
  session: McpSession,
  info: JsBoxInfo,
  tags: ReadonlyMap<string, string> = new Map(),
): z.infer<z.ZodObject<typeof boxShape>> {
  const own = session.boxes.get(info.id);
  return {
    id: info.id,
    name: info.name ?? null,
    image: info.image,
    status: info.state.status,
    running: info.state.running,
    cpus: info.cpus,
    memory_mib: info.memoryMib,
    created_at: info.createdAt,
    network: info.network ? { mode: info.network.mode, allow_net: info.network.allowNet } : null,
    isolation: info.isolation?.tier ?? null,
    session_box: own !== undefined,
    persist: own?.persist ?? tags.has(info.id),
    mcp_session: own ? session.id : (tags.get(info.id) ?? null),
  };
}

/**
 * The network of a new box: none, or `allowNet` when every destination is one the operator allows.
 * @throws BoxError `permission_denied` (field `allow_net`) naming a destination the operator does not allow.
 */
export function networkFor(config: McpConfig, allowNet: string[] | undefined): NetworkSpec {
  if (!allowNet || allowNet.length === 0) return { mode: 'disabled' };
  const any = config.allowNet.includes('*');
  const refused = allowNet.filter((d) => !any && !config.allowNet.includes(d));
  if (refused.length > 0) {
    throw new BoxError(
      `network destinations not allowed by the operator: ${refused.join(', ')} (allowed: ${config.allowNet.join(', ') || 'none'})`,
      { code: 'permission_denied', field: 'allow_net' },
    );
  }
  return { mode: 'enabled', allowNet: any && allowNet.includes('*') ? [] : allowNet };
}

const boxArg = z.string().min(1).describe('box id or name (from create_box or list_boxes)');

/**
 * Pulls `image` through the session's provider (when it can pull: a local runtime), reporting per-layer
 * byte progress to `report`; a new phase or a finished layer is always sent.
 * @throws BoxError `image` as `images.pull`.
 */
async function pullReported(
  session: McpSession,
  extra: ToolExtra,
  image: string,
  report: ProgressReporter,
): Promise<void> {
  let layers = 0;
  await session.provider.pull?.(
    image,
    (p) => {
      const force = p.phase !== 'downloading' || p.layersDone !== layers;
      layers = p.layersDone;
      report.update(p.bytesDone, pullMessage(image, p), p.bytesTotal || undefined, force);
    },
    extra.signal,
  );
}

/** The text of a pull progress notification of `image`: phase, layers done, MiB downloaded. */
function pullMessage(image: string, p: PullProgress): string {
  const mib = (bytes: number) => (bytes / (1024 * 1024)).toFixed(1);
  const bytes = p.bytesTotal > 0 ? `, ${mib(p.bytesDone)} of ${mib(p.bytesTotal)} MiB` : '';
  return `pulling ${image}: ${p.phase}, ${p.layersDone} of ${p.layersTotal} layers${bytes}`;
}

/** Registers the box tools. */
export function boxTools(server: McpServer, session: McpSession): void {
  defineTool(server, session, {
    name: 'create_box',
    title: 'Create a sandbox box',
    description:
      'Creates and starts an isolated Linux box (a container) from an OCI image and returns its id. Use ' +
      "kind 'code' for Python with stateful run_code (default image python:slim). The box has no network " +
      'unless allow_net lists destinations the operator permits. It is removed when this MCP session ends ' +
      'unless persist is true, and after lifetime_seconds at the latest.',
    input: {
      kind: z
        .enum(['simple', 'code', 'computer', 'browser'])
        .default('simple')
        .describe(
          'simple: commands and files; code: also run_code; computer: a 1024x768 desktop driven by ' +
            'screenshot, click, type_text, key…; browser: Chromium driven by navigate, screenshot, ' +
            'cdp_endpoint (for computer and browser, image, env and working_dir do not apply)',
        ),
      image: z.string().min(1).optional().describe(`OCI image reference; default ${SIMPLEBOX_DEFAULT_IMAGE}`),
      name: z
        .string()
        .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/)
        .optional()
        .describe('unique box name; default mcp-<session>-<n>'),
      cpus: z.number().int().min(1).max(64).optional().describe(`vCPUs; default ${DEFAULT_CPUS}`),
      memory_mib: z
        .number()
        .int()
        .min(64)
        .max(1 << 20)
        .optional()
        .describe(`memory in MiB; default ${DEFAULT_MEMORY_MIB}`),
      allow_net: z
        .array(z.string().min(1))
        .max(64)
        .optional()
        .describe('outbound destinations (host names, IPs, CIDRs) to allow; default none (no network)'),
      isolation: z
        .enum(['container', 'gvisor'])
        .optional()
        .describe('isolation tier; default the runtime default'),
      lifetime_seconds: z
        .number()
        .int()
        .min(1)
        .optional()
        .describe('removed after this many seconds; default and maximum set by the operator'),
      env: z.record(z.string(), z.string()).optional().describe('environment variables of the box'),
      working_dir: z
        .string()
        .regex(/^\//, 'must be an absolute path')
        .optional()
        .describe('default working directory; default /root'),
      persist: z.boolean().default(false).describe('keep the box when this MCP session ends'),
    },
    output: boxShape,
    async run(args, extra) {
      const config = session.config;
      const cpus = args.cpus ?? DEFAULT_CPUS;
      const memoryMib = args.memory_mib ?? DEFAULT_MEMORY_MIB;
      const lifetime = args.lifetime_seconds ?? config.maxLifetimeSeconds;
      if (lifetime > config.maxLifetimeSeconds) {
        throw new BoxError(`invalid lifetime_seconds: at most ${config.maxLifetimeSeconds}`, {
          field: 'lifetime_seconds',
        });
      }
      const options: JsBoxOptions = {
        image: args.image ?? SIMPLEBOX_DEFAULT_IMAGE,
        cpus,
        memoryMib,
        network: networkFor(config, args.allow_net),
        timeoutMs: lifetime * 1000,
        onTimeout: 'remove',
        autoRemove: !args.persist,
        detach: args.persist,
      };
      if (args.isolation) options.isolation = args.isolation;
      if (args.env) options.env = Object.entries(args.env).map(([key, value]) => ({ key, value }));
      if (args.working_dir) options.workingDir = args.working_dir;
      const report = progressReporter(extra);
      if (args.kind === 'computer' || args.kind === 'browser') {
        const image = args.kind === 'computer' ? COMPUTERBOX_IMAGE : (BROWSERBOX_IMAGES.chromium as string);
        report.update(0, `starting a ${args.kind} box from ${image}`, undefined, true);
        // Without a local runtime the kind is unsupported: nothing to pull.
        if (session.provider.runtime) await pullReported(session, extra, image, report);
        const request = {
          name: args.name ?? session.nextName(),
          cpus: args.cpus,
          memoryMib: args.memory_mib,
          network: options.network ?? { mode: 'disabled' as const },
          persist: args.persist,
          lifetimeMs: lifetime * 1000,
        };
        const id =
          args.kind === 'computer'
            ? await createComputer(session, request)
            : await createBrowser(session, request);
        report.update(report.last + 1, 'box started', report.last + 1, true);
        return { result: boxView(session, await (await session.box(id)).info()) };
      }
      const release = session.reserve(cpus, memoryMib);
      try {
        const image = options.image as string;
        report.update(0, `creating the box from ${image}`, undefined, true);
        await pullReported(session, extra, image, report);
        const box = await session.provider.create(options, args.name ?? session.nextName());
        session.adopt(box, { id: box.id, kind: args.kind, cpus, memoryMib, persist: args.persist });
        if (args.persist) await session.provider.tags?.set(box.id, session.id);
        report.update(report.last + 1, 'box started', report.last + 1, true);
        return { result: boxView(session, await box.info()) };
      } finally {
        release();
      }
    },
  });

  defineTool(server, session, {
    name: 'list_boxes',
    title: 'List boxes',
    description: 'Lists the boxes this caller can use, oldest first, with their state and resources.',
    input: {},
    output: { boxes: z.array(z.object(boxShape)) },
    readOnly: true,
    async run() {
      const infos = await session.provider.list();
      const tags =
        (await session.provider.tags?.read(
          infos.map((info) => info.id),
          session.provider.allIds,
        )) ?? new Map<string, string>();
      return { result: { boxes: infos.map((info) => boxView(session, info, tags)) } };
    },
  });

  defineTool(server, session, {
    name: 'box_info',
    title: 'Box details',
    description: 'State, image, resources, network and isolation of one box.',
    input: { box: boxArg },
    output: boxShape,
    readOnly: true,
    async run(args) {
      const box = await session.box(args.box);
      const tags = (await session.provider.tags?.read([box.id])) ?? new Map<string, string>();
      return { result: boxView(session, await box.info(), tags) };
    },
  });

  defineTool(server, session, {
    name: 'stop_box',
    title: 'Stop a box',
    description:
      'Stops a box: its commands get SIGTERM, then SIGKILL. A box created without persist is removed on stop.',
    input: { box: boxArg },
    output: { id: z.string(), stopped: z.boolean(), removed: z.boolean() },
    destructive: true,
    async run(args) {
      const box = await session.box(args.box);
      await box.stop();
      const gone = (await session.provider.list()).every((info) => info.id !== box.id);
      if (gone) session.forget(box.id);
      return { result: { id: box.id, stopped: true, removed: gone } };
    },
  });

  defineTool(server, session, {
    name: 'remove_box',
    title: 'Remove a box',
    description: 'Removes a box and everything in it (a running box is killed first).',
    input: { box: boxArg },
    output: { id: z.string(), removed: z.boolean() },
    destructive: true,
    async run(args) {
      const box = await session.box(args.box);
      await session.provider.remove(box.id);
      await session.provider.tags?.drop(box.id);
      session.forget(box.id);
      return { result: { id: box.id, removed: true } };
    },
  });

  const snapshotName = z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/)
    .describe('snapshot name: 1-64 letters, digits, . _ -');

  defineTool(server, session, {
    name: 'snapshot_box',
    title: 'Snapshot a box',
    description:
      "Saves the box's files as a named snapshot (the box keeps running); restore_box brings them back.",
    input: { box: boxArg, name: snapshotName.optional() },
    output: { name: z.string(), created_at: z.string(), size_bytes: z.number() },
    async run(args) {
      const box = await session.box(args.box);
      const info = await box.snapshot.create(args.name);
      return { result: { name: info.name, created_at: info.createdAt, size_bytes: info.sizeBytes } };
    },
  });

  defineTool(server, session, {
    name: 'restore_box',
    title: 'Restore a snapshot',
    description: "Puts the box's files back to a snapshot taken by snapshot_box (a running box restarts).",
    input: { box: boxArg, name: snapshotName },
    output: { id: z.string(), restored: z.string() },
    destructive: true,
    async run(args) {
      const box = await session.box(args.box);
      await box.snapshot.restore(args.name);
      return { result: { id: box.id, restored: args.name } };
    },
  });

  defineTool(server, session, {
    name: 'preview_url',
    title: 'Preview URL of a port',
    description:
      'A signed URL that reaches a TCP port of the box over HTTP and WebSocket (e.g. a web server the agent ' +
      'started), valid for expires_in_seconds. Needs a sandbox serve runtime.',
    input: {
      box: boxArg,
      port: z.number().int().min(1).max(65535),
      expires_in_seconds: z
        .number()
        .int()
        .min(1)
        .max(7 * 24 * 3600)
        .optional()
        .describe('default 3600'),
    },
    output: { url: z.string(), expires_at: z.string() },
    async run(args) {
      const box = await session.box(args.box);
      const ms = args.expires_in_seconds === undefined ? undefined : args.expires_in_seconds * 1000;
      const link = await session.provider.previewUrl(box, args.port, ms);
      return { result: { url: link.url, expires_at: link.expiresAt } };
    },
  });
}
