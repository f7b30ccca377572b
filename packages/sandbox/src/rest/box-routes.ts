/**
 * HTTP routes of the boxes themselves on the REST runtime server (a Fastify plugin): create, list, get,
 * remove, start, stop and metrics. JSON in snake_case (`wire.ts`); errors are `HttpError`s or `BoxError`s
 * mapped by code.
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/boxes` (options + `name`) | `sandbox.boxes.write` | create → 201 box |
 * | `GET /v1/boxes`, `GET /v1/boxes/{box}` | `sandbox.boxes.read` | list, get |
 * | `DELETE /v1/boxes/{box}[?force=true]` | `sandbox.boxes.write` | remove → 204 |
 * | `POST /v1/boxes/{box}/start`, `POST …/stop[?timeout=s]` | `sandbox.boxes.write` | start, stop → box (204 once an `autoRemove` box is gone) |
 * | `GET /v1/boxes/{box}/metrics` | `sandbox.boxes.read` | box metrics |
 */
import type { FastifyInstance } from 'fastify';
import type { JsRuntime } from '../js-runtime.ts';
import type { JsBox } from '../runtime/box.ts';
import { validateBoxName, validateBoxOptions } from '../runtime/options.ts';
import type { JsBoxInfo, JsBoxOptions } from '../types.ts';
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
]);

/** What the box routes need from the server. */
export interface BoxRoutesOptions {
  /** The server's runtime. */
  runtime: JsRuntime;
  /** The box with this id or name. @throws BoxError `not_found`. */
  box(idOrName: string): Promise<JsBox>;
  /** A box's metadata as the server answers it (snake_case; publications as the server knows them). */
  info(info: JsBoxInfo): unknown;
  /** Remembers a handle of a box this server created. */
  created(box: JsBox): void;
  /** Forgets a removed box: its handle and its executions. */
  forget(boxId: string): void;
}

/** Registers the box routes (see the module comment). */
export async function boxRoutes(app: FastifyInstance, options: BoxRoutesOptions): Promise<void> {
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
        errors: [409, 422],
      }),
      // Box options are checked by the SDK's option rules (errors name the camelCase option, as locally).
      validatorCompiler: documentedBody,
    },
    async (request, reply) => {
      const body = request.body ?? {};
      if (!isObject(body))
        throw new HttpError(
          400,
          'invalid_request_error',
          'invalid_body',
          'the body must be a JSON object of box options',
        );
      const { name, ...rest } = toCamel<JsBoxOptions & { name?: string }>(body);
      unknownFields({ name, ...rest }, BOX_OPTION_FIELDS);
      validateBoxName(name);
      // Spec 002 rejection 4 (no host paths from a client) and "port publication is local-runtime only".
      validateBoxOptions(rest, { allowHostBinds: false });
      if (Array.isArray(rest.ports) && rest.ports.length > 0) {
        throw new HttpError(
          400,
          'invalid_request_error',
          'invalid_option',
          'invalid box option ports: port publication is refused by a REST runtime (local runtime only)',
          'ports',
        );
      }
      const box = await options.runtime.create(rest, name ?? undefined);
      options.created(box);
      return reply.code(201).send(options.info(await box.info()));
    },
  );

  app.get(
    '/v1/boxes',
    route(read, {
      tags,
      summary: 'list boxes',
      description: 'Every box of the runtime, oldest first (boxes held ready by a warm pool are not listed).',
      response: { 200: { description: 'boxes', type: 'array', items: ref('BoxInfo') } },
    }),
    async () => (await options.runtime.listInfo()).map((info) => options.info(info)),
  );

  app.get<{ Params: { box: string } }>(
    '/v1/boxes/:box',
    route(read, { tags, summary: 'box metadata', params: boxParams, response: { 200: boxAnswer } }),
    async (request) => {
      const info = await options.runtime.getInfo(request.params.box);
      if (!info)
        throw new HttpError(
          404,
          'not_found_error',
          'box_not_found',
          `no box with id or name '${request.params.box}'`,
        );
      return options.info(info);
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
      const force = request.query.force;
      const box = await options.box(request.params.box);
      await options.runtime.remove(box.id, force === 'true');
      options.forget(box.id);
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
      errors: [409],
    }),
    async (request) => {
      const box = await options.box(request.params.box);
      await box.start();
      return options.info(await box.info());
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
      const box = await options.box(request.params.box);
      if (timeout === undefined) await box.stop();
      else await box.stopWithin(Math.round(timeout * 1000));
      const info = await options.runtime.getInfo(box.id);
      if (!info) {
        options.forget(box.id);
        return reply.code(204).send();
      }
      return options.info(info);
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
      const box = await options.box(request.params.box);
      return toSnake(await box.metrics());
    },
  );
}
