/**
 * A remote command as an `EngineProcess`: its stdin, stdout and stderr are byte streams carried by the
 * exec WebSocket of the REST runtime (framing in `wire.ts`). Wrapping it in the local `JsExecution` gives
 * REST executions exactly the local line readers, stream-once rules, `wait()` and `kill()` semantics.
 *
 * The command starts on the runtime's multiplexed exec stream (`mux.ts`) when the link has one, else on
 * its own WebSocket (`…/executions/attach`, also the fallback for a server without the multiplexed
 * stream). A dropped connection is replaced by a per-execution attach with `?offset=<bytes received>` so
 * the server replays what was missed from its bounded backlog (a `backlog_truncated` notice says how much
 * was lost when it was exceeded).
 */
import { PassThrough, Writable } from 'node:stream';
import { WebSocket } from 'ws';
import type { EngineProcess } from '../engine/types.ts';
import { BoxError } from '../errors.ts';
import type { ExecMux } from './mux.ts';
import { boxErrorOf, Channel, controlMessageOf, readRefusal } from './wire.ts';

/** How the process reaches its server: WebSocket base URL and headers, and the HTTP control calls. */
export interface RemoteProcessLink {
  /**
   * `ws(s)://…/v1/boxes/{box}/executions`: the command is started with `…/attach` (start request in the
   * first frame) and reattached with `…/{execution}/attach?offset=N`.
   */
  executionsUrl: string;
  headers: Record<string, string>;
  /** The runtime's multiplexed exec stream, and the box id or name to start in (absent: own WebSocket). */
  mux?: { mux: ExecMux; box: string };
  /** `POST …/{execution}/signal` (`SIGKILL` included); rejects with BoxError. */
  signal(id: string, signal: NodeJS.Signals): Promise<void>;
  /** `POST …/{execution}/resize`; rejects with BoxError. */
  resize(id: string, cols: number, rows: number): Promise<void>;
}

/** A message for the server waiting for (or being sent on) a connection: stdin bytes or a control. */
interface Outgoing {
  stdin?: Uint8Array;
  control?: Record<string, unknown>;
  done: (error?: Error | null) => void;
}

/** Largest start request sent in the upgrade header (base64url characters); larger ones go in a frame. */
const MAX_HEADER_START = 6144;

/** Reconnection attempts after a dropped WebSocket before the execution fails. */
export const MAX_RECONNECTS = 8;

/** An `EngineProcess` whose streams travel over the exec WebSocket. */
export class RemoteProcess implements EngineProcess {
  readonly stdin: Writable;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly exited: Promise<number>;
  readonly #link: RemoteProcessLink;
  #socket: WebSocket | null = null;
  /** Stream number on the multiplexed exec stream while the execution travels there. */
  #stream: number | null = null;
  #pending: Outgoing[] = [];
  #received = 0;
  #exitCode: number | null = null;
  #failure: string | null = null;
  #attempts = 0;
  #settle!: { resolve: (code: number) => void; reject: (error: Error) => void };
  #finished = false;
  #id: string | null = null;
  readonly #start: Record<string, unknown>;
  #started!: { resolve: (id: string) => void; reject: (error: Error) => void };
  /** Resolves with the server's execution id once the command has started; rejects with BoxError. */
  readonly ready: Promise<string>;

  /**
   * Starts the command over one WebSocket (`start` is the exec request: cmd, args, env, tty, cwd, user);
   * output then flows into `stdout`/`stderr`.
   */
  constructor(link: RemoteProcessLink, start: Record<string, unknown>) {
    this.#link = link;
    this.#start = start;
    this.ready = new Promise<string>((resolve, reject) => {
      this.#started = { resolve, reject };
    });
    this.ready.catch(() => {});
    this.exited = new Promise<number>((resolve, reject) => {
      this.#settle = { resolve, reject };
    });
    this.exited.catch(() => {});
    this.stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => this.#send({ stdin: chunk, done: callback }),
      final: (callback) => this.#send({ control: { type: 'stdin_eof' }, done: callback }),
    });
    if (link.mux) this.#startOnMux(link.mux);
    else this.#connect();
  }

  #startOnMux({ mux, box }: { mux: ExecMux; box: string }): void {
    let stream = 0;
    stream = mux.start(
      { box, ...this.#start },
      {
        data: (channel, payload) => this.#data(channel, payload),
        control: (message) => {
          if (message.type === 'exit' || message.type === 'error') {
            mux.release(stream);
            this.#stream = null;
          }
          if (message.type === 'started' && typeof message.id === 'string') this.#stream = stream;
          this.#control(message);
        },
        closed: (refused, status) => {
          this.#stream = null;
          if (this.#finished) return;
          if (refused && status === 404 && !this.#id)
            this.#connect(); // a server without the stream
          else if (refused) this.#fail(refused);
          else this.#lost();
        },
      },
    );
  }

  /** Output bytes received so far (stdout and stderr together). */
  get receivedBytes(): number {
    return this.#received;
  }

  /** @internal Drops the current WebSocket as a network failure would (tests of the reconnect path). */
  dropConnection(): void {
    if (this.#stream !== null) this.#link.mux?.mux.drop();
    else this.#socket?.terminate();
  }

  #send(message: Outgoing): void {
    const socket = this.#socket;
    if (this.#finished)
      message.done(new BoxError('the command has exited; stdin is closed', { code: 'conflict' }));
    else if (!this.#id) this.#pending.push(message);
    else if (this.#stream !== null) this.#sendOnMux(this.#stream, message);
    else if (socket && socket.readyState === WebSocket.OPEN) this.#sendOnSocket(socket, message);
    else this.#pending.push(message);
  }

  #sendOnMux(stream: number, { stdin, control, done }: Outgoing): void {
    const mux = this.#link.mux!.mux;
    if (stdin) mux.stdin(stream, stdin, () => done());
    else mux.control(stream, control!, () => done());
  }

  #sendOnSocket(socket: WebSocket, { stdin, control, done }: Outgoing): void {
    if (stdin) {
      const frame = Buffer.allocUnsafe(stdin.length + 1);
      frame[0] = Channel.stdin;
      frame.set(stdin, 1);
      socket.send(frame, () => done());
    } else {
      socket.send(JSON.stringify(control), () => done());
    }
  }

  #flushTo(send: (message: Outgoing) => void): void {
    const pending = this.#pending;
    this.#pending = [];
    for (const message of pending) send(message);
  }

  #data(channel: number, payload: Buffer): void {
    this.#received += payload.length;
    if (channel === Channel.stdout) this.stdout.write(payload);
    else if (channel === Channel.stderr) this.stderr.write(payload);
  }

  #control(message: {
    type?: unknown;
    id?: unknown;
    status?: unknown;
    exit_code?: unknown;
    dropped_bytes?: unknown;
    error?: unknown;
  }): void {
    if (message.type === 'started' && typeof message.id === 'string') {
      this.#id = message.id;
      this.#started.resolve(message.id);
      const stream = this.#stream;
      const socket = this.#socket;
      if (stream !== null) this.#flushTo((m) => this.#sendOnMux(stream, m));
      else if (socket) this.#flushTo((m) => this.#sendOnSocket(socket, m));
    } else if (message.type === 'error' && typeof message.error === 'object') {
      this.#fail(boxErrorOf(typeof message.status === 'number' ? message.status : 400, message, 'exec'));
    } else if (message.type === 'exit' && typeof message.exit_code === 'number') {
      // Everything before the exit frame has arrived (one ordered stream): finish without waiting for
      // the close handshake.
      this.#exitCode = message.exit_code;
      if (typeof message.error === 'string') this.#failure = message.error;
      this.#finish();
    } else if (message.type === 'backlog_truncated' && typeof message.dropped_bytes === 'number') {
      this.#received += message.dropped_bytes;
      this.stderr.write(`[sandbox: ${message.dropped_bytes} bytes of output were lost while reconnecting]\n`);
    }
  }

  /** The connection dropped: reattach (per execution) unless the command never started or has exited. */
  #lost(): void {
    if (this.#finished) return;
    if (this.#exitCode !== null) this.#finish();
    // Not started yet: whether the command runs is unknown, so it is not started again.
    else if (!this.#id)
      this.#fail(
        new BoxError('exec: the connection to the REST runtime closed before the command started', {
          code: 'unavailable',
        }),
      );
    else this.#retry();
  }

  #connect(): void {
    const base = this.#link.executionsUrl;
    const url = this.#id ? `${base}/${this.#id}/attach?offset=${this.#received}` : `${base}/attach`;
    // A small start request travels in the upgrade (header `sandbox-exec`, base64url JSON): one round trip.
    // A large one (e.g. a long script in the arguments) goes in the first frame instead.
    const encoded = this.#id ? '' : Buffer.from(JSON.stringify(this.#start)).toString('base64url');
    const inHeader = encoded !== '' && encoded.length <= MAX_HEADER_START;
    const headers = inHeader ? { ...this.#link.headers, 'sandbox-exec': encoded } : this.#link.headers;
    const socket = new WebSocket(url, { headers, perMessageDeflate: false });
    this.#socket = socket;
    socket.on('open', () => {
      this.#attempts = 0;
      if (!this.#id) {
        if (!inHeader) socket.send(JSON.stringify({ type: 'start', ...this.#start }));
        return;
      }
      this.#flushTo((m) => this.#sendOnSocket(socket, m));
    });
    socket.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        this.#data(data[0]!, data.subarray(1));
        return;
      }
      const message = controlMessageOf(data);
      if (message) this.#control(message);
    });
    socket.on('unexpected-response', (_request, response) => {
      readRefusal(response, (status, body) => {
        socket.terminate();
        // 409: the server has not noticed the old connection is gone yet; retry like a drop.
        if (this.#id && (status === 409 || status >= 500)) {
          this.#retry();
          return;
        }
        this.#fail(boxErrorOf(status, body, 'exec stream'));
      });
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      if (this.#socket !== socket) return;
      this.#lost();
    });
  }

  #retry(): void {
    if (this.#finished) return;
    if (++this.#attempts > MAX_RECONNECTS) {
      this.#fail(
        new BoxError(`exec stream lost: no connection to the REST runtime after ${MAX_RECONNECTS} attempts`, {
          code: 'unavailable',
        }),
      );
      return;
    }
    const delay = Math.min(25 * 2 ** this.#attempts, 1000);
    setTimeout(() => this.#connect(), delay).unref();
  }

  #finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    this.stdout.end();
    this.stderr.end();
    this.#flushPending(new BoxError('the command has exited; stdin is closed', { code: 'conflict' }));
    if (this.#failure)
      this.#settle.reject(
        new BoxError(`execution failed on the server: ${this.#failure}`, { code: 'internal' }),
      );
    else this.#settle.resolve(this.#exitCode!);
  }

  #fail(error: BoxError): void {
    if (this.#finished) return;
    this.#finished = true;
    if (this.#stream !== null) this.#link.mux?.mux.release(this.#stream);
    this.#stream = null;
    this.#started.reject(error);
    this.#socket?.terminate();
    this.stdout.end();
    this.stderr.end();
    this.#flushPending(error);
    this.#settle.reject(error);
  }

  #flushPending(error: Error): void {
    this.#flushTo(({ done }) => done(error));
  }

  /** Sends a signal through the server (default SIGKILL). */
  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.#finished) return;
    await this.#link.signal(await this.ready, signal);
  }

  /** Resizes the command's terminal (tty executions), in character cells. */
  async resize(cols: number, rows: number): Promise<void> {
    await this.#link.resize(await this.ready, cols, rows);
  }
}
