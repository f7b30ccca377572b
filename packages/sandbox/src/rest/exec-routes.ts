/**
 * HTTP routes of executions on the REST runtime server (a Fastify plugin). Every route needs the
 * `sandbox.exec` permission. The output streams are WebSocket endpoints (`exec-sockets.ts`); their GET
 * routes here answer 426 to a plain HTTP request, and document the endpoints in the OpenAPI document.
 *
 * | Route | What |
 * |---|---|
 * | `POST /v1/boxes/{box}/executions` (`ExecRequest`) | start a command → 201 status |
 * | `GET /v1/boxes/{box}/executions/{execution}` | status |
 * | `POST …/{execution}/kill`, `…/signal` `{ signal }`, `…/resize` `{ cols, rows }` | → status |
 * | `GET /v1/boxes/{box}/executions/attach` (WebSocket) | start and attach in one round trip |
 * | `GET /v1/boxes/{box}/executions/{execution}/attach[?offset=N]` (WebSocket) | attach to the output |
 * | `GET /v1/executions/stream` (WebSocket) | many executions over one connection |
 */
import type { FastifyInstance } from 'fastify';
import type { ServerContext } from './context.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { type ExecSession, normalizeSignal } from './sessions.ts';
import { HttpError, Permission } from './wire.ts';

const boxParam = { type: 'string', description: 'box id (ULID) or name' };
const executionParam = { type: 'string', description: 'execution id (ULID)' };
const boxParams = obj({ box: boxParam }, ['box']);
const executionParams = obj({ box: boxParam, execution: executionParam }, ['box', 'execution']);
const status = { description: 'the execution', ...ref('ExecutionStatus') };
const switching = {
  101: { description: 'switching protocols (WebSocket)', type: 'null' },
} as const;

type P = { box: string; execution: string };

function statusOf(session: ExecSession): unknown {
  return {
    id: session.id,
    box_id: session.boxId,
    status: session.status,
    exit_code: session.exitCode,
    attached: session.sink !== null,
  };
}

function upgradeRequired(what: string): never {
  throw new HttpError(
    'upgrade_required',
    `${what} is a WebSocket endpoint (Connection: Upgrade, Upgrade: websocket)`,
  );
}

/** Registers the execution routes (see the module comment). */
export async function execRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  const exec = Permission.exec;
  const tags = ['executions'];

  app.post<{ Params: { box: string } }>(
    '/v1/boxes/:box/executions',
    route(exec, {
      tags,
      summary: 'start a command',
      description:
        'Starts the command and keeps its output (a bounded backlog) for a client to attach with `…/{execution}/attach`.',
      params: boxParams,
      body: ref('ExecRequest'),
      response: { 201: { description: 'started', ...ref('ExecutionStatus') } },
      errors: [409, 422],
    }),
    async (request, reply) => {
      const session = await ctx.startExecution(request.params.box, request.body, principalOf(request));
      return reply.code(201).send({ id: session.id, box_id: session.boxId, status: session.status });
    },
  );

  app.get<{ Params: P }>(
    '/v1/boxes/:box/executions/:execution',
    route(exec, {
      tags,
      summary: 'execution status',
      description: 'Finished executions stay queryable for 5 minutes.',
      params: executionParams,
      response: { 200: status },
    }),
    async (request) => statusOf(await ctx.execution(request.params, principalOf(request))),
  );

  app.post<{ Params: P }>(
    '/v1/boxes/:box/executions/:execution/kill',
    route(exec, { tags, summary: 'SIGKILL the command', params: executionParams, response: { 200: status } }),
    async (request) => {
      const session = await ctx.execution(request.params, principalOf(request));
      await session.execution.kill();
      return statusOf(session);
    },
  );

  app.post<{ Params: P; Body: { signal: string } }>(
    '/v1/boxes/:box/executions/:execution/signal',
    route(exec, {
      tags,
      summary: 'send a signal to the command',
      params: executionParams,
      body: obj({ signal: { type: 'string', description: 'signal name, e.g. SIGTERM' } }, ['signal']),
      response: { 200: status },
    }),
    async (request) => {
      const session = await ctx.execution(request.params, principalOf(request));
      const { signal } = request.body;
      try {
        normalizeSignal(signal);
      } catch (error) {
        throw new HttpError('invalid_option', `invalid field signal: ${(error as Error).message}`, 'signal');
      }
      await session.signal(signal);
      return statusOf(session);
    },
  );

  const size = { type: 'integer', minimum: 1, maximum: 10000 };
  app.post<{ Params: P; Body: { cols: number; rows: number } }>(
    '/v1/boxes/:box/executions/:execution/resize',
    route(exec, {
      tags,
      summary: 'resize the terminal of a tty command',
      params: executionParams,
      body: obj({ cols: size, rows: size }, ['cols', 'rows']),
      response: { 200: status },
    }),
    async (request) => {
      const session = await ctx.execution(request.params, principalOf(request));
      await session.resize(request.body.cols, request.body.rows);
      return statusOf(session);
    },
  );

  app.get<{ Params: { box: string } }>(
    '/v1/boxes/:box/executions/attach',
    route(exec, {
      tags,
      summary: 'WebSocket: start a command and attach in one round trip',
      description:
        'The first client frame is `{"type":"start", cmd, args?, env?, tty?, cwd?, user?}` (an `ExecRequest`), or the start request travels base64url-encoded in the `sandbox-exec` header of the upgrade; the server answers `{"type":"started","id"}` (or `{"type":"error","status","error"}` and closes), then streams as an attach at offset 0.',
      params: boxParams,
      response: switching,
      errors: [426],
    }),
    async (request) => {
      await ctx.box(request.params.box, principalOf(request));
      upgradeRequired('start-and-attach');
    },
  );

  app.get<{ Params: P }>(
    '/v1/boxes/:box/executions/:execution/attach',
    route(exec, {
      tags,
      summary: 'WebSocket: attach to the output and input of an execution',
      description:
        'Frames as in the document description; `offset` resumes after that many output bytes. One attached client at a time (409).',
      params: executionParams,
      querystring: obj({
        offset: { type: 'integer', minimum: 0, description: 'resume after this many output bytes' },
      }),
      response: switching,
      errors: [409, 426],
    }),
    async (request) => {
      await ctx.execution(request.params, principalOf(request));
      upgradeRequired('attach');
    },
  );

  app.get(
    '/v1/executions/stream',
    route(exec, {
      tags,
      summary: 'WebSocket: many executions in any boxes over one connection',
      description:
        'Frames as in the document description. An execution attached here counts as attached (409 for a second client), and is reattached with `…/{execution}/attach?offset=N` when the connection drops. An access token is checked for expiry at every start (close code 4401).',
      response: switching,
      errors: [426],
    }),
    async () => upgradeRequired('the exec stream'),
  );
}
