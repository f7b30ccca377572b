/**
 * The exec WebSockets of the REST runtime server (framing in `wire.ts`; the GET routes that document them
 * are in `exec-routes.ts`): attach to an execution, start-and-attach in one round trip, and the
 * multiplexed stream of many executions over one connection. Upgrades bypass Fastify's routing: each is
 * authenticated here (`sandbox.exec`), and a refused one is answered on the raw socket with the JSON
 * error body. Attached clients are pinged; one that misses a pong is dropped so that it can reattach.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { type WebSocket, WebSocketServer } from 'ws';
import type { Authenticator, Principal } from './auth.ts';
import type { RawAttempt, ServerContext } from './context.ts';
import type { ExecSession, ExecSink } from './sessions.ts';
import {
  Channel,
  controlMessageOf,
  HttpError,
  httpErrorOf,
  isObject,
  isStreamNumber,
  MUX_HEADER_BYTES,
  muxFrame,
  Permission,
} from './wire.ts';

/** Interval of WebSocket pings; a client silent for two intervals is dropped, ms. */
export const HEARTBEAT_MS = 10_000;

const invalidBody = (message: string) => new HttpError('invalid_body', message);

/** The exec WebSocket endpoints of one server. */
export class ExecSockets {
  readonly #ctx: ServerContext;
  readonly #auth: Authenticator;
  readonly #wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: 16 * 1024 * 1024,
  });
  readonly #heartbeat: NodeJS.Timeout;
  readonly #alive = new WeakSet<WebSocket>();

  /** Starts the heartbeat (unreferenced: it never keeps the process alive); `close()` stops it. */
  constructor(ctx: ServerContext, auth: Authenticator) {
    this.#ctx = ctx;
    this.#auth = auth;
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
  }

  /** Drops every client and stops the heartbeat. */
  close(): void {
    clearInterval(this.#heartbeat);
    for (const client of this.#wss.clients) client.terminate();
    this.#wss.close();
  }

  /**
   * Handles an HTTP upgrade of the server. Every upgrade is audited once: with status 101 when it is
   * accepted, else with the status and code it is refused with (under tenant `-` when the credential is
   * refused), naming the box and execution the request named.
   * @throws HttpError (401/403/404/409/400) before the upgrade; the caller answers it on the socket.
   */
  async onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    const attempt: RawAttempt = { method: 'GET', route: 'unmatched' };
    try {
      await this.#route(req, socket, head, attempt);
    } catch (error) {
      this.#ctx.auditRefused(attempt, httpErrorOf(error));
      throw error;
    }
  }

  async #route(req: IncomingMessage, socket: Duplex, head: Buffer, attempt: RawAttempt): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname === '/v1/executions/stream') {
      attempt.route = '/v1/executions/stream';
      attempt.principal = await this.#auth.check(req, Permission.exec);
      const principal = attempt.principal;
      this.#ctx.auditEvent(principal, { method: 'GET', route: attempt.route, status: 101 });
      this.#upgrade(req, socket, head, (ws) => this.#multiplex(ws, principal));
      return;
    }
    const start = /^\/v1\/boxes\/([^/]+)\/executions\/attach$/.exec(url.pathname);
    if (start) {
      attempt.route = '/v1/boxes/:box/executions/attach';
      attempt.resource = { box: decodeURIComponent(start[1]!) };
      attempt.principal = await this.#auth.check(req, Permission.exec);
      const principal = attempt.principal;
      const box = await this.#ctx.box(attempt.resource.box!, principal);
      attempt.resource = { box: box.id };
      const header = req.headers['sandbox-exec'];
      if (typeof header === 'string') {
        // The start request in the upgrade itself: started and attached in one round trip.
        let request: unknown;
        try {
          request = JSON.parse(Buffer.from(header, 'base64url').toString('utf8'));
        } catch {
          throw invalidBody('invalid header sandbox-exec: must be base64url-encoded JSON');
        }
        const session = await this.#ctx.startExecution(box.id, request, principal);
        this.#auditUpgraded(principal, attempt.route, { box: box.id, execution: session.id });
        this.#upgrade(req, socket, head, (ws) => {
          ws.send(JSON.stringify({ type: 'started', id: session.id, box_id: session.boxId }));
          session.attach(ws, 0);
        });
        return;
      }
      this.#auditUpgraded(principal, attempt.route, attempt.resource);
      this.#upgrade(req, socket, head, (ws) => this.#startOverSocket(ws, box.id, principal));
      return;
    }
    const match = /^\/v1\/boxes\/([^/]+)\/executions\/([^/]+)\/attach$/.exec(url.pathname);
    if (!match) throw new HttpError('route_not_found', `no WebSocket route ${url.pathname}`);
    attempt.route = '/v1/boxes/:box/executions/:execution/attach';
    attempt.resource = { box: decodeURIComponent(match[1]!), execution: decodeURIComponent(match[2]!) };
    attempt.principal = await this.#auth.check(req, Permission.exec);
    const principal = attempt.principal;
    const box = await this.#ctx.box(attempt.resource.box!, principal);
    attempt.resource.box = box.id;
    const session = this.#ctx.session(box.id, attempt.resource.execution!);
    if (session.sink) {
      throw new HttpError(
        'already_attached',
        `execution ${session.id} already has an attached client (one at a time)`,
      );
    }
    const offsetText = url.searchParams.get('offset') ?? '0';
    const offset = Number(offsetText);
    if (!/^\d+$/.test(offsetText) || !Number.isSafeInteger(offset)) {
      throw new HttpError(
        'invalid_option',
        'invalid query parameter offset: must be a non-negative integer',
        'offset',
      );
    }
    this.#auditUpgraded(principal, attempt.route, { box: box.id, execution: session.id });
    this.#upgrade(req, socket, head, (ws) => {
      if (session.sink) {
        ws.close(4409, 'already attached');
        return;
      }
      session.attach(ws, offset);
    });
  }

  /** Writes the audit entry of an accepted upgrade (GET, status 101) of `principal` on `route`. */
  #auditUpgraded(principal: Principal, route: string, resource: Record<string, string> | undefined): void {
    this.#ctx.auditEvent(principal, { method: 'GET', route, resource, status: 101 });
  }

  /** Completes a WebSocket upgrade; the socket then takes part in the heartbeat. */
  #upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, done: (ws: WebSocket) => void): void {
    this.#wss.handleUpgrade(req, socket, head, (ws) => {
      this.#alive.add(ws);
      ws.on('pong', () => this.#alive.add(ws));
      done(ws);
    });
  }

  /**
   * `GET /v1/boxes/{box}/executions/attach` without the `sandbox-exec` header: the client's first text
   * frame is `{"type":"start", cmd, …}`; the server answers `{"type":"started","id"}` and streams as an
   * attach at offset 0, or `{"type":"error","error"}` and closes.
   */
  #startOverSocket(ws: WebSocket, boxId: string, principal: Principal): void {
    ws.on('error', () => {});
    ws.once('message', (data, isBinary) => {
      (async () => {
        if (isBinary) throw invalidBody('the first frame must be the start request (text)');
        let message: Record<string, unknown>;
        try {
          message = JSON.parse((data as Buffer).toString('utf8'));
        } catch {
          throw invalidBody('the start request is not JSON');
        }
        if (!isObject(message) || message.type !== 'start') {
          throw invalidBody('the first frame must be {"type":"start", cmd, ...}');
        }
        const { type: _type, ...request } = message;
        const session = await this.#ctx.startExecution(boxId, request, principal);
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

  /**
   * `GET /v1/executions/stream`: many executions over one authenticated connection. Each start names its
   * box; one stream's failure is an `error` frame for that stream only. An access token is checked for
   * expiry again at every start (the connection closes with 4401 then).
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
      const message = controlMessageOf(data);
      if (!message || !isStreamNumber(message.stream)) return;
      const stream = message.stream;
      if (message.type !== 'start') {
        streams.get(stream)?.session.command(message);
        return;
      }
      if (streams.has(stream)) {
        fail(
          stream,
          new HttpError(
            'invalid_option',
            `invalid field stream: stream ${stream} is in use on this connection`,
            'stream',
          ),
        );
        return;
      }
      if (principal.expiresAt !== undefined && Date.now() >= principal.expiresAt) {
        fail(stream, new HttpError('invalid_token', 'the access token has expired'));
        ws.close(4401, 'token expired');
        return;
      }
      streams.set(stream, null);
      const { type: _type, stream: _stream, box, ...request } = message;
      (async () => {
        if (typeof box !== 'string' || box === '') {
          throw new HttpError('invalid_option', 'invalid field box: must be a box id or name', 'box');
        }
        const session = await this.#ctx.startExecution(box, request, principal);
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
}
