/**
 * A running command in a box (spec 002 "Execution (`JsExecution`)"): streaming stdin, line-based stdout
 * and stderr readers, `wait()` and `kill()`.
 *
 * Both output streams are drained continuously from the moment the command starts and buffered until the
 * caller reads them, so a command that writes megabytes to stderr while the caller reads only stdout never
 * blocks on a full pipe (no deadlock, whatever order the caller reads in).
 */
import { constants as osConstants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { ulid } from 'ulid';
import type { EngineProcess } from '../engine/types.ts';
import { BoxError } from '../errors.ts';
import type { JsExecResult } from '../types.ts';

/** Line reader of a command's stdout (spec 002 `JsExecStdout`). */
export interface JsExecStdout {
  /** The next line without its `\n`; null at the end of the stream (and on every call after it). */
  next(): Promise<string | null>;
}

/** Line reader of a command's stderr (spec 002 `JsExecStderr`). */
export interface JsExecStderr {
  /** The next line without its `\n`; null at the end of the stream (and on every call after it). */
  next(): Promise<string | null>;
}

/** Writer to a command's stdin (spec 002 `JsExecStdin`). */
export interface JsExecStdin {
  /** Writes bytes; resolves once they are handed to the pipe. @throws BoxError when stdin is closed. */
  write(data: Buffer): Promise<void>;
  /** Writes a UTF-8 string. @throws BoxError when stdin is closed. */
  writeString(text: string): Promise<void>;
  /** Closes stdin (end of input for the command). Not in the spec's table; needed by commands reading to EOF. */
  close(): Promise<void>;
}

/**
 * Buffers one output stream from the start, split into lines on `\n`. Memory grows with unread output:
 * a caller that never reads a stream keeps its whole output in memory until the execution is dropped.
 */
export class LineBuffer implements JsExecStdout, JsExecStderr {
  readonly #decoder = new StringDecoder('utf8');
  #lines: string[] = [];
  #partial = '';
  #ended = false;
  #error: Error | null = null;
  #waiters: (() => void)[] = [];
  #raw: ((chunk: string) => void) | null = null;
  /** The stream ended with a `\n` (or was empty). */
  endsWithNewline = true;
  readonly done: Promise<void>;

  constructor(stream: Readable, onBytes: (n: number) => void) {
    this.done = new Promise((resolve) => {
      stream.on('data', (chunk: Buffer | string) => {
        const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        onBytes(buf.length);
        this.#push(this.#decoder.write(buf));
      });
      const finish = (error?: Error) => {
        if (this.#ended) return;
        if (error) this.#error = error;
        this.#push(this.#decoder.end());
        if (this.#partial !== '') {
          this.endsWithNewline = false;
          this.#emit([this.#partial]);
          this.#partial = '';
        }
        this.#ended = true;
        this.#wake();
        resolve();
      };
      stream.on('end', () => finish());
      stream.on('close', () => finish());
      stream.on('error', (error) => finish(error));
    });
  }

  #push(text: string): void {
    if (text === '') return;
    if (this.#raw) {
      this.#raw(text);
      return;
    }
    this.endsWithNewline = text.endsWith('\n');
    const parts = (this.#partial + text).split('\n');
    this.#partial = parts.pop()!;
    if (parts.length > 0) this.#emit(parts);
  }

  #emit(lines: string[]): void {
    for (const line of lines) this.#lines.push(line);
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }

  async next(): Promise<string | null> {
    while (this.#lines.length === 0 && !this.#ended) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
    if (this.#lines.length > 0) return this.#lines.shift()!;
    return null;
  }

  /** Whole remaining output as text (lines joined with `\n`, final newline as the command wrote it). */
  async text(): Promise<string> {
    await this.done;
    const lines = this.#lines;
    this.#lines = [];
    if (lines.length === 0) return '';
    return lines.join('\n') + (this.endsWithNewline ? '\n' : '');
  }

  /** Hands the output (buffered and future) to `sink` as text chunks exactly as written, until the end. */
  drainTo(sink: (text: string) => void): Promise<void> {
    const lines = this.#lines;
    const terminated = lines.length > 0 && (!this.#ended || this.endsWithNewline);
    const buffered = lines.join('\n') + (terminated ? '\n' : '') + this.#partial;
    this.#lines = [];
    this.#partial = '';
    if (buffered !== '') sink(buffered);
    this.#raw = sink;
    return this.done;
  }

  /** The stream's read error, if it failed. */
  get error(): Error | null {
    return this.#error;
  }
}

class StdinWriter implements JsExecStdin {
  readonly #stream: Writable;
  readonly #onBytes: (n: number) => void;
  #closed = false;

  constructor(stream: Writable, onBytes: (n: number) => void) {
    this.#stream = stream;
    this.#onBytes = onBytes;
    // A command that exits without reading its stdin closes the pipe: that is not an SDK failure.
    stream.on('error', () => {
      this.#closed = true;
    });
  }

  write(data: Buffer): Promise<void> {
    if (!((data as unknown) instanceof Uint8Array)) {
      return Promise.reject(new BoxError('stdin.write: data must be a Buffer', { field: 'data' }));
    }
    if (this.#closed || this.#stream.destroyed || this.#stream.writableEnded) {
      return Promise.reject(new BoxError('stdin is closed', { code: 'conflict' }));
    }
    return new Promise((resolve, reject) => {
      this.#stream.write(data, (error) => {
        if (error)
          reject(new BoxError(`stdin write failed: ${error.message}`, { cause: error, code: 'internal' }));
        else {
          this.#onBytes(data.length);
          resolve();
        }
      });
    });
  }

  writeString(text: string): Promise<void> {
    if (typeof text !== 'string')
      return Promise.reject(new BoxError('stdin.writeString: text must be a string', { field: 'text' }));
    return this.write(Buffer.from(text, 'utf8'));
  }

  close(): Promise<void> {
    if (this.#closed || this.#stream.writableEnded) return Promise.resolve();
    this.#closed = true;
    return new Promise((resolve) => this.#stream.end(() => resolve()));
  }
}

/**
 * The signal name for a name or number (`15` → `SIGTERM`).
 * @throws BoxError `invalid_option` (field `signal`) when it names no signal of this platform.
 */
export function signalName(signal: NodeJS.Signals | number): NodeJS.Signals {
  if (typeof signal === 'number') {
    const name = Object.entries(osConstants.signals).find(([, n]) => n === signal)?.[0];
    if (name) return name as NodeJS.Signals;
  } else if (typeof signal === 'string' && signal in osConstants.signals) {
    return signal;
  }
  throw new BoxError(`invalid exec option signal: '${String(signal)}' is not a signal name or number`, {
    field: 'signal',
  });
}

/** How long `wait()` waits for the output pipes to close after the command exited, ms. */
export const STREAM_GRACE_MS = 2000;

/** Counters an execution reports to its box when it ends (bytes in and out, exit status). */
export interface ExecutionReport {
  bytesSent: number;
  bytesReceived: number;
  exitCode: number;
}

/**
 * A command started by `JsBox.exec` (spec 002 `JsExecution`). Each output stream can be taken once;
 * taking it again rejects with `BoxError`.
 */
export class JsExecution {
  readonly #id: string;
  readonly #process: EngineProcess;
  readonly #stdout: LineBuffer;
  readonly #stderr: LineBuffer;
  readonly #stdin: StdinWriter;
  readonly #taken = new Set<string>();
  readonly #result: Promise<JsExecResult>;
  #bytesSent = 0;
  #bytesReceived = 0;
  #errorMessage: string | undefined;

  /**
   * @internal Created by a box backend's `exec`: `process` is the command (an engine process locally, the
   * remote process of `rest/process.ts` over REST), `onEnd` receives the execution's counters once it has
   * exited, `id` is the execution id (a new ULID when absent; the server's over REST).
   */
  constructor(process: EngineProcess, onEnd: (report: ExecutionReport) => void, id: string = ulid()) {
    this.#id = id;
    this.#process = process;
    const received = (n: number) => {
      this.#bytesReceived += n;
    };
    const stdout = new LineBuffer(process.stdout, received);
    const stderr = new LineBuffer(process.stderr, received);
    this.#stdout = stdout;
    this.#stderr = stderr;
    this.#stdin = new StdinWriter(process.stdin, (n) => {
      this.#bytesSent += n;
    });
    this.#result = (async () => {
      const exitCode = await process.exited;
      // Both pipes are drained before the result counts as final (their bytes belong to this command). A
      // background process the command left behind may hold them open: after a grace period they are
      // closed so that wait() and the readers end.
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<'grace'>((resolve) => {
        timer = setTimeout(() => resolve('grace'), STREAM_GRACE_MS);
      });
      const drained = await Promise.race([Promise.all([stdout.done, stderr.done]), grace]);
      clearTimeout(timer);
      if (drained === 'grace') {
        process.stdout.destroy();
        process.stderr.destroy();
        await Promise.all([stdout.done, stderr.done]);
      }
      onEnd({ bytesSent: this.#bytesSent, bytesReceived: this.#bytesReceived, exitCode });
      return this.#errorMessage === undefined ? { exitCode } : { exitCode, errorMessage: this.#errorMessage };
    })();
    // Never an unhandled rejection; callers see the failure through wait().
    this.#result.catch(() => {});
  }

  #take<T>(which: string, value: T): Promise<T> {
    if (this.#taken.has(which)) {
      return Promise.reject(
        new BoxError(`${which} of execution ${this.#id} was already taken (each stream once)`, {
          code: 'conflict',
        }),
      );
    }
    this.#taken.add(which);
    return Promise.resolve(value);
  }

  /** Execution id (ULID). */
  id(): Promise<string> {
    return Promise.resolve(this.#id);
  }

  /** The stdin writer. @throws BoxError when taken before. */
  stdin(): Promise<JsExecStdin> {
    return this.#take('stdin', this.#stdin);
  }

  /** The stdout line reader. @throws BoxError when taken before. */
  stdout(): Promise<JsExecStdout> {
    return this.#take('stdout', this.#stdout);
  }

  /** The stderr line reader. @throws BoxError when taken before. */
  stderr(): Promise<JsExecStderr> {
    return this.#take('stderr', this.#stderr);
  }

  /** Waits for the command to exit; `exitCode` is 128 + signal number when it was killed by a signal. */
  wait(): Promise<JsExecResult> {
    return this.#result;
  }

  /** Sends SIGKILL to the command. */
  async kill(): Promise<void> {
    await this.#process.kill('SIGKILL');
  }

  /**
   * Sends a signal to the command: a name (`SIGTERM`) or, as BoxLite's `signal(15)`, a number.
   * @throws BoxError `invalid_option` (field `signal`) for an unknown signal.
   */
  async signal(signal: NodeJS.Signals | number): Promise<void> {
    await this.#process.kill(signalName(signal));
  }

  /**
   * BoxLite's `resizeTty(rows, cols)`: the terminal size, rows first (see {@link resize}).
   * @throws BoxError `conflict` without a terminal, `invalid_option` for a bad size.
   */
  resizeTty(rows: number, cols: number): Promise<void> {
    return this.resize(cols, rows);
  }

  /**
   * @internal Ends the command because of `reason` (a per-command timeout): SIGKILL, and `wait()` reports
   * `reason` as `errorMessage`.
   */
  async abort(reason: string): Promise<void> {
    this.#errorMessage ??= reason;
    await this.kill();
  }

  /**
   * Resizes the command's pseudo-terminal to `cols` × `rows` character cells (the command gets SIGWINCH).
   * Not in the spec's table; used by `InteractiveBox`. Terminals start at 80 × 24.
   * @throws BoxError when the command was started without `tty`, or the size is not two positive integers.
   */
  async resize(cols: number, rows: number): Promise<void> {
    if (!this.#process.resize) {
      throw new BoxError(`execution ${this.#id} has no terminal to resize (start it with tty: true)`, {
        code: 'conflict',
      });
    }
    await this.#process.resize(cols, rows);
  }

  /** @internal Collects both outputs whole (used by the wrapper boxes and the CLI). */
  collect(): { stdout: LineBuffer; stderr: LineBuffer; stdin: StdinWriter } {
    this.#taken.add('stdout');
    this.#taken.add('stderr');
    return { stdout: this.#stdout, stderr: this.#stderr, stdin: this.#stdin };
  }
}
