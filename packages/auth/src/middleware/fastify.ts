/**
 * Fastify plugin of the permission middleware (spec 001 "Business endpoints protected by the permission
 * middleware"). Routes declare what they need in their config:
 *
 * ```ts
 * app.get('/orders', { config: { auth: { permission: 'shop.orders.read' } } }, handler);
 * ```
 *
 * or use the guard `app.authorize({ permission })` as a `preHandler`. Every request gets `request.auth`
 * (an {@link AuthorizationOutcome}: the decision, subject, permission and a `check(code)` helper). On denial
 * the plugin answers the spec's body `{error, error_description, permission}` with 401/403 and the
 * `WWW-Authenticate` header of RFC 6750 §3, unless `onDenied` replaces the body.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import fp from 'fastify-plugin';
import type {
  AuthorizationOutcome,
  AuthorizationService,
  Denial,
  EndpointRequirement,
} from '../authorization.ts';
import { requestAuthorization } from '../authorization-wire.ts';
import { clientAddress } from '../client-address.ts';
import type { PolicyRequest } from '../policies.ts';
import type { AuthorizationDecision } from '../reasons.ts';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authorization outcome of this request (set by the `@seed/auth` plugin). */
    auth: AuthorizationOutcome;
  }
  interface FastifyContextConfig {
    /** What this route requires (permission code, policy, guests). Absent: not protected. */
    auth?: EndpointRequirement;
  }
  interface FastifyInstance {
    /** A `preHandler` guard requiring `requirement`; it sets `request.auth` and answers denials itself. */
    authorize(requirement: EndpointRequirement): preHandlerAsyncHookHandler;
  }
}

/** What `onDenied` receives: the default answer (status and headers are already set on the reply) and the decision. */
export interface DeniedContext extends Denial {
  readonly decision: AuthorizationDecision;
}

/** Options of {@link authPlugin}. */
export interface AuthPluginOptions {
  service: AuthorizationService;
  /**
   * `OnDenied` (spec 001): replaces the default body. Status and `WWW-Authenticate` are already set; send your own
   * body with `reply.send(...)` or return it. When set, the default body is not written.
   */
  onDenied?: (request: FastifyRequest, reply: FastifyReply, denied: DeniedContext) => unknown;
  /**
   * Hook that checks routes with `config.auth` (default `onRequest`: before the body is parsed, so unauthorized
   * callers cannot make the server parse bodies; use `preHandler` when policies need `request.body`).
   */
  hook?: 'onRequest' | 'preHandler';
  /** The resource handed to policies (default: `request.params`). */
  resource?: (request: FastifyRequest) => unknown;
  /**
   * Accept the token from the `access_token` query parameter on WebSocket upgrade requests (`GET` with
   * `Upgrade: websocket` and no `Authorization` header; see `upgradeQueryToken`). Default false. Plain HTTP
   * requests never authenticate through the query string.
   */
  queryTokenOnUpgrade?: boolean;
}

function policyRequest(request: FastifyRequest): PolicyRequest {
  return {
    method: request.method,
    url: request.url,
    headers: request.headers,
    params: request.params as Record<string, unknown>,
    query: request.query as Record<string, unknown>,
    remoteAddress: clientAddress(request),
  };
}

async function plugin(app: FastifyInstance, options: AuthPluginOptions): Promise<void> {
  const { service, onDenied } = options;
  const resourceOf = options.resource ?? ((request: FastifyRequest) => request.params);
  const notProtected = await service.authorize({ request: { method: 'GET', url: '/', headers: {} } });

  const run = async (request: FastifyRequest, reply: FastifyReply, requirement: EndpointRequirement) => {
    const outcome = await service.authorize({
      authorization: requestAuthorization(
        request.raw.method,
        request.headers,
        request.raw.url,
        options.queryTokenOnUpgrade,
      ),
      requirement,
      request: policyRequest(request),
      resource: resourceOf(request),
      htu: `${request.protocol}://${request.host}${request.url}`,
    });
    request.auth = outcome;
    const denial = outcome.denial;
    if (!denial) return;
    reply.code(denial.status);
    for (const [name, value] of Object.entries(denial.headers)) reply.header(name, value);
    if (onDenied) {
      const body = await onDenied(request, reply, { ...denial, decision: outcome.decision });
      if (!reply.sent) await reply.send(body === undefined ? '' : body);
    } else {
      await reply.type('application/json; charset=utf-8').send(denial.body);
    }
    return reply;
  };

  app.decorateRequest('auth', null as unknown as AuthorizationOutcome);
  app.decorate('authorize', (requirement: EndpointRequirement): preHandlerAsyncHookHandler => {
    return async (request, reply) => {
      await run(request, reply, requirement);
    };
  });
  app.addHook(options.hook ?? 'onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    const requirement = request.routeOptions.config?.auth;
    if (!requirement) {
      request.auth = notProtected;
      return;
    }
    return run(request, reply, requirement);
  });
}

/**
 * The Fastify plugin (wrapped with `fastify-plugin`, so it applies to the whole instance it is registered on).
 * Register it before the routes: `await app.register(authPlugin, { service })`.
 */
export const authPlugin = fp(plugin, { fastify: '5.x', name: '@seed/auth' });
