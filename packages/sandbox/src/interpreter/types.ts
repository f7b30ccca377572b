/**
 * Types of the stateful code interpreter (`src/interpreter/`): contexts (one live Jupyter kernel each),
 * executions and their results, shaped like E2B's code interpreter (`@e2b/code-interpreter`: `Execution`,
 * `Result`, `ExecutionError`, `OutputMessage`, the `/execute` and `/contexts` routes) so that an E2B server
 * can serve them as they are.
 */
import type { JsNetworkHandle } from '../types.ts';

/**
 * One output of an execution (E2B `Result`): the representations of a Jupyter `execute_result` (the cell's
 * value, `isMainResult` true) or `display_data` (a `display()` call or a figure, false). Binary formats
 * (`png`, `jpeg`, `pdf`) are base64 text as the kernel sent them; MIME types without a field are in `extra`.
 */
export interface ExecutionResult {
  /** `text/plain`, without the quotes of a Python string repr (as E2B does). */
  text?: string;
  /** `text/html`. */
  html?: string;
  /** `text/markdown`. */
  markdown?: string;
  /** `image/svg+xml`. */
  svg?: string;
  /** `image/png`, base64. */
  png?: string;
  /** `image/jpeg`, base64. */
  jpeg?: string;
  /** `application/pdf`, base64. */
  pdf?: string;
  /** `text/latex`. */
  latex?: string;
  /** `application/json`. */
  json?: unknown;
  /** `application/javascript`. */
  javascript?: string;
  /** `e2b/data` (E2B's data frames extension). */
  data?: unknown;
  /** `e2b/chart` (E2B's chart extension). */
  chart?: unknown;
  /** Other MIME types of the bundle, by MIME type. */
  extra?: Record<string, unknown>;
  /** True for the cell's value (`execute_result`), false for displayed data. */
  isMainResult: boolean;
}

/** An error raised by the executed code (E2B `ExecutionError`): exception name, value and traceback text. */
export interface ExecutionError {
  name: string;
  value: string;
  /** The traceback lines joined (ANSI colours as the kernel wrote them). */
  traceback: string;
}

/** One chunk of stdout or stderr (E2B `OutputMessage`); `timestamp` in microseconds since the epoch. */
export interface OutputMessage {
  line: string;
  timestamp: number;
  error: boolean;
}

/**
 * The events of one execution, in order, exactly the objects of E2B's `/execute` NDJSON stream once
 * encoded (`events.ts`): output chunks (`timestamp`: ISO 8601 from the kernel's message header), results,
 * the error, the execution count, then `end_of_execution` (or `unexpected_end_of_execution` when the
 * kernel went away).
 */
export type ExecutionEvent =
  | { type: 'stdout' | 'stderr'; text: string; timestamp: string }
  | { type: 'result'; result: ExecutionResult }
  | { type: 'error'; error: ExecutionError }
  | { type: 'number_of_executions'; executionCount: number }
  | { type: 'end_of_execution' | 'unexpected_end_of_execution' };

/** What an execution produced (E2B `Execution`). */
export interface Execution {
  /** Results in the order they came: displayed data and the main result. */
  results: ExecutionResult[];
  /** stdout and stderr chunks as the kernel sent them. */
  logs: { stdout: string[]; stderr: string[] };
  /** The error raised by the code (or `TimeoutError`, `OutputLimitExceeded`, `ExecutionAborted`), else null. */
  error: ExecutionError | null;
  /** The kernel's execution counter after this execution; null when the code never started. */
  executionCount: number | null;
  /** Text of the main result, if any. */
  text: string | undefined;
}

/** A context (E2B `Context`): one live kernel that keeps state between executions. */
export interface CodeContext {
  /** Context id (the kernel id). */
  id: string;
  /** Language of its kernel, e.g. `python`. */
  language: string;
  /** Working directory of its kernel in the box. */
  cwd: string;
}

/** Options of `createContext` (E2B `CreateCodeContextOpts`). */
export interface CreateContextOptions {
  /** Language (default `python`); `js`, `ts` are aliases of `javascript`, `typescript`. */
  language?: string;
  /** Working directory of the kernel (absolute path in the box); default the box's working directory. */
  cwd?: string;
}

/** Options of `execute` (E2B `RunCodeOpts`). */
export interface ExecuteOptions {
  /** Context (or its id) to run in; default the box's default context of `language`. */
  context?: string | CodeContext;
  /** Language of the default context to use when `context` is not given (default `python`). */
  language?: string;
  /** Environment variables set for this execution only. */
  envVars?: Record<string, string>;
  /** Interrupts the kernel after this many ms (default 60000; 0: no limit); the error is `TimeoutError`. */
  timeoutMs?: number;
  /** Aborting interrupts the kernel; the error is `ExecutionAborted`. */
  signal?: AbortSignal;
  onStdout?: (output: OutputMessage) => unknown;
  onStderr?: (output: OutputMessage) => unknown;
  onResult?: (result: ExecutionResult) => unknown;
  onError?: (error: ExecutionError) => unknown;
  /** Every event as it comes (what an `/execute` stream sends). */
  onEvent?: (event: ExecutionEvent) => unknown;
}

/** The contexts and executions of one box (local: `JupyterInterpreter`; REST: the code routes' client). */
export interface CodeInterpreter {
  /**
   * Starts a new context (kernel). @throws BoxError `invalid_option` (language without a kernel, cwd not
   * absolute), `conflict` past the box's context limit.
   */
  createContext(options?: CreateContextOptions): Promise<CodeContext>;
  /** The box's live contexts. */
  listContexts(): Promise<CodeContext[]>;
  /** Restarts a context's kernel: its state is gone. @throws BoxError `not_found` for an unknown id. */
  restartContext(context: string | CodeContext): Promise<void>;
  /** Shuts a context's kernel down. @throws BoxError `not_found` for an unknown id. */
  removeContext(context: string | CodeContext): Promise<void>;
  /**
   * Runs `code` in a context and resolves once the kernel is idle again, the callbacks having been called
   * as the events came. @throws BoxError `not_found` (unknown context), `invalid_option` (bad option);
   * errors of the code itself are in `Execution.error`, not thrown.
   */
  execute(code: string, options?: ExecuteOptions): Promise<Execution>;
  /** Releases the host side (connections, forwarders); the box's kernels end with the box. */
  close(): Promise<void>;
}

/**
 * What the interpreter needs of a box (a `JsBox` fits): run the Jupyter Server in it, reach its port.
 * The execution's output is read with `collect()`; the server runs until it is killed or the box stops.
 */
export interface InterpreterBox {
  readonly id: string;
  execWith(
    cmd: string,
    args: string[],
    env: Record<string, string> | undefined,
    options: { cwd?: string; user?: string },
  ): Promise<InterpreterProcess>;
  readonly network: JsNetworkHandle;
}

/** The part of `JsExecution` the interpreter uses for the Jupyter Server process. */
export interface InterpreterProcess {
  collect(): {
    stdout: { drainTo(sink: (text: string) => void): Promise<void> };
    stderr: { drainTo(sink: (text: string) => void): Promise<void> };
    stdin: { close(): Promise<void> };
  };
  wait(): Promise<{ exitCode: number }>;
  kill(): Promise<void>;
}

/** Bounds of one box's interpreter. */
export interface InterpreterLimits {
  /** Live contexts per box (default 16). */
  maxContexts?: number;
  /** stdout, stderr and result bytes one execution may produce before it is interrupted (default 16 MiB). */
  maxOutputBytes?: number;
  /** Largest single kernel message accepted, bytes (default 64 MiB). */
  maxMessageBytes?: number;
  /** Executions waiting on one context (default 32); more are refused with `conflict`. */
  maxQueued?: number;
}
