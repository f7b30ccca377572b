/**
 * HTTP routes of `box.files` on the REST runtime server (a Fastify plugin). File contents travel as raw
 * byte streams (`application/octet-stream`, chunked, never buffered whole); metadata as snake_case JSON;
 * `watch` as newline-delimited JSON. Every route needs the `sandbox.exec` permission (files of a box are
 * as powerful as commands in it). Errors are `BoxError`s mapped by code (`wire.ts`).
 *
 * | Route | What |
 * |---|---|
 * | `GET …/files/content?path=` | file bytes |
 * | `PUT …/files/content?path=[&mode=]` | write (body: bytes) → 201 `{ name, path, type }` |
 * | `GET …/files?path=[&depth=]` | list → entries |
 * | `DELETE …/files?path=` | remove |
 * | `GET …/files/stat?path=` | entry |
 * | `POST …/files/mkdir` `{ path }` | → `{ created }` |
 * | `POST …/files/rename` `{ from, to }` | → entry |
 * | `POST …/files/symlink` `{ path, target }` | → 204 |
 * | `GET …/files/watch?path=[&recursive=true]` | NDJSON: `{"type":"ready"}`, then `{ name, type }` per event |
 */
import { PassThrough, type Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import { streamSink } from '../runtime/files/pump.ts';
import type { JsEntryInfo } from '../runtime/files/types.ts';
import type { Principal } from './auth.ts';
import { principalOf } from './hooks.ts';
import { type RouteDoc, route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { documentedBody } from './validation.ts';
import { type Permission, toSnake } from './wire.ts';

/** What the file routes need from the server. */
export interface FileRoutesOptions {
  /** The box with this id or name as `principal` sees it. @throws BoxError `not_found` (another tenant's too). */
  box(idOrName: string, principal: Principal): Promise<JsBox>;
  /** Route config carrying the permission every file route requires. */
  config: { permission: Permission };
}

type P = { box: string };
type Q = { path: string; depth?: number; mode?: number; recursive?: 'true' | 'false' };

const tags = ['files'];
const boxParams = obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']);
const path = {
  type: 'string',
  minLength: 1,
  description: 'absolute path inside the box (resolved inside the box root; symlinks never leave it)',
};
const pathQuery = obj({ path }, ['path']);
const binary = { type: 'string', format: 'binary' };
const entry = { description: 'the entry', ...ref('EntryInfo') };

/** An entry as JSON: ISO 8601 `modified_time`. */
export function wireEntry(entry: JsEntryInfo): unknown {
  return toSnake({ ...entry, modifiedTime: entry.modifiedTime.toISOString() });
}

/** Registers the file routes (see the module comment) in their own scope (raw-body parser). */
export async function fileRoutes(app: FastifyInstance, options: FileRoutesOptions): Promise<void> {
  const { config } = options;
  // Every file route needs the same permission, has the same tag and takes the box in its path.
  const fileRoute = (doc: Omit<RouteDoc, 'tags' | 'params'>) =>
    route(config.permission, { tags, params: boxParams, ...doc });
  const files = async (request: { params: P; principal?: Principal }) =>
    (await options.box(request.params.box, principalOf(request))).files;
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload));

  app.get<{ Params: P; Querystring: Q }>(
    '/v1/boxes/:box/files/content',
    fileRoute({
      summary: 'read a regular file',
      description: 'The bytes, streamed (chunked); symlinks are followed inside the box.',
      querystring: pathQuery,
      response: {
        200: { description: 'the file bytes', content: { 'application/octet-stream': { schema: binary } } },
      },
      errors: [409],
    }),
    async (request, reply) => {
      // The file is pumped through one reused buffer straight to the response; the status line is
      // written with the first chunk, so an error before it (no such file, a directory) is a JSON answer.
      const raw = reply.raw;
      const send = streamSink(raw);
      let started = false;
      try {
        await (await files(request)).readInto(request.query.path, (chunk) => {
          if (!started) {
            started = true;
            reply.hijack();
            raw.writeHead(200, { 'content-type': 'application/octet-stream' });
          }
          return send(chunk);
        });
      } catch (error) {
        if (!started) throw error;
        raw.destroy(error as Error); // the client sees a truncated body, never a partial file as whole
        return reply;
      }
      if (!started) return reply.type('application/octet-stream').send(Buffer.alloc(0));
      raw.end();
      return reply;
    },
  );

  app.put<{ Params: P; Querystring: Q; Body: Readable }>(
    '/v1/boxes/:box/files/content',
    {
      ...fileRoute({
        summary: 'write a file',
        description:
          'Atomically, streamed from the body; parents are created; the owner and mode of an existing file are kept.',
        querystring: obj(
          {
            path,
            mode: {
              type: 'integer',
              minimum: 0,
              maximum: 4095,
              description: 'mode of a new file, decimal (default 420 = 0o644)',
            },
          },
          ['path'],
        ),
        body: { content: { 'application/octet-stream': { schema: binary } } },
        response: { 201: { description: 'written', ...ref('WriteInfo') } },
        errors: [409],
      }),
      // The body is a byte stream, not JSON: its schema documents it.
      validatorCompiler: documentedBody,
    },
    async (request, reply) => {
      const body = request.body;
      if (!body || typeof (body as Readable).pipe !== 'function') {
        throw new BoxError('the body must be the file bytes (content-type application/octet-stream)', {
          field: 'body',
        });
      }
      const mode = request.query.mode;
      const info = await (await files(request)).write(
        request.query.path,
        body,
        mode !== undefined ? { mode } : {},
      );
      return reply.code(201).send(toSnake(info));
    },
  );

  app.get<{ Params: P; Querystring: Q }>(
    '/v1/boxes/:box/files',
    fileRoute({
      summary: 'list a directory',
      querystring: obj(
        { path, depth: { type: 'integer', minimum: 1, maximum: 64, description: 'levels (default 1)' } },
        ['path'],
      ),
      response: { 200: { description: 'the entries', type: 'array', items: ref('EntryInfo') } },
    }),
    async (request) => {
      const depth = request.query.depth;
      const entries = await (await files(request)).list(
        request.query.path,
        depth !== undefined ? { depth } : {},
      );
      return entries.map(wireEntry);
    },
  );

  app.delete<{ Params: P; Querystring: Q }>(
    '/v1/boxes/:box/files',
    fileRoute({
      summary: 'remove a file, symlink or directory tree',
      querystring: pathQuery,
      response: { 204: { description: 'removed', type: 'null' } },
    }),
    async (request, reply) => {
      await (await files(request)).remove(request.query.path);
      return reply.code(204).send();
    },
  );

  app.get<{ Params: P; Querystring: Q }>(
    '/v1/boxes/:box/files/stat',
    fileRoute({
      summary: 'the entry at a path (a final symlink is not followed)',
      querystring: pathQuery,
      response: { 200: entry },
    }),
    async (request) => wireEntry(await (await files(request)).stat(request.query.path)),
  );

  app.post<{ Params: P; Body: { path: string } }>(
    '/v1/boxes/:box/files/mkdir',
    fileRoute({
      summary: 'make a directory and its parents',
      body: obj({ path }, ['path']),
      response: {
        200: {
          description: '`created` is false when it existed',
          ...obj({ created: { type: 'boolean' } }, ['created']),
        },
      },
      errors: [409],
    }),
    async (request) => ({ created: await (await files(request)).makeDir(request.body.path) }),
  );

  app.post<{ Params: P; Body: { from: string; to: string } }>(
    '/v1/boxes/:box/files/rename',
    fileRoute({
      summary: 'rename (move) an entry',
      body: obj({ from: path, to: path }, ['from', 'to']),
      response: { 200: { description: 'the entry at its new path', ...ref('EntryInfo') } },
      errors: [409],
    }),
    async (request) => wireEntry(await (await files(request)).rename(request.body.from, request.body.to)),
  );

  app.post<{ Params: P; Body: { path: string; target: string } }>(
    '/v1/boxes/:box/files/symlink',
    fileRoute({
      summary: 'make a symbolic link (used by copyIn)',
      body: obj({ path, target: { type: 'string', minLength: 1, description: 'link target' } }, [
        'path',
        'target',
      ]),
      response: { 204: { description: 'made', type: 'null' } },
      errors: [409],
    }),
    async (request, reply) => {
      await (await files(request)).symlink(request.body.path, request.body.target);
      return reply.code(204).send();
    },
  );

  app.get<{ Params: P; Querystring: Q }>(
    '/v1/boxes/:box/files/watch',
    fileRoute({
      summary: 'watch a directory (inotify)',
      description:
        'Newline-delimited JSON: first `{"type":"ready"}`, then `{"name","type"}` per event (create, write, remove); ends when the client disconnects.',
      querystring: obj(
        {
          path,
          recursive: { type: 'string', enum: ['true', 'false'], description: 'watch subdirectories too' },
        },
        ['path'],
      ),
      response: {
        200: {
          description: 'event stream',
          content: { 'application/x-ndjson': { schema: { type: 'string' } } },
        },
      },
    }),
    async (request, reply) => {
      const recursive = request.query.recursive;
      const out = new PassThrough();
      const handle = await (await files(request)).watchDir(
        request.query.path,
        (event) => out.write(`${JSON.stringify(event)}\n`),
        { recursive: recursive === 'true', onExit: () => out.end() },
      );
      const stop = () => {
        handle.stop().catch(() => {});
        out.end();
      };
      request.raw.socket.once('close', stop);
      reply.raw.once('close', stop);
      out.write('{"type":"ready"}\n');
      return reply.type('application/x-ndjson').send(out);
    },
  );
}
