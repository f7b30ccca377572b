/**
 * The Jupyter Server of one box: Debian's `jupyter_server` started in the box on a loopback port
 * (`JUPYTER_PORT`), reached from the host through two tunnel forwarders (`box.network.tunnel(port).forward`,
 * one tunnel per connection): a TCP one for the REST calls (`fetch` keeps its connections alive) and one on
 * a unix socket in a private temporary directory for the kernel WebSockets (one per kernel), and
 * the `@jupyterlab/services` settings that talk to it (token auth, `ws` as WebSocket with a message-size
 * bound). `@jupyterlab/services` is loaded on first use only.
 *
 * The server runs with Nagle's algorithm off on all its connections (`JUPYTER_BOOT`). Tornado's HTTP/1
 * connection turns it back on when a response ends, the 101 of a WebSocket upgrade included, and Jupyter
 * Server 1.x never turns it off for the kernel WebSocket; a kernel sends several small messages per request
 * (`status: busy`, the reply, `status: idle`), so every message after the first waited for the client's
 * delayed ACK (40 ms on Linux): a `kernel_info` took 48 ms through the WebSocket against 4 ms straight to
 * the kernel, and 8 ms with this start. The same holds for the host forwarder's TCP sockets, which
 * Node opens with Nagle's algorithm on; the kernel WebSockets go through a unix socket, which has none.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerConnection } from '@jupyterlab/services';
import WebSocket from 'ws';
import { BoxError } from '../errors.ts';
import type { TunnelForwarder } from '../types.ts';
import type { InterpreterBox, InterpreterProcess } from './types.ts';

/** Port of the Jupyter Server inside the box (loopback only), as in E2B's code-interpreter template. */
export const JUPYTER_PORT = 8888;

/** How long the server may take to answer after its start (ms): first start imports a lot of Python. */
const START_TIMEOUT_MS = 60_000;

/**
 * Python that starts Jupyter Server (`jupyter_server.serverapp.main`, arguments from the command line) with
 * every Tornado stream of it sending without Nagle's algorithm (`IOStream.set_nodelay` always sets
 * `TCP_NODELAY`; see the module comment). Without Tornado the import of Jupyter Server fails as it would
 * with `python3 -m jupyter_server`.
 */
const JUPYTER_BOOT = [
  'import sys',
  'from tornado.iostream import IOStream',
  '_set_nodelay = IOStream.set_nodelay',
  'IOStream.set_nodelay = lambda self, value: _set_nodelay(self, True)',
  'from jupyter_server.serverapp import main',
  'sys.exit(main())',
].join('\n');

/** Bytes of the server's output kept for error messages. */
const LOG_TAIL_BYTES = 8192;

/** A running Jupyter Server of a box. */
export interface JupyterServer {
  /** Settings for `@jupyterlab/services` (base URL on the host forwarder, token, WebSocket, fetch). */
  settings: ServerConnection.ISettings;
  /** The server's working directory in the box (default cwd of kernels). */
  cwd: string;
  /** Resolves when the server process ends (then every kernel of it is gone). */
  exited: Promise<void>;
  /** The tail of the server's output (for error messages). */
  log(): string;
  /** Kills the server and closes the forwarders. */
  close(): Promise<void>;
}

/**
 * `ws` with a bound on one incoming message, constructed as the browser `WebSocket(url, protocols)`, that
 * connects to the unix socket `socketPath` whatever the URL's host (the URL still gives the `Host` header
 * and the request path).
 */
function boundedWebSocket(maxPayload: number, socketPath: string): typeof globalThis.WebSocket {
  class BoundedWebSocket extends WebSocket {
    constructor(url: string | URL, protocols?: string | string[]) {
      super(url, protocols, { maxPayload, createConnection: () => connect(socketPath) });
    }
  }
  return BoundedWebSocket as unknown as typeof globalThis.WebSocket;
}

/** Keeps the last `LOG_TAIL_BYTES` of what it is given. */
function tail(): { add(text: string): void; text(): string } {
  let kept = '';
  return {
    add(text) {
      kept = (kept + text).slice(-LOG_TAIL_BYTES);
    },
    text: () => kept,
  };
}

/**
 * Starts the box's Jupyter Server (as the box's default user, in its working directory, or its `$HOME`
 * when that user cannot enter it; token from `JUPYTER_TOKEN`) and waits until it answers through the forwarder.
 * @throws BoxError `unsupported` when the image has no Jupyter Server (with its output), `timeout` when it
 *   does not answer within 60 s.
 */
export async function startJupyterServer(
  box: InterpreterBox,
  options: { maxMessageBytes: number },
): Promise<JupyterServer> {
  const token = randomBytes(24).toString('hex');
  const log = tail();
  const script =
    // A box whose working directory its user cannot enter (`/root` for `user`) serves from $HOME.
    '{ test -r . && test -x .; } || cd "$HOME" || cd /; pwd; exec python3 -c "$1" --ServerApp.ip=127.0.0.1 ' +
    `--ServerApp.port=${JUPYTER_PORT} --ServerApp.port_retries=0 --ServerApp.open_browser=False ` +
    '--ServerApp.allow_root=True --ServerApp.log_level=WARN';
  let process: InterpreterProcess;
  try {
    process = await box.execWith('/bin/sh', ['-c', script, 'sh', JUPYTER_BOOT], { JUPYTER_TOKEN: token }, {});
  } catch (error) {
    throw new BoxError(
      `code interpreter: cannot start Jupyter Server in box ${box.id}: ${(error as Error).message}`,
      {
        code: 'unsupported',
        cause: error,
      },
    );
  }
  const { stdout, stderr, stdin } = process.collect();
  await stdin.close();
  let cwd: string | null = null;
  let cwdResolve: (dir: string) => void = () => {};
  const cwdKnown = new Promise<string>((resolve) => {
    cwdResolve = resolve;
  });
  let out = '';
  void stdout.drainTo((text) => {
    if (cwd === null) {
      out += text;
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        cwd = out.slice(0, nl);
        cwdResolve(cwd);
        log.add(out.slice(nl + 1));
      }
    } else log.add(text);
  });
  void stderr.drainTo((text) => log.add(text));
  let running = true;
  const exited = process.wait().then(
    () => {
      running = false;
    },
    () => {
      running = false;
    },
  );
  const forwarders: TunnelForwarder[] = [];
  let socketDir: string | null = null;
  const closeForwarders = async () => {
    for (const forwarder of forwarders) await forwarder.close().catch(() => {});
    if (socketDir) await rm(socketDir, { recursive: true, force: true }).catch(() => {});
  };
  let forwarder: TunnelForwarder;
  let socketPath: string;
  try {
    forwarder = await (await box.network.tunnel(JUPYTER_PORT)).forward({
      type: 'tcp',
      host: '127.0.0.1',
      port: 0,
    });
    forwarders.push(forwarder);
    socketDir = await mkdtemp(join(tmpdir(), 'seed-jupyter-'));
    socketPath = join(socketDir, 'ws.sock');
    forwarders.push(
      await (await box.network.tunnel(JUPYTER_PORT)).forward({ type: 'unix', path: socketPath }),
    );
  } catch (error) {
    await process.kill().catch(() => {});
    await closeForwarders();
    throw error;
  }
  const baseUrl = `http://${forwarder.localAddr()}/`;
  const { ServerConnection } = await import('@jupyterlab/services');
  const settings = ServerConnection.makeSettings({
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, 'ws'),
    token,
    appendToken: true,
    init: {},
    WebSocket: boundedWebSocket(options.maxMessageBytes, socketPath),
  });
  const close = async () => {
    await process.kill().catch(() => {});
    await closeForwarders();
  };
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    if (!running) {
      await close();
      throw new BoxError(
        `code interpreter: Jupyter Server did not start in box ${box.id} (does the image have python3-jupyter-server?): ${log.text().trim()}`,
        { code: 'unsupported' },
      );
    }
    try {
      const res = await fetch(`${baseUrl}api/status`, {
        headers: { authorization: `token ${token}` },
        signal: AbortSignal.timeout(2000),
      });
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await close();
      throw new BoxError(`code interpreter: Jupyter Server of box ${box.id} did not answer within 60 s`, {
        code: 'timeout',
      });
    }
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  return { settings, cwd: await cwdKnown, exited, log: log.text, close };
}
