/**
 * HTTP routes of managed volumes on the REST runtime server (a Fastify plugin; spec 002
 * `JsVolumeSpec.managedVolume`). JSON in snake_case (`wire.ts`).
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/volumes` `{ name? }` | `sandbox.boxes.write` | create → 201 volume |
 * | `GET /v1/volumes`, `GET /v1/volumes/{volume}` | `sandbox.boxes.read` | list, get (by id or name) |
 * | `DELETE /v1/volumes/{volume}` | `sandbox.boxes.write` | delete → 204 (409 while mounted) |
 */
import type { FastifyInstance } from 'fastify';
import type { JsRuntime } from '../js-runtime.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { HttpError, Permission, toSnake } from './wire.ts';

/** What the volume routes need from the server. */
export interface VolumeRoutesOptions {
  /** The server's runtime. */
  runtime: JsRuntime;
}

const tags = ['volumes'];
const volumeParams = obj({ volume: { type: 'string', description: 'volume id or name' } }, ['volume']);
const volume = { description: 'the volume', ...ref('Volume') };

/** Registers the volume routes (see the module comment). */
export async function volumeRoutes(app: FastifyInstance, options: VolumeRoutesOptions): Promise<void> {
  app.post<{ Body: { name?: string | null } | null }>(
    '/v1/volumes',
    route(Permission.boxesWrite, {
      tags,
      summary: 'create a managed volume',
      description: 'Names are unique: an existing name answers that volume.',
      body: {
        type: ['object', 'null'],
        properties: { name: { type: ['string', 'null'], minLength: 1 } },
        additionalProperties: false,
      },
      response: { 201: { description: 'created', ...ref('Volume') } },
    }),
    async (request, reply) => {
      const created = await options.runtime.volumes.create(request.body?.name ?? undefined);
      return reply.code(201).send(toSnake(created));
    },
  );
  app.get(
    '/v1/volumes',
    route(Permission.boxesRead, {
      tags,
      summary: 'list managed volumes',
      response: { 200: { description: 'volumes', type: 'array', items: ref('Volume') } },
    }),
    async () => toSnake(await options.runtime.volumes.list()),
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
      const found = await options.runtime.volumes.get(request.params.volume);
      if (!found)
        throw new HttpError(
          404,
          'not_found_error',
          'volume_not_found',
          `no volume with id or name '${request.params.volume}'`,
        );
      return toSnake(found);
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
      await options.runtime.volumes.remove(request.params.volume);
      return reply.code(204).send();
    },
  );
}
