/**
 * HTTP routes of `runtime.images` on the REST runtime server (a Fastify plugin): the server's image
 * store, as BoxLite's REST runtime offers it. JSON in snake_case; errors are `BoxError`s mapped by code
 * (`wire.ts`): an image that cannot be pulled is 422 `image`, a missing one 404, one in use 409.
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/images/pull` `{ reference }` | `sandbox.boxes.write` | pull → `{ reference, config_digest, layer_count, digest, resolved_reference }` |
 * | `GET /v1/images` | `sandbox.boxes.read` | stored images (`images.list()` entries) |
 * | `DELETE /v1/images?reference=` | `sandbox.boxes.write` | remove a reference → 204 |
 */
import type { FastifyInstance } from 'fastify';
import { BoxError } from '../errors.ts';
import type { RuntimeImages } from '../runtime/backend.ts';
import { Permission, toSnake } from './wire.ts';

/** What the image routes need from the server. */
export interface ImageRoutesOptions {
  /** The server runtime's image operations. */
  images(): RuntimeImages;
}

/** JSON schema of an image reference as the routes accept it. */
const REFERENCE_SCHEMA = { type: 'string', minLength: 1, maxLength: 512 } as const;

function reference(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '' || value.length > 512 || /[\s\0]/.test(value)) {
    throw new BoxError(
      `invalid image option ${field}: must be an image reference (1-512 characters, no spaces)`,
      {
        field,
      },
    );
  }
  return value;
}

/** Registers the image routes (see the module comment). */
export async function imageRoutes(app: FastifyInstance, options: ImageRoutesOptions): Promise<void> {
  const read = { permission: Permission.boxesRead };
  const write = { permission: Permission.boxesWrite };

  app.post<{ Body: unknown }>(
    '/v1/images/pull',
    {
      config: write,
      schema: {
        body: { type: 'object', properties: { reference: REFERENCE_SCHEMA }, required: ['reference'] },
      },
      // The body is checked below with errors naming the field (the server's error shape).
      validatorCompiler: () => () => true,
    },
    async (request) => {
      const body = request.body as Record<string, unknown> | null;
      const ref = reference(body?.reference, 'reference');
      return toSnake(await options.images().pull(ref));
    },
  );

  app.get('/v1/images', { config: read }, async () => toSnake(await options.images().list()));

  app.delete<{ Querystring: { reference?: string } }>(
    '/v1/images',
    {
      config: write,
      schema: {
        querystring: { type: 'object', properties: { reference: REFERENCE_SCHEMA }, required: ['reference'] },
      },
      validatorCompiler: () => () => true,
    },
    async (request, reply) => {
      await options.images().remove(reference(request.query.reference, 'reference'));
      return reply.code(204).send();
    },
  );
}
