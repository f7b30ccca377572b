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
import type { JsRuntime } from '../runtime/runtime.ts';
import { HttpError, isObject, Permission, toSnake, unknownFields } from './wire.ts';

/** What the volume routes need from the server. */
export interface VolumeRoutesOptions {
  /** The server's runtime. */
  runtime: JsRuntime;
}

/** Registers the volume routes (see the module comment). */
export async function volumeRoutes(app: FastifyInstance, options: VolumeRoutesOptions): Promise<void> {
  const read = { permission: Permission.boxesRead };
  const write = { permission: Permission.boxesWrite };

  app.post<{ Body: unknown }>('/v1/volumes', { config: write }, async (request, reply) => {
    const body = request.body ?? {};
    if (!isObject(body))
      throw new HttpError(
        400,
        'invalid_request_error',
        'invalid_body',
        'the body must be a JSON object { name? }',
      );
    unknownFields(body, new Set(['name']));
    const volume = await options.runtime.volumes.create((body.name as string | undefined) ?? undefined);
    return reply.code(201).send(toSnake(volume));
  });
  app.get('/v1/volumes', { config: read }, async () => toSnake(await options.runtime.volumes.list()));
  app.get<{ Params: { volume: string } }>('/v1/volumes/:volume', { config: read }, async (request) => {
    const volume = await options.runtime.volumes.get(request.params.volume);
    if (!volume)
      throw new HttpError(
        404,
        'not_found_error',
        'volume_not_found',
        `no volume with id or name '${request.params.volume}'`,
      );
    return toSnake(volume);
  });
  app.delete<{ Params: { volume: string } }>(
    '/v1/volumes/:volume',
    { config: write },
    async (request, reply) => {
      await options.runtime.volumes.remove(request.params.volume);
      return reply.code(204).send();
    },
  );
}
