/**
 * HTTP routes of box pause/resume and lifetimes on the REST runtime server (a Fastify plugin).
 * Every route needs the `sandbox.boxes.write` permission; bodies are snake_case JSON; errors are `BoxError`s mapped
 * by code (`wire.ts`: `conflict` 409, `not_found` 404, `invalid_option` 400).
 *
 * | Route | What |
 * |---|---|
 * | `POST /v1/boxes/{box}/pause` | freezes the box → 204 (`JsBox.pause`) |
 * | `POST /v1/boxes/{box}/resume` | thaws it → 204 (`JsBox.resume`) |
 * | `POST /v1/boxes/{box}/timeout` `{ timeout_ms, on_timeout? }` | sets its timeout → 204 (`JsBox.setTimeout`) |
 */
import type { FastifyInstance } from 'fastify';
import type { JsBox } from '../runtime/box.ts';
import type { TimeoutAction } from '../types.ts';
import type { Principal } from './auth.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj } from './schemas.ts';
import type { Permission } from './wire.ts';

/** What the lifecycle routes need from the server. */
export interface LifecycleRoutesOptions {
  /** The box with this id or name as `principal` sees it. @throws BoxError `not_found` (another tenant's too). */
  box(idOrName: string, principal: Principal): Promise<JsBox>;
  /** Route config carrying the permission every route requires (`sandbox.boxes.write`). */
  config: { permission: Permission };
}

type P = { box: string };

const tags = ['boxes'];
const boxParams = obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']);

/** Registers the lifecycle routes (see the module comment). */
export async function lifecycleRoutes(app: FastifyInstance, options: LifecycleRoutesOptions): Promise<void> {
  const { permission } = options.config;

  app.post<{ Params: P }>(
    '/v1/boxes/:box/pause',
    route(permission, {
      tags,
      summary: 'pause the box',
      description:
        'Its processes are frozen (cgroup freezer) and use no CPU; commands are refused (or resume it, with `auto_resume`). A paused box is left as is.',
      params: boxParams,
      response: { 204: { description: 'paused', type: 'null' } },
      errors: [409],
    }),
    async (request, reply) => {
      await (await options.box(request.params.box, principalOf(request))).pause();
      return reply.code(204).send();
    },
  );

  app.post<{ Params: P }>(
    '/v1/boxes/:box/resume',
    route(permission, {
      tags,
      summary: 'resume a paused box',
      description: 'A running box is left as is.',
      params: boxParams,
      response: { 204: { description: 'running', type: 'null' } },
      errors: [409],
    }),
    async (request, reply) => {
      await (await options.box(request.params.box, principalOf(request))).resume();
      return reply.code(204).send();
    },
  );

  app.post<{ Params: P; Body: { timeout_ms: number; on_timeout?: TimeoutAction } }>(
    '/v1/boxes/:box/timeout',
    route(permission, {
      tags,
      summary: "set the box's timeout",
      description:
        "`on_timeout` (default the box's own, else stop) happens `timeout_ms` from now (E2B `setTimeout`).",
      params: boxParams,
      body: {
        ...obj(
          {
            timeout_ms: { type: 'number', exclusiveMinimum: 0, description: 'ms from now' },
            on_timeout: { enum: ['stop', 'pause', 'remove'] },
          },
          ['timeout_ms'],
        ),
        additionalProperties: false,
      },
      response: { 204: { description: 'set', type: 'null' } },
      errors: [409],
    }),
    async (request, reply) => {
      const box = await options.box(request.params.box, principalOf(request));
      await box.setTimeout(request.body.timeout_ms, request.body.on_timeout);
      return reply.code(204).send();
    },
  );
}
