/**
 * Request hooks of the REST runtime server that hold for every route: the permission check of each
 * route's `config.permission` (`auth.ts`; unknown routes need `sandbox.boxes.read`, so that they do not
 * reveal what exists) leaving the caller in `request.principal`, `cache-control: no-store` on every
 * answer, and the error mapping (with `Retry-After` on 429 and 503 answers that carry a hint) — every failure
 * leaves as the `Error` body with the status of its code (`wire.ts` `httpErrorOf`), never a 500 for a
 * client mistake. Also the raw-socket form of an error, for refused upgrades and CONNECTs.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { BoxError, type ErrorCode } from '../errors.ts';
import type { Authenticator, Principal } from './auth.ts';
import type { AuditLog } from './tenancy/audit.ts';
import { HttpError, httpErrorOf, Permission } from './wire.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Permission a route needs (absent: public). */
    permission?: Permission;
    /** Error statuses the route answers beyond the common ones (the OpenAPI document lists them). */
    errors?: number[];
  }
  interface FastifyRequest {
    /** Who made the request; set by the permission hook on every route with a permission. */
    principal?: Principal;
    /** The error code the request was answered with (for the audit log). */
    errorCode?: string;
  }
}

const current = new AsyncLocalStorage<Principal>();

/**
 * The caller of the request being handled, for route plugins whose lookups take no principal (the
 * principal travels with the request's async context from the `preHandler` hook on).
 * @throws HttpError 401 outside a request that went through a permission check.
 */
export function currentPrincipal(): Principal {
  return principalOf({ principal: current.getStore() });
}

/**
 * The caller of a route that declares a permission.
 * @throws HttpError 401 when the request went through no permission check (a public route).
 */
export function principalOf(request: { principal?: Principal }): Principal {
  if (!request.principal) throw new HttpError('missing_credentials', 'this route needs a credential');
  return request.principal;
}

/** Path parameters the audit log records as the resources a request named. */
const AUDITED_PARAMS = ['box', 'execution', 'volume', 'pool', 'preview', 'key', 'name'];

/** The code of a client error Fastify raises itself (before a handler runs), by its status; else `invalid_body`. */
const FASTIFY_CLIENT_ERROR: Record<number, ErrorCode> = {
  413: 'body_too_large',
  415: 'unsupported_media_type',
};

/**
 * Installs the hooks, error handler and not-found handler on the server's root instance; with `audit`,
 * every authenticated request is written to it once answered (`tenancy/audit.ts`).
 */
export function installHooks(app: FastifyInstance, auth: Authenticator, audit?: AuditLog): void {
  app.addHook('onRequest', async (request, reply) => {
    const permission =
      request.routeOptions.config?.permission ?? (request.is404 ? Permission.boxesRead : undefined);
    if (!permission) return;
    try {
      request.principal = await auth.check(request.raw, permission);
    } catch (error) {
      const http = httpErrorOf(error);
      if (http.status === 401) reply.header('www-authenticate', 'Bearer realm="sandbox"');
      // Refused credentials are audited without a tenant (`-`): who it was is not known.
      audit?.write({
        time: new Date().toISOString(),
        tenant: '-',
        subject: '-',
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        status: http.status,
        error: http.code,
      });
      return reply.code(http.status).send(http.body());
    }
  });
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.principal) current.run(request.principal, done);
    else done();
  });
  app.addHook('onSend', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
  });
  if (audit) {
    app.addHook('onResponse', async (request, reply) => {
      const principal = request.principal;
      if (!principal) return;
      const params = (request.params ?? {}) as Record<string, unknown>;
      const resource: Record<string, string> = {};
      for (const key of AUDITED_PARAMS) if (typeof params[key] === 'string') resource[key] = params[key];
      audit.write({
        time: new Date().toISOString(),
        tenant: principal.tenant,
        subject: principal.subject,
        ...(principal.keyId ? { key_id: principal.keyId } : {}),
        method: request.method,
        route: request.routeOptions.url ?? request.url.split('?')[0]!,
        ...(Object.keys(resource).length > 0 ? { resource } : {}),
        status: reply.statusCode,
        ...(request.errorCode ? { error: request.errorCode } : {}),
      });
    });
  }
  app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, request, reply) => {
    let http: HttpError;
    if (
      !(error instanceof HttpError) &&
      !(error instanceof BoxError) &&
      error.statusCode &&
      error.statusCode < 500
    ) {
      // Fastify's own client errors (body not JSON, too large, unsupported media type).
      http = new HttpError(FASTIFY_CLIENT_ERROR[error.statusCode] ?? 'invalid_body', error.message);
    } else {
      http = httpErrorOf(error);
    }
    if (http.status >= 500 && http.code !== 'capacity') app.log.error({ err: error }, 'request failed');
    if (http.retryAfterS !== undefined) reply.header('retry-after', String(http.retryAfterS));
    request.errorCode = http.code;
    return reply.code(http.status).send(http.body());
  });
  app.setNotFoundHandler((request, reply) => {
    const error = new HttpError('route_not_found', `no route ${request.method} ${request.url.split('?')[0]}`);
    return reply.code(error.status).send(error.body());
  });
}

const REASON: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  429: 'Too Many Requests',
  501: 'Not Implemented',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

/** Answers a raw upgrade/CONNECT socket with an HTTP error and the JSON error body, then closes it. */
export function rejectSocket(socket: Duplex, error: HttpError): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(error.body());
  const reason = REASON[error.status] ?? 'Error';
  const auth = error.status === 401 ? 'WWW-Authenticate: Bearer realm="sandbox"\r\n' : '';
  const retry = error.retryAfterS === undefined ? '' : `Retry-After: ${error.retryAfterS}\r\n`;
  socket.end(
    `HTTP/1.1 ${error.status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n${auth}${retry}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
