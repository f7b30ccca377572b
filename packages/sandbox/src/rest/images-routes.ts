/**
 * HTTP routes of `runtime.images` on the REST runtime server (a Fastify plugin): the server's image
 * store, as BoxLite's REST runtime offers it. JSON in snake_case; errors are `BoxError`s mapped by code
 * (`wire.ts`): an image that cannot be pulled is 422 `image`, a missing one 404, one in use 409.
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/images/pull` `{ reference }` | `sandbox.boxes.write` | pull → `{ reference, config_digest, layer_count, digest, resolved_reference }` |
 * | `GET /v1/images` | `sandbox.boxes.read` | stored images (`images.list()` entries) |
 * | `DELETE /v1/images?reference=` | `sandbox.operator` | remove a reference → 204 |
 *
 * The image store is the node's, shared by every tenant (images are not tenant resources): tenants pull
 * and list; only the operator removes.
 */
import type { FastifyInstance } from 'fastify';
import type { RuntimeImages } from '../runtime/backend.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { Permission, toSnake } from './wire.ts';

/** What the image routes need from the server. */
export interface ImageRoutesOptions {
  /** The server runtime's image operations. */
  images(): RuntimeImages;
}

const REFERENCE_SCHEMA = {
  type: 'string',
  minLength: 1,
  maxLength: 512,
  pattern: '^[^\\s\\u0000]+$',
  description: 'image reference, e.g. busybox:latest or registry:5000/library/alpine@sha256:…',
} as const;
const tags = ['images'];

/** Registers the image routes (see the module comment). */
export async function imageRoutes(app: FastifyInstance, options: ImageRoutesOptions): Promise<void> {
  app.post<{ Body: { reference: string } }>(
    '/v1/images/pull',
    route(Permission.boxesWrite, {
      tags,
      summary: 'pull an image into the server store (BoxLite images.pull)',
      body: { ...obj({ reference: REFERENCE_SCHEMA }, ['reference']), additionalProperties: false },
      response: { 200: { description: 'pulled (or already stored)', ...ref('ImagePullResult') } },
      errors: [422],
    }),
    async (request) => toSnake(await options.images().pull(request.body.reference)),
  );

  app.get(
    '/v1/images',
    route(Permission.boxesRead, {
      tags,
      summary: 'stored images (BoxLite images.list)',
      response: { 200: { description: 'images', type: 'array', items: ref('ListedImage') } },
    }),
    async () => toSnake(await options.images().list()),
  );

  app.delete<{ Querystring: { reference: string } }>(
    '/v1/images',
    route(Permission.operator, {
      tags,
      summary: 'remove an image reference',
      description:
        'Refused (409) while a box uses it. The image store is shared by every tenant: operators only.',
      querystring: obj({ reference: REFERENCE_SCHEMA }, ['reference']),
      response: { 204: { description: 'removed', type: 'null' } },
      errors: [404, 409],
    }),
    async (request, reply) => {
      await options.images().remove(request.query.reference);
      return reply.code(204).send();
    },
  );
}
