/**
 * `InteractiveBox` (spec 002 "InteractiveBox"): a `SimpleBox` that runs one shell session in a
 * pseudo-terminal and, when the caller has a terminal (or `tty: true`), forwards the caller's stdin to
 * it and its output to the caller's stdout, like `docker run -it`.
 */
import type { WriteStream } from 'node:tty';
import { BoxError } from '../errors.ts';
import type { JsExecution } from '../runtime/execution.ts';
import { type BoxDefaults, SIMPLEBOX_DEFAULT_IMAGE, SimpleBox, type SimpleBoxOptions } from './simple.ts';

/** Options of `InteractiveBox`: those of `SimpleBox` plus `shell` and `tty` (spec 002). */
export interface InteractiveBoxOptions extends SimpleBoxOptions {
  /** Shell run in the box (absolute path or a name on the box's PATH); default `/bin/sh`. */
  shell?: string;
  /**
   * `undefined`: forward I/O when the caller's stdin is a terminal; `true`: always run the shell in a
   * pseudo-terminal and forward stdin/stdout; `false`: no forwarding (use `session()`).
   */
  tty?: boolean;
}

/** Default shell of an `InteractiveBox` (spec 002). */
export const INTERACTIVEBOX_DEFAULT_SHELL = '/bin/sh';

/** Where an `InteractiveBox` forwards to; the process's own streams unless a test or embedder overrides. */
export interface InteractiveStreams {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean; setRawMode?(mode: boolean): unknown };
  stdout: NodeJS.WritableStream & Partial<Pick<WriteStream, 'isTTY' | 'columns' | 'rows'>>;
  stderr: NodeJS.WritableStream;
}

/** A box running one interactive shell session (spec 002 `InteractiveBox`). */
export class InteractiveBox extends SimpleBox {
  readonly #shell: string;
  readonly #tty: boolean | undefined;
  readonly #streams: InteractiveStreams;
  #session: JsExecution | null = null;
  #done: Promise<void> | null = null;

  /**
   * @param options SimpleBox options plus `shell` (default `/bin/sh`) and `tty`; nothing is created until
   *   `start()`. @throws BoxError naming `shell` or `tty` when they have the wrong type.
   * @param defaults defaults of the box type (image `python:slim`).
   * @param streams the caller's terminal; default `process.stdin`/`stdout`/`stderr`.
   */
  constructor(
    options: InteractiveBoxOptions = {},
    defaults: BoxDefaults = { image: SIMPLEBOX_DEFAULT_IMAGE },
    streams?: InteractiveStreams,
  ) {
    super(options, defaults);
    if (options.shell !== undefined && (typeof options.shell !== 'string' || options.shell === '')) {
      throw new BoxError('invalid box option shell: must be a non-empty string', { field: 'shell' });
    }
    if (options.tty !== undefined && typeof options.tty !== 'boolean') {
      throw new BoxError('invalid box option tty: must be true, false or undefined', { field: 'tty' });
    }
    this.#shell = options.shell ?? INTERACTIVEBOX_DEFAULT_SHELL;
    this.#tty = options.tty;
    this.#streams = streams ?? { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr };
  }

  /** Whether this session forwards the caller's I/O (`tty` option, else whether stdin is a terminal). */
  get forwarding(): boolean {
    return this.#tty ?? this.#streams.stdin.isTTY === true;
  }

  /**
   * Starts the box if needed and the shell session. With forwarding (see `tty`) the shell runs in a
   * pseudo-terminal sized like the caller's, the caller's terminal is put in raw mode, its keystrokes go
   * to the shell and the shell's output to the caller's stdout, until the shell exits. Without
   * forwarding the shell runs without a terminal and its streams are available through `session()`.
   * @throws BoxError when a session was already started or the shell cannot be started.
   */
  async start(): Promise<void> {
    if (this.#session || this.#done)
      throw new BoxError('the interactive session was already started', { code: 'conflict' });
    this.#done = Promise.resolve();
    const forward = this.forwarding;
    const env: Record<string, string> = forward ? { TERM: process.env.TERM || 'xterm' } : {};
    let session: JsExecution;
    try {
      const box = await this.ensureStarted();
      const { columns, rows } = this.#streams.stdout;
      const ttySize = forward && columns && rows ? { cols: columns, rows } : undefined;
      session = await box.execWith(
        this.#shell,
        [],
        env,
        ttySize ? { tty: forward, ttySize } : { tty: forward },
      );
    } catch (error) {
      this.#done = null;
      throw error;
    }
    this.#session = session;
    this.#done = forward ? this.#forward(session) : session.wait().then(() => undefined);
  }

  async #forward(session: JsExecution): Promise<void> {
    const { stdin, stdout, stderr } = this.#streams;
    const { stdout: out, stderr: err, stdin: input } = session.collect();
    const outDone = out.drainTo((text) => stdout.write(text));
    const errDone = err.drainTo((text) => stderr.write(text));
    const raw = stdin.isTTY === true && typeof stdin.setRawMode === 'function';
    if (raw) stdin.setRawMode?.(true);
    const onData = (chunk: Buffer | string) => {
      input.write(typeof chunk === 'string' ? Buffer.from(chunk) : chunk).catch(() => {});
    };
    const onEnd = () => {
      input.close().catch(() => {});
    };
    stdin.on('data', onData);
    stdin.on('end', onEnd);
    stdin.resume();
    const onResize = () => {
      const { columns, rows } = stdout;
      if (columns && rows) session.resize(columns, rows).catch(() => {});
    };
    if (stdout.isTTY) {
      onResize();
      stdout.on('resize', onResize);
    }
    try {
      await session.wait();
      await Promise.all([outDone, errDone]);
    } finally {
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      stdout.off('resize', onResize);
      if (raw) stdin.setRawMode?.(false);
      stdin.pause();
    }
  }

  /**
   * The shell's execution (spec 002 `JsExecution`): its stdin, stdout and stderr when the session does
   * not forward I/O, `kill()`. @throws BoxError before `start()`.
   */
  session(): JsExecution {
    if (!this.#session)
      throw new BoxError('the interactive session is not started; call start() first', { code: 'conflict' });
    return this.#session;
  }

  /**
   * Resolves when the shell exits (and, when forwarding, once its output has been written and the
   * caller's terminal restored). @throws BoxError before `start()`.
   */
  async wait(): Promise<void> {
    if (!this.#done)
      throw new BoxError('the interactive session is not started; call start() first', { code: 'conflict' });
    await this.#done;
  }
}
