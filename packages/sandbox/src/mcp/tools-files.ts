/**
 * File tools: `read_file` (text, or image content for pictures), `write_file`,
 * `list_files`, `make_dir`, `move`, `remove`, and `upload_from_host` / `download_to_host` — registered
 * only when the operator lists host directories (`McpConfig.hostPaths`), and confined to them.
 */
import { realpath } from 'node:fs/promises';
import { dirname, extname, resolve, sep } from 'node:path';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { BoxError } from '../errors.ts';
import { shorten } from './output.ts';
import type { McpSession } from './session.ts';
import { defineTool } from './tool.ts';

/** MIME types of the pictures `read_file` returns as image content. */
const IMAGE_TYPES: Record<string, string> = {
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
};
/** Largest picture `read_file` returns as image content, bytes. */
const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

const boxArg = z.string().min(1).describe('box id or name');
const boxPath = z.string().regex(/^\//, 'must be an absolute path').describe('absolute path in the box');

/**
 * `path` resolved on the host, when it lies in one of `roots` (after following symlinks of its existing
 * part). @throws BoxError `permission_denied` (field `host_path`) otherwise.
 */
async function hostPathIn(roots: string[], path: string): Promise<string> {
  const absolute = resolve(path);
  let real = absolute;
  try {
    real = await realpath(absolute);
  } catch {
    real = resolve(
      await realpath(dirname(absolute)).catch(() => dirname(absolute)),
      absolute.slice(dirname(absolute).length + 1),
    );
  }
  const inside = await Promise.all(
    roots.map(async (root) => {
      const r = await realpath(root).catch(() => root);
      return real === r || real.startsWith(r.endsWith(sep) ? r : r + sep);
    }),
  );
  if (!inside.some(Boolean)) {
    throw new BoxError(`host path ${path} is outside the directories the operator allows`, {
      code: 'permission_denied',
      field: 'host_path',
    });
  }
  return real;
}

/** Registers the file tools. */
export function fileTools(server: McpServer, session: McpSession): void {
  defineTool(server, session, {
    name: 'read_file',
    title: 'Read a file',
    description:
      'Reads a file of the box: pictures (png, jpg, gif, webp) come back as image content, other files as ' +
      'UTF-8 text from byte offset, shortened to the output limit (truncated tells; read on with a larger offset).',
    input: {
      box: boxArg,
      path: boxPath,
      offset: z.number().int().min(0).default(0).describe('first byte to return'),
    },
    output: {
      path: z.string(),
      size: z.number(),
      text: z.string().nullable().describe('the text (null for a picture)'),
      mime_type: z.string().nullable(),
      truncated: z.boolean(),
      next_offset: z.number().nullable(),
    },
    readOnly: true,
    async run(args) {
      const box = await session.box(args.box);
      const info = await box.files.stat(args.path);
      const mime = IMAGE_TYPES[extname(args.path).toLowerCase()];
      if (mime && args.offset === 0 && info.size <= MAX_IMAGE_BYTES) {
        const bytes = Buffer.from(await box.files.read(args.path, { format: 'bytes' }));
        return {
          result: {
            path: args.path,
            size: bytes.length,
            text: null,
            mime_type: mime,
            truncated: false,
            next_offset: null,
          },
          content: [{ type: 'image', data: bytes.toString('base64'), mimeType: mime }],
        };
      }
      const limit = session.config.maxOutputBytes;
      const bytes = await readRange(box.files, args.path, args.offset, limit + 4);
      const short = shorten(bytes, limit);
      const next = args.offset + Buffer.byteLength(short.text);
      return {
        result: {
          path: args.path,
          size: info.size,
          text: short.text,
          mime_type: null,
          truncated: next < info.size,
          next_offset: next < info.size ? next : null,
        },
      };
    },
  });

  defineTool(server, session, {
    name: 'write_file',
    title: 'Write a file',
    description:
      'Creates or replaces a file of the box (parent directories are created). encoding base64 for binary data.',
    input: {
      box: boxArg,
      path: boxPath,
      content: z.string().max(32 * 1024 * 1024),
      encoding: z.enum(['utf8', 'base64']).default('utf8'),
      mode: z.number().int().min(0).max(0o7777).optional().describe('permission bits, e.g. 493 for 0755'),
    },
    output: { path: z.string(), bytes: z.number() },
    async run(args) {
      const box = await session.box(args.box);
      const data = Buffer.from(args.content, args.encoding);
      const parent = dirname(args.path);
      if (parent !== '/') await box.files.makeDir(parent);
      await box.files.write(args.path, data, args.mode === undefined ? {} : { mode: args.mode });
      return { result: { path: args.path, bytes: data.length } };
    },
  });

  defineTool(server, session, {
    name: 'list_files',
    title: 'List a directory',
    description: 'Entries of a directory of the box (name, type, size), down to depth levels.',
    input: { box: boxArg, path: boxPath, depth: z.number().int().min(1).max(8).default(1) },
    output: {
      entries: z.array(
        z.object({ path: z.string(), type: z.string(), size: z.number(), permissions: z.string() }),
      ),
      truncated: z.boolean(),
    },
    readOnly: true,
    async run(args) {
      const box = await session.box(args.box);
      const all = await box.files.list(args.path, { depth: args.depth });
      const max = 1000;
      const entries = all
        .slice(0, max)
        .map((e) => ({ path: e.path, type: e.type, size: e.size, permissions: e.permissions }));
      return { result: { entries, truncated: all.length > max } };
    },
  });

  defineTool(server, session, {
    name: 'make_dir',
    title: 'Make a directory',
    description: 'Creates a directory of the box and its missing parents.',
    input: { box: boxArg, path: boxPath },
    output: { path: z.string(), created: z.boolean() },
    async run(args) {
      const box = await session.box(args.box);
      return { result: { path: args.path, created: await box.files.makeDir(args.path) } };
    },
  });

  defineTool(server, session, {
    name: 'move',
    title: 'Move or rename',
    description: 'Moves or renames a file or directory of the box.',
    input: { box: boxArg, from: boxPath, to: boxPath },
    output: { path: z.string() },
    destructive: true,
    async run(args) {
      const box = await session.box(args.box);
      const entry = await box.files.rename(args.from, args.to);
      return { result: { path: entry.path } };
    },
  });

  defineTool(server, session, {
    name: 'remove',
    title: 'Remove a file',
    description: 'Removes a file or a directory (with its contents) of the box.',
    input: { box: boxArg, path: boxPath },
    output: { path: z.string(), removed: z.boolean() },
    destructive: true,
    async run(args) {
      const box = await session.box(args.box);
      await box.files.remove(args.path);
      return { result: { path: args.path, removed: true } };
    },
  });

  const roots = session.config.hostPaths;
  if (roots.length === 0) return;
  const hostPath = z
    .string()
    .regex(/^\//, 'must be an absolute path')
    .describe(`absolute host path under ${roots.join(' or ')}`);

  defineTool(server, session, {
    name: 'upload_from_host',
    title: 'Copy from the host into a box',
    description: `Copies a host file or directory (under ${roots.join(', ')}) into the box.`,
    input: { box: boxArg, host_path: hostPath, path: boxPath },
    output: { path: z.string() },
    async run(args) {
      const box = await session.box(args.box);
      await box.copyIn(await hostPathIn(roots, args.host_path), args.path);
      return { result: { path: args.path } };
    },
  });

  defineTool(server, session, {
    name: 'download_to_host',
    title: 'Copy from a box to the host',
    description: `Copies a file or directory of the box to the host (under ${roots.join(', ')}).`,
    input: { box: boxArg, path: boxPath, host_path: hostPath },
    output: { host_path: z.string() },
    async run(args) {
      const box = await session.box(args.box);
      const target = await hostPathIn(roots, args.host_path);
      await box.copyOut(args.path, target);
      return { result: { host_path: target } };
    },
  });
}

/** Bytes `[offset, offset + length)` of a box file, read as a stream and stopped at the end of the range. */
async function readRange(
  files: { read(path: string, o: { format: 'stream' }): Promise<ReadableStream<Uint8Array>> },
  path: string,
  offset: number,
  length: number,
): Promise<Buffer> {
  const stream = await files.read(path, { format: 'stream' });
  const chunks: Buffer[] = [];
  let seen = 0;
  let kept = 0;
  const reader = stream.getReader();
  try {
    while (kept < length) {
      const { done, value } = await reader.read();
      if (done) break;
      const chunk = Buffer.from(value);
      const start = Math.max(0, offset - seen);
      seen += chunk.length;
      if (start >= chunk.length) continue;
      const part = chunk.subarray(start, start + (length - kept));
      chunks.push(part);
      kept += part.length;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return Buffer.concat(chunks);
}
