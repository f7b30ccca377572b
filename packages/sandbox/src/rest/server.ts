/**
 * The REST runtime server (spec 002 "The runtime is local, or remote through a REST runtime"):
 * one local `JsRuntime` exposed over HTTP under `/v1`, JSON in snake_case, errors as
 * `{ "error": { "message", "type", "code" } }`, exec streams over WebSocket (`exec-sockets.ts`), one-shot
 * box tunnels over HTTP `CONNECT` (`tunnel-routes.ts`), and an OpenAPI 3.1 document at `/v1/openapi.json`
 * generated from the route schemas (`openapi.ts`).
 *
 * This file bootstraps the server: validation (`validation.ts`), the permission and error hooks
 * (`hooks.ts`), the document, then every route as a Fastify plugin (box, file, lifecycle, image, volume,
 * execution, tunnel, pool routes), sharing the server state of `context.ts`.
 *
 * Security: host paths never come from a client (host bind mounts and `rootfsPath` are refused, spec 002
 * rejection 4), nor do host port publications (local runtime only). Without an API key or JWKS the server
 * refuses to listen on anything but a loopback address and answers loopback clients only.
 */
import { createServer } from 'node:http';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { type E2bOptions, installE2b } from '../e2b/index.ts';
import { BoxError } from '../errors.ts';
import type { JsRuntime } from '../js-runtime.ts';
import type { McpConfig } from '../mcp/config.ts';
import { mcpRoutes } from '../mcp/http.ts';
import { Authenticator, type AuthOptions, isLoopback } from './auth.ts';
import { boxRoutes } from './box-routes.ts';
import { codeRoutes } from './code-routes.ts';
import { ServerContext, type TenancyOptions } from './context.ts';
import { execRoutes } from './exec-routes.ts';
import { ExecSockets } from './exec-sockets.ts';
import { fileRoutes } from './files-routes.ts';
import { installHooks, rejectSocket } from './hooks.ts';
import { imageRoutes } from './images-routes.ts';
import { lifecycleRoutes } from './lifecycle-routes.ts';
import { serveMetrics } from './metrics.ts';
import { networkRoutes } from './network-routes.ts';
import { installOpenApi, route } from './openapi.ts';
import { ServerPools } from './pool-routes.ts';
import { ref } from './schemas.ts';
import { DEFAULT_BACKLOG_BYTES } from './sessions.ts';
import { snapshotRoutes } from './snapshot-routes.ts';
import { PreviewProxy } from './tenancy/preview-proxy.ts';
import { tenancyRoutes } from './tenancy/routes.ts';
import { Tunnels } from './tunnel-routes.ts';
import { installValidation } from './validation.ts';
import { volumeRoutes } from './volume-routes.ts';
import { httpErrorOf, Permission, toSnake } from './wire.ts';

export { FINISHED_TTL_MS } from './context.ts';
export { HEARTBEAT_MS } from './exec-sockets.ts';
export { TUNNEL_TTL_MS } from './tunnel-routes.ts';

/** Default listen address of `sandbox serve`. */
export const DEFAULT_HOST = '127.0.0.1';
/** Default port of `sandbox serve`. */
export const DEFAULT_PORT = 8100;

/** Options of {@link RestServer}. */
export interface RestServerOptions extends AuthOptions, Partial<TenancyOptions> {
  /** The local runtime to expose. */
  runtime: JsRuntime;
  /** Listen address; default `127.0.0.1`. A non-loopback address needs `apiKey` or `jwt`. */
  host?: string;
  /** TCP port; default 8100, 0 for an ephemeral port. */
  port?: number;
  /** Output kept per execution for reconnecting clients, bytes; default 1 MiB. */
  backlogBytes?: number;
  /** Fastify logger (`true`, or pino options). Authorization headers are never logged. Default off. */
  logger?: boolean | { level: string };
  /** Serve Prometheus metrics at `GET /metrics` (`metrics.ts`); default true. */
  metrics?: boolean;
  /** The E2B-compatible API at the root (`src/e2b`): templates and Host domain; `false` turns it off. Default on. */
  e2b?: E2bOptions | false;
  /**
   * Directory of the shared service's state (managed keys, ownership, preview URLs, audit log); default
   * `<runtime homeDir>/serve`.
   */
  stateDir?: string;
  /** The MCP server at `/mcp` (`src/mcp/http.ts`): limits of its sessions, or `false` to turn it off. Default on. */
  mcp?: Partial<McpConfig> | false;
}

/** A running REST runtime server. */
export class RestServer {
  /** The Fastify instance (routes, `swagger()`); ready once `listen()` resolved. */
  readonly app: FastifyInstance;
  /** Every HTTP route the server serves (method and URL template), as registered. */
  readonly routes: { method: string; url: string }[] = [];
  readonly #runtime: JsRuntime;
  readonly #auth: Authenticator;
  readonly #host: string;
  readonly #port: number;
  readonly #ctx: ServerContext;
  readonly #sockets: ExecSockets;
  readonly #tunnels: Tunnels;
  readonly #pools: ServerPools;
  readonly #previews: PreviewProxy;
  #url: string | null = null;

  /**
   * @throws Error when `apiKey` is empty, `jwt.jwksUrl` is not an http(s) URL, or `host` is not a
   *   loopback address while no credential is configured.
   */
  constructor(options: RestServerOptions) {
    this.#runtime = options.runtime;
    this.#ctx = new ServerContext(this.#runtime, options.backlogBytes ?? DEFAULT_BACKLOG_BYTES, {
      ...options,
      stateDir: options.stateDir ?? join(this.#runtime.homeDir, 'serve'),
    });
    this.#auth = new Authenticator({ ...options, keys: this.#ctx.keys });
    this.#host = options.host ?? DEFAULT_HOST;
    this.#port = options.port ?? DEFAULT_PORT;
    if (!this.#auth.required && !isLoopback(this.#host)) {
      throw new Error(
        `refusing to listen on ${this.#host} without an API key: set --api-key (or SANDBOX_API_KEY), or listen on 127.0.0.1`,
      );
    }
    this.#sockets = new ExecSockets(this.#ctx, this.#auth);
    this.#tunnels = new Tunnels(this.#ctx, this.#auth);
    this.#pools = new ServerPools(this.#runtime, this.#ctx.admission);
    this.#ctx.tenantPools = (tenant) => this.#pools.runtimePoolIds(tenant);
    const previews = new PreviewProxy(this.#ctx);
    this.#previews = previews;
    this.app = Fastify({
      logger: options.logger ?? false,
      bodyLimit: 4 * 1024 * 1024,
      forceCloseConnections: true,
      // Preview URLs (`tenancy/preview-proxy.ts`) are proxied before routing: bodies stream untouched.
      serverFactory: (handler) =>
        createServer((req, res) =>
          previews.matches(req) ? void previews.handle(req, res) : handler(req, res),
        ),
    });
    this.app.addHook('onRoute', (r) => {
      for (const method of [r.method].flat()) this.routes.push({ method, url: r.url });
    });
    installValidation(this.app);
    const e2b = options.e2b !== false ? installE2b(this.app, this.#ctx, this.#auth, options.e2b ?? {}) : null;
    installHooks(this.app, this.#auth, this.#ctx.audit);
    installOpenApi(this.app);
    this.#ctx.metrics = options.metrics === false ? undefined : serveMetrics(this.app, this.#runtime);
    this.#routes();
    if (options.mcp !== false) this.app.register(mcpRoutes, { ctx: this.#ctx, config: options.mcp ?? {} });
    this.app.server.on('upgrade', (req, socket, head) => {
      if (previews.matches(req)) return void previews.upgrade(req, socket, head);
      if (e2b?.upgrade(req, socket, head)) return;
      this.#sockets.onUpgrade(req, socket, head).catch((error) => rejectSocket(socket, httpErrorOf(error)));
    });
    this.app.server.on('connect', (req, socket, head) => {
      this.#tunnels.onConnect(req, socket, head).catch((error) => rejectSocket(socket, httpErrorOf(error)));
    });
  }

  /** Base URL once listening, e.g. `http://127.0.0.1:8100`. */
  get url(): string {
    if (!this.#url) throw new Error('the server is not listening');
    return this.#url;
  }

  /** Starts listening; resolves with the base URL. */
  async listen(): Promise<string> {
    await this.app.listen({ host: this.#host, port: this.#port });
    const address = this.app.server.address();
    if (address === null || typeof address === 'string') throw new Error('unexpected listen address');
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    this.#url = `http://${host}:${address.port}`;
    this.#ctx.publicUrl ??= this.#url;
    return this.#url;
  }

  /**
   * Stops listening, kills the commands started over REST, closes tunnels and the warm pools (their ready
   * boxes are removed). Other boxes stay as they are.
   */
  async close(): Promise<void> {
    this.#sockets.close();
    this.#previews.close();
    await this.#ctx.close();
    this.#tunnels.close();
    await this.#pools.close();
    await this.app.close();
  }

  /** Registers every route plugin (the OpenAPI document lists each route they add). */
  #routes(): void {
    const app = this.app;
    const write = { permission: Permission.boxesWrite };
    const exec = { permission: Permission.exec };
    const ctx = this.#ctx;

    app.register(async (scope) => this.#serverRoutes(scope));
    const box = ctx.box.bind(ctx);
    const rated: typeof box = async (idOrName, principal) => {
      await ctx.rates.consume('files', principal);
      return box(idOrName, principal);
    };
    app.register(fileRoutes, { box: rated, config: exec });
    app.register(lifecycleRoutes, { box, config: write });
    app.register(codeRoutes, { box, config: exec });
    app.register(imageRoutes, { images: () => this.#runtime.images });
    app.register(boxRoutes, ctx);
    app.register(networkRoutes, ctx);
    app.register(volumeRoutes, ctx);
    app.register(execRoutes, ctx);
    app.register(this.#tunnels.routes);
    app.register(this.#pools.routes);
    app.register(snapshotRoutes, ctx);
    app.register(tenancyRoutes, { ctx, proxy: this.#previews });
  }

  /** `GET /v1/openapi.json`, `GET /v1/config` and `GET /v1/metrics`. */
  async #serverRoutes(app: FastifyInstance): Promise<void> {
    const tags = ['server'];
    app.get(
      '/v1/openapi.json',
      route(null, {
        tags,
        summary: 'this OpenAPI 3.1 document',
        description: 'Generated from the route schemas; public (no credential needed).',
        response: { 200: { description: 'the document', type: 'object' } },
      }),
      async () => app.swagger(),
    );
    app.get(
      '/v1/config',
      route(Permission.boxesRead, {
        tags,
        summary: 'server configuration and features',
        response: {
          200: {
            description: 'configuration',
            type: 'object',
            properties: {
              api_version: { const: 'v1' },
              runtime: { const: 'local' },
              auth: { enum: ['bearer', 'loopback'] },
              features: { type: 'object' },
              exec: { type: 'object' },
            },
            required: ['api_version', 'runtime', 'auth', 'features', 'exec'],
          },
        },
      }),
      async () => ({
        api_version: 'v1',
        runtime: 'local',
        auth: this.#auth.required ? 'bearer' : 'loopback',
        features: { tunnels: true, port_publication: false, host_bind_mounts: false, pools: true },
        exec: { backlog_bytes: this.#ctx.backlogBytes, channels: { stdin: 0, stdout: 1, stderr: 2 } },
      }),
    );
    app.get(
      '/v1/metrics',
      route(Permission.boxesRead, {
        tags,
        summary: 'runtime metrics (spec 002 JsRuntimeMetrics)',
        response: { 200: { description: 'metrics', ...ref('RuntimeMetrics') } },
      }),
      async () => toSnake(await this.#runtime.metrics()),
    );
  }
}

/** Starts a REST runtime server; resolves once it listens. See {@link RestServerOptions}. */
export async function startRestServer(options: RestServerOptions): Promise<RestServer> {
  const server = new RestServer(options);
  await server.listen();
  return server;
}

/**
 * The server's OpenAPI 3.1 document without a running server (for client generators and docs): the
 * routes are registered on a server that never listens nor touches a runtime.
 */
export async function openApiDocument(): Promise<Record<string, unknown>> {
  const unused = new Proxy({} as JsRuntime, {
    get() {
      throw new BoxError('openApiDocument() has no runtime', { code: 'unsupported' });
    },
  });
  const server = new RestServer({ runtime: unused, port: 0, stateDir: '/nonexistent/openapi-only' });
  try {
    await server.app.ready();
    return server.app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await server.close();
  }
}
