/**
 * Execution events of the code interpreter: results from Jupyter MIME bundles, the `Execution` an event
 * sequence adds up to (with the E2B-style callbacks), and the NDJSON wire form of E2B's `POST /execute`
 * stream (one JSON object per line, snake_case, `type` first), both ways.
 */
import { BoxError } from '../errors.ts';
import type {
  ExecuteOptions,
  Execution,
  ExecutionError,
  ExecutionEvent,
  ExecutionResult,
  OutputMessage,
} from './types.ts';

/** MIME types with a field of their own in `ExecutionResult` (E2B's `Result`). */
const MIME_FIELDS: Record<string, keyof ExecutionResult> = {
  'text/plain': 'text',
  'text/html': 'html',
  'text/markdown': 'markdown',
  'image/svg+xml': 'svg',
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'application/pdf': 'pdf',
  'text/latex': 'latex',
  'application/json': 'json',
  'application/javascript': 'javascript',
  'e2b/data': 'data',
  'e2b/chart': 'chart',
};

/** Wire names of `ExecutionResult` fields (snake_case where they differ). */
const RESULT_FIELDS = [...Object.values(MIME_FIELDS), 'extra'] as const;

/**
 * The result of one Jupyter MIME bundle (`execute_result` when `isMainResult`, else `display_data`):
 * known types in their fields, the rest in `extra`; a `text/plain` Python string repr loses its quotes.
 */
export function resultFromBundle(bundle: Record<string, unknown>, isMainResult: boolean): ExecutionResult {
  const result: ExecutionResult = { isMainResult };
  const extra: Record<string, unknown> = {};
  for (const [mime, value] of Object.entries(bundle)) {
    const field = MIME_FIELDS[mime];
    if (field === undefined) extra[mime] = value;
    else (result as unknown as Record<string, unknown>)[field] = value;
  }
  const text = result.text;
  if (
    typeof text === 'string' &&
    text.length >= 2 &&
    ((text.startsWith("'") && text.endsWith("'")) || (text.startsWith('"') && text.endsWith('"')))
  ) {
    result.text = text.slice(1, -1);
  }
  if (Object.keys(extra).length > 0) result.extra = extra;
  return result;
}

/**
 * Adds events up to an `Execution` and calls the `ExecuteOptions` callbacks (`onEvent` first, then the
 * typed one) as each event comes. Only the first error counts (a kernel reports it twice: `error` and the
 * reply). Callback errors are not caught: they reject the caller's `execute`.
 */
export class ExecutionCollector {
  readonly execution: Execution = {
    results: [],
    logs: { stdout: [], stderr: [] },
    error: null,
    executionCount: null,
    text: undefined,
  };
  readonly #options: ExecuteOptions;
  #ended = false;

  constructor(options: ExecuteOptions) {
    this.#options = options;
  }

  /** True once `end_of_execution` or `unexpected_end_of_execution` was added. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Adds one event (ignored after the end, or when it is a second error). */
  async add(event: ExecutionEvent): Promise<void> {
    if (this.#ended) return;
    const ex = this.execution;
    if (event.type === 'error') {
      if (ex.error) return;
      ex.error = event.error;
    }
    await this.#options.onEvent?.(event);
    switch (event.type) {
      case 'stdout':
      case 'stderr': {
        ex.logs[event.type].push(event.text);
        const message: OutputMessage = {
          line: event.text,
          timestamp: microseconds(event.timestamp),
          error: event.type === 'stderr',
        };
        await (event.type === 'stdout' ? this.#options.onStdout : this.#options.onStderr)?.(message);
        break;
      }
      case 'result':
        ex.results.push(event.result);
        if (event.result.isMainResult) ex.text = event.result.text;
        await this.#options.onResult?.(event.result);
        break;
      case 'error':
        await this.#options.onError?.(event.error);
        break;
      case 'number_of_executions':
        ex.executionCount = event.executionCount;
        break;
      default:
        this.#ended = true;
    }
  }
}

/** Microseconds since the epoch of an ISO 8601 time (now when it cannot be parsed). */
function microseconds(iso: string): number {
  const ms = Date.parse(iso);
  return (Number.isNaN(ms) ? Date.now() : ms) * 1000;
}

/** One event as a line of E2B's `/execute` NDJSON stream (with the trailing `\n`). */
export function encodeEvent(event: ExecutionEvent): string {
  let wire: Record<string, unknown>;
  switch (event.type) {
    case 'stdout':
    case 'stderr':
      wire = { type: event.type, text: event.text, timestamp: event.timestamp };
      break;
    case 'result': {
      wire = { type: 'result' };
      for (const field of RESULT_FIELDS) {
        const value = event.result[field];
        if (value !== undefined) wire[field] = value;
      }
      wire.is_main_result = event.result.isMainResult;
      break;
    }
    case 'error':
      wire = { type: 'error', ...event.error };
      break;
    case 'number_of_executions':
      wire = { type: 'number_of_executions', execution_count: event.executionCount };
      break;
    default:
      wire = { type: event.type };
  }
  return `${JSON.stringify(wire)}\n`;
}

/**
 * One line of an `/execute` NDJSON stream back to an event; null for lines that carry none (`keepalive`,
 * blank lines, types this version does not know).
 * @throws BoxError `parse` when the line is not a JSON object.
 */
export function decodeEvent(line: string): ExecutionEvent | null {
  if (line.trim() === '') return null;
  let wire: Record<string, unknown>;
  try {
    wire = JSON.parse(line) as Record<string, unknown>;
  } catch (error) {
    throw new BoxError(`execute stream: a line is not JSON: ${(error as Error).message}`, {
      code: 'parse',
    });
  }
  if (wire === null || typeof wire !== 'object') {
    throw new BoxError('execute stream: a line is not a JSON object', { code: 'parse' });
  }
  const str = (value: unknown): string => (typeof value === 'string' ? value : '');
  switch (wire.type) {
    case 'stdout':
    case 'stderr':
      return { type: wire.type, text: str(wire.text), timestamp: str(wire.timestamp) };
    case 'result': {
      const result: ExecutionResult = { isMainResult: wire.is_main_result === true };
      for (const field of RESULT_FIELDS) {
        if (wire[field] !== undefined && wire[field] !== null) {
          (result as unknown as Record<string, unknown>)[field] = wire[field];
        }
      }
      return { type: 'result', result };
    }
    case 'error': {
      const error: ExecutionError = {
        name: str(wire.name),
        value: str(wire.value),
        traceback: str(wire.traceback),
      };
      return { type: 'error', error };
    }
    case 'number_of_executions':
      return { type: 'number_of_executions', executionCount: Number(wire.execution_count) };
    case 'end_of_execution':
    case 'unexpected_end_of_execution':
      return { type: wire.type };
    default:
      return null;
  }
}
