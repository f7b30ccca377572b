/**
 * The REST runtime server (issue 10; spec 002 "The runtime is local, or remote through a REST
 * runtime"): one local `JsRuntime` exposed over HTTP under `/v1`, JSON in snake_case, errors as
 * `{ "error": { "message", "type", "code" } }`, exec streams over WebSocket (see `wire.ts`), one-shot
 * box tunnels over HTTP `CONNECT`, and an OpenAPI 3.1 document at `/v1/openapi.json`.
 *
 * Security: host paths never come from a client (host bind mounts and `rootfsPath` are refused, spec 002
 * rejection 4), nor do host port publications (local runtime only). Without an API key or JWKS the server
 * refuses to listen on anything but a loopback address and answers loopback clients only.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { ulid } from 'ulid';
import { type WebSocket, WebSocketServer } from 'ws';
import { BoxError, notFound } from '../errors.ts';
import { LocalNetworkHandle } from '../network/tunnel.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsRuntime } from '../runtime/runtime.ts';
import type { JsBoxInfo, JsNetworkHandle } from '../types.ts';
import { Authenticator, type AuthOptions, isLoopback, type Principal } from './auth.ts';
import { boxRoutes } from './box-routes.ts';
import { fileRoutes } from './files-routes.ts';
import { imageRoutes } from './images-routes.ts';
import { lifecycleRoutes } from './lifecycle-routes.ts';
import { type RestMetrics, serveMetrics } from './metrics.ts';
import { openApiDocument } from './openapi.ts';
import { DEFAULT_BACKLOG_BYTES, ExecSession, type ExecSink, normalizeSignal } from './sessions.ts';
import { volumeRoutes } from './volume-routes.ts';
import {
  Channel,
  HttpError,
  httpErrorOf,
  isObject,
  isStreamNumber,
  MUX_HEADER_BYTES,
  muxFrame,
  Permission,
  toSnake,
  unknownFields,
} from './wire.ts';

/** Default listen address of `sandbox serve`. */
export const DEFAULT_HOST = '127.0.0.1';
/** Default port of `sandbox serve`. */
export const DEFAULT_PORT = 8100;
/** How long a prepared tunnel may wait for its `CONNECT`, ms. */
export const TUNNEL_TTL_MS = 60_000;
/** How long a finished execution stays queryable (status, reattach for its backlog), ms. */
export const FINISHED_TTL_MS = 5 * 60_000;

/** Interval of WebSocket pings; a client silent for two intervals is dropped, ms. */
export const HEARTBEAT_MS = 10_000;

/** Options of {@link RestServer}. */
export interface RestServerOptions extends AuthOptions {
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
}

const EXEC_FIELDS = new Set(['cmd', 'args', 'env', 'tty', 'cwd', 'user']);

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Permission a route needs (absent: public). */
    permission?: Permission;
  }
}

interface PreparedTunnel {
  boxId: string;
  port: number;
  expires: number;
}

/** A running REST runtime server. */
export class RestServer {
  readonly app: FastifyInstance;
  readonly #runtime: JsRuntime;
  readonly #auth: Authenticator;
  readonly #host: string;
  readonly #port: number;
  readonly #backlogBytes: number;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: 16 * 1024 * 1024,
  });
  /** Handles of boxes created through this server (they know their port publications: none). */
  readonly #handles = new Map<string, JsBox>();
  readonly #sessions = new Map<string, ExecSession>();
  readonly #tunnels = new Map<string, PreparedTunnel>();
  readonly #tunnelSockets = new Set<Duplex>();
  readonly #timers = new Set<NodeJS.Timeout>();
  /** Pings attached clients; one that misses a pong is dropped so that it can reattach (no stale 409). */
  readonly #heartbeat: NodeJS.Timeout;
  readonly #alive = new WeakSet<WebSocket>();
  #url: string | null = null;
  readonly #metrics: RestMetrics | undefined;

  /**
   * @throws Error when `apiKey` is empty, `jwt.jwksUrl` is not an http(s) URL, or `host` is not a
   *   loopback address while no credential is configured.
   */
  constructor(options: RestServerOptions) {
    this.#runtime = options.runtime;
    this.#auth = new Authenticator(options);
    this.#host = options.host ?? DEFAULT_HOST;
    this.#port = options.port ?? DEFAULT_PORT;
    this.#backlogBytes = options.backlogBytes ?? DEFAULT_BACKLOG_BYTES;
    if (!this.#auth.required && !isLoopback(this.#host)) {
      throw new Error(
        `refusing to listen on ${this.#host} without an API key: set --api-key (or SANDBOX_API_KEY), or listen on 127.0.0.1`,
      );
    }
    this.app = Fastify({
      logger: options.logger ?? false,
      bodyLimit: 4 * 1024 * 1024,
      forceCloseConnections: true,
    });
    this.#routes();
    this.#metrics = options.metrics === false ? undefined : serveMetrics(this.app, this.#runtime);
    this.#heartbeat = setInterval(() => {
      for (const ws of this.#wss.clients) {
        if (!this.#alive.has(ws)) {
          ws.terminate();
          continue;
        }
        this.#alive.delete(ws);
        ws.ping();
      }
    }, HEARTBEAT_MS);
    this.#heartbeat.unref();
    this.app.server.on('upgrade', (req, socket, head) => {
      this.#onUpgrade(req, socket, head).catch((error) => rejectSocket(socket, httpErrorOf(error)));
    });
    this.app.server.on('connect', (req, socket, head) => {
      this.#onConnect(req, socket, head).catch((error) => rejectSocket(socket, httpErrorOf(error)));
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
    return this.#url;
  }

  /** Stops listening, kills the commands started over REST and closes tunnels. Boxes stay as they are. */
  async close(): Promise<void> {
    clearInterval(this.#heartbeat);
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    await Promise.all([...this.#sessions.values()].map((s) => s.terminate()));
    this.#sessions.clear();
    for (const socket of this.#tunnelSockets) socket.destroy();
    for (const client of this.#wss.clients) client.terminate();
    this.#wss.close();
    await this.app.close();
  }

  #later(ms: number, fn: () => void): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    timer.unref();
    this.#timers.add(timer);
  }

  async #box(idOrName: string): Promise<JsBox> {
    // Fast path: a box this server created, addressed by id (its handle reads fresh state on every call).
    const known = this.#handles.get(idOrName);
    if (known) return known;
    const info = await this.#runtime.getInfo(idOrName);
    if (!info) throw notFound(`no box with id or name '${idOrName}'`);
    const handle = this.#handles.get(info.id) ?? (await this.#runtime.get(info.id));
    if (!handle) throw notFound(`no box with id or name '${idOrName}'`);
    return handle;
  }

  /** `JsBoxInfo` as the server knows it: boxes created here have no publications (`[]`), others null. */
  #info(info: JsBoxInfo): unknown {
    if (this.#handles.has(info.id) && info.network) info.network.publishedPorts = [];
    return toSnake(info);
  }

  /** The execution named by route params `box` (id or name) and `execution`. @throws HttpError 404 for either. */
  async #execution(params: { box: string; execution: string }): Promise<ExecSession> {
    const box = await this.#box(params.box);
    return this.#session(box.id, params.execution);
  }

  #session(boxId: string, executionId: string): ExecSession {
    const session = this.#sessions.get(executionId);
    if (!session || session.boxId !== boxId) {
      throw notFound(`no execution '${executionId}' in box ${boxId}`);
    }
    return session;
  }

  #routes(): void {
    const app = this.app;
    const read = { permission: Permission.boxesRead };
    const write = { permission: Permission.boxesWrite };
    const exec = { permission: Permission.exec };

    app.addHook('onRequest', async (request, reply) => {
      const permission =
        request.routeOptions.config?.permission ?? (request.is404 ? Permission.boxesRead : undefined);
      if (!permission) return;
      try {
        await this.#auth.check(request.raw, permission);
      } catch (error) {
        const http = httpErrorOf(error);
        if (http.status === 401) reply.header('www-authenticate', 'Bearer realm="sandbox"');
        return reply.code(http.status).send(http.body());
      }
    });
    app.addHook('onSend', async (_request, reply) => {
      reply.header('cache-control', 'no-store');
    });
    app.setErrorHandler((error: Error & { statusCode?: number; code?: string }, _request, reply) => {
      let http: HttpError;
      if (
        !(error instanceof HttpError) &&
        !(error instanceof BoxError) &&
        error.statusCode &&
        error.statusCode < 500
      ) {
        http = new HttpError(
          error.statusCode,
          'invalid_request_error',
          (error.code ?? 'bad_request').toLowerCase(),
          error.message,
        );
      } else {
        http = httpErrorOf(error);
      }
      if (http.status >= 500) app.log.error({ err: error }, 'request failed');
      return reply.code(http.status).send(http.body());
    });
    app.setNotFoundHandler((request, reply) => {
      const error = new HttpError(
        404,
        'not_found_error',
        'route_not_found',
        `no route ${request.method} ${request.url.split('?')[0]}`,
      );
      return reply.code(404).send(error.body());
    });

    app.get('/v1/openapi.json', async () => openApiDocument());
    app.register(fileRoutes, { box: (idOrName: string) => this.#box(idOrName), config: exec });
    app.register(lifecycleRoutes, { box: (idOrName: string) => this.#box(idOrName), config: write });
    app.register(imageRoutes, { images: () => this.#runtime.images });

    app.get('/v1/config', { config: read }, async () => ({
      api_version: 'v1',
      runtime: 'local',
      auth: this.#auth.required ? 'bearer' : 'loopback',
      features: { tunnels: true, port_publication: false, host_bind_mounts: false },
      exec: { backlog_bytes: this.#backlogBytes, channels: { stdin: 0, stdout: 1, stderr: 2 } },
    }));

    app.get('/v1/metrics', { config: read }, async () => toSnake(await this.#runtime.metrics()));

    app.register(boxRoutes, {
      runtime: this.#runtime,
      box: (idOrName: string) => this.#box(idOrName),
      info: (info: JsBoxInfo) => this.#info(info),
      created: (box: JsBox) => this.#handles.set(box.id, box),
      forget: (boxId: string) => this.#forget(boxId),
    });
    app.register(volumeRoutes, { runtime: this.#runtime });

    app.post<{ Params: { box: string } }>(
      '/v1/boxes/:box/executions',
      { config: exec },
      async (request, reply) => {
        const session = await this.#startExecution(request.params.box, request.body);
        return reply.code(201).send({ id: session.id, box_id: session.boxId, status: session.status });
      },
    );

    const status = (session: ExecSession) => ({
      id: session.id,
      box_id: session.boxId,
      status: session.status,
      exit_code: session.exitCode,
      attached: session.sink !== null,
    });

    app.get<{ Params: { box: string; execution: string } }>(
      '/v1/boxes/:box/executions/:execution',
      { config: exec },
      async (request) => {
        return status(await this.#execution(request.params));
      },
    );

    app.post<{ Params: { box: string; execution: string } }>(
      '/v1/boxes/:box/executions/:execution/kill',
      { config: exec },
      async (request) => {
        const session = await this.#execution(request.params);
        await session.execution.kill();
        return status(session);
      },
    );

    app.post<{ Params: { box: string; execution: string } }>(
      '/v1/boxes/:box/executions/:execution/signal',
      { config: exec },
      async (request) => {
        const session = await this.#execution(request.params);
        const signal = isObject(request.body) ? request.body.signal : undefined;
        if (typeof signal !== 'string')
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_option',
            'invalid field signal: must be a signal name such as SIGTERM',
            'signal',
          );
        try {
          normalizeSignal(signal);
        } catch (error) {
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_option',
            `invalid field signal: ${(error as Error).message}`,
            'signal',
          );
        }
        await session.signal(signal);
        return status(session);
      },
    );

    app.post<{ Params: { box: string; execution: string } }>(
      '/v1/boxes/:box/executions/:execution/resize',
      { config: exec },
      async (request) => {
        const session = await this.#execution(request.params);
        const body = isObject(request.body) ? request.body : {};
        for (const field of ['cols', 'rows'] as const) {
          const value = body[field];
          if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 10000) {
            throw new HttpError(
              400,
              'invalid_request_error',
              'invalid_option',
              `invalid field ${field}: must be an integer from 1 to 10000`,
              field,
            );
          }
        }
        await session.resize(body.cols as number, body.rows as number);
        return status(session);
      },
    );

    app.get('/v1/executions/stream', { config: exec }, async () => {
      throw new HttpError(
        426,
        'invalid_request_error',
        'upgrade_required',
        'the exec stream is a WebSocket endpoint (Connection: Upgrade, Upgrade: websocket)',
      );
    });

    app.get('/v1/boxes/:box/executions/:execution/attach', { config: exec }, async () => {
      throw new HttpError(
        426,
        'invalid_request_error',
        'upgrade_required',
        'attach is a WebSocket endpoint (Connection: Upgrade, Upgrade: websocket)',
      );
    });

    app.post<{ Params: { box: string } }>(
      '/v1/boxes/:box/tunnels',
      { config: exec },
      async (request, reply) => {
        const port = isObject(request.body) ? request.body.port : undefined;
        if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_option',
            'invalid tunnel option port: must be an integer from 1 to 65535',
            'port',
          );
        }
        const box = await this.#box(request.params.box);
        if (!(await box.info()).state.running)
          throw new HttpError(409, 'conflict_error', 'conflict', `box ${box.id} is not running`);
        const id = ulid();
        this.#tunnels.set(id, { boxId: box.id, port, expires: Date.now() + TUNNEL_TTL_MS });
        this.#later(TUNNEL_TTL_MS, () => this.#tunnels.delete(id));
        return reply.code(201).send({
          id,
          box_id: box.id,
          port,
          connect_path: `/v1/tunnels/${id}`,
          expires_at: new Date(Date.now() + TUNNEL_TTL_MS).toISOString(),
        });
      },
    );
  }

  /** Validates an exec request (`{ cmd, args?, env?, tty?, cwd?, user? }`) and starts its session. */
  async #startExecution(idOrName: string, body: unknown): Promise<ExecSession> {
    if (!isObject(body)) {
      throw new HttpError(
        400,
        'invalid_request_error',
        'invalid_body',
        'the body must be a JSON object { cmd, args?, env?, tty?, cwd?, user? }',
      );
    }
    unknownFields(body, EXEC_FIELDS);
    const { cmd, args, env, tty, cwd, user } = body;
    if (tty !== undefined && typeof tty !== 'boolean') {
      throw new HttpError(
        400,
        'invalid_request_error',
        'invalid_option',
        'invalid exec option tty: must be a boolean',
        'tty',
      );
    }
    if (user !== undefined && (typeof user !== 'string' || user === '')) {
      throw new HttpError(
        400,
        'invalid_request_error',
        'invalid_option',
        'invalid exec option user: must be a non-empty string',
        'user',
      );
    }
    const box = await this.#box(idOrName);
    const execution = await box.execWith(
      cmd as string,
      (args ?? []) as string[],
      env as { key: string; value: string }[] | undefined,
      {
        tty: tty === true,
        ...(cwd !== undefined ? { cwd: cwd as string } : {}),
        ...(user !== undefined ? { user: user as string } : {}),
      },
    );
    const session = new ExecSession(box.id, execution, this.#backlogBytes);
    this.#sessions.set(session.id, session);
    this.#metrics?.executionStarted(session);
    session.done.then(() => this.#later(FINISHED_TTL_MS, () => this.#sessions.delete(session.id)));
    return session;
  }

  /**
   * `GET /v1/boxes/{box}/executions/attach` (WebSocket): start and attach in one round trip. The client's
   * first text frame is `{"type":"start", cmd, args?, env?, tty?, cwd?, user?}`; the server answers
   * `{"type":"started","id"}` and streams as an attach at offset 0, or `{"type":"error","error"}` and closes.
   */
  #startOverSocket(ws: WebSocket, boxIdOrName: string): void {
    ws.on('error', () => {});
    ws.once('message', (data, isBinary) => {
      (async () => {
        if (isBinary)
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_body',
            'the first frame must be the start request (text)',
          );
        let message: Record<string, unknown>;
        try {
          message = JSON.parse((data as Buffer).toString('utf8'));
        } catch {
          throw new HttpError(400, 'invalid_request_error', 'invalid_body', 'the start request is not JSON');
        }
        if (!isObject(message) || message.type !== 'start') {
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_body',
            'the first frame must be {"type":"start", cmd, ...}',
          );
        }
        const { type: _type, ...request } = message;
        const session = await this.#startExecution(boxIdOrName, request);
        ws.send(JSON.stringify({ type: 'started', id: session.id, box_id: session.boxId }));
        session.attach(ws, 0);
      })().catch((error) => {
        const http = httpErrorOf(error);
        if (ws.readyState === ws.OPEN) {
          ws.send(JSON.stringify({ type: 'error', status: http.status, ...http.body() }));
          ws.close(4000 + Math.min(http.status, 999), http.code);
        }
      });
    });
  }

  /** Completes a WebSocket upgrade; the socket then takes part in the heartbeat. */
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, done: (ws: WebSocket) => void): void {
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      this.#alive.add(ws);
      ws.on('pong', () => this.#alive.add(ws));
      done(ws);
    });
  }

  #forget(boxId: string): void {
    this.#handles.delete(boxId);
    for (const session of this.#sessions.values()) {
      if (session.boxId === boxId) {
        session.terminate().catch(() => {});
        this.#sessions.delete(session.id);
      }
    }
  }

  /**
   * `GET /v1/executions/stream` (WebSocket): many executions over one authenticated connection (framing
   * in `wire.ts`). Each start names its box; one stream's failure is an `error` frame for that stream only.
   * An access token is checked for expiry again at every start (the connection closes with 4401 then).
   */
  #multiplex(ws: WebSocket, principal: Principal): void {
    const streams = new Map<number, { session: ExecSession; sink: ExecSink } | null>();
    const send = (message: Record<string, unknown>) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(message));
    };
    const fail = (stream: number, error: unknown) => {
      const http = httpErrorOf(error);
      send({ type: 'error', stream, status: http.status, ...http.body() });
    };
    ws.on('error', () => {});
    ws.on('close', () => {
      for (const entry of streams.values()) entry?.session.detach(entry.sink);
      streams.clear();
    });
    ws.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        if (data.length <= MUX_HEADER_BYTES || data[0] !== Channel.stdin) return;
        streams.get(data.readUInt32BE(1))?.session.input(data.subarray(MUX_HEADER_BYTES));
        return;
      }
      let message: unknown;
      try {
        message = JSON.parse(data.toString('utf8'));
      } catch {
        return;
      }
      if (!isObject(message) || !isStreamNumber(message.stream)) return;
      const stream = message.stream;
      if (message.type !== 'start') {
        streams.get(stream)?.session.command(message);
        return;
      }
      if (streams.has(stream)) {
        fail(
          stream,
          new HttpError(
            400,
            'invalid_request_error',
            'invalid_option',
            `invalid field stream: stream ${stream} is in use on this connection`,
            'stream',
          ),
        );
        return;
      }
      if (principal.expiresAt !== undefined && Date.now() >= principal.expiresAt) {
        fail(
          stream,
          new HttpError(401, 'authentication_error', 'invalid_token', 'the access token has expired'),
        );
        ws.close(4401, 'token expired');
        return;
      }
      streams.set(stream, null);
      const { type: _type, stream: _stream, box, ...request } = message;
      (async () => {
        if (typeof box !== 'string' || box === '') {
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_option',
            'invalid field box: must be a box id or name',
            'box',
          );
        }
        const session = await this.#startExecution(box, request);
        if (ws.readyState !== ws.OPEN) return; // gone while starting: reattach with …/attach
        const sink: ExecSink = {
          get open() {
            return ws.readyState === ws.OPEN && streams.get(stream)?.sink === sink;
          },
          data: (channel, bytes) => ws.send(muxFrame(channel, stream, bytes)),
          control: (control) => ws.send(JSON.stringify({ ...control, stream })),
          end: () => {
            streams.delete(stream);
            session.detach(sink);
          },
          terminate: () => {
            streams.delete(stream);
            session.detach(sink);
            fail(
              stream,
              new HttpError(
                404,
                'not_found_error',
                'execution_not_found',
                `execution ${session.id} was ended by the server (box removed or server stopping)`,
              ),
            );
          },
        };
        streams.set(stream, { session, sink });
        send({ type: 'started', stream, id: session.id, box_id: session.boxId });
        session.attachSink(sink, 0);
      })().catch((error) => {
        streams.delete(stream);
        fail(stream, error);
      });
    });
  }

  async #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === '/v1/executions/stream') {
      const principal = await this.#auth.check(req, Permission.exec);
      this.#upgrade(req, socket, head, (ws) => this.#multiplex(ws, principal));
      return;
    }
    const start = /^\/v1\/boxes\/([^/]+)\/executions\/attach$/.exec(url.pathname);
    if (start) {
      await this.#auth.check(req, Permission.exec);
      const box = await this.#box(decodeURIComponent(start[1]!));
      const header = req.headers['sandbox-exec'];
      if (typeof header === 'string') {
        // The start request in the upgrade itself: started and attached in one round trip.
        let request: unknown;
        try {
          request = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'));
        } catch {
          throw new HttpError(
            400,
            'invalid_request_error',
            'invalid_body',
            'invalid header sandbox-exec: must be base64url-encoded JSON',
          );
        }
        const session = await this.#startExecution(box.id, request);
        this.#upgrade(req, socket, head, (ws) => {
          ws.send(JSON.stringify({ type: 'started', id: session.id, box_id: session.boxId }));
          session.attach(ws, 0);
        });
        return;
      }
      this.#upgrade(req, socket, head, (ws) => this.#startOverSocket(ws, box.id));
      return;
    }
    const match = /^\/v1\/boxes\/([^/]+)\/executions\/([^/]+)\/attach$/.exec(url.pathname);
    if (!match)
      throw new HttpError(404, 'not_found_error', 'route_not_found', `no WebSocket route ${url.pathname}`);
    await this.#auth.check(req, Permission.exec);
    const box = await this.#box(decodeURIComponent(match[1]!));
    const session = this.#session(box.id, decodeURIComponent(match[2]!));
    if (session.sink) {
      throw new HttpError(
        409,
        'conflict_error',
        'already_attached',
        `execution ${session.id} already has an attached client (one at a time)`,
      );
    }
    const offsetText = url.searchParams.get('offset') ?? '0';
    const offset = Number(offsetText);
    if (!/^\d+$/.test(offsetText) || !Number.isSafeInteger(offset)) {
      throw new HttpError(
        400,
        'invalid_request_error',
        'invalid_option',
        'invalid query parameter offset: must be a non-negative integer',
        'offset',
      );
    }
    this.#upgrade(req, socket, head, (ws) => {
      if (session.sink) {
        ws.close(4409, 'already attached');
        return;
      }
      session.attach(ws, offset);
    });
  }

  async #onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    const match = /^\/v1\/tunnels\/([0-9A-HJKMNP-TV-Z]{26})$/.exec(req.url ?? '');
    if (!match)
      throw new HttpError(
        404,
        'not_found_error',
        'route_not_found',
        'CONNECT target must be /v1/tunnels/{tunnel id}',
      );
    await this.#auth.check(req, Permission.exec);
    const tunnel = this.#tunnels.get(match[1]!);
    // One-shot: a tunnel is consumed by its first CONNECT, whatever happens next.
    this.#tunnels.delete(match[1]!);
    if (!tunnel || tunnel.expires < Date.now())
      throw new HttpError(
        404,
        'not_found_error',
        'tunnel_not_found',
        'no such tunnel (tunnels are one-shot and expire after 60 s)',
      );
    const box = await this.#box(tunnel.boxId);
    const network =
      (box as JsBox & { network?: JsNetworkHandle }).network ??
      new LocalNetworkHandle(async () => {
        const info = await box.info();
        if (!info.state.running || !info.state.pid)
          throw new BoxError(`box ${box.id} is not running`, { code: 'conflict' });
        return info.state.pid;
      });
    let connection: Awaited<ReturnType<Awaited<ReturnType<JsNetworkHandle['tunnel']>>['connect']>>;
    try {
      connection = await (await network.tunnel(tunnel.port)).connect();
    } catch (error) {
      throw new HttpError(502, 'sandbox_error', 'tunnel_failed', (error as Error).message);
    }
    this.#tunnelSockets.add(socket);
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) await connection.write(head);
    let open = true;
    const finish = () => {
      if (!open) return;
      open = false;
      this.#tunnelSockets.delete(socket);
      connection.close().catch(() => {});
      socket.end();
    };
    socket.on('data', (chunk: Buffer) => {
      socket.pause();
      connection.write(chunk).then(() => socket.resume(), finish);
    });
    socket.on('end', finish);
    socket.on('close', finish);
    (async () => {
      while (open) {
        const data = await connection.read();
        if (data.length === 0) break;
        if (!socket.write(data)) await new Promise((resolve) => socket.once('drain', resolve));
      }
    })().then(finish, finish);
  }
}

/** Answers a raw upgrade/CONNECT socket with an HTTP error and the JSON error body, then closes it. */
function rejectSocket(socket: Duplex, error: HttpError): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(error.body());
  const reason =
    {
      400: 'Bad Request',
      401: 'Unauthorized',
      403: 'Forbidden',
      404: 'Not Found',
      409: 'Conflict',
      501: 'Not Implemented',
      502: 'Bad Gateway',
    }[error.status] ?? 'Error';
  const auth = error.status === 401 ? 'WWW-Authenticate: Bearer realm="sandbox"\r\n' : '';
  socket.end(
    `HTTP/1.1 ${error.status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n${auth}Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Starts a REST runtime server; resolves once it listens. See {@link RestServerOptions}. */
export async function startRestServer(options: RestServerOptions): Promise<RestServer> {
  const server = new RestServer(options);
  await server.listen();
  return server;
}
