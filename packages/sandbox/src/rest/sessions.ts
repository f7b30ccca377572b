/**
 * Server-side exec sessions of the REST runtime: one per execution started over REST. A session drains
 * the command's stdout and stderr from the start into a bounded backlog (so a client that drops and
 * reconnects with `?offset=N` gets what it missed, as long as it is still in the backlog), forwards stdin
 * and control messages, and allows one attached WebSocket at a time.
 */
import { ulid } from 'ulid';
import type { WebSocket } from 'ws';
import type { JsExecStdin, JsExecution } from '../runtime/execution.ts';
import { Channel, controlMessageOf } from './wire.ts';

/** Default backlog of output kept per execution for reconnecting clients, bytes (1 MiB). */
export const DEFAULT_BACKLOG_BYTES = 1024 * 1024;

/** What the server can ask of an execution beyond the public `JsExecution` (signals, terminal size). */
interface ExecutionControls {
  signal?(signal: NodeJS.Signals): Promise<void>;
  resize?(cols: number, rows: number): Promise<void>;
}

/**
 * Where a session's output goes: a per-execution attach WebSocket, or one stream of a multiplexed exec
 * WebSocket (`GET /v1/executions/stream`, see `wire.ts`). One sink at a time per session.
 */
export interface ExecSink {
  /** True while frames can be sent. */
  readonly open: boolean;
  /** Sends output bytes of one channel (1 stdout, 2 stderr). */
  data(channel: Channel, data: Buffer): void;
  /** Sends a JSON control message (`exit`, `backlog_truncated`). */
  control(message: Record<string, unknown>): void;
  /** Called after the exit message: the sink is done with this execution. */
  end(): void;
  /** The session is going away (box removed, server stopping): drop the client. */
  terminate(): void;
}

/** The sink of a per-execution attach WebSocket (`…/executions/{execution}/attach`). */
export class SocketSink implements ExecSink {
  readonly socket: WebSocket;
  constructor(socket: WebSocket) {
    this.socket = socket;
  }
  get open(): boolean {
    return this.socket.readyState === this.socket.OPEN;
  }
  data(channel: Channel, data: Buffer): void {
    this.socket.send(frame(channel, data));
  }
  control(message: Record<string, unknown>): void {
    this.socket.send(JSON.stringify(message));
  }
  end(): void {
    this.socket.close(1000, 'exited');
  }
  terminate(): void {
    this.socket.terminate();
  }
}

interface Chunk {
  /** Offset of the chunk's first byte in the execution's output (stdout and stderr together). */
  offset: number;
  channel: Channel;
  data: Buffer;
}

/** One execution started over REST. */
export class ExecSession {
  /** Execution id (ULID). */
  readonly id = ulid();
  /** Id of the box the command runs in. */
  readonly boxId: string;
  readonly execution: JsExecution;
  readonly #stdin: JsExecStdin;
  readonly #backlogBytes: number;
  readonly #chunks: Chunk[] = [];
  /** Offset of the oldest byte still kept. */
  #start = 0;
  /** Total output bytes so far. */
  #end = 0;
  #kept = 0;
  /** Exit code once the command has exited and both outputs are drained; null while running. */
  exitCode: number | null = null;
  /** Error message when the execution failed on the server. */
  failure: string | null = null;
  /** The attached client, if any (one at a time). */
  sink: ExecSink | null = null;
  /** Resolves when the command has exited and its output is drained. */
  readonly done: Promise<void>;

  /** @param backlogBytes output kept for reconnecting clients (oldest bytes are dropped first). */
  constructor(boxId: string, execution: JsExecution, backlogBytes: number) {
    this.boxId = boxId;
    this.execution = execution;
    this.#backlogBytes = backlogBytes;
    const { stdout, stderr, stdin } = execution.collect();
    this.#stdin = stdin;
    stdout.drainTo((text) => this.#push(Channel.stdout, Buffer.from(text, 'utf8')));
    stderr.drainTo((text) => this.#push(Channel.stderr, Buffer.from(text, 'utf8')));
    this.done = execution.wait().then(
      ({ exitCode }) => {
        this.exitCode = exitCode;
        this.#sendExit();
      },
      (error: Error) => {
        this.exitCode = -1;
        this.failure = error.message;
        this.#sendExit();
      },
    );
  }

  /** `running` or `exited`. */
  get status(): 'running' | 'exited' {
    return this.exitCode === null ? 'running' : 'exited';
  }

  #push(channel: Channel, data: Buffer): void {
    if (data.length === 0) return;
    this.#chunks.push({ offset: this.#end, channel, data });
    this.#end += data.length;
    this.#kept += data.length;
    while (this.#kept > this.#backlogBytes) {
      const first = this.#chunks[0]!;
      const excess = this.#kept - this.#backlogBytes;
      if (first.data.length <= excess) {
        this.#chunks.shift();
        this.#kept -= first.data.length;
        this.#start = first.offset + first.data.length;
      } else {
        first.data = first.data.subarray(excess);
        first.offset += excess;
        this.#kept -= excess;
        this.#start = first.offset;
      }
    }
    const sink = this.sink;
    if (sink?.open) sink.data(channel, data);
  }

  #sendExit(): void {
    const sink = this.sink;
    if (!sink?.open) return;
    sink.control({
      type: 'exit',
      exit_code: this.exitCode,
      offset: this.#end,
      ...(this.failure ? { error: this.failure } : {}),
    });
    sink.end();
  }

  /**
   * Attaches a client: replays the backlog after `offset` (telling the client how many bytes were dropped
   * when `offset` is older than the backlog), then streams live output, and sends the exit when known.
   */
  attach(socket: WebSocket, offset: number): void {
    const sink = new SocketSink(socket);
    socket.on('close', () => this.detach(sink));
    socket.on('error', () => {});
    socket.on('message', (data: Buffer, isBinary) => {
      if (isBinary) {
        if (data.length > 1 && data[0] === Channel.stdin) this.input(data.subarray(1));
        return;
      }
      const message = controlMessageOf(data);
      if (message) this.command(message);
    });
    this.attachSink(sink, offset);
  }

  /** Attaches any sink (see {@link attach}); the caller routes the client's input to {@link input}/{@link command}. */
  attachSink(sink: ExecSink, offset: number): void {
    this.sink = sink;
    let from = Math.min(Math.max(offset, 0), this.#end);
    if (from < this.#start) {
      sink.control({ type: 'backlog_truncated', dropped_bytes: this.#start - from });
      from = this.#start;
    }
    for (const chunk of this.#chunks) {
      const chunkEnd = chunk.offset + chunk.data.length;
      if (chunkEnd <= from) continue;
      sink.data(chunk.channel, chunk.data.subarray(Math.max(0, from - chunk.offset)));
    }
    if (this.exitCode !== null) this.#sendExit();
  }

  /** Detaches `sink` if it is the attached one (its connection closed): a client may attach again. */
  detach(sink: ExecSink): void {
    if (this.sink === sink) this.sink = null;
  }

  /** Bytes for the command's stdin (a channel 0 frame). */
  input(data: Buffer): void {
    if (data.length > 0) this.#stdin.write(data).catch(() => {});
  }

  /** A client control message: `stdin_eof`, `signal` or `resize` (anything else is ignored). */
  command(message: { type?: unknown; signal?: unknown; cols?: unknown; rows?: unknown }): void {
    if (message === null || typeof message !== 'object') return;
    const controls = this.execution as unknown as ExecutionControls;
    if (message.type === 'stdin_eof') this.#stdin.close().catch(() => {});
    else if (message.type === 'signal' && typeof message.signal === 'string')
      this.signal(message.signal).catch(() => {});
    else if (message.type === 'resize' && isCells(message.cols) && isCells(message.rows))
      controls.resize?.(message.cols, message.rows).catch(() => {});
  }

  /** Sends a signal (`SIGTERM`, `TERM`, …) to the command. @throws Error for an unknown signal name. */
  async signal(name: string): Promise<void> {
    const signal = normalizeSignal(name);
    if (signal === 'SIGKILL') return this.execution.kill();
    const controls = this.execution as unknown as ExecutionControls;
    if (!controls.signal) throw new Error('this runtime cannot send signals other than SIGKILL');
    await controls.signal(signal);
  }

  /** Resizes the command's terminal (tty executions). */
  async resize(cols: number, rows: number): Promise<void> {
    const controls = this.execution as unknown as ExecutionControls;
    if (!controls.resize) throw new Error('this runtime cannot resize terminals');
    await controls.resize(cols, rows);
  }

  /** Kills the command and closes the attached client (used when the box is removed or the server stops). */
  async terminate(): Promise<void> {
    if (this.exitCode === null) await this.execution.kill().catch(() => {});
    this.sink?.terminate();
  }
}

/** A binary exec frame: the channel byte, then the bytes. */
export function frame(channel: Channel, data: Buffer): Buffer {
  const out = Buffer.allocUnsafe(data.length + 1);
  out[0] = channel;
  data.copy(out, 1);
  return out;
}

function isCells(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= 10000;
}

const SIGNALS = new Set([
  'SIGHUP',
  'SIGINT',
  'SIGQUIT',
  'SIGKILL',
  'SIGUSR1',
  'SIGUSR2',
  'SIGTERM',
  'SIGCONT',
  'SIGSTOP',
  'SIGTSTP',
  'SIGWINCH',
  'SIGALRM',
  'SIGPIPE',
]);

/** `TERM`, `term`, `SIGTERM` → `SIGTERM`. @throws Error naming the rule for anything else. */
export function normalizeSignal(name: string): NodeJS.Signals {
  const upper = name.toUpperCase();
  const signal = upper.startsWith('SIG') ? upper : `SIG${upper}`;
  if (!SIGNALS.has(signal)) {
    throw new Error(`unknown signal '${name}': use one of ${[...SIGNALS].join(', ')}`);
  }
  return signal as NodeJS.Signals;
}
