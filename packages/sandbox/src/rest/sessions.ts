/**
 * Server-side exec sessions of the REST runtime: one per execution started over REST. A session drains
 * the command's stdout and stderr from the start into a bounded backlog (so a client that drops and
 * reconnects with `?offset=N` gets what it missed, as long as it is still in the backlog), forwards stdin
 * and control messages, and allows one attached WebSocket at a time.
 */
import { ulid } from 'ulid';
import type { WebSocket } from 'ws';
import type { JsExecStdin, JsExecution } from '../runtime/execution.ts';
import { Channel } from './wire.ts';

/** Default backlog of output kept per execution for reconnecting clients, bytes (1 MiB). */
export const DEFAULT_BACKLOG_BYTES = 1024 * 1024;

/** What the server can ask of an execution beyond the public `JsExecution` (signals, terminal size). */
interface ExecutionControls {
  signal?(signal: NodeJS.Signals): Promise<void>;
  resize?(cols: number, rows: number): Promise<void>;
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
  /** The attached client, if any. */
  socket: WebSocket | null = null;
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
    const socket = this.socket;
    if (socket && socket.readyState === socket.OPEN) socket.send(frame(channel, data));
  }

  #sendExit(): void {
    const socket = this.socket;
    if (!socket || socket.readyState !== socket.OPEN) return;
    socket.send(
      JSON.stringify({
        type: 'exit',
        exit_code: this.exitCode,
        offset: this.#end,
        ...(this.failure ? { error: this.failure } : {}),
      }),
    );
    socket.close(1000, 'exited');
  }

  /**
   * Attaches a client: replays the backlog after `offset` (telling the client how many bytes were dropped
   * when `offset` is older than the backlog), then streams live output, and sends the exit when known.
   */
  attach(socket: WebSocket, offset: number): void {
    this.socket = socket;
    socket.on('close', () => {
      if (this.socket === socket) this.socket = null;
    });
    socket.on('error', () => {});
    socket.on('message', (data, isBinary) => this.#onMessage(data as Buffer, isBinary));
    let from = Math.min(Math.max(offset, 0), this.#end);
    if (from < this.#start) {
      socket.send(JSON.stringify({ type: 'backlog_truncated', dropped_bytes: this.#start - from }));
      from = this.#start;
    }
    for (const chunk of this.#chunks) {
      const chunkEnd = chunk.offset + chunk.data.length;
      if (chunkEnd <= from) continue;
      socket.send(frame(chunk.channel, chunk.data.subarray(Math.max(0, from - chunk.offset))));
    }
    if (this.exitCode !== null) this.#sendExit();
  }

  #onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      if (data.length > 1 && data[0] === Channel.stdin) this.#stdin.write(data.subarray(1)).catch(() => {});
      return;
    }
    let message: { type?: unknown; signal?: unknown; cols?: unknown; rows?: unknown };
    try {
      message = JSON.parse(data.toString('utf8'));
    } catch {
      return;
    }
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
    this.socket?.terminate();
  }
}

function frame(channel: Channel, data: Buffer): Buffer {
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
