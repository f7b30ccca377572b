/**
 * HTTP requests routed to a sandbox port other than envd's (E2B `sandbox.getHost(port)`): the request
 * is relayed byte for byte through a box tunnel to that port (`box.network.tunnel(port)`) — the head as
 * received (routing headers removed, `Connection: close` so that the exchange ends with the
 * connection), then the body; the box's answer goes back unchanged on the client connection, which
 * closes when the box side does.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { JsBox } from '../runtime/box.ts';
import type { JsTunnelConnection } from '../types.ts';

/** Headers not passed on to the box (routing and hop-by-hop). */
const DROPPED = new Set([
  'e2b-sandbox-id',
  'e2b-sandbox-port',
  'connection',
  'keep-alive',
  'proxy-connection',
]);

/** The request head to send to the box: request line, headers, `Connection: close`. */
export function requestHead(req: IncomingMessage): string {
  const lines = [`${req.method} ${req.url} HTTP/1.1`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i] as string;
    if (DROPPED.has(name.toLowerCase())) continue;
    lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
  }
  lines.push('Connection: close');
  return `${lines.join('\r\n')}\r\n\r\n`;
}

/** Pumps the box side to `socket` until either closes. */
async function pumpBack(connection: JsTunnelConnection, socket: Duplex): Promise<void> {
  for (;;) {
    const chunk = await connection.read();
    if (chunk.length === 0 || socket.destroyed) break;
    if (!socket.write(chunk)) await new Promise((resolve) => socket.once('drain', resolve));
  }
}

/**
 * Relays `req` (whose body is still unread) to `port` of `box`, answering on the client connection
 * `socket`.
 * @throws BoxError as `JsNetworkHandle.tunnel` / `connect` (a port nothing listens on: `unavailable`).
 */
export async function relay(box: JsBox, port: number, req: IncomingMessage, socket: Duplex): Promise<void> {
  const connection = await (await box.network.tunnel(port)).connect();
  socket.on('error', () => {});
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    connection.close().catch(() => {});
    socket.destroy();
  };
  socket.once('close', close);
  try {
    await connection.write(requestHead(req));
    const upstream = (async () => {
      for await (const chunk of req as AsyncIterable<Buffer>) await connection.write(chunk);
    })().catch(close);
    await pumpBack(connection, socket);
    void upstream;
  } finally {
    close();
  }
}
