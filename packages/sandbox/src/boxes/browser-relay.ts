/**
 * Host access to a TCP port of a box for `BrowserBox` and `ComputerBox`: the active port publication when
 * the runtime made one (`JsBoxInfo.network.publishedPorts`), otherwise a host listener that carries each
 * connection into the box's network namespace (`nsenter --net=/proc/<init pid>/ns/net socat STDIO
 * TCP:127.0.0.1:<port>`), the same path as `box.network` tunnels. The relay works for every box, network
 * `disabled` included, and needs root (like the engine).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';

/** Where a box port is reachable from the host, and how to release it. */
export interface HostPort {
  /** Host address to connect to (`127.0.0.1` for a wildcard publication). */
  host: string;
  /** Host TCP port. */
  port: number;
  /** `published` (runtime port publication) or `relay` (host listener of this process). */
  via: 'published' | 'relay';
  /** Closes the relay listener and its connections (no-op for a publication). */
  close(): void;
}

/**
 * Finds or creates host access to `guestPort` of a running box.
 * @param box the running box.
 * @param guestPort TCP port in the box.
 * @param relayPort host port of the relay when one is needed (0: any free port); it listens on 127.0.0.1.
 * @throws BoxError when the box has no running init or the relay port cannot be bound.
 */
export async function hostPortOf(box: JsBox, guestPort: number, relayPort = 0): Promise<HostPort> {
  const info = await box.info();
  const published = info.network?.publishedPorts?.find(
    (p) => p.guestPort === guestPort && p.protocol === 'tcp',
  );
  if (published) {
    const host = published.hostIp === '0.0.0.0' || published.hostIp === '' ? '127.0.0.1' : published.hostIp;
    return { host, port: published.hostPort, via: 'published', close: () => {} };
  }
  const pid = info.state.pid;
  if (!pid) throw new BoxError(`box ${box.id} has no running init process`, { code: 'conflict' });
  const streams = new Set<ChildProcess>();
  const server: Server = createServer((socket) => {
    const child = spawn(
      'nsenter',
      [
        `--net=/proc/${pid}/ns/net`,
        '--',
        'socat',
        '-t',
        '30',
        'STDIO,shut-close',
        `TCP:127.0.0.1:${guestPort}`,
      ],
      { stdio: ['pipe', 'pipe', 'ignore'] },
    );
    streams.add(child);
    child.stdin!.on('error', () => {});
    socket.on('error', () => child.kill());
    socket.pipe(child.stdin!);
    child.stdout!.pipe(socket);
    child.on('error', () => socket.destroy());
    child.on('exit', () => {
      streams.delete(child);
      socket.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(
        new BoxError(`cannot listen on 127.0.0.1:${relayPort} for box port ${guestPort}: ${error.message}`, {
          code: 'internal',
        }),
      ),
    );
    server.listen(relayPort, '127.0.0.1', () => resolve());
  });
  server.unref();
  const address = server.address();
  if (address === null || typeof address === 'string')
    throw new BoxError('relay listener has no port', { code: 'internal' });
  return {
    host: '127.0.0.1',
    port: address.port,
    via: 'relay',
    close: () => {
      server.close();
      for (const child of streams) child.kill();
    },
  };
}
