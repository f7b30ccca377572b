/**
 * HTTP routes of the boxes themselves on the REST runtime server (a Fastify plugin): create, list, get,
 * remove, start, stop and metrics. JSON in snake_case (`wire.ts`); errors are `HttpError`s or `BoxError`s
 * mapped by code.
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/boxes` (options + `name`) | `sandbox.boxes.write` | create → 201 box |
 * | `GET /v1/boxes[?label=key=value]`, `GET /v1/boxes/{box}` | `sandbox.boxes.read` | list (by labels), get |
 * | `DELETE /v1/boxes/{box}[?force=true]` | `sandbox.boxes.write` | remove → 204 |
 * | `POST /v1/boxes/{box}/start`, `POST …/stop[?timeout=s]` | `sandbox.boxes.write` | start, stop → box (204 once an `autoRemove` box is gone) |
 * | `GET /v1/boxes/{box}/metrics` | `sandbox.boxes.read` | box metrics |
 *
 * Every route acts as the caller's tenant (`ServerContext`): lists show its boxes, another tenant's box
 * is 404, names are unique per tenant, and creation applies its quotas and the node's admission.
 */
import type { FastifyInstance } from 'fastify';
import { labelFilter, MAX_LABELS, validateBoxName, validateBoxOptions } from '../runtime/options.ts';
import type { JsBoxOptions } from '../types.ts';
import type { ServerContext } from './context.ts';
import { principalOf } from './hooks.ts';
import { refuseHostReach } from './host-reach.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { documentedBody } from './validation.ts';
import { HttpError, isObject, Permission, toCamel, toSnake, unknownFields } from './wire.ts';

const boxParams = obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']);
const boxAnswer = { description: 'the box', ...ref('BoxInfo') };
const tags = ['boxes'];

/** Fields of the create body (camelCase after `toCamel`): `JsBoxOptions` and the box `name`. */
export const BOX_OPTION_FIELDS: ReadonlySet<string> = new Set([
  'name',
  'image',
  'rootfsPath',
  'cpus',
  'memoryMib',
  'diskSizeGb',
  'workingDir',
  'env',
  'volumes',
  'network',
  'ports',
  'secrets',
  'advanced',
  'autoRemove',
  'detach',
  'isolation',
  'autoPause',
  'autoDelete',
  'autoResume',
  'timeoutMs',
  'onTimeout',
  'entrypoint',
  'cmd',
  'user',
  'healthCheck',
  'labels',
]);

/** Registers the box routes (see the module comment). */
export async function boxRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const read = Permission.boxesRead;
  const write = Permission.boxesWrite;

  app.post(
    '/v1/boxes',
    {
      ...route(write, {
        tags,
        summary: 'create and start a box',
        description:
          'A warm pool of the server with the same options (name and lifetimes aside) hands out a ready box instead (`POST /v1/pools`).',
        body: ref('BoxOptions'),
        response: { 201: { description: 'created', ...ref('BoxInfo') } },
        errors: [409, 422, 429, 503],
      }),
      // Box options are checked by the SDK's option rules (errors name the camelCase option, as locally).
      validatorCompiler: documentedBody,
    },
    async (request, reply) => {
      const body = request.body ?? {};
      if (!isObject(body))
        throw new HttpError('invalid_body', 'the body must be a JSON object of box options');
      const { name, ...rest } = toCamel<JsBoxOptions & { name?: string }>(body);
      unknownFields({ name, ...rest }, BOX_OPTION_FIELDS);
      validateBoxName(name);
      // Spec 002 rejection 4 (no host paths from a client) and "port publication is local-runtime only".
      refuseHostReach(rest as Record<string, unknown>);
      validateBoxOptions(rest, { allowHostBinds: false });
      const box = await ctx.createBox(principalOf(request), rest, name ?? undefined);
      return reply.code(201).send(ctx.info(await box.info()));
    },
  );

  app.get<{ Querystring: { label?: string | string[] } }>(
    '/v1/boxes',
    route(read, {
      tags,
      summary: 'list boxes',
      description:
        "The caller's boxes (every tenant's for the operator), oldest first (boxes held ready by a warm pool are not listed).",
      querystring: obj({
        label: {
          type: ['string', 'array'],
          items: { type: 'string' },
          maxItems: MAX_LABELS,
          description:
            'only boxes with this label: `key=value`, or `key` for any value (repeatable: all must match)',
        },
      }),
      response: { 200: { description: 'boxes', type: 'array', items: ref('BoxInfo') } },
    }),
    async (request) => {
      const { label } = request.query;
      const matches = labelFilter(label === undefined ? [] : typeof label === 'string' ? [label] : label);
      return (await ctx.listBoxes(principalOf(request))).filter(matches).map((info) => ctx.info(info));
    },
  );

  app.get<{ Params: { box: string } }>(
    '/v1/boxes/:box',
    route(read, { tags, summary: 'box metadata', params: boxParams, response: { 200: boxAnswer } }),
    async (request) => {
      const box = await ctx.box(request.params.box, principalOf(request));
      const info = await ctx.runtime.getInfo(box.id);
      if (!info) throw new HttpError('not_found', `no box with id or name '${request.params.box}'`);
      return ctx.info(info);
    },
  );

  app.delete<{ Params: { box: string }; Querystring: { force?: 'true' | 'false' } }>(
    '/v1/boxes/:box',
    route(write, {
      tags,
      summary: 'remove a box and everything it owns',
      params: boxParams,
      querystring: obj({
        force: { type: 'string', enum: ['true', 'false'], description: 'kill a running box (default false)' },
      }),
      response: { 204: { description: 'removed', type: 'null' } },
      errors: [409],
    }),
    async (request, reply) => {
      await ctx.removeBox(principalOf(request), request.params.box, request.query.force === 'true');
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { box: string } }>(
    '/v1/boxes/:box/start',
    route(write, {
      tags,
      summary: 'start a stopped box again',
      description: 'Its writable layer and volumes are kept; a running box is left as is.',
      params: boxParams,
      response: { 200: boxAnswer },
      errors: [409, 429, 503],
    }),
    async (request) => {
      const box = await ctx.startBox(principalOf(request), request.params.box);
      return ctx.info(await box.info());
    },
  );

  app.post<{ Params: { box: string }; Querystring: { timeout?: number } }>(
    '/v1/boxes/:box/stop',
    route(write, {
      tags,
      summary: 'stop the box',
      description:
        'Its commands get SIGTERM, then SIGKILL after `timeout`; an `auto_remove` box is removed (204).',
      params: boxParams,
      querystring: obj({
        timeout: {
          type: 'number',
          minimum: 0,
          description:
            'seconds the commands get after SIGTERM before SIGKILL (default: the engine grace, 2 s)',
        },
      }),
      response: { 200: boxAnswer, 204: { description: 'stopped and removed (auto_remove)', type: 'null' } },
    }),
    async (request, reply) => {
      const timeout = request.query.timeout;
      const box = await ctx.box(request.params.box, principalOf(request));
      if (timeout === undefined) await box.stop();
      else await box.stopWithin(Math.round(timeout * 1000));
      const info = await ctx.runtime.getInfo(box.id);
      if (!info) {
        ctx.forget(box.id);
        return reply.code(204).send();
      }
      return ctx.info(info);
    },
  );

  app.get<{ Params: { box: string } }>(
    '/v1/boxes/:box/metrics',
    route(read, {
      tags,
      summary: 'box metrics (spec 002 JsBoxMetrics)',
      params: boxParams,
      response: { 200: { description: 'metrics', ...ref('BoxMetrics') } },
    }),
    async (request) => {
      const box = await ctx.box(request.params.box, principalOf(request));
      return toSnake(await box.metrics());
    },
  );
}
