/**
 * E2B's control plane at the server's root (E2B `spec/openapi.yml`, as the `e2b` SDK 2.5x and older SDKs
 * call it): create (`POST /v2/sandboxes`, `POST /sandboxes`), list (`GET /v2/sandboxes` with `metadata`,
 * `state`, `limit`, `nextToken` → `X-Next-Token`, newest first; `GET /sandboxes`), get, kill, timeout,
 * refresh, pause, connect/resume, metrics, snapshots and fork. Auth is the server's (`X-API-KEY` or
 * Bearer, `rest/auth.ts`); every error is `{ code, message }` with the status of its code (`wire.ts`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Authenticator, Principal } from '../rest/auth.ts';
import { Permission } from '../rest/wire.ts';
import type { JsBoxInfo } from '../types.ts';
import {
  type CreateRequest,
  DEFAULT_TEMPLATE,
  DEFAULT_TIMEOUT_S,
  type E2bSandbox,
  E2bSandboxes,
  MAX_TIMEOUT_S,
  stateOf,
} from './sandboxes.ts';
import type { E2bSnapshots } from './snapshots.ts';
import {
  E2bError,
  e2bErrorOf,
  field,
  isBoolean,
  isCount,
  isString,
  isStringList,
  isStringMap,
  objectBody,
  timeoutField,
} from './wire.ts';

/** Options of {@link controlRoutes}. */
export interface ControlRoutesOptions {
  auth: Authenticator;
  sandboxes: E2bSandboxes;
  snapshots: E2bSnapshots;
  /** The `domain` answered with each sandbox (`--e2b-domain`), or null. */
  domain: string | null;
}

/** The most sandboxes one list page holds (E2B's limit). */
export const MAX_LIST_LIMIT = 100;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Permission an E2B control-plane route needs. */
    e2b?: Permission;
  }
}

/** Registers the control-plane routes in their own scope (own auth hook and error shape). */
export async function controlRoutes(app: FastifyInstance, options: ControlRoutesOptions): Promise<void> {
  const { auth, sandboxes, snapshots, domain } = options;
  const principals = new WeakMap<FastifyRequest, Principal>();
  app.addHook('onRequest', async (request, reply) => {
    const permission = request.routeOptions.config?.e2b;
    if (!permission) return;
    try {
      principals.set(request, await auth.check(request.raw, permission));
    } catch (error) {
      return reply.code(401).send({ code: 401, message: e2bErrorOf(error).message });
    }
  });
  app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
    let body = e2bErrorOf(error);
    if (!(error instanceof E2bError) && body.code === 500 && error.statusCode && error.statusCode < 500) {
      body = { code: error.statusCode, message: error.message };
    }
    return reply.code(body.code).send(body);
  });
  const who = (request: FastifyRequest): Principal => {
    const principal = principals.get(request);
    if (!principal) throw new E2bError(401, 'missing API key');
    return principal;
  };
  const read = { config: { e2b: Permission.boxesRead } };
  const write = { config: { e2b: Permission.boxesWrite } };
  type Params = { Params: { id: string } };

  const create = async (request: FastifyRequest, reply: FastifyReply) => {
    const principal = who(request);
    const body = objectBody(request.body);
    const checked = createRequestOf(body);
    const from = snapshots.get(principal, checked.templateId);
    const { record } = from
      ? await snapshots.createFrom(principal, from, checked)
      : await sandboxes.create(principal, checked);
    return reply.code(201).send(E2bSandboxes.sandboxBody(record, domain));
  };
  app.post('/sandboxes', write, create);
  app.post('/v2/sandboxes', write, create);

  const list = async (request: FastifyRequest, reply: FastifyReply, paged: boolean) => {
    const query = request.query as Record<string, unknown>;
    const filter = listFilterOf(query);
    const all = (await sandboxes.list(who(request))).filter(({ record, info }) => filter(record, info));
    let page = all;
    if (paged) {
      const limit = query.limit === undefined ? MAX_LIST_LIMIT : Number(query.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
        throw new E2bError(
          400,
          `invalid query parameter limit: must be an integer from 1 to ${MAX_LIST_LIMIT}`,
        );
      }
      let start = 0;
      if (typeof query.nextToken === 'string' && query.nextToken !== '') {
        const token = query.nextToken;
        start = all.findIndex(({ record }) => record.sandboxId === token);
        if (start < 0) start = all.length;
      }
      page = all.slice(start, start + limit);
      const next = all[start + limit];
      if (next) reply.header('x-next-token', next.record.sandboxId);
      reply.header('x-total-running', String(all.filter(({ info }) => stateOf(info) === 'running').length));
    }
    return page.map(({ record, info }) => E2bSandboxes.listedBody(record, info, domain));
  };
  app.get('/sandboxes', read, (request, reply) => list(request, reply, false));
  app.get('/v2/sandboxes', read, (request, reply) => list(request, reply, true));

  app.get<Params>('/sandboxes/:id', read, async (request) => {
    const { record, box } = await sandboxes.get(who(request), request.params.id);
    return E2bSandboxes.listedBody(record, await box.info(), domain, true);
  });

  app.delete<Params>('/sandboxes/:id', write, async (request, reply) => {
    await sandboxes.kill(who(request), request.params.id);
    return reply.code(204).send();
  });

  app.post<Params>('/sandboxes/:id/timeout', write, async (request, reply) => {
    const body = objectBody(request.body);
    if (body.timeout === undefined) throw new E2bError(400, 'invalid field timeout: required (seconds)');
    const timeoutS = timeoutField(body, 'timeout', DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S);
    const { record, box } = await sandboxes.get(who(request), request.params.id);
    await sandboxes.setTimeout(record, box, timeoutS);
    return reply.code(204).send();
  });

  app.post<Params>('/sandboxes/:id/refreshes', write, async (request, reply) => {
    const body = objectBody(request.body);
    const timeoutS = timeoutField(body, 'duration', DEFAULT_TIMEOUT_S, 3600);
    const { record, box } = await sandboxes.get(who(request), request.params.id);
    await sandboxes.setTimeout(record, box, timeoutS, true);
    return reply.code(204).send();
  });

  app.post<Params>('/sandboxes/:id/pause', write, async (request, reply) => {
    const { box } = await sandboxes.get(who(request), request.params.id);
    if (stateOf(await box.info()) === 'paused')
      throw new E2bError(409, `sandbox ${request.params.id} is already paused`);
    await box.pause();
    return reply.code(204).send();
  });

  const connect = async (request: FastifyRequest<Params>, reply: FastifyReply) => {
    const body = objectBody(request.body);
    const timeoutS = timeoutField(body, 'timeout', DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S);
    const { record, box } = await sandboxes.get(who(request), request.params.id);
    const paused = stateOf(await box.info()) === 'paused';
    if (paused) await box.resume();
    await sandboxes.setTimeout(record, box, timeoutS, true);
    return reply.code(paused ? 201 : 200).send(E2bSandboxes.sandboxBody(record, domain));
  };
  app.post<Params>('/sandboxes/:id/connect', write, connect);
  app.post<Params>('/v2/sandboxes/:id/connect', write, connect);
  app.post<Params>('/sandboxes/:id/resume', write, connect);

  app.get<Params>('/sandboxes/:id/metrics', read, async (request) => {
    const { box } = await sandboxes.get(who(request), request.params.id);
    const [info, metrics] = await Promise.all([box.info(), box.metrics()]);
    return [
      {
        timestamp: new Date().toISOString(),
        timestampUnix: Math.floor(Date.now() / 1000),
        cpuCount: info.cpus,
        cpuUsedPct: metrics.cpuPercent ?? 0,
        memUsed: metrics.memoryBytes ?? 0,
        memTotal: info.memoryMib * 1024 * 1024,
        memCache: 0,
        diskUsed: 0,
        diskTotal: 0,
      },
    ];
  });

  app.post<Params>('/sandboxes/:id/snapshots', write, async (request, reply) => {
    const body = objectBody(request.body);
    const name = field(body, 'name', 'must be a string', isString);
    const snapshot = await snapshots.create(who(request), request.params.id, name);
    return reply.code(201).send({ snapshotID: snapshot.snapshotId, names: snapshot.names });
  });
  app.get('/snapshots', read, async (request, reply) => {
    const query = request.query as Record<string, unknown>;
    const sandboxId = typeof query.sandboxID === 'string' ? query.sandboxID : undefined;
    const all = snapshots.list(who(request), sandboxId);
    reply.header('x-total-count', String(all.length));
    return all.map((s) => ({ snapshotID: s.snapshotId, names: s.names }));
  });
  app.delete<Params>('/templates/:id', write, async (request, reply) => {
    await snapshots.remove(who(request), request.params.id);
    return reply.code(204).send();
  });
  app.post<Params>('/sandboxes/:id/fork', write, async (request) => {
    const body = objectBody(request.body);
    const timeoutS = timeoutField(body, 'timeout', DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S);
    const count =
      field(
        body,
        'count',
        'must be an integer from 1 to 10',
        (v): v is number => isCount(v) && (v as number) >= 1 && (v as number) <= 10,
      ) ?? 1;
    const results = await snapshots.fork(who(request), request.params.id, timeoutS, count);
    return results.map((r) =>
      'record' in r
        ? { sandbox: E2bSandboxes.sandboxBody(r.record, domain) }
        : { error: e2bErrorOf(r.error) },
    );
  });
}

/** The checked fields of a create body (`NewSandbox`). @throws E2bError 400 naming the field. */
export function createRequestOf(body: Record<string, unknown>): CreateRequest {
  const templateId = field(body, 'templateID', 'must be a template name', isString) ?? DEFAULT_TEMPLATE;
  const network = field(
    body,
    'network',
    'must be an object',
    (v): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v),
  );
  const allowOut = network
    ? field(network, 'allowOut', 'must be a list of destinations', isStringList)
    : undefined;
  const autoResume = field(
    body,
    'autoResume',
    'must be an object { enabled }',
    (v): v is { enabled?: unknown } => typeof v === 'object' && v !== null && !Array.isArray(v),
  );
  if (autoResume && autoResume.enabled !== undefined && typeof autoResume.enabled !== 'boolean') {
    throw new E2bError(400, 'invalid field autoResume.enabled: must be a boolean');
  }
  const request: CreateRequest = {
    templateId,
    timeoutS: timeoutField(body, 'timeout', DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S),
    metadata: field(body, 'metadata', 'must be an object of strings', isStringMap) ?? {},
    envVars: field(body, 'envVars', 'must be an object of strings', isStringMap) ?? {},
    autoPause: field(body, 'autoPause', 'must be a boolean', isBoolean) ?? false,
    autoResume: autoResume?.enabled === true,
    allowInternetAccess: field(body, 'allow_internet_access', 'must be a boolean', isBoolean) ?? true,
  };
  if (request.timeoutS === 0) throw new E2bError(400, 'invalid field timeout: must be at least 1 second');
  if (allowOut) request.allowOut = allowOut;
  return request;
}

/**
 * The filter of a list query: `state` (`running`, `paused`, comma-separated or repeated), `metadata`
 * (URL-encoded `key=value&…`, every pair must match), `template`.
 * @throws E2bError 400 naming the parameter.
 */
function listFilterOf(query: Record<string, unknown>): (record: E2bSandbox, info: JsBoxInfo) => boolean {
  const states = new Set(
    [query.state]
      .flat()
      .filter((s): s is string => typeof s === 'string')
      .flatMap((s) => s.split(','))
      .filter((s) => s !== ''),
  );
  for (const state of states) {
    if (state !== 'running' && state !== 'paused') {
      throw new E2bError(400, `invalid query parameter state: '${state}' is not running or paused`);
    }
  }
  const wanted: [string, string][] = [];
  if (typeof query.metadata === 'string' && query.metadata !== '') {
    for (const [key, value] of new URLSearchParams(query.metadata)) {
      wanted.push([decodeURIComponent(key), decodeURIComponent(value)]);
    }
  }
  const template = typeof query.template === 'string' && query.template !== '' ? query.template : undefined;
  return (record, info) =>
    (states.size === 0 || states.has(stateOf(info))) &&
    wanted.every(([k, v]) => record.metadata[k] === v) &&
    (template === undefined || record.templateId === template);
}
