/**
 * HTTP routes of the stateful code interpreter on the REST runtime server (a Fastify plugin; the
 * `sandbox.exec` permission): each context is a live Jupyter kernel in the box, driven by this server
 * (`src/interpreter/`). Bodies are snake_case JSON; errors are `BoxError`s mapped by code (`wire.ts`).
 *
 * | Route | What |
 * |---|---|
 * | `POST /v1/boxes/{box}/code/contexts` `{ language?, cwd? }` | starts a context → 201 `{ id, language, cwd }` |
 * | `GET /v1/boxes/{box}/code/contexts` | the live contexts → 200 `[{ id, language, cwd }]` |
 * | `POST /v1/boxes/{box}/code/contexts/{context}/restart` | restarts its kernel (state gone) → 204 |
 * | `DELETE /v1/boxes/{box}/code/contexts/{context}` | shuts it down → 204 |
 * | `POST /v1/boxes/{box}/code/execute` `{ code, context_id?, language?, env_vars?, timeout_ms? }` | runs code → 200 NDJSON |
 *
 * The execute answer is E2B's `/execute` stream (`application/x-ndjson`, one event per line:
 * `stdout`/`stderr`, `result`, `error`, `number_of_executions`, `end_of_execution`). Its status is sent
 * with the first event, so a bad context or option is still a 4xx; a client that disconnects interrupts
 * the kernel.
 */
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { encodeEvent } from '../interpreter/events.ts';
import type { CodeInterpreter, ExecutionEvent } from '../interpreter/types.ts';
import type { JsBox } from '../runtime/box.ts';
import type { Principal } from './auth.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj } from './schemas.ts';
import type { Permission } from './wire.ts';

/** What the code routes need from the server. */
export interface CodeRoutesOptions {
  /** The box with this id or name as `principal` sees it. @throws BoxError `not_found` (another tenant's too). */
  box(idOrName: string, principal: Principal): Promise<JsBox>;
  /** Route config carrying the permission every route requires (`sandbox.exec`). */
  config: { permission: Permission };
}

type P = { box: string };
type PC = { box: string; context: string };

const tags = ['code'];
const boxParams = obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']);
const contextParams = obj(
  {
    box: { type: 'string', description: 'box id (ULID) or name' },
    context: { type: 'string', description: 'context id' },
  },
  ['box', 'context'],
);
const contextSchema = obj(
  {
    id: { type: 'string' },
    language: { type: 'string' },
    cwd: { type: 'string' },
  },
  ['id', 'language', 'cwd'],
);

/** The interpreter of a box on this server (local boxes: the box's Jupyter Server driven from here). */
async function interpreterOf(
  options: CodeRoutesOptions,
  request: { params: { box: string }; principal?: Principal },
): Promise<CodeInterpreter> {
  return (await options.box(request.params.box, principalOf(request))).interpreter;
}

/** Registers the code routes (see the module comment). */
export async function codeRoutes(app: FastifyInstance, options: CodeRoutesOptions): Promise<void> {
  const { permission } = options.config;

  app.post<{ Params: P; Body: { language?: string; cwd?: string } }>(
    '/v1/boxes/:box/code/contexts',
    route(permission, {
      tags,
      summary: 'start a code context (a Jupyter kernel in the box)',
      description:
        'The context keeps its state between executions. `language` defaults to python (the kernels the image has); `cwd` to the box working directory. 409 past the per-box context limit.',
      params: boxParams,
      body: obj({
        language: { type: 'string', maxLength: 32 },
        cwd: { type: 'string', maxLength: 4096 },
      }),
      response: { 201: { description: 'started', ...contextSchema } },
      errors: [404, 409, 501],
    }),
    async (request, reply) => {
      const interpreter = await interpreterOf(options, request);
      const body = request.body ?? {};
      const context = await interpreter.createContext({
        ...(body.language !== undefined ? { language: body.language } : {}),
        ...(body.cwd !== undefined ? { cwd: body.cwd } : {}),
      });
      return reply.code(201).send(context);
    },
  );

  app.get<{ Params: P }>(
    '/v1/boxes/:box/code/contexts',
    route(permission, {
      tags,
      summary: 'list the code contexts of the box',
      params: boxParams,
      response: { 200: { description: 'the live contexts', type: 'array', items: contextSchema } },
      errors: [404],
    }),
    async (request) => (await interpreterOf(options, request)).listContexts(),
  );

  app.post<{ Params: PC }>(
    '/v1/boxes/:box/code/contexts/:context/restart',
    route(permission, {
      tags,
      summary: 'restart a code context (its state is gone)',
      params: contextParams,
      response: { 204: { description: 'restarted', type: 'null' } },
      errors: [404],
    }),
    async (request, reply) => {
      await (await interpreterOf(options, request)).restartContext(request.params.context);
      return reply.code(204).send();
    },
  );

  app.delete<{ Params: PC }>(
    '/v1/boxes/:box/code/contexts/:context',
    route(permission, {
      tags,
      summary: 'shut a code context down',
      params: contextParams,
      response: { 204: { description: 'removed', type: 'null' } },
      errors: [404],
    }),
    async (request, reply) => {
      await (await interpreterOf(options, request)).removeContext(request.params.context);
      return reply.code(204).send();
    },
  );

  app.post<{
    Params: P;
    Body: {
      code: string;
      context_id?: string;
      language?: string;
      env_vars?: Record<string, string>;
      timeout_ms?: number;
    };
  }>(
    '/v1/boxes/:box/code/execute',
    route(permission, {
      tags,
      summary: 'run code in a context; answers the events as NDJSON (E2B /execute)',
      description:
        'Without `context_id`, the default context of `language` (python) is used, made on first use. `timeout_ms` (default 60000, 0: none) interrupts the kernel; the error event is then `TimeoutError`. Output past 16 MiB interrupts it too (`OutputLimitExceeded`).',
      params: boxParams,
      body: obj(
        {
          code: { type: 'string', maxLength: 16 * 1024 * 1024 },
          context_id: { type: 'string', maxLength: 128 },
          language: { type: 'string', maxLength: 32 },
          env_vars: { type: 'object', additionalProperties: { type: 'string' }, maxProperties: 256 },
          timeout_ms: { type: 'integer', minimum: 0, maximum: 86_400_000 },
        },
        ['code'],
      ),
      response: {
        200: {
          description: 'one JSON event per line (application/x-ndjson)',
          content: { 'application/x-ndjson': { schema: { type: 'string' } } },
        },
      },
      errors: [404, 409, 501],
    }),
    async (request, reply) => {
      const interpreter = await interpreterOf(options, request);
      const body = request.body;
      const aborter = new AbortController();
      const stream = new PassThrough();
      let started: () => void = () => {};
      const firstEvent = new Promise<void>((resolve) => {
        started = resolve;
      });
      const onEvent = (event: ExecutionEvent) => {
        stream.write(encodeEvent(event));
        started();
      };
      // The response closes early when the client goes away: interrupt the kernel.
      reply.raw.on('close', () => {
        if (!reply.raw.writableFinished) aborter.abort();
      });
      const running = interpreter.execute(body.code, {
        ...(body.context_id !== undefined ? { context: body.context_id } : {}),
        ...(body.language !== undefined ? { language: body.language } : {}),
        ...(body.env_vars !== undefined ? { envVars: body.env_vars } : {}),
        ...(body.timeout_ms !== undefined ? { timeoutMs: body.timeout_ms } : {}),
        signal: aborter.signal,
        onEvent,
      });
      // Errors before the first event (unknown context, bad option) answer with their status.
      await Promise.race([firstEvent, running]);
      running.then(
        () => stream.end(),
        (error: Error) => stream.destroy(error),
      );
      return reply.code(200).header('content-type', 'application/x-ndjson').send(stream);
    },
  );
}
