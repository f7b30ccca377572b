/**
 * HTTP routes of managed volumes on the REST runtime server (a Fastify plugin; spec 002
 * `JsVolumeSpec.managedVolume`). JSON in snake_case (`wire.ts`).
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/volumes` `{ name? }` | `sandbox.boxes.write` | create → 201 volume |
 * | `GET /v1/volumes`, `GET /v1/volumes/{volume}` | `sandbox.boxes.read` | list, get (by id or name) |
 * | `DELETE /v1/volumes/{volume}` | `sandbox.boxes.write` | delete → 204 (409 while mounted) |
 *
 * Volumes belong to the caller's tenant (`tenancy/volumes.ts`): names are unique per tenant, another
 * tenant's volume is 404, lists show the caller's (every tenant's for the operator).
 */
import type { FastifyInstance } from 'fastify';
import type { ServerContext } from './context.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { createVolume, findVolume, listVolumes, removeVolume, volumeView } from './tenancy/volumes.ts';
import { HttpError, Permission, toSnake } from './wire.ts';

const tags = ['volumes'];
const volumeParams = obj({ volume: { type: 'string', description: 'volume id or name' } }, ['volume']);
const volume = { description: 'the volume', ...ref('Volume') };

/** Registers the volume routes (see the module comment). */
export async function volumeRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  app.post<{ Body: { name?: string | null } | null }>(
    '/v1/volumes',
    route(Permission.boxesWrite, {
      tags,
      summary: 'create a managed volume',
      description: "Names are unique per tenant: an existing name answers the caller's volume of that name.",
      body: {
        type: ['object', 'null'],
        properties: { name: { type: ['string', 'null'], minLength: 1 } },
        additionalProperties: false,
      },
      response: { 201: { description: 'created', ...ref('Volume') } },
    }),
    async (request, reply) => {
      const name = request.body?.name ?? undefined;
      const created = await createVolume(ctx.runtime, ctx.owners, principalOf(request), name);
      return reply.code(201).send(toSnake(volumeView(ctx.owners, created)));
    },
  );
  app.get(
    '/v1/volumes',
    route(Permission.boxesRead, {
      tags,
      summary: 'list managed volumes',
      response: { 200: { description: 'volumes', type: 'array', items: ref('Volume') } },
    }),
    async (request) =>
      toSnake(
        (await listVolumes(ctx.runtime, ctx.owners, principalOf(request))).map((v) =>
          volumeView(ctx.owners, v),
        ),
      ),
  );
  app.get<{ Params: { volume: string } }>(
    '/v1/volumes/:volume',
    route(Permission.boxesRead, {
      tags,
      summary: 'a managed volume',
      params: volumeParams,
      response: { 200: volume },
    }),
    async (request) => {
      const found = await findVolume(ctx.runtime, ctx.owners, principalOf(request), request.params.volume);
      if (!found)
        throw new HttpError('volume_not_found', `no volume with id or name '${request.params.volume}'`);
      return toSnake(volumeView(ctx.owners, found));
    },
  );
  app.delete<{ Params: { volume: string } }>(
    '/v1/volumes/:volume',
    route(Permission.boxesWrite, {
      tags,
      summary: 'delete a managed volume and its data',
      description: 'Refused (409) while a box mounts it.',
      params: volumeParams,
      response: { 204: { description: 'deleted', type: 'null' } },
      errors: [409],
    }),
    async (request, reply) => {
      await removeVolume(ctx.runtime, ctx.owners, principalOf(request), request.params.volume);
      return reply.code(204).send();
    },
  );
}
