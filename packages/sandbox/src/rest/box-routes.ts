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
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import { validateBoxName, validateBoxOptions } from '../runtime/options.ts';
import type { JsRuntime } from '../runtime/runtime.ts';
import type { JsBoxInfo, JsBoxOptions } from '../types.ts';
import { HttpError, isObject, Permission, toCamel, toSnake, unknownFields } from './wire.ts';

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
  const read = { permission: Permission.boxesRead };
  const write = { permission: Permission.boxesWrite };

  app.post('/v1/boxes', { config: write }, async (request, reply) => {
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
  });

  app.get('/v1/boxes', { config: read }, async () =>
    (await options.runtime.listInfo()).map((info) => options.info(info)),
  );

  app.get<{ Params: { box: string } }>('/v1/boxes/:box', { config: read }, async (request) => {
    const info = await options.runtime.getInfo(request.params.box);
    if (!info)
      throw new HttpError(
        404,
        'not_found_error',
        'box_not_found',
        `no box with id or name '${request.params.box}'`,
      );
    return options.info(info);
  });

  app.delete<{ Params: { box: string }; Querystring: { force?: string } }>(
    '/v1/boxes/:box',
    { config: write },
    async (request, reply) => {
      const force = request.query.force;
      if (force !== undefined && force !== 'true' && force !== 'false') {
        throw new HttpError(
          400,
          'invalid_request_error',
          'invalid_option',
          "invalid query parameter force: must be 'true' or 'false'",
          'force',
        );
      }
      const box = await options.box(request.params.box);
      await options.runtime.remove(box.id, force === 'true');
      options.forget(box.id);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { box: string } }>('/v1/boxes/:box/start', { config: write }, async (request) => {
    const box = await options.box(request.params.box);
    await box.start();
    return options.info(await box.info());
  });

  app.post<{ Params: { box: string } }>('/v1/boxes/:box/stop', { config: write }, async (request, reply) => {
    const timeout = (request.query as { timeout?: string }).timeout;
    if (timeout !== undefined && !/^\d+(\.\d+)?$/.test(timeout)) {
      throw new BoxError('invalid query parameter timeout: must be a number of seconds ≥ 0', {
        field: 'timeout',
      });
    }
    const box = await options.box(request.params.box);
    if (timeout === undefined) await box.stop();
    else await box.stopWithin(Math.round(Number(timeout) * 1000));
    const info = await options.runtime.getInfo(box.id);
    if (!info) {
      options.forget(box.id);
      return reply.code(204).send();
    }
    return options.info(info);
  });

  app.get<{ Params: { box: string } }>('/v1/boxes/:box/metrics', { config: read }, async (request) => {
    const box = await options.box(request.params.box);
    return toSnake(await box.metrics());
  });
}
