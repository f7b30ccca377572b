/**
 * HTTP routes of box pause/resume and lifetimes on the REST runtime server (a Fastify plugin; issue 18).
 * Every route needs the `boxes:write` permission; bodies are snake_case JSON; errors are `BoxError`s mapped
 * by code (`wire.ts`: `conflict` 409, `not_found` 404, `invalid_option` 400).
 *
 * | Route | What |
 * |---|---|
 * | `POST /v1/boxes/{box}/pause` | freezes the box → 204 (`JsBox.pause`) |
 * | `POST /v1/boxes/{box}/resume` | thaws it → 204 (`JsBox.resume`) |
 * | `POST /v1/boxes/{box}/timeout` `{ timeout_ms, on_timeout? }` | sets its timeout → 204 (`JsBox.setTimeout`) |
 */
import type { FastifyInstance } from 'fastify';
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import type { Permission } from './wire.ts';

/** What the lifecycle routes need from the server. */
export interface LifecycleRoutesOptions {
  /** The box with this id or name. @throws BoxError `not_found`. */
  box(idOrName: string): Promise<JsBox>;
  /** Route config carrying the permission every route requires (`boxes:write`). */
  config: { permission: Permission };
}

type P = { box: string };

const TIMEOUT_FIELDS = new Set(['timeout_ms', 'on_timeout']);

/** Registers the lifecycle routes (see the module comment). */
export async function lifecycleRoutes(app: FastifyInstance, options: LifecycleRoutesOptions): Promise<void> {
  const { config } = options;

  app.post<{ Params: P }>('/v1/boxes/:box/pause', { config }, async (request, reply) => {
    await (await options.box(request.params.box)).pause();
    return reply.code(204).send();
  });

  app.post<{ Params: P }>('/v1/boxes/:box/resume', { config }, async (request, reply) => {
    await (await options.box(request.params.box)).resume();
    return reply.code(204).send();
  });

  app.post<{ Params: P; Body: unknown }>('/v1/boxes/:box/timeout', { config }, async (request, reply) => {
    const body = request.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new BoxError('the body must be an object { timeout_ms, on_timeout? }', { field: 'body' });
    }
    const fields = body as Record<string, unknown>;
    for (const key of Object.keys(fields)) {
      if (!TIMEOUT_FIELDS.has(key)) throw new BoxError(`unknown field '${key}'`, { field: key });
    }
    const box = await options.box(request.params.box);
    await box.setTimeout(
      fields.timeout_ms as number,
      fields.on_timeout === undefined ? undefined : (fields.on_timeout as 'stop'),
    );
    return reply.code(204).send();
  });
}
