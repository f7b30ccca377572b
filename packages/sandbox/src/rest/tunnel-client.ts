/**
 * Box tunnels of the REST runtime client (spec 002 "Network tunnels"; the server side is
 * `tunnel-routes.ts`): `box.network.tunnel(port)` prepares a one-shot tunnel on the server, `connect()`
 * opens it with HTTP `CONNECT`, and `forward()` listens locally and prepares one tunnel per connection.
 */
import { rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer, type Server, type Socket } from 'node:net';
import { BoxError } from '../errors.ts';
import {
  checkNetworkPolicy,
  checkReadSize,
  listenAddress,
  listenOn,
  validateListen,
  writeTunnel,
} from '../network/tunnel.ts';
import type {
  JsBoxTunnel,
  JsNetworkHandle,
  JsNetworkPolicy,
  JsPreviewUrl,
  JsTunnelConnection,
  TunnelForwarder,
  TunnelListen,
} from '../types.ts';
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

/** `JsTunnelConnection` over a CONNECT socket. */
class SocketConnection implements JsTunnelConnection {
  readonly #socket: Socket;
  readonly #chunks: Buffer[] = [];
  #ended = false;
  #waiter: (() => void) | null = null;

  constructor(socket: Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      socket.pause();
      this.#wake();
    });
    const end = () => {
      this.#ended = true;
      this.#wake();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  async read(maxBytes = 65536): Promise<Buffer> {
    checkReadSize(maxBytes);
    while (this.#chunks.length === 0) {
      if (this.#ended) return Buffer.alloc(0);
      this.#socket.resume();
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
    const chunk = this.#chunks[0]!;
    if (chunk.length <= maxBytes) {
      this.#chunks.shift();
      return chunk;
    }
    this.#chunks[0] = chunk.subarray(maxBytes);
    return chunk.subarray(0, maxBytes);
  }

  write(data: Buffer | Uint8Array | string): Promise<void> {
    return writeTunnel(this.#socket, data);
  }

  async close(): Promise<void> {
    this.#socket.destroy();
    this.#ended = true;
    this.#wake();
  }
}

interface PreparedTunnel {
  id: string;
  connectPath: string;
}

function prepare(conn: Connection, boxId: string, port: number): Promise<PreparedTunnel> {
  return conn.call<PreparedTunnel>('POST', `${boxPath(boxId)}/tunnels`, { port });
}

/** A one-shot tunnel of a REST box (spec 002 `JsBoxTunnel`); `uri()` is its CONNECT URL on the server. */
class RestBoxTunnel implements JsBoxTunnel {
  readonly #conn: Connection;
  readonly #boxId: string;
  readonly #port: number;
  readonly #prepared: PreparedTunnel;
  #used = false;

  constructor(conn: Connection, boxId: string, port: number, prepared: PreparedTunnel) {
    this.#conn = conn;
    this.#boxId = boxId;
    this.#port = port;
    this.#prepared = prepared;
  }

  #consume(): void {
    if (this.#used)
      throw new BoxError('this tunnel was already used; tunnels are one-shot (call tunnel(port) again)', {
        code: 'conflict',
      });
    this.#used = true;
  }

  uri(): string {
    return `${this.#conn.url}${this.#prepared.connectPath}`;
  }

  async connect(): Promise<JsTunnelConnection> {
    this.#consume();
    return new SocketConnection(await connectTunnel(this.#conn, this.#prepared.connectPath));
  }

  async forward(listen: TunnelListen): Promise<TunnelForwarder> {
    const spec = validateListen(listen);
    this.#consume();
    let first: PreparedTunnel | null = this.#prepared;
    const server = createServer((client) => {
      client.pause();
      client.on('error', () => {});
      const prepared = first ?? null;
      first = null;
      (prepared ? Promise.resolve(prepared) : prepare(this.#conn, this.#boxId, this.#port))
        .then((p) => connectTunnel(this.#conn, p.connectPath))
        .then(
          (upstream) => {
            upstream.on('error', () => client.destroy());
            client.on('close', () => upstream.destroy());
            client.pipe(upstream).pipe(client);
            client.resume();
          },
          () => client.destroy(),
        );
    });
    await listenOn(server, spec);
    return new RestForwarder(server, spec);
  }
}

class RestForwarder implements TunnelForwarder {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  readonly #address: string;
  readonly #unixPath: string | null;
  readonly #closed: Promise<void>;

  constructor(server: Server, spec: TunnelListen) {
    this.#server = server;
    server.on('connection', (socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    this.#unixPath = spec.type === 'unix' ? spec.path : null;
    this.#address = listenAddress(server, spec);
    this.#closed = new Promise((resolve) => server.once('close', () => resolve()));
  }

  localAddr(): string {
    return this.#address;
  }

  wait(): Promise<void> {
    return this.#closed;
  }

  async close(): Promise<void> {
    if (this.#server.listening) {
      this.#server.close();
      for (const socket of this.#sockets) socket.destroy();
    }
    await this.#closed;
    if (this.#unixPath) rmSync(this.#unixPath, { force: true });
  }
}

/** `box.network` of a REST box: tunnels prepared on the server, consumed with HTTP CONNECT. */
export class RestNetworkHandle implements JsNetworkHandle {
  readonly #conn: Connection;
  readonly #boxId: string;

  constructor(conn: Connection, boxId: string) {
    this.#conn = conn;
    this.#boxId = boxId;
  }

  /** Prepares a one-shot tunnel to TCP `port` (1–65535). @throws BoxError naming `port`. */
  async tunnel(port: number): Promise<JsBoxTunnel> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new BoxError('invalid tunnel option port: must be an integer from 1 to 65535', { field: 'port' });
    }
    return new RestBoxTunnel(this.#conn, this.#boxId, port, await prepare(this.#conn, this.#boxId, port));
  }

  /**
   * Replaces the box's outbound allowlist (`PUT /v1/boxes/{box}/network`; see `JsNetworkHandle.update`).
   * @throws BoxError `invalid_option` naming `allowNet` when it is not an array of strings; as the server answers.
   */
  async update(policy: JsNetworkPolicy): Promise<JsNetworkPolicy> {
    const allowNet = checkNetworkPolicy(policy);
    // The connection converts keys: `allowNet` travels as `allow_net` both ways.
    const answer = await this.#conn.call<JsNetworkPolicy>(
      'PUT',
      `/v1/boxes/${encodeURIComponent(this.#boxId)}/network`,
      { allowNet },
    );
    return { allowNet: answer.allowNet };
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
