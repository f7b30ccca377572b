/**
 * Box tunnels of local boxes (spec 002 "Network tunnels (`box.network`)"). A tunnel is a byte stream
 * to `127.0.0.1:<port>` inside the box's network namespace, carried by `socat` run with `nsenter`
 * in that namespace (so it works for every box, `disabled` network included, and reaches servers bound
 * to the box's loopback). Each `connect()` and each client of a forwarder gets its own stream.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { gvisorTunnelCommand, TUNNEL_READY_LINE } from '../engine/gvisor-netns.ts';
import { BoxError } from '../errors.ts';
import type { JsBoxTunnel, JsPreviewUrl, JsTunnelConnection } from '../types.ts';
import { ByteStreamConnection, CheckedNetworkHandle, OneShotTunnel } from './tunnel-shared.ts';

/** Resolves the host pid of a running box's init (its namespace is `/proc/<pid>/ns/net`). */
export type BoxPidResolver = () => Promise<number>;

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

/**
 * A `JsTunnelConnection` over one socat stream: its stdout read, its stdin written; it ends when the
 * process exits, and `close()` kills the process.
 */
function streamConnection(child: ChildProcess): JsTunnelConnection {
  const connection = new ByteStreamConnection(child.stdout!, child.stdin!, async () => {
    child.stdin!.destroy();
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  });
  child.on('exit', () => connection.end());
  return connection;
}

/**
 * Pipes one forwarder client through a fresh stream from `open`; returns what kills that stream's
 * process when the forwarder closes (it is killed as well when the client goes away).
 */
function tunnelClient(socket: Socket, open: () => Promise<ChildProcess>): () => void {
  let child: ChildProcess | undefined;
  socket.on('close', () => child?.kill('SIGKILL'));
  open().then(
    (started) => {
      child = started;
      if (socket.destroyed) return void started.kill('SIGKILL');
      started.stdin!.on('error', () => {});
      socket.pipe(started.stdin!);
      started.stdout!.pipe(socket);
      started.on('exit', () => socket.end());
      socket.resume();
    },
    () => socket.destroy(),
  );
  return () => child?.kill('SIGKILL');
}

/** `box.network` of a local box. */
export class LocalNetworkHandle extends CheckedNetworkHandle {
  readonly #pid: BoxPidResolver;
  readonly #update: ((allowNet: string[]) => Promise<string[]>) | undefined;

  /**
   * @param pid resolves the running box's init pid; rejects `BoxError` when the box is not running.
   * @param update replaces the box's `allowNet` and resolves to the rules in force (`RuntimeContext.updateNetwork`);
   *   absent: `update` throws `unsupported`.
   */
  constructor(pid: BoxPidResolver, update?: (allowNet: string[]) => Promise<string[]>) {
    super();
    this.#pid = pid;
    this.#update = update;
  }

  /** Through the runtime's update. @throws BoxError `unsupported` without one. */
  protected async applyAllowNet(allowNet: string[]): Promise<string[]> {
    if (!this.#update) {
      throw new BoxError('changing the network policy needs a runtime of this host', { code: 'unsupported' });
    }
    return this.#update(allowNet);
  }

  /** A tunnel whose connection and each forwarded client are their own stream; no public URL. */
  protected async prepareTunnel(port: number): Promise<JsBoxTunnel> {
    const pid = this.#pid;
    return new OneShotTunnel({
      uri: null,
      open: async () => streamConnection(await openStream(await pid(), port)),
      clientHandler: async () => {
        const resolved = await pid();
        return (socket) => tunnelClient(socket, () => openStream(resolved, port));
      },
    });
  }

  /** Preview URLs are served by `sandbox serve`: @throws BoxError `unsupported` on a local runtime. */
  async previewUrl(): Promise<JsPreviewUrl> {
    throw new BoxError('preview URLs are served by a REST runtime (sandbox serve)', { code: 'unsupported' });
  }
}
