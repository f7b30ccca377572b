/**
 * Routing of in-sandbox traffic: a request carrying `E2b-Sandbox-Id` and
 * `E2b-Sandbox-Port` headers (what the SDK sends to `E2B_SANDBOX_URL`), or whose Host is
 * `<port>-<sandboxId>.<domain>` for the configured domain, goes to that sandbox's port. Port 49983 is
 * envd, served here: `GET /health` (204 while running, 502 when paused, killed or unknown), `/files`,
 * and the Connect services (`connect-node`, JSON and binary codecs). A signed `/files` URL without the
 * headers is routed to the sandbox whose access token signs it.
 *
 * Every other envd request needs the sandbox's `X-Access-Token`; a paused sandbox is resumed first when
 * it has `autoResume`, else the request is refused with 409. Other ports get HTTP requests and upgrades
 * (WebSockets) relayed to the box
 * (`port-proxy.ts`) without a token, as E2B serves them publicly under the unguessable sandbox id;
 * 49999 is the code interpreter, served from the host over the box's kernels (`code-interpreter.ts`).
 */
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { createContextValues } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import type { JsBox } from '../runtime/box.ts';
import { CODE_INTERPRETER_PORT, serveCodeInterpreter } from './code-interpreter.ts';
import { type EnvdRequest, envdKey, userOf } from './envd-context.ts';
import { filesystemService, type OwnerNames } from './envd-filesystem.ts';
import { download, sendError, signatureValid, upload } from './envd-http.ts';
import { type ProcessTable, processService } from './envd-process.ts';
import { Filesystem } from './gen/filesystem/filesystem_pb.ts';
import { Process } from './gen/process/process_pb.ts';
import { relay, relayUpgrade } from './port-proxy.ts';
import { type E2bSandbox, E2bSandboxes, stateOf } from './sandboxes.ts';
import { E2bError, e2bErrorOf } from './wire.ts';

/** envd's port in a sandbox. */
export const ENVD_PORT = 49983;
/** Largest Connect message accepted, bytes (8 MiB). */
export const MAX_CONNECT_MESSAGE_BYTES = 8 * 1024 * 1024;

/** `relaying`, with a failure to reach the box's port turned into E2bError 502. */
async function unreachable(target: SandboxTarget, relaying: Promise<void>): Promise<void> {
  try {
    await relaying;
  } catch (error) {
    throw new E2bError(
      502,
      `port ${target.port} of sandbox ${target.sandboxId} is not reachable: ${(error as Error).message}`,
    );
  }
}

/** Answers an upgrade `socket` with the HTTP status and `{ code, message }` of `error`, then closes it. */
function rejectUpgrade(socket: Duplex, error: unknown): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(e2bErrorOf(error));
  const status = e2bErrorOf(error).code;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Where a request goes. */
export interface SandboxTarget {
  sandboxId: string;
  port: number;
}

/** Routes in-sandbox requests of one server. */
export class E2bRouter {
  readonly #sandboxes: E2bSandboxes;
  readonly #domain: string | null;
  readonly #routed = new WeakMap<IncomingMessage, EnvdRequest>();
  readonly #connect: (req: IncomingMessage, res: ServerResponse) => void;

  constructor(sandboxes: E2bSandboxes, domain: string | null, processes: ProcessTable, names: OwnerNames) {
    this.#sandboxes = sandboxes;
    this.#domain = domain?.toLowerCase() ?? null;
    this.#connect = connectNodeAdapter({
      readMaxBytes: MAX_CONNECT_MESSAGE_BYTES,
      routes: (router) => {
        router.service(Process, processService(processes));
        router.service(Filesystem, filesystemService(names));
      },
      contextValues: (req) =>
        createContextValues().set(envdKey, this.#routed.get(req as IncomingMessage) ?? null),
      fallback: (_req, res) => sendError(res as ServerResponse, new E2bError(404, 'no such envd route')),
    }) as (req: IncomingMessage, res: ServerResponse) => void;
  }

  /**
   * The sandbox and port a request is for, or null when it is for the server itself.
   * @throws E2bError 400 for a malformed `E2b-Sandbox-Port`.
   */
  targetOf(req: IncomingMessage): SandboxTarget | null {
    const id = req.headers['e2b-sandbox-id'];
    if (typeof id === 'string' && id !== '') {
      const rawPort = req.headers['e2b-sandbox-port'];
      const port = rawPort === undefined ? ENVD_PORT : Number(rawPort);
      if (!Number.isInteger(port) || port < 1 || port > 65535)
        throw new E2bError(400, 'E2b-Sandbox-Port: must be a TCP port');
      return { sandboxId: id, port };
    }
    if (this.#domain) {
      const host = (req.headers.host ?? '').toLowerCase().replace(/:\d+$/, '');
      const suffix = `.${this.#domain}`;
      if (host.endsWith(suffix)) {
        const match = /^(\d{1,5})-([a-z0-9][a-z0-9_.-]*)$/.exec(host.slice(0, -suffix.length));
        if (match) return { sandboxId: match[2] as string, port: Number(match[1]) };
      }
    }
    return null;
  }

  /** Whether the request is a signed `/files` URL without routing headers (see module comment). */
  isSignedFiles(req: IncomingMessage): boolean {
    return (req.url ?? '').startsWith('/files?') && /[?&]signature=/.test(req.url ?? '');
  }

  /**
   * Takes an upgrade request (a WebSocket) routed to a sandbox port other than envd's and the code
   * interpreter's, and relays it to that port of the box (`relayUpgrade`). Returns false, touching
   * nothing, when the request is not routed to a sandbox. A failure before the box's answer is written
   * on the socket as an HTTP `{ code, message }` answer (404 unknown sandbox, 409 paused, 502 nothing
   * listens on the port).
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    let target: SandboxTarget | null;
    try {
      target = this.targetOf(req);
    } catch (error) {
      rejectUpgrade(socket, error);
      return true;
    }
    if (!target) return false;
    socket.on('error', () => {});
    void (async () => {
      if (target.port === ENVD_PORT || target.port === CODE_INTERPRETER_PORT) {
        throw new E2bError(404, `port ${target.port} of a sandbox takes no upgrade`);
      }
      const box = await this.#running(target);
      await unreachable(target, relayUpgrade(box, target.port, req, socket, head));
    })().catch((error) => rejectUpgrade(socket, error));
    return true;
  }

  /** The box of a routed request, resumed when paused with autoResume. @throws E2bError 404, 409. */
  async #running(target: SandboxTarget): Promise<JsBox> {
    const { record, box } = await this.#sandboxes.get(null, target.sandboxId);
    if (stateOf(await box.info()) === 'paused') {
      if (!record.autoResume) throw new E2bError(409, `sandbox ${record.sandboxId} is paused`);
      await box.resume();
    }
    return box;
  }

  /** Serves a routed request; every failure is answered as `{ code, message }`. */
  async handle(req: IncomingMessage, res: ServerResponse, target: SandboxTarget | null): Promise<void> {
    try {
      await this.#handle(req, res, target);
    } catch (error) {
      sendError(res, error);
    }
  }

  async #handle(req: IncomingMessage, res: ServerResponse, target: SandboxTarget | null): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://envd');
    if (target && target.port !== ENVD_PORT) {
      const box = await this.#running(target);
      if (target.port === CODE_INTERPRETER_PORT) return serveCodeInterpreter(box, req, res, url);
      return unreachable(target, relay(box, target.port, req, req.socket));
    }
    if (url.pathname === '/health' && target) {
      const found = await this.#sandboxes.get(null, target.sandboxId).catch(() => null);
      const running = found ? stateOf(await found.box.info()) === 'running' : false;
      res.writeHead(running ? 204 : 502).end();
      return;
    }
    const signed = url.pathname === '/files' && url.searchParams.has('signature');
    const record = target
      ? (await this.#sandboxes.get(null, target.sandboxId)).record
      : await this.#signer(url.searchParams, req.method === 'GET' ? 'read' : 'write');
    const { box } = await this.#sandboxes.get(null, record.sandboxId);
    if (signed) {
      if (!signatureValid(record, url.searchParams, req.method === 'GET' ? 'read' : 'write')) {
        throw new E2bError(401, 'invalid or expired signature');
      }
    } else {
      const token = req.headers['x-access-token'];
      if (typeof token !== 'string' || !E2bSandboxes.tokenMatches(record, token)) {
        throw new E2bError(401, 'missing or invalid X-Access-Token');
      }
    }
    const info = await box.info();
    if (stateOf(info) === 'paused') {
      if (!record.autoResume) throw new E2bError(409, `sandbox ${record.sandboxId} is paused`);
      await box.resume();
    }
    const request: EnvdRequest = {
      record,
      box,
      user: userOf(req.headers.authorization, url.searchParams.get('username')),
      admit: () => this.#sandboxes.admitExecution(record),
    };
    if (url.pathname === '/files') {
      if (req.method === 'GET') return download(request, req, res, url.searchParams);
      if (req.method === 'POST') return upload(request, req, res, url.searchParams);
      throw new E2bError(405, `method ${req.method} not allowed on /files`);
    }
    this.#routed.set(req, request);
    this.#connect(req, res);
  }

  /** The sandbox whose token signs a signed `/files` URL. @throws E2bError 401 when none does. */
  async #signer(query: URLSearchParams, operation: 'read' | 'write'): Promise<E2bSandbox> {
    for (const record of this.#sandboxes.records()) {
      if (signatureValid(record, query, operation)) return record;
    }
    throw new E2bError(401, 'invalid or expired signature');
  }
}
