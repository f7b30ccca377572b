/**
 * Box tunnels of the REST runtime client (spec 002 "Network tunnels"; the server side is
 * `tunnel-routes.ts`): `box.network.tunnel(port)` prepares a one-shot tunnel on the server, `connect()`
 * opens it with HTTP `CONNECT`, and `forward()` listens locally and prepares one tunnel per connection.
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import { BoxError } from '../errors.ts';
import {
  ByteStreamConnection,
  CheckedNetworkHandle,
  OneShotTunnel,
  type TunnelClientHandler,
} from '../network/tunnel-shared.ts';
import type { JsBoxTunnel, JsNetworkPolicy, JsPreviewUrl, JsTunnelConnection } from '../types.ts';
import type { Connection } from './connection.ts';
import { codeOfStatus } from './wire.ts';

function boxPath(id: string): string {
  return `/v1/boxes/${encodeURIComponent(id)}`;
}

/** Opens the CONNECT stream of a prepared tunnel. */
function connectTunnel(conn: Connection, connectPath: string): Promise<Socket> {
  const target = new URL(conn.url);
  const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)({
    host: target.hostname.replace(/^\[|\]$/g, ''),
    port: target.port || (target.protocol === 'https:' ? 443 : 80),
    method: 'CONNECT',
    path: connectPath,
    headers: conn.headers,
  });
  return new Promise((resolve, reject) => {
    request.on('connect', (response, socket: Socket, head: Buffer) => {
      if (response.statusCode === 200) {
        if (head.length > 0) socket.unshift(head);
        resolve(socket);
        return;
      }
      let body = head.toString('utf8');
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => {
        body += chunk;
      });
      socket.on('close', () => {
        let message = `HTTP ${response.statusCode}`;
        try {
          message = JSON.parse(body).error.message;
        } catch {}
        reject(new BoxError(`tunnel: ${message}`, { code: codeOfStatus(response.statusCode ?? 500) }));
      });
    });
    request.on('error', (error) =>
      reject(
        new BoxError(`tunnel: cannot reach the REST runtime at ${conn.url}: ${error.message}`, {
          code: 'unavailable',
        }),
      ),
    );
    request.end();
  });
}

/** `JsTunnelConnection` over a CONNECT socket; it ends when the socket closes or fails. */
function socketConnection(socket: Socket): JsTunnelConnection {
  const connection = new ByteStreamConnection(socket, socket, async () => {
    socket.destroy();
  });
  const end = () => connection.end();
  socket.on('close', end);
  socket.on('error', end);
  return connection;
}

interface PreparedTunnel {
  id: string;
  connectPath: string;
}

function prepare(conn: Connection, boxId: string, port: number): Promise<PreparedTunnel> {
  return conn.call<PreparedTunnel>('POST', `${boxPath(boxId)}/tunnels`, { port });
}

/**
 * What tunnels one forwarder client of a REST box: the first client uses the tunnel `prepared` already,
 * each later one a tunnel prepared for it; its bytes are piped through the tunnel's CONNECT stream.
 */
function forwardClients(
  conn: Connection,
  boxId: string,
  port: number,
  prepared: PreparedTunnel,
): TunnelClientHandler {
  let first: PreparedTunnel | null = prepared;
  return (client) => {
    const ready = first;
    first = null;
    (ready ? Promise.resolve(ready) : prepare(conn, boxId, port))
      .then((p) => connectTunnel(conn, p.connectPath))
      .then(
        (upstream) => {
          upstream.on('error', () => client.destroy());
          client.on('close', () => upstream.destroy());
          client.pipe(upstream).pipe(client);
          client.resume();
        },
        () => client.destroy(),
      );
    return undefined;
  };
}

/** `box.network` of a REST box: tunnels prepared on the server, consumed with HTTP CONNECT. */
export class RestNetworkHandle extends CheckedNetworkHandle {
  readonly #conn: Connection;
  readonly #boxId: string;

  constructor(conn: Connection, boxId: string) {
    super();
    this.#conn = conn;
    this.#boxId = boxId;
  }

  /** A tunnel prepared on the server (`POST /v1/boxes/{box}/tunnels`); `uri()` is its CONNECT URL there. */
  protected async prepareTunnel(port: number): Promise<JsBoxTunnel> {
    const conn = this.#conn;
    const prepared = await prepare(conn, this.#boxId, port);
    return new OneShotTunnel({
      uri: `${conn.url}${prepared.connectPath}`,
      open: async () => socketConnection(await connectTunnel(conn, prepared.connectPath)),
      clientHandler: async () => forwardClients(conn, this.#boxId, port, prepared),
    });
  }

  /** `PUT /v1/boxes/{box}/network`. @throws BoxError as the server answers. */
  protected async applyAllowNet(allowNet: string[]): Promise<string[]> {
    // The connection converts keys: `allowNet` travels as `allow_net` both ways.
    const answer = await this.#conn.call<JsNetworkPolicy>(
      'PUT',
      `/v1/boxes/${encodeURIComponent(this.#boxId)}/network`,
      { allowNet },
    );
    return answer.allowNet;
  }

  /**
   * A signed preview URL of `port` (`POST /v1/boxes/{box}/previews`), valid `expiresIn` ms.
   * @throws BoxError `invalid_option` naming `port` or `expiresIn`; as the server answers.
   */
  async previewUrl(port: number, options: { expiresIn?: number } = {}): Promise<JsPreviewUrl> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new BoxError('invalid preview option port: must be an integer from 1 to 65535', {
        field: 'port',
      });
    }
    if (options.expiresIn !== undefined && !(Number.isInteger(options.expiresIn) && options.expiresIn > 0)) {
      throw new BoxError('invalid preview option expiresIn: must be a positive integer (ms)', {
        field: 'expiresIn',
      });
    }
    const answer = await this.#conn.call<JsPreviewUrl>(
      'POST',
      `/v1/boxes/${encodeURIComponent(this.#boxId)}/previews`,
      {
        port,
        ...(options.expiresIn !== undefined ? { expiresInMs: options.expiresIn } : {}),
      },
    );
    return { url: answer.url, token: answer.token, id: answer.id, expiresAt: answer.expiresAt };
  }
}
