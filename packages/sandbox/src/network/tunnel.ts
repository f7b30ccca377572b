/**
 * Box tunnels of local boxes (spec 002 "Network tunnels (`box.network`)"). A tunnel is a byte stream
 * to `127.0.0.1:<port>` inside the box's network namespace, carried by `socat` run with `nsenter`
 * in that namespace (so it works for every box, `disabled` network included, and reaches servers bound
 * to the box's loopback). Each `connect()` and each client of a forwarder gets its own stream.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { gvisorTunnelCommand, TUNNEL_READY_LINE } from '../engine/gvisor-netns.ts';
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

/** Resolves the host pid of a running box's init (its namespace is `/proc/<pid>/ns/net`). */
export type BoxPidResolver = () => Promise<number>;

/** Default and largest `read` size, bytes. */
export const DEFAULT_READ_BYTES = 65536;
const MAX_BUFFERED = 1024 * 1024;

/**
 * Checks the `maxBytes` of `JsTunnelConnection.read` (shared by local and REST tunnels).
 * @throws BoxError naming `maxBytes` unless it is an integer from 1 to 16 MiB (16777216).
 */
export function checkReadSize(maxBytes: number): void {
  if (!Number.isInteger(maxBytes) || maxBytes < 1 || maxBytes > 16 * 1024 * 1024) {
    throw new BoxError('invalid read option maxBytes: must be an integer from 1 to 16777216', {
      field: 'maxBytes',
    });
  }
}

/**
 * `JsTunnelConnection.write` on the sending side of a tunnel (shared by local and REST tunnels):
 * strings are sent as UTF-8; resolves once the bytes are handed to the stream.
 * @throws BoxError when the stream is already closed or the write fails.
 */
export function writeTunnel(stream: Writable, data: Buffer | Uint8Array | string): Promise<void> {
  if (stream.writableEnded || stream.destroyed) {
    return Promise.reject(new BoxError('tunnel connection is closed', { code: 'conflict' }));
  }
  return new Promise((resolve, reject) => {
    stream.write(typeof data === 'string' ? Buffer.from(data) : data, (error) =>
      error
        ? reject(new BoxError(`tunnel write failed: ${error.message}`, { cause: error, code: 'internal' }))
        : resolve(),
    );
  });
}

/**
 * Starts `socat` in the box's namespace connected to its `127.0.0.1:port` (for a gVisor box, whose
 * sockets live in its own network stack, the relay of `gvisorTunnelCommand` inside the box); resolves
 * once connected.
 */
function openStream(pid: number, port: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const [cmd, ...args] = gvisorTunnelCommand(pid, port) ?? [
      'nsenter',
      `--net=/proc/${pid}/ns/net`,
      '--',
      'socat',
      '-d',
      '-d',
      '-t',
      '60',
      'STDIO,shut-close',
      `TCP:127.0.0.1:${port}`,
    ];
    const child = spawn(cmd as string, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let log = '';
    let settled = false;
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      if (!settled && log.includes(TUNNEL_READY_LINE)) {
        settled = true;
        child.stderr!.off('data', onData);
        child.stderr!.resume();
        resolve(child);
      }
    };
    child.stderr!.on('data', onData);
    child.stdin!.on('error', () => {});
    child.on('error', (error) => {
      if (!settled) {
        settled = true;
        reject(
          new BoxError(`tunnel to box port ${port}: ${error.message}`, { cause: error, code: 'unavailable' }),
        );
      }
    });
    child.on('exit', () => {
      if (settled) return;
      settled = true;
      const reason = /Connection refused/i.test(log)
        ? 'connection refused (nothing listens on that port in the box)'
        : log.trim().split('\n').pop() || 'the tunnel process exited';
      reject(new BoxError(`tunnel to box port ${port}: ${reason}`, { code: 'unavailable' }));
    });
  });
}

/** A `JsTunnelConnection` over one socat stream. */
class StreamConnection implements JsTunnelConnection {
  readonly #child: ChildProcess;
  readonly #chunks: Buffer[] = [];
  #buffered = 0;
  #ended = false;
  #waiter: (() => void) | null = null;

  constructor(child: ChildProcess) {
    this.#child = child;
    const out = child.stdout!;
    out.on('data', (chunk: Buffer) => {
      this.#chunks.push(chunk);
      this.#buffered += chunk.length;
      if (this.#buffered > MAX_BUFFERED) out.pause();
      this.#wake();
    });
    out.on('end', () => {
      this.#ended = true;
      this.#wake();
    });
    child.on('exit', () => {
      this.#ended = true;
      this.#wake();
    });
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = null;
    waiter?.();
  }

  /** Up to `maxBytes` bytes (1..16 MiB, default 65536); an empty Buffer at the end of the stream. */
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
    if (this.#buffered <= MAX_BUFFERED) this.#child.stdout!.resume();
    return Buffer.concat(parts);
  }

  /** Sends bytes (strings as UTF-8). @throws BoxError once the connection is closed. */
  write(data: Buffer | Uint8Array | string): Promise<void> {
    return writeTunnel(this.#child.stdin!, data);
  }

  /** Closes both directions and ends the stream's process. Idempotent. */
  async close(): Promise<void> {
    this.#child.stdin!.destroy();
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      const exited = new Promise((resolve) => this.#child.once('exit', resolve));
      this.#child.kill('SIGKILL');
      await exited;
    }
    this.#ended = true;
    this.#wake();
  }
}

/** A listener that tunnels each client to the box port. */
class Forwarder implements TunnelForwarder {
  readonly #server: Server;
  readonly #address: string;
  readonly #unixPath: string | null;
  readonly #clients = new Set<{ socket: Socket; child?: ChildProcess }>();
  readonly #closed: Promise<void>;
  #closing = false;

  constructor(server: Server, address: string, unixPath: string | null) {
    this.#server = server;
    this.#address = address;
    this.#unixPath = unixPath;
    this.#closed = new Promise((resolve) => server.once('close', () => resolve()));
  }

  /** Pipes one client through a fresh stream. */
  attach(socket: Socket, open: () => Promise<ChildProcess>): void {
    const client: { socket: Socket; child?: ChildProcess } = { socket };
    this.#clients.add(client);
    socket.pause();
    socket.on('error', () => {});
    socket.on('close', () => {
      this.#clients.delete(client);
      client.child?.kill('SIGKILL');
    });
    open().then(
      (child) => {
        client.child = child;
        if (socket.destroyed) return void child.kill('SIGKILL');
        child.stdin!.on('error', () => {});
        socket.pipe(child.stdin!);
        child.stdout!.pipe(socket);
        child.on('exit', () => socket.end());
        socket.resume();
      },
      () => socket.destroy(),
    );
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
      for (const client of this.#clients) {
        client.socket.destroy();
        client.child?.kill('SIGKILL');
      }
    }
    await this.#closed;
    if (this.#unixPath) rmSync(this.#unixPath, { force: true });
  }
}

/** A one-shot tunnel of a local box (`uri()` is null). */
export class LocalBoxTunnel implements JsBoxTunnel {
  readonly #pid: BoxPidResolver;
  readonly #port: number;
  #used = false;

  /** @internal Use `box.network.tunnel(port)`. */
  constructor(pid: BoxPidResolver, port: number) {
    this.#pid = pid;
    this.#port = port;
  }

  #consume(): void {
    if (this.#used)
      throw new BoxError('this tunnel was already used; tunnels are one-shot (call tunnel(port) again)', {
        code: 'conflict',
      });
    this.#used = true;
  }

  /** null: local boxes have no public tunnel URL. */
  uri(): string | null {
    return null;
  }

  /** Opens the connection. @throws BoxError when nothing listens on the port or the box is not running. */
  async connect(): Promise<JsTunnelConnection> {
    this.#consume();
    return new StreamConnection(await openStream(await this.#pid(), this.#port));
  }

  /**
   * Listens on `listen` and tunnels each client to the box port.
   * @throws BoxError naming `listen` for a bad listen spec or an address in use.
   */
  async forward(listen: TunnelListen): Promise<TunnelForwarder> {
    const spec = validateListen(listen);
    this.#consume();
    const pid = await this.#pid();
    const server = createServer();
    await listenOn(server, spec);
    const forwarder = new Forwarder(
      server,
      listenAddress(server, spec),
      spec.type === 'unix' ? spec.path : null,
    );
    server.on('connection', (socket) => forwarder.attach(socket, () => openStream(pid, this.#port)));
    return forwarder;
  }
}

/**
 * Checks a forwarder's listen spec (shared by local and REST tunnels).
 * @throws BoxError naming `listen` with the broken rule (type, path, port 0–65535, host).
 */
export function validateListen(listen: TunnelListen): TunnelListen {
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
export function listenOn(server: Server, spec: TunnelListen): Promise<void> {
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
export function listenAddress(server: Server, spec: TunnelListen): string {
  const address = server.address();
  return typeof address === 'string' || address === null
    ? (spec as { path: string }).path
    : `${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

/**
 * The `allowNet` of a `box.network.update` argument, copied.
 * @throws BoxError `invalid_option` (field `allowNet`) when `policy` is not `{ allowNet: string[] }`.
 */
export function checkNetworkPolicy(policy: unknown): string[] {
  const allowNet = (policy as { allowNet?: unknown } | null)?.allowNet;
  if (!Array.isArray(allowNet) || !allowNet.every((rule) => typeof rule === 'string')) {
    throw new BoxError('invalid network option allowNet: must be an array of strings', { field: 'allowNet' });
  }
  return [...allowNet];
}

/** `box.network` of a local box. */
export class LocalNetworkHandle implements JsNetworkHandle {
  readonly #pid: BoxPidResolver;
  readonly #update: ((allowNet: string[]) => Promise<string[]>) | undefined;

  /**
   * @param pid resolves the running box's init pid; rejects `BoxError` when the box is not running.
   * @param update replaces the box's `allowNet` and resolves to the rules in force (`RuntimeContext.updateNetwork`);
   *   absent: `update` throws `unsupported`.
   */
  constructor(pid: BoxPidResolver, update?: (allowNet: string[]) => Promise<string[]>) {
    this.#pid = pid;
    this.#update = update;
  }

  /**
   * Replaces the box's outbound allowlist (see `JsNetworkHandle.update`).
   * @throws BoxError `invalid_option` naming `allowNet` when it is not an array of strings; as the runtime's update.
   */
  async update(policy: JsNetworkPolicy): Promise<JsNetworkPolicy> {
    const allowNet = checkNetworkPolicy(policy);
    if (!this.#update) {
      throw new BoxError('changing the network policy needs a runtime of this host', { code: 'unsupported' });
    }
    return { allowNet: await this.#update(allowNet) };
  }

  /** Prepares a one-shot tunnel to TCP `port` (1–65535) in the box. @throws BoxError naming `port`. */
  async tunnel(port: number): Promise<JsBoxTunnel> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new BoxError('invalid tunnel option port: must be an integer from 1 to 65535', { field: 'port' });
    }
    return new LocalBoxTunnel(this.#pid, port);
  }

  /** Preview URLs are served by `sandbox serve`: @throws BoxError `unsupported` on a local runtime. */
  async previewUrl(): Promise<JsPreviewUrl> {
    throw new BoxError('preview URLs are served by a REST runtime (sandbox serve)', { code: 'unsupported' });
  }
}
