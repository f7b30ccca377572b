/**
 * Serving signed preview URLs: `sandbox serve` proxies HTTP requests and WebSocket
 * upgrades that carry a valid preview token to the box port the token names, without an API key.
 *
 * - Path form: `/preview/<token>/<path>` reaches `/<path>` (query kept) on the port.
 * - Host form, with a preview domain: `Host: <port>-<boxId>.<domain>`; the token comes as the
 *   `preview_token` query parameter (removed before forwarding; the answer sets the `sandbox_preview`
 *   cookie for that host so that the page's own requests carry it), the `X-Preview-Token` header, or that
 *   cookie. The token must name that box and port: a URL for one box never reaches another.
 *
 * A token that is unknown, expired or revoked, or whose box is gone, is 404. Open connections of a
 * preview are closed when it is revoked or expires. Each request is in the audit log under the preview's
 * tenant and id (never the token).
 */
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Duplex } from 'node:stream';
import { ERROR_CODES } from '../../errors.ts';
import type { JsTunnelConnection } from '../../types.ts';
import type { ServerContext } from '../context.ts';
import { rejectSocket } from '../hooks.ts';
import { boxNetwork } from '../tunnel-routes.ts';
import { HttpError, httpErrorOf } from '../wire.ts';
import type { PreviewInfo } from './previews.ts';

/** Cookie carrying a Host-form preview token. */
export const PREVIEW_COOKIE = 'sandbox_preview';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'authorization',
  'x-api-key',
  'x-preview-token',
]);

/** A request addressed to a preview: its token and the path to forward. */
interface Target {
  token: string;
  path: string;
  /** Host form: the box and port the Host names (the token must match them). */
  host?: { boxId: string; port: number };
  /** Host form with `preview_token` in the query: the answer sets the cookie. */
  setCookie: boolean;
}

function notFound(): HttpError {
  return new HttpError('preview_not_found', 'no such preview URL (expired, revoked, or never issued)');
}

/** A Node stream over a box tunnel connection (reads pull, writes await the tunnel). */
function connectionStream(connection: JsTunnelConnection): Duplex {
  const stream: Duplex = new Duplex({
    read() {
      connection.read().then(
        (data) => stream.push(data.length === 0 ? null : data),
        (error: Error) => stream.destroy(error),
      );
    },
    write(chunk: Buffer, _encoding, callback) {
      connection.write(chunk).then(() => callback(), callback);
    },
    destroy(error, callback) {
      connection.close().then(
        () => callback(error),
        () => callback(error),
      );
    },
  });
  return stream;
}

function cookieToken(header: string | undefined): string | null {
  if (!header) return null;
  for (const part of header.split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === PREVIEW_COOKIE) return value.join('=');
  }
  return null;
}

/** The preview proxy of one server (see the module comment). */
export class PreviewProxy {
  readonly #ctx: ServerContext;
  /** Open connections by preview id. */
  readonly #open = new Map<string, Set<Duplex>>();

  constructor(ctx: ServerContext) {
    this.#ctx = ctx;
  }

  /** The preview target of a request, or null when it is not addressed to a preview. */
  #target(req: IncomingMessage): Target | null {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://preview.invalid');
    } catch {
      return null; // not a preview; the router answers the malformed target
    }
    const domain = this.#ctx.previewDomain;
    const host = (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
    if (domain && host.endsWith(`.${domain.toLowerCase()}`)) {
      const label = host.slice(0, -domain.length - 1);
      const match = /^(\d{1,5})-([0-9a-hjkmnp-tv-z]{26})$/.exec(label);
      if (!match) return { token: '', path: '/', setCookie: false };
      const fromQuery = url.searchParams.get('preview_token');
      url.searchParams.delete('preview_token');
      const header = req.headers['x-preview-token'];
      const token =
        fromQuery ?? (typeof header === 'string' ? header : null) ?? cookieToken(req.headers.cookie) ?? '';
      return {
        token,
        path: `${url.pathname}${url.search}`,
        host: { port: Number(match[1]), boxId: match[2]!.toUpperCase() },
        setCookie: fromQuery !== null,
      };
    }
    const match = /^\/preview\/([^/]+)(\/.*)?$/.exec(url.pathname);
    if (!match) return null;
    // Tokens are base64url: a segment needing decoding is no token (and a malformed escape cannot throw).
    return {
      token: match[1]!,
      path: `${match[2] ?? '/'}${url.search}`,
      setCookie: false,
    };
  }

  /** True when `req` is addressed to a preview (path form, or Host form under the preview domain). */
  matches(req: IncomingMessage): boolean {
    return this.#target(req) !== null;
  }

  /** Opens a stream to the port of the preview `target` names. @throws HttpError 404, 502. */
  async #connect(target: Target): Promise<{ info: PreviewInfo; stream: Duplex }> {
    const info = this.#ctx.previews.verify(target.token);
    if (!info) throw notFound();
    if (target.host && (target.host.boxId !== info.boxId || target.host.port !== info.port)) throw notFound();
    if (this.#ctx.ownerOf(info.boxId) !== info.tenant) throw notFound();
    const box = await this.#ctx.runtime.get(info.boxId);
    if (!box) throw notFound();
    let connection: JsTunnelConnection;
    try {
      connection = await (await boxNetwork(box).tunnel(info.port)).connect();
    } catch (error) {
      throw new HttpError('preview_unreachable', `port ${info.port} of the box: ${(error as Error).message}`);
    }
    const stream = connectionStream(connection);
    stream.on('error', () => {});
    this.#track(info, stream);
    return { info, stream };
  }

  #track(info: PreviewInfo, stream: Duplex): void {
    let set = this.#open.get(info.id);
    if (!set) {
      set = new Set();
      this.#open.set(info.id, set);
    }
    set.add(stream);
    const expiry = setTimeout(() => stream.destroy(), Math.max(0, Date.parse(info.expiresAt) - Date.now()));
    expiry.unref();
    stream.once('close', () => {
      clearTimeout(expiry);
      set.delete(stream);
      if (set.size === 0) this.#open.delete(info.id);
    });
  }

  /** Closes the open connections of preview `id` (it was revoked). */
  closePreview(id: string): void {
    for (const stream of this.#open.get(id) ?? []) stream.destroy();
  }

  /** Closes every open preview connection (the server is closing). */
  close(): void {
    for (const set of this.#open.values()) for (const stream of set) stream.destroy();
  }

  #audit(info: PreviewInfo, req: IncomingMessage, status: number): void {
    this.#ctx.auditEvent(
      { tenant: info.tenant, subject: `preview:${info.id}` },
      {
        method: req.method ?? 'GET',
        route: 'preview',
        resource: { box: info.boxId, preview: info.id },
        status,
      },
    );
  }

  /** Forwards one HTTP request (see the module comment); errors are answered as JSON. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = this.#target(req);
    try {
      if (!target) throw notFound();
      const { info, stream } = await this.#connect(target);
      const headers: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
      }
      headers.host = `127.0.0.1:${info.port}`;
      headers.connection = 'close';
      await new Promise<void>((resolve) => {
        const upstream = httpRequest(
          { method: req.method, path: target.path, headers, createConnection: () => stream },
          (answer) => {
            const out = { ...answer.headers };
            delete out.connection;
            delete out['keep-alive'];
            delete out['transfer-encoding'];
            if (target.setCookie) {
              const cookie = `${PREVIEW_COOKIE}=${target.token}; Path=/; HttpOnly; SameSite=Lax; Expires=${new Date(info.expiresAt).toUTCString()}`;
              out['set-cookie'] = [...[answer.headers['set-cookie'] ?? []].flat(), cookie];
            }
            res.writeHead(answer.statusCode ?? 502, out);
            answer.pipe(res);
            answer.once('end', resolve);
            answer.once('error', () => {
              res.destroy();
              resolve();
            });
            this.#audit(info, req, answer.statusCode ?? 502);
          },
        );
        upstream.once('error', (error) => {
          if (!res.headersSent) {
            const http = new HttpError(
              'preview_unreachable',
              `the box port did not answer: ${error.message}`,
            );
            res
              .writeHead(http.status, { 'content-type': 'application/json; charset=utf-8' })
              .end(JSON.stringify(http.body()));
          } else res.destroy();
          this.#audit(info, req, ERROR_CODES.preview_unreachable.status);
          resolve();
        });
        req.pipe(upstream);
      });
    } catch (error) {
      const http = httpErrorOf(error);
      if (!res.headersSent) {
        res.writeHead(http.status, {
          'content-type': 'application/json; charset=utf-8',
          'cache-control': 'no-store',
        });
        res.end(JSON.stringify(http.body()));
      } else res.destroy();
    }
  }

  /** Forwards a WebSocket (any upgrade) to the port: the request head, then bytes both ways. */
  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => {});
    const target = this.#target(req);
    try {
      if (!target) throw notFound();
      const { info, stream } = await this.#connect(target);
      const lines = [`${req.method} ${target.path} HTTP/1.1`, `Host: 127.0.0.1:${info.port}`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) {
        const name = req.rawHeaders[i]!;
        const lower = name.toLowerCase();
        if (
          lower === 'host' ||
          lower === 'authorization' ||
          lower === 'x-api-key' ||
          lower === 'x-preview-token'
        )
          continue;
        lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
      }
      stream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) stream.write(head);
      stream.pipe(socket);
      socket.pipe(stream);
      socket.once('close', () => stream.destroy());
      stream.once('close', () => socket.destroy());
      this.#audit(info, req, 101);
    } catch (error) {
      rejectSocket(socket, httpErrorOf(error));
    }
  }
}
