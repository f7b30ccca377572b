/**
 * Box tunnels of the REST runtime server (spec 002 "Network tunnels"): `POST /v1/boxes/{box}/tunnels`
 * `{ port }` prepares a one-shot tunnel to a TCP port of a running box (a Fastify plugin, `sandbox.exec`),
 * and HTTP `CONNECT /v1/tunnels/{id}` consumes it — the socket then carries the bytes both ways. A
 * tunnel expires after {@link TUNNEL_TTL_MS} and is consumed by its first CONNECT, whatever happens next.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { ulid } from 'ulid';
import { BoxError } from '../errors.ts';
import { LocalNetworkHandle } from '../network/tunnel.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsNetworkHandle } from '../types.ts';
import type { Authenticator } from './auth.ts';
import type { RawAttempt, ServerContext } from './context.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { HttpError, httpErrorOf, Permission } from './wire.ts';

/** How long a prepared tunnel may wait for its `CONNECT`, ms. */
export const TUNNEL_TTL_MS = 60_000;

interface PreparedTunnel {
  boxId: string;
  /** Tenant of the caller that prepared it: only a caller of that tenant (or the operator) may CONNECT. */
  tenant: string;
  port: number;
  expires: number;
}

type Connection = Awaited<ReturnType<Awaited<ReturnType<JsNetworkHandle['tunnel']>>['connect']>>;

/** The network handle of a box (`box.network`, else one reaching its init's network namespace). */
export function boxNetwork(box: JsBox): JsNetworkHandle {
  return (
    (box as JsBox & { network?: JsNetworkHandle }).network ??
    new LocalNetworkHandle(async () => {
      const info = await box.info();
      if (!info.state.running || !info.state.pid)
        throw new BoxError(`box ${box.id} is not running`, { code: 'conflict' });
      return info.state.pid;
    })
  );
}

/** The prepared tunnels of one server and their open CONNECT sockets. */
export class Tunnels {
  readonly #ctx: ServerContext;
  readonly #auth: Authenticator;
  readonly #prepared = new Map<string, PreparedTunnel>();
  readonly #sockets = new Set<Duplex>();

  /** @param auth checks the `sandbox.exec` permission of each CONNECT. */
  constructor(ctx: ServerContext, auth: Authenticator) {
    this.#ctx = ctx;
    this.#auth = auth;
  }

  /** Closes every open tunnel socket. */
  close(): void {
    for (const socket of this.#sockets) socket.destroy();
  }

  /** The route plugin: `POST /v1/boxes/{box}/tunnels`. */
  readonly routes = async (app: FastifyInstance): Promise<void> => {
    app.post<{ Params: { box: string }; Body: { port: number } }>(
      '/v1/boxes/:box/tunnels',
      route(Permission.exec, {
        tags: ['tunnels'],
        summary: 'prepare a one-shot tunnel to a TCP port of the box',
        description:
          'Then `CONNECT /v1/tunnels/{id}` (the `connect_path`) with the same credential within 60 s: the connection carries the bytes to and from the port inside the box.',
        params: obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']),
        body: obj({ port: { type: 'integer', minimum: 1, maximum: 65535 } }, ['port']),
        response: { 201: { description: 'prepared', ...ref('Tunnel') } },
        errors: [409],
      }),
      async (request, reply) => {
        const port = request.body.port;
        const principal = principalOf(request);
        const box = await this.#ctx.box(request.params.box, principal);
        if (!(await box.info()).state.running)
          throw new HttpError('conflict', `box ${box.id} is not running`);
        const id = ulid();
        this.#prepared.set(id, {
          boxId: box.id,
          tenant: principal.tenant,
          port,
          expires: Date.now() + TUNNEL_TTL_MS,
        });
        this.#ctx.later(TUNNEL_TTL_MS, () => this.#prepared.delete(id));
        return reply.code(201).send({
          id,
          box_id: box.id,
          port,
          connect_path: `/v1/tunnels/${id}`,
          expires_at: new Date(Date.now() + TUNNEL_TTL_MS).toISOString(),
        });
      },
    );
  };

  /**
   * Handles an HTTP `CONNECT` of the server. Every CONNECT is audited once: with status 200 when the
   * tunnel is established, else with the status and code it is refused with (under tenant `-` when the
   * credential is refused), naming the tunnel it asked for.
   * @throws HttpError (401/403/404/502) before the connection is established; the caller answers it.
   */
  async onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    const attempt: RawAttempt = { method: 'CONNECT', route: 'unmatched' };
    let connection: Connection;
    try {
      connection = await this.#open(req, attempt);
    } catch (error) {
      this.#ctx.auditRefused(attempt, httpErrorOf(error));
      throw error;
    }
    await this.#pipe(socket, head, connection);
  }

  /** Authenticates a CONNECT, finds its tunnel and connects to the box port (see {@link onConnect}). */
  async #open(req: IncomingMessage, attempt: RawAttempt): Promise<Connection> {
    const match = /^\/v1\/tunnels\/([0-9A-HJKMNP-TV-Z]{26})$/.exec(req.url ?? '');
    if (!match) throw new HttpError('route_not_found', 'CONNECT target must be /v1/tunnels/{tunnel id}');
    attempt.route = '/v1/tunnels/:id';
    attempt.resource = { tunnel: match[1]! };
    attempt.principal = await this.#auth.check(req, Permission.exec);
    const principal = attempt.principal;
    const found = this.#prepared.get(match[1]!);
    // Another tenant's tunnel is not found, and stays prepared for its owner.
    const tunnel = found && (principal.operator || found.tenant === principal.tenant) ? found : undefined;
    if (tunnel) this.#prepared.delete(match[1]!);
    if (!tunnel || tunnel.expires < Date.now())
      throw new HttpError('tunnel_not_found', 'no such tunnel (tunnels are one-shot and expire after 60 s)');
    const box = await this.#ctx.box(tunnel.boxId, principal);
    attempt.resource = { box: box.id, tunnel: match[1]! };
    let connection: Connection;
    try {
      connection = await (await boxNetwork(box).tunnel(tunnel.port)).connect();
    } catch (error) {
      throw new HttpError('tunnel_failed', (error as Error).message);
    }
    this.#ctx.auditEvent(principal, {
      method: 'CONNECT',
      route: attempt.route,
      resource: attempt.resource,
      status: 200,
    });
    return connection;
  }

  async #pipe(socket: Duplex, head: Buffer, connection: Connection): Promise<void> {
    this.#sockets.add(socket);
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) await connection.write(head);
    let open = true;
    const finish = () => {
      if (!open) return;
      open = false;
      this.#sockets.delete(socket);
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
