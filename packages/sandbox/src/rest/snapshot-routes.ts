/**
 * HTTP routes of snapshots, clones, exports and imports on the REST runtime server (a Fastify plugin).
 * JSON bodies are snake_case; archives travel as raw byte streams (`application/x-tar`,
 * chunked). Errors are `BoxError`s mapped by code (`wire.ts`: `invalid_option` 400, `not_found` 404,
 * `conflict` 409, `unsupported` 501).
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/boxes/{box}/snapshots` `{ name? }` | `sandbox.boxes.write` | take one → 201 snapshot |
 * | `GET /v1/boxes/{box}/snapshots` | `sandbox.boxes.read` | list, oldest first |
 * | `GET /v1/boxes/{box}/snapshots/{name}` | `sandbox.boxes.read` | one snapshot |
 * | `POST /v1/boxes/{box}/snapshots/{name}/restore` | `sandbox.boxes.write` | restore → 204 |
 * | `DELETE /v1/boxes/{box}/snapshots/{name}` | `sandbox.boxes.write` | remove → 204 |
 * | `POST /v1/boxes/{box}/clone` (box options + `snapshot?`, `name?`) | `sandbox.boxes.write` | clone → 201 box |
 * | `GET /v1/boxes/{box}/export` | `sandbox.boxes.read` | the box archive (OCI image layout tar) |
 * | `POST /v1/boxes/import[?name=]` (body: the archive; header `X-Box-Options`: JSON box options) | `sandbox.boxes.write` | import → 201 box |
 *
 * The server writes an export to `<homeDir>/exports` before sending it and an uploaded import to
 * `<homeDir>/imports`; both files are removed once done.
 */
import { createReadStream, createWriteStream, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance } from 'fastify';
import { ulid } from 'ulid';
import { BoxError, notFound } from '../errors.ts';
import { HashCounter } from '../images/digest.ts';
import { DEFAULT_IMAGE_LIMITS } from '../images/limits.ts';
import { archiveResources, importTooLarge } from '../runtime/archive-import.ts';
import { validateBoxName } from '../runtime/options.ts';
import type { CloneOptions } from '../runtime/snapshots.ts';
import type { JsBoxOptions } from '../types.ts';
import type { Principal } from './auth.ts';
import { BOX_OPTION_FIELDS } from './box-routes.ts';
import type { ServerContext } from './context.ts';
import { principalOf } from './hooks.ts';
import { refuseHostReach } from './host-reach.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { documentedBody } from './validation.ts';
import { HttpError, isObject, Permission, toCamel, toSnake, unknownFields } from './wire.ts';

type P = { box: string };
type PN = { box: string; name: string };

const tags = ['snapshots'];
const TAR = 'application/x-tar';
const binary = { type: 'string', format: 'binary' };
const boxParams = obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']);
const snapshotName = {
  type: 'string',
  pattern: '^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$',
  description: "1–64 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
};
const nameParams = obj(
  { box: { type: 'string', description: 'box id (ULID) or name' }, name: snapshotName },
  ['box', 'name'],
);
/** A snapshot record (`SnapshotInfo`, snake_case). */
const snapshotSchema = obj(
  {
    name: { type: 'string' },
    created_at: { type: 'string', format: 'date-time', description: 'when it was taken (RFC 3339)' },
    size_bytes: {
      type: 'integer',
      description: "bytes in use on the box's disk when it was taken (an upper bound of what it holds)",
    },
  },
  ['name', 'created_at', 'size_bytes'],
);
const boxAnswer = (description: string) => ({ description, ...ref('BoxInfo') });
const CLONE_FIELDS: ReadonlySet<string> = new Set([...BOX_OPTION_FIELDS, 'snapshot']);
const IMPORT_FIELDS: ReadonlySet<string> = new Set([...BOX_OPTION_FIELDS].filter((f) => f !== 'name'));

/** Header of `POST /v1/boxes/import` carrying box options passed again (JSON, snake_case). */
const OPTIONS_HEADER = 'x-box-options';

/**
 * The `X-Box-Options` header of `POST /v1/boxes/import` as box options (camelCase): a JSON object of
 * `BoxOptions` fields without `name`, refused as by `POST /v1/boxes` (`host-reach.ts`). Absent: `{}`.
 * @throws BoxError `invalid_option` (field `options`) for a header that is not a JSON object, or naming the
 *   refused field; HttpError 400 `unknown_field` for a field box options do not have.
 */
function importedOptions(text: string | undefined): JsBoxOptions {
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BoxError('invalid import options: the X-Box-Options header must be JSON', {
      field: 'options',
    });
  }
  if (!isObject(parsed)) {
    throw new BoxError('invalid import options: the X-Box-Options header must be a JSON object', {
      field: 'options',
    });
  }
  const options = toCamel<Record<string, unknown>>(parsed);
  unknownFields(options, IMPORT_FIELDS);
  refuseHostReach(options);
  return options as JsBoxOptions;
}

/** Registers the snapshot routes (see the module comment) in their own scope (raw-body parser). */
export async function snapshotRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const read = Permission.boxesRead;
  const write = Permission.boxesWrite;
  app.addContentTypeParser([TAR, 'application/octet-stream'], (_request, payload, done) =>
    done(null, payload),
  );
  const snapshots = async (request: { params: P; principal?: Principal }) =>
    (await ctx.box(request.params.box, principalOf(request))).snapshot;

  app.post<{ Params: P; Body: { name?: string } | undefined }>(
    '/v1/boxes/:box/snapshots',
    route(write, {
      tags,
      summary: 'take a snapshot of the box',
      description:
        'Its writable layer, copy-on-write, while it keeps running (frozen for the moment it takes; a paused box stays paused). Default name `snap-<UTC time>`. Boxes on ext4 disks or the gVisor tier answer 501 `unsupported`.',
      params: boxParams,
      body: { ...obj({ name: snapshotName }), additionalProperties: false },
      response: { 201: { description: 'taken', ...snapshotSchema } },
      errors: [409, 429, 501],
    }),
    async (request, reply) => {
      const name = request.body?.name;
      const taken = await ctx.takeSnapshot(principalOf(request), request.params.box, name);
      return reply.code(201).send(toSnake(taken));
    },
  );

  app.get<{ Params: P }>(
    '/v1/boxes/:box/snapshots',
    route(read, {
      tags,
      summary: "list the box's snapshots",
      description: 'Oldest first.',
      params: boxParams,
      response: { 200: { description: 'snapshots', type: 'array', items: snapshotSchema } },
      errors: [501],
    }),
    async (request) => (await (await snapshots(request)).list()).map((s) => toSnake(s)),
  );

  app.get<{ Params: PN }>(
    '/v1/boxes/:box/snapshots/:name',
    route(read, {
      tags,
      summary: 'one snapshot',
      params: nameParams,
      response: { 200: { description: 'the snapshot', ...snapshotSchema } },
      errors: [501],
    }),
    async (request) => {
      const found = await (await snapshots(request)).get(request.params.name);
      if (!found) throw notFound(`box '${request.params.box}' has no snapshot '${request.params.name}'`);
      return toSnake(found);
    },
  );

  app.post<{ Params: PN }>(
    '/v1/boxes/:box/snapshots/:name/restore',
    route(write, {
      tags,
      summary: 'restore a snapshot',
      description:
        "The box's writable layer becomes the snapshot again; a running (or paused) box is restarted: its processes are killed, it keeps its id, options, volumes and snapshots and runs again. A stopped box stays stopped.",
      params: nameParams,
      response: { 204: { description: 'restored', type: 'null' } },
      errors: [409, 501],
    }),
    async (request, reply) => {
      await (await snapshots(request)).restore(request.params.name);
      return reply.code(204).send();
    },
  );

  app.delete<{ Params: PN }>(
    '/v1/boxes/:box/snapshots/:name',
    route(write, {
      tags,
      summary: 'remove a snapshot',
      params: nameParams,
      response: { 204: { description: 'removed', type: 'null' } },
      errors: [501],
    }),
    async (request, reply) => {
      await (await snapshots(request)).remove(request.params.name);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: P }>(
    '/v1/boxes/:box/clone',
    {
      ...route(write, {
        tags,
        summary: 'start a new box from this box',
        description:
          "From its current state, or from its snapshot `snapshot`. The clone has the source's options (without secrets and port publications) overridden by the body's; its own copy of the writable layer. Host paths and `ports` are refused as by `POST /v1/boxes`.",
        params: boxParams,
        body: {
          allOf: [
            ref('BoxOptions'),
            obj({
              snapshot: {
                ...snapshotName,
                description: 'start from this snapshot (default: the current state)',
              },
            }),
          ],
        },
        response: { 201: boxAnswer('the clone, running') },
        errors: [409, 501],
      }),
      // Options are checked by the SDK's rules once merged with the source's (errors name the option).
      validatorCompiler: documentedBody,
    },
    async (request, reply) => {
      const body = request.body ?? {};
      if (!isObject(body)) {
        throw new HttpError('invalid_body', 'the body must be a JSON object of box options');
      }
      const { name, ...rest } = toCamel<CloneOptions & { name?: string }>(body);
      unknownFields({ name, ...rest }, CLONE_FIELDS);
      validateBoxName(name);
      refuseHostReach(rest as Record<string, unknown>);
      const principal = principalOf(request);
      const source = await ctx.box(request.params.box, principal);
      // Admitted for what the clone gets: the given resources, else the source box's.
      const of = await source.info();
      const admitted = {
        ...rest,
        cpus: rest.cpus ?? of.cpus,
        memoryMib: rest.memoryMib ?? of.memoryMib,
      };
      const sourceDisk = ctx.owners.get('box', source.id)?.diskGb;
      if (admitted.diskSizeGb === undefined && sourceDisk !== undefined) admitted.diskSizeGb = sourceDisk;
      const box = await ctx.createWith(principal, admitted, name ?? undefined, (runtimeName, options) => {
        // The clone keeps the source's resources unless the request names them.
        const { cpus: _c, memoryMib: _m, diskSizeGb: _d, ...others } = options;
        const given = {
          ...(rest.cpus !== undefined ? { cpus: rest.cpus } : {}),
          ...(rest.memoryMib !== undefined ? { memoryMib: rest.memoryMib } : {}),
          ...(rest.diskSizeGb !== undefined ? { diskSizeGb: rest.diskSizeGb } : {}),
        };
        return ctx.runtime.cloneBox(source.id, { ...others, ...given }, runtimeName);
      });
      return reply.code(201).send(ctx.info(await box.info()));
    },
  );

  app.get<{ Params: P }>(
    '/v1/boxes/:box/export',
    route(read, {
      tags,
      summary: 'export the box as an archive',
      description:
        "An OCI image layout in one tar: the image's layers, one more with the box's writable layer (taken consistently while it keeps running) and its options in the config labels (`org.seed.sandbox.options`); it also opens as an image (`skopeo inspect oci-archive:`).",
      params: boxParams,
      response: { 200: { description: 'the archive', content: { [TAR]: { schema: binary } } } },
      errors: [501],
    }),
    async (request, reply) => {
      const box = await ctx.box(request.params.box, principalOf(request));
      const dir = join(ctx.runtime.homeDir, 'exports');
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const file = join(dir, `${ulid()}.tar`);
      try {
        await box.export(file);
        reply.hijack();
        reply.raw.writeHead(200, { 'content-type': TAR });
        await pipeline(createReadStream(file), reply.raw).catch((error: Error) => reply.raw.destroy(error));
      } finally {
        rmSync(file, { force: true });
      }
      return reply;
    },
  );

  const importRoute = route(write, {
    tags,
    summary: 'import a box archive',
    description:
      "Starts a new box from an archive of `GET /v1/boxes/{box}/export`: its files, owners, modes and options; its image is the archive's image part, kept by the server. The archive's options are not trusted: added capabilities, `allow_net` entries, volumes, ports and secrets are dropped and listed in `dropped_options` unless the `X-Box-Options` header passes them again. An upload over the server's `maxImportBytes` is refused with 422 `image` as it arrives; hostile or oversized layers likewise.",
    querystring: obj({ name: { type: 'string', description: 'name of the new box' } }),
    body: { content: { [TAR]: { schema: binary }, 'application/octet-stream': { schema: binary } } },
    response: {
      201: {
        description: 'the imported box, running',
        allOf: [
          ref('BoxInfo'),
          obj({
            dropped_options: {
              type: 'array',
              items: { type: 'string' },
              description: 'archive options not applied, as option paths (`volumes[0]`, `network.allowNet`)',
            },
          }),
        ],
      },
    },
    errors: [409, 422],
  });
  // A header rather than a query parameter: options may carry secrets, and request URLs get logged.
  importRoute.schema.headers = obj({
    [OPTIONS_HEADER]: {
      type: 'string',
      description:
        "box options passed again, as one JSON object of `BoxOptions` fields (snake_case, `name` aside; non-ASCII characters as `\\u` escapes), applied over the archive's field by field: the only way the box gets capabilities, `allow_net` entries, volumes (managed volumes among the caller's own, by name or id), ports or secrets. Refused as by `POST /v1/boxes`: `rootfs_path`, host bind mounts and `ports` answer 400 naming the field.",
    },
  });
  app.post<{
    Querystring: { name?: string };
    Headers: { [OPTIONS_HEADER]?: string };
    Body: Readable;
  }>(
    '/v1/boxes/import',
    // The body is a byte stream: its schema documents it.
    { ...importRoute, validatorCompiler: documentedBody },
    async (request, reply) => {
      const body = request.body;
      if (!body || typeof (body as Readable).pipe !== 'function') {
        throw new BoxError(`the body must be the archive (content-type ${TAR})`, { field: 'body' });
      }
      const name = validateBoxName(request.query.name);
      const given = importedOptions(request.headers[OPTIONS_HEADER]);
      const dir = join(ctx.runtime.homeDir, 'imports');
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const file = join(dir, `upload-${ulid()}.tar`);
      const maxImportBytes = ctx.runtime.imageLimits?.maxImportBytes ?? DEFAULT_IMAGE_LIMITS.maxImportBytes;
      if (Number(request.headers['content-length'] ?? 0) > maxImportBytes)
        throw importTooLarge(maxImportBytes);
      try {
        // Counted as it arrives: the upload stops at the bound, whatever the request declared.
        const counted = new HashCounter('sha256', {
          limit: maxImportBytes,
          overLimit: () => importTooLarge(maxImportBytes),
        });
        await pipeline(body, counted, createWriteStream(file, { flags: 'wx', mode: 0o600 }));
        // Admitted for the resources the box gets (the caller's, else the archive's), which are passed
        // again so that the box gets what was admitted; managed volumes resolve among the caller's own.
        const wanted = { ...(await archiveResources(file, maxImportBytes)), ...given };
        let dropped: readonly string[] = [];
        const box = await ctx.createWith(principalOf(request), wanted, name, async (runtimeName, options) => {
          const imported = await ctx.runtime.importBox(file, {
            ...(runtimeName !== undefined ? { name: runtimeName } : {}),
            options,
          });
          dropped = imported.droppedOptions;
          return imported;
        });
        const info = ctx.info(await box.info()) as Record<string, unknown>;
        return reply.code(201).send({ ...info, dropped_options: dropped });
      } finally {
        rmSync(file, { force: true });
      }
    },
  );
}
