/**
 * What the box tunnels of local boxes (tunnel.ts) and of REST boxes (rest/tunnel-client.ts) share
 * (spec 002 "Network tunnels (`box.network`)"): the checks of their arguments, the one-shot rule of a
 * prepared tunnel, the reading and writing side of a connection over a byte stream, and the listener of
 * a forwarder. Nothing here starts a process or reaches a box.
 */
import { rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { BoxError } from '../errors.ts';
import type {
  JsBoxTunnel,
  JsNetworkHandle,
  JsNetworkPolicy,
  JsPreviewUrl,
  JsTunnelConnection,
  TunnelForwarder,
  TunnelListen,
} from '../types.ts';

/** Default and largest `read` size, bytes. */
export const DEFAULT_READ_BYTES = 65536;
/** Bytes a connection keeps unread before it pauses its stream (1 MiB). */
const MAX_BUFFERED = 1024 * 1024;

/**
 * Checks the `maxBytes` of `JsTunnelConnection.read`.
 * @throws BoxError naming `maxBytes` unless it is an integer from 1 to 16 MiB (16777216).
 */
function checkReadSize(maxBytes: number): void {
  if (!Number.isInteger(maxBytes) || maxBytes < 1 || maxBytes > 16 * 1024 * 1024) {
    throw new BoxError('invalid read option maxBytes: must be an integer from 1 to 16777216', {
      field: 'maxBytes',
    });
  }
}

/**
 * Checks the box port of `JsNetworkHandle.tunnel(port)`.
 * @throws BoxError naming `port` unless it is an integer from 1 to 65535.
 */
function checkTunnelPort(port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new BoxError('invalid tunnel option port: must be an integer from 1 to 65535', { field: 'port' });
  }
}

/**
 * The `allowNet` of a `box.network.update` argument, copied.
 * @throws BoxError `invalid_option` (field `allowNet`) when `policy` is not `{ allowNet: string[] }`.
 */
function checkNetworkPolicy(policy: unknown): string[] {
  const allowNet = (policy as { allowNet?: unknown } | null)?.allowNet;
  if (!Array.isArray(allowNet) || !allowNet.every((rule) => typeof rule === 'string')) {
    throw new BoxError('invalid network option allowNet: must be an array of strings', { field: 'allowNet' });
  }
  return [...allowNet];
}

/**
 * A `JsTunnelConnection` over a byte stream: read from `input`, written to `output` (strings as UTF-8).
 * Chunks are kept as they arrive, and `input` is paused while more than 1 MiB is unread. Reading ends
 * with `input`'s `end`, with `end()` (called by the owner when its process exits or its socket closes),
 * or with `close()`, which first runs `stop` (ending both directions).
 */
export class ByteStreamConnection implements JsTunnelConnection {
  readonly #input: Readable;
  readonly #output: Writable;
  readonly #stop: () => Promise<void>;
  readonly #chunks: Buffer[] = [];
  #buffered = 0;
  #ended = false;
  #waiter: (() => void) | null = null;

  constructor(input: Readable, output: Writable, stop: () => Promise<void>) {
    this.#input = input;
    this.#output = output;
    this.#stop = stop;
    input.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      this.#buffered += chunk.length;
      if (this.#buffered > MAX_BUFFERED) input.pause();
      this.#wake();
    });
    input.on('end', () => this.end());
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  /** Ends reading: `read` answers what is still unread, then empty Buffers. Idempotent. */
  end(): void {
    this.#ended = true;
    this.#wake();
  }

  /**
   * 1 to `maxBytes` bytes (1..16 MiB, default 65536) as soon as any are unread; an empty Buffer once
   * the stream has ended and everything was read.
   * @throws BoxError naming `maxBytes` for a bad size.
   */
  async read(maxBytes = DEFAULT_READ_BYTES): Promise<Buffer> {
    checkReadSize(maxBytes);
    while (this.#chunks.length === 0) {
      if (this.#ended) return Buffer.alloc(0);
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
    const parts: Buffer[] = [];
    let size = 0;
    while (this.#chunks.length > 0 && size < maxBytes) {
      const chunk = this.#chunks[0]!;
      const take = Math.min(chunk.length, maxBytes - size);
      parts.push(chunk.subarray(0, take));
      size += take;
      if (take === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(take);
    }
    this.#buffered -= size;
    if (this.#buffered <= MAX_BUFFERED) this.#input.resume();
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
  }

  /**
   * Sends bytes (strings as UTF-8); resolves once they are handed to the stream.
   * @throws BoxError `conflict` once the connection is closed, `internal` when the write fails.
   */
  write(data: Buffer | Uint8Array | string): Promise<void> {
    const output = this.#output;
    if (output.writableEnded || output.destroyed) {
      return Promise.reject(new BoxError('tunnel connection is closed', { code: 'conflict' }));
    }
    return new Promise((resolve, reject) => {
      output.write(typeof data === 'string' ? Buffer.from(data) : data, (error) =>
        error
          ? reject(new BoxError(`tunnel write failed: ${error.message}`, { cause: error, code: 'internal' }))
          : resolve(),
      );
    });
  }

  /** Closes both directions (`stop`) and ends reading. Idempotent. */
  async close(): Promise<void> {
    await this.#stop();
    this.end();
  }
}

/**
 * Checks a forwarder's listen spec.
 * @throws BoxError naming `listen` with the broken rule (type, path, port 0–65535, host).
 */
function validateListen(listen: TunnelListen): TunnelListen {
  const bad = (rule: string): never => {
    throw new BoxError(`invalid tunnel option listen: ${rule}`, { field: 'listen' });
  };
  if (listen === null || typeof listen !== 'object')
    bad("must be { type: 'tcp', host?, port } or { type: 'unix', path }");
  if (listen.type === 'unix') {
    if (typeof listen.path !== 'string' || listen.path === '') bad('path must be a non-empty string');
    return listen;
  }
  if (listen.type === 'tcp') {
    if (!Number.isInteger(listen.port) || listen.port < 0 || listen.port > 65535)
      bad('port must be an integer 0–65535');
    if (listen.host !== undefined && (typeof listen.host !== 'string' || listen.host === ''))
      bad('host must be a non-empty string');
    return listen;
  }
  return bad("type must be 'tcp' or 'unix'");
}

/**
 * Starts `server` listening on a validated listen spec (TCP host defaults to 127.0.0.1).
 * @throws BoxError naming `listen` when it cannot listen (address in use, bad path, …).
 */
function listenOn(server: Server, spec: TunnelListen): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(
        new BoxError(`invalid tunnel option listen: cannot listen (${error.message})`, {
          field: 'listen',
          cause: error,
        }),
      ),
    );
    if (spec.type === 'unix') server.listen(spec.path, () => resolve());
    else server.listen(spec.port, spec.host ?? '127.0.0.1', () => resolve());
  });
}

/** `TunnelForwarder.localAddr()` of a listening server: the socket path, or `host:port` (`[v6]:port`). */
function listenAddress(server: Server, spec: TunnelListen): string {
  const address = server.address();
  return typeof address === 'string' || address === null
    ? (spec as { path: string }).path
    : `${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

/**
 * Tunnels each client of a forwarder: called with the client's socket, paused (errors on it are
 * ignored; it is destroyed when it fails). Returns what to stop when the forwarder closes, if anything
 * beyond the socket (e.g. the client's tunnel process).
 */
export type TunnelClientHandler = (socket: Socket) => (() => void) | undefined;

/** A forwarder: its listening server and its clients (see `listenForTunnels`). */
class TunnelListener implements TunnelForwarder {
  readonly #server: Server;
  readonly #address: string;
  readonly #unixPath: string | null;
  /** Each client's socket and what its handler asked to stop with it. */
  readonly #clients = new Map<Socket, (() => void) | undefined>();
  readonly #closed: Promise<void>;
  #closing = false;

  constructor(server: Server, spec: TunnelListen, onClient: TunnelClientHandler) {
    this.#server = server;
    this.#address = listenAddress(server, spec);
    this.#unixPath = spec.type === 'unix' ? spec.path : null;
    this.#closed = new Promise((resolve) => server.once('close', () => resolve()));
    server.on('connection', (socket) => {
      socket.pause();
      socket.on('error', () => {});
      this.#clients.set(socket, undefined);
      socket.on('close', () => this.#clients.delete(socket));
      const stop = onClient(socket);
      if (stop && this.#clients.has(socket)) this.#clients.set(socket, stop);
    });
  }

  localAddr(): string {
    return this.#address;
  }

  wait(): Promise<void> {
    return this.#closed;
  }

  async close(): Promise<void> {
    if (!this.#closing) {
      this.#closing = true;
      this.#server.close();
      for (const [socket, stop] of this.#clients) {
        socket.destroy();
        stop?.();
      }
    }
    await this.#closed;
    if (this.#unixPath) rmSync(this.#unixPath, { force: true });
  }
}

/**
 * A forwarder (spec 002 `TunnelForwarder`) listening on `spec` (checked by `validateListen`; TCP host
 * default 127.0.0.1) that hands each client to `onClient`. `close()` stops listening, destroys the
 * clients' sockets, calls what their handlers returned, and removes a unix socket file once the server
 * has closed.
 * @throws BoxError naming `listen` when it cannot listen (address in use, bad path, …).
 */
async function listenForTunnels(spec: TunnelListen, onClient: TunnelClientHandler): Promise<TunnelForwarder> {
  // Clients' sockets without Nagle: a relay that holds back small writes until the peer's delayed ACK
  // (40 ms) would stall request/answer protocols (a kernel WebSocket, a database wire) on every turn.
  const server = createServer({ noDelay: true });
  await listenOn(server, spec);
  return new TunnelListener(server, spec, onClient);
}

/** How one kind of box tunnel reaches the box port (see `OneShotTunnel`). */
export interface TunnelWays {
  /** The public URL of the tunnel, or null where it has none. */
  uri: string | null;
  /** Opens the one connection of `connect()`. */
  open(): Promise<JsTunnelConnection>;
  /** Gets ready to forward (e.g. resolves the box) and returns what tunnels each client. */
  clientHandler(): Promise<TunnelClientHandler>;
}

/**
 * A prepared one-shot tunnel (spec 002 `JsBoxTunnel`): `connect()` or `forward(listen)`, once; a second
 * use is refused. `ways` says how its kind (local, REST) reaches the box port.
 */
export class OneShotTunnel implements JsBoxTunnel {
  readonly #ways: TunnelWays;
  #used = false;

  /** @internal Use `box.network.tunnel(port)`. */
  constructor(ways: TunnelWays) {
    this.#ways = ways;
  }

  #consume(): void {
    if (this.#used)
      throw new BoxError('this tunnel was already used; tunnels are one-shot (call tunnel(port) again)', {
        code: 'conflict',
      });
    this.#used = true;
  }

  /** The public URL of the tunnel (a REST tunnel's CONNECT URL on the server); null for a local box. */
  uri(): string | null {
    return this.#ways.uri;
  }

  /**
   * Opens the connection.
   * @throws BoxError `conflict` when the tunnel was used; `unavailable` when nothing listens on the port
   *   or the box cannot be reached; as the box's state (not running, not found).
   */
  async connect(): Promise<JsTunnelConnection> {
    this.#consume();
    return this.#ways.open();
  }

  /**
   * Listens on `listen` and tunnels each client to the box port through a fresh tunnel.
   * @throws BoxError naming `listen` for a bad listen spec or an address in use; `conflict` when the
   *   tunnel was used.
   */
  async forward(listen: TunnelListen): Promise<TunnelForwarder> {
    const spec = validateListen(listen);
    this.#consume();
    return listenForTunnels(spec, await this.#ways.clientHandler());
  }
}

/**
 * `box.network` (spec 002 `JsNetworkHandle`) with its arguments checked the same way for every kind of
 * box: `update` and `tunnel` check theirs here and hand them to the kind's `applyAllowNet` and
 * `prepareTunnel`.
 */
export abstract class CheckedNetworkHandle implements JsNetworkHandle {
  /** Replaces the box's outbound allowlist with `allowNet` (checked); resolves to the rules in force. */
  protected abstract applyAllowNet(allowNet: string[]): Promise<string[]>;

  /** Prepares a one-shot tunnel to TCP `port` (checked: 1–65535) in the box. */
  protected abstract prepareTunnel(port: number): Promise<JsBoxTunnel>;

  abstract previewUrl(port: number, options?: { expiresIn?: number }): Promise<JsPreviewUrl>;

  /**
   * Replaces the box's outbound allowlist (see `JsNetworkHandle.update`).
   * @throws BoxError `invalid_option` naming `allowNet` when it is not an array of strings; as the box's
   *   kind applies it.
   */
  async update(policy: JsNetworkPolicy): Promise<JsNetworkPolicy> {
    const allowNet = checkNetworkPolicy(policy);
    return { allowNet: await this.applyAllowNet(allowNet) };
  }

  /** Prepares a one-shot tunnel to TCP `port` (1–65535) in the box. @throws BoxError naming `port`. */
  async tunnel(port: number): Promise<JsBoxTunnel> {
    checkTunnelPort(port);
    return this.prepareTunnel(port);
  }
}
