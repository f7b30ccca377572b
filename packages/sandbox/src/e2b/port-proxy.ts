/**
 * Traffic routed to a sandbox port other than envd's (E2B `sandbox.getHost(port)`), relayed byte for
 * byte through a box tunnel to that port (`box.network.tunnel(port)`):
 * - an HTTP request (`relay`): the head as received (routing headers removed, `Connection: close` so
 *   that the exchange ends with the connection), then the body; the box's answer goes back unchanged on
 *   the client connection, which closes when the box side does;
 * - an upgrade such as a WebSocket (`relayUpgrade`): the head as received (routing headers removed,
 *   `Connection`/`Upgrade` kept), the bytes already read after it, then bytes both ways until either
 *   side closes. The box's server answers the handshake itself (`101`, or a refusal).
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
/** Headers not passed on to the box in an upgrade (routing only: the upgrade needs `Connection`). */
const DROPPED_UPGRADE = new Set(['e2b-sandbox-id', 'e2b-sandbox-port']);

/**
 * The request head to send to the box: request line, headers, then `Connection: close` for a plain
 * request, or the client's own `Connection` and `Upgrade` headers for an upgrade.
 */
export function requestHead(req: IncomingMessage, upgrade = false): string {
  const dropped = upgrade ? DROPPED_UPGRADE : DROPPED;
  const lines = [`${req.method} ${req.url} HTTP/1.1`];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i] as string;
    if (dropped.has(name.toLowerCase())) continue;
    lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
  }
  if (!upgrade) lines.push('Connection: close');
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
 * Opens a tunnel connection to `port` of `box`, sends `head` and `first`, then copies `upstream` to the
 * box and the box's bytes to `socket` until the box side ends or `socket` closes; both are closed then.
 * Writes to the box are awaited one after another (the tunnel's back-pressure).
 */
async function splice(
  box: JsBox,
  port: number,
  head: string,
  first: Buffer,
  upstream: AsyncIterable<Buffer>,
  socket: Duplex,
): Promise<void> {
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
    await connection.write(head);
    if (first.length > 0) await connection.write(first);
    void (async () => {
      for await (const chunk of upstream) await connection.write(chunk);
    })().catch(close);
    await pumpBack(connection, socket);
  } finally {
    close();
  }
}

/**
 * Relays `req` (whose body is still unread) to `port` of `box`, answering on the client connection
 * `socket`.
 * @throws BoxError as `JsNetworkHandle.tunnel` / `connect` (a port nothing listens on: `unavailable`).
 */
export function relay(box: JsBox, port: number, req: IncomingMessage, socket: Duplex): Promise<void> {
  return splice(box, port, requestHead(req), Buffer.alloc(0), req as AsyncIterable<Buffer>, socket);
}

/**
 * Relays an upgrade request (the server's `upgrade` event: `req`, its `socket` and the `head` bytes read
 * past the request head) to `port` of `box`, then bytes both ways until either side closes.
 * @throws BoxError as `JsNetworkHandle.tunnel` / `connect` (a port nothing listens on: `unavailable`).
 */
export function relayUpgrade(
  box: JsBox,
  port: number,
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
): Promise<void> {
  return splice(box, port, requestHead(req, true), head, socket as AsyncIterable<Buffer>, socket);
}
