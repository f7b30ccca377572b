/**
 * HTTP routes of the shared service (a Fastify plugin): managed API keys (operators), the
 * caller's usage and limits, signed preview URLs of a box, and the audit log.
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/keys` `{ tenant, permissions?, expires_at? }` | `sandbox.operator` | create → 201 `{ key, … }` (the key is shown once) |
 * | `GET /v1/keys[?tenant=]` | `sandbox.operator` | list (id, prefix, tenant, permissions, times) |
 * | `DELETE /v1/keys/{key}` | `sandbox.operator` | revoke → 204 (applies at once) |
 * | `GET /v1/usage[?tenant=]` | `sandbox.boxes.read` | the tenant's use and limits (operators may name any tenant) |
 * | `POST /v1/boxes/{box}/previews` `{ port, expires_in_ms? }` | `sandbox.exec` | signed preview URL → 201 |
 * | `GET /v1/boxes/{box}/previews` | `sandbox.boxes.read` | the box's live preview URLs (without tokens) |
 * | `DELETE /v1/boxes/{box}/previews/{preview}` | `sandbox.exec` | revoke → 204 (open connections closed) |
 * | `GET /v1/audit[?tenant=&since=&until=&limit=]` | `sandbox.boxes.read` | audit entries (a tenant sees its own) |
 */
import type { FastifyInstance } from 'fastify';
import type { ServerContext } from '../context.ts';
import { principalOf } from '../hooks.ts';
import { route } from '../openapi.ts';
import { obj } from '../schemas.ts';
import { HttpError, Permission, toSnake } from '../wire.ts';
import { AUDIT_MAX_LIMIT } from './audit.ts';
import { KEY_PERMISSIONS } from './keys.ts';
import { DEFAULT_LIMITS } from './limits.ts';
import { registerTenantMetrics } from './metrics.ts';
import type { PreviewProxy } from './preview-proxy.ts';
import { MAX_PREVIEW_TTL_MS } from './previews.ts';
import { TENANT_RE } from './tenant.ts';

const str = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const tenantSchema = { type: 'string', pattern: TENANT_RE.source, description: 'tenant id' };
const keyInfo = obj(
  {
    id: { type: 'string', description: 'key id (ULID)' },
    prefix: { type: 'string', description: 'the first characters of the key' },
    tenant: str,
    permissions: { type: 'array', items: str },
    created_at: time,
    expires_at: { type: ['string', 'null'], format: 'date-time' },
    revoked_at: { type: ['string', 'null'], format: 'date-time' },
  },
  ['id', 'prefix', 'tenant', 'permissions', 'created_at', 'expires_at', 'revoked_at'],
);
const limitsSchema = obj(
  Object.fromEntries(Object.keys(DEFAULT_LIMITS.defaults).map((key) => [key, { type: ['number', 'null'] }])),
);
const previewSchema = obj(
  {
    id: { type: 'string', description: 'preview id (ULID), to revoke it' },
    box_id: str,
    port: { type: 'integer' },
    url: { type: 'string', description: 'the URL (token included): no API key needed until it expires' },
    token: { type: 'string', description: 'the token (`pv_…`), shown once' },
    expires_at: time,
  },
  ['id', 'box_id', 'port', 'expires_at'],
);
const boxParam = { type: 'string', description: 'box id (ULID) or name' };

/** What the routes need besides the context: the preview proxy (to close a revoked preview's connections). */
export interface TenancyRoutesOptions {
  ctx: ServerContext;
  proxy: PreviewProxy;
}

function timeQuery(value: string | undefined, field: string, what = 'query parameter'): number | undefined {
  if (value === undefined) return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) {
    throw new HttpError('invalid_option', `invalid ${what} ${field}: must be an RFC 3339 time`, field);
  }
  return at;
}

/** Registers the routes (see the module comment). */
export async function tenancyRoutes(app: FastifyInstance, options: TenancyRoutesOptions): Promise<void> {
  const { ctx, proxy } = options;
  if (ctx.metrics) registerTenantMetrics(ctx.metrics.registry, ctx.admission);

  app.post<{ Body: { tenant: string; permissions?: string[]; expires_at?: string } }>(
    '/v1/keys',
    route(Permission.operator, {
      tags: ['keys'],
      summary: 'create a managed API key',
      description:
        'The answer holds the key (`e2b_` and 40 hex digits) once; the server keeps only its SHA-256. Clients send it as `Authorization: Bearer <key>` or `X-API-KEY: <key>`.',
      body: {
        ...obj(
          {
            tenant: tenantSchema,
            permissions: {
              type: 'array',
              minItems: 1,
              items: { enum: [...KEY_PERMISSIONS] },
              description: 'default: sandbox.boxes.read, sandbox.boxes.write, sandbox.exec',
            },
            expires_at: { type: 'string', description: 'RFC 3339 time in the future; absent: never' },
          },
          ['tenant'],
        ),
        additionalProperties: false,
      },
      response: {
        201: { description: 'created', ...obj({ key: str, ...(keyInfo.properties as object) }, ['key']) },
      },
    }),
    async (request, reply) => {
      const { tenant, permissions, expires_at } = request.body;
      const expiresAt = timeQuery(expires_at, 'expires_at', 'field');
      const { key, info } = ctx.keys.create({
        tenant,
        ...(permissions ? { permissions } : {}),
        ...(expiresAt !== undefined ? { expiresAt } : {}),
      });
      return reply.code(201).send({ key, ...(toSnake(info) as object) });
    },
  );

  app.get<{ Querystring: { tenant?: string } }>(
    '/v1/keys',
    route(Permission.operator, {
      tags: ['keys'],
      summary: 'list managed API keys (never the keys themselves)',
      querystring: obj({ tenant: tenantSchema }),
      response: { 200: { description: 'keys, oldest first', type: 'array', items: keyInfo } },
    }),
    async (request) => toSnake(ctx.keys.list(request.query.tenant)),
  );

  app.delete<{ Params: { key: string } }>(
    '/v1/keys/:key',
    route(Permission.operator, {
      tags: ['keys'],
      summary: 'revoke a managed API key',
      description: 'Requests with it are refused (401) from now on; no restart needed.',
      params: obj({ key: { type: 'string', description: 'key id (ULID)' } }, ['key']),
      response: { 204: { description: 'revoked', type: 'null' } },
    }),
    async (request, reply) => {
      ctx.keys.revoke(request.params.key);
      return reply.code(204).send();
    },
  );

  app.get<{ Querystring: { tenant?: string } }>(
    '/v1/usage',
    route(Permission.boxesRead, {
      tags: ['usage'],
      summary: "the tenant's use of the node and its limits",
      description:
        "A tenant sees its own (naming another tenant is 404); operators may name any tenant (default: their own). `running_boxes`, `vcpus` and `memory_mib` count running boxes; `disk_gb` all boxes; `snapshot_bytes` the boxes' snapshots; `running_executions` the commands running now.",
      querystring: obj({ tenant: tenantSchema }),
      response: {
        200: {
          description: 'usage',
          ...obj(
            {
              tenant: str,
              usage: obj({
                running_boxes: { type: 'integer' },
                vcpus: { type: 'number' },
                memory_mib: { type: 'number' },
                disk_gb: { type: 'number' },
                snapshot_bytes: { type: 'integer' },
                running_executions: { type: 'integer', description: 'commands running now' },
              }),
              limits: limitsSchema,
            },
            ['tenant', 'usage', 'limits'],
          ),
        },
      },
    }),
    async (request) => {
      const principal = principalOf(request);
      const tenant = request.query.tenant ?? principal.tenant;
      if (tenant !== principal.tenant && !principal.operator) {
        throw new HttpError('not_found', `no tenant '${tenant}'`);
      }
      const usage = await ctx.admission.usage(tenant);
      return {
        tenant,
        usage: {
          ...(toSnake(usage) as object),
          snapshot_bytes: await ctx.snapshotBytes(tenant),
          running_executions: ctx.executions.running(tenant),
        },
        limits: ctx.limits.tenant(tenant),
      };
    },
  );

  app.post<{ Params: { box: string }; Body: { port: number; expires_in_ms?: number } }>(
    '/v1/boxes/:box/previews',
    route(Permission.exec, {
      tags: ['previews'],
      summary: 'a signed preview URL for a port of the box',
      description:
        'Anyone with the URL reaches that port (HTTP and WebSocket) through this server without an API key, until it expires or is revoked. Path form `<server>/preview/<token>/`, or Host form `<port>-<box id>.<preview domain>` when the server has a preview domain.',
      params: obj({ box: boxParam }, ['box']),
      body: {
        ...obj(
          {
            port: { type: 'integer', minimum: 1, maximum: 65535 },
            expires_in_ms: {
              type: 'integer',
              minimum: 1,
              maximum: MAX_PREVIEW_TTL_MS,
              description: 'lifetime, ms (default 1 hour, at most 7 days)',
            },
          },
          ['port'],
        ),
        additionalProperties: false,
      },
      response: { 201: { description: 'issued', ...previewSchema } },
    }),
    async (request, reply) => {
      const { port, expires_in_ms } = request.body;
      const principal = principalOf(request);
      const preview = await ctx.previewUrl(principal, request.params.box, port, {
        ...(expires_in_ms !== undefined ? { expiresInMs: expires_in_ms } : {}),
      });
      const box = await ctx.box(request.params.box, principal);
      return reply.code(201).send({
        id: preview.id,
        box_id: box.id,
        port,
        url: preview.url,
        token: preview.token,
        expires_at: preview.expiresAt,
      });
    },
  );

  app.get<{ Params: { box: string } }>(
    '/v1/boxes/:box/previews',
    route(Permission.boxesRead, {
      tags: ['previews'],
      summary: "the box's live preview URLs (without their tokens)",
      params: obj({ box: boxParam }, ['box']),
      response: { 200: { description: 'previews', type: 'array', items: previewSchema } },
    }),
    async (request) => {
      const box = await ctx.box(request.params.box, principalOf(request));
      return ctx.previews
        .list(box.id)
        .map((p) => ({ id: p.id, box_id: p.boxId, port: p.port, expires_at: p.expiresAt }));
    },
  );

  app.delete<{ Params: { box: string; preview: string } }>(
    '/v1/boxes/:box/previews/:preview',
    route(Permission.exec, {
      tags: ['previews'],
      summary: 'revoke a preview URL',
      description: 'Its open connections are closed; new requests with it are 404.',
      params: obj({ box: boxParam, preview: { type: 'string', description: 'preview id (ULID)' } }, [
        'box',
        'preview',
      ]),
      response: { 204: { description: 'revoked', type: 'null' } },
    }),
    async (request, reply) => {
      const box = await ctx.box(request.params.box, principalOf(request));
      ctx.previews.revoke(box.id, request.params.preview);
      proxy.closePreview(request.params.preview);
      return reply.code(204).send();
    },
  );

  app.get<{ Querystring: { tenant?: string; since?: string; until?: string; limit?: number } }>(
    '/v1/audit',
    route(Permission.boxesRead, {
      tags: ['audit'],
      summary: 'audit log entries',
      description:
        'Who (tenant, subject, key id) did what (method, route, resources) with which outcome (status, error code), oldest first, the newest `limit`. A tenant sees its own entries; operators any tenant (default all).',
      querystring: obj({
        tenant: tenantSchema,
        since: { type: 'string', description: 'RFC 3339: entries at or after' },
        until: { type: 'string', description: 'RFC 3339: entries before' },
        limit: { type: 'integer', minimum: 1, maximum: AUDIT_MAX_LIMIT },
      }),
      response: { 200: { description: 'entries', type: 'array', items: { type: 'object' } } },
    }),
    async (request) => {
      const principal = principalOf(request);
      const { since, until, limit } = request.query;
      const tenant = principal.operator ? request.query.tenant : principal.tenant;
      if (
        !principal.operator &&
        request.query.tenant !== undefined &&
        request.query.tenant !== principal.tenant
      ) {
        throw new HttpError('not_found', `no tenant '${request.query.tenant}'`);
      }
      const sinceMs = timeQuery(since, 'since');
      const untilMs = timeQuery(until, 'until');
      return ctx.audit.query({
        ...(tenant !== undefined ? { tenant } : {}),
        ...(sinceMs !== undefined ? { since: sinceMs } : {}),
        ...(untilMs !== undefined ? { until: untilMs } : {}),
        ...(limit !== undefined ? { limit } : {}),
      });
    },
  );
}
