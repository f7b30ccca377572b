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
import { type Permission, toSnake } from './wire.ts';

/** What the file routes need from the server. */
export interface FileRoutesOptions {
  /** The box with this id or name. @throws BoxError `not_found`. */
  box(idOrName: string): Promise<JsBox>;
  /** Route config carrying the permission every file route requires. */
  config: { permission: Permission };
}

type Q = Record<string, string | undefined>;
type P = { box: string };

/** An entry as JSON: ISO 8601 `modified_time`. */
export function wireEntry(entry: JsEntryInfo): unknown {
  return toSnake({ ...entry, modifiedTime: entry.modifiedTime.toISOString() });
}

function intParam(query: Q, name: string): number | undefined {
  const raw = query[name];
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) {
    throw new BoxError(`invalid query parameter ${name}: must be a non-negative integer`, { field: name });
  }
  return Number(raw);
}

function bodyField(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | null)?.[name];
  if (typeof value !== 'string')
    throw new BoxError(`invalid files option ${name}: must be a string`, { field: name });
  return value;
}

/** Registers the file routes (see the module comment) in their own scope (raw-body parser). */
export async function fileRoutes(app: FastifyInstance, options: FileRoutesOptions): Promise<void> {
  const { config } = options;
  const files = async (params: P) => (await options.box(params.box)).files;
  app.addContentTypeParser('application/octet-stream', (_request, payload, done) => done(null, payload));

  app.get<{ Params: P; Querystring: Q }>(
    '/v1/boxes/:box/files/content',
    { config },
    async (request, reply) => {
      // The file is pumped through one reused buffer straight to the response; the status line is
      // written with the first chunk, so an error before it (no such file, a directory) is a JSON answer.
      const raw = reply.raw;
      const send = streamSink(raw);
      let started = false;
      try {
        await (await files(request.params)).readInto(request.query.path as string, (chunk) => {
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
    { config },
    async (request, reply) => {
      const body = request.body;
      if (!body || typeof (body as Readable).pipe !== 'function') {
        throw new BoxError('the body must be the file bytes (content-type application/octet-stream)', {
          field: 'body',
        });
      }
      const mode = intParam(request.query, 'mode');
      const info = await (await files(request.params)).write(
        request.query.path as string,
        body,
        mode !== undefined ? { mode } : {},
      );
      return reply.code(201).send(toSnake(info));
    },
  );

  app.get<{ Params: P; Querystring: Q }>('/v1/boxes/:box/files', { config }, async (request) => {
    const depth = intParam(request.query, 'depth');
    const entries = await (await files(request.params)).list(
      request.query.path as string,
      depth !== undefined ? { depth } : {},
    );
    return entries.map(wireEntry);
  });

  app.delete<{ Params: P; Querystring: Q }>('/v1/boxes/:box/files', { config }, async (request, reply) => {
    await (await files(request.params)).remove(request.query.path as string);
    return reply.code(204).send();
  });

  app.get<{ Params: P; Querystring: Q }>('/v1/boxes/:box/files/stat', { config }, async (request) =>
    wireEntry(await (await files(request.params)).stat(request.query.path as string)),
  );

  app.post<{ Params: P }>('/v1/boxes/:box/files/mkdir', { config }, async (request) => ({
    created: await (await files(request.params)).makeDir(bodyField(request.body, 'path')),
  }));

  app.post<{ Params: P }>('/v1/boxes/:box/files/rename', { config }, async (request) =>
    wireEntry(
      await (await files(request.params)).rename(
        bodyField(request.body, 'from'),
        bodyField(request.body, 'to'),
      ),
    ),
  );

  app.post<{ Params: P }>('/v1/boxes/:box/files/symlink', { config }, async (request, reply) => {
    await (await files(request.params)).symlink(
      bodyField(request.body, 'path'),
      bodyField(request.body, 'target'),
    );
    return reply.code(204).send();
  });

  app.get<{ Params: P; Querystring: Q }>('/v1/boxes/:box/files/watch', { config }, async (request, reply) => {
    const recursive = request.query.recursive;
    if (recursive !== undefined && recursive !== 'true' && recursive !== 'false') {
      throw new BoxError("invalid query parameter recursive: must be 'true' or 'false'", {
        field: 'recursive',
      });
    }
    const out = new PassThrough();
    const handle = await (await files(request.params)).watchDir(
      request.query.path as string,
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
  });
}
