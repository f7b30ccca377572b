/**
 * Code contexts of a REST box (`CodeInterpreter` over the server's code routes, `code-routes.ts`):
 * contexts are JSON calls; `execute` reads the NDJSON event stream line by line as it arrives (bounded:
 * one line at most `MAX_LINE_BYTES`), feeding the same `ExecutionCollector` as the local interpreter, so
 * callbacks fire as the server sends each event. Aborting the signal drops the request; the server then
 * interrupts the kernel.
 */
import type { IncomingMessage } from 'node:http';
import { BoxError } from '../errors.ts';
import { decodeEvent, ExecutionCollector } from '../interpreter/events.ts';
import type {
  CodeContext,
  CodeInterpreter,
  CreateContextOptions,
  ExecuteOptions,
  Execution,
} from '../interpreter/types.ts';
import type { Connection } from './connection.ts';

/** Longest NDJSON line accepted from the server (a result with a big image), bytes. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

function contextId(context: string | CodeContext): string {
  const id = typeof context === 'object' && context !== null ? context.id : context;
  if (typeof id !== 'string' || id === '') {
    throw new BoxError('invalid code option context: must be a context or its id', { field: 'context' });
  }
  return id;
}

/** `CodeInterpreter` of a box on a REST server. */
export class RestCodeInterpreter implements CodeInterpreter {
  readonly #conn: Connection;
  readonly #path: string;

  /** @param boxPath the box's server path, `/v1/boxes/<id>`. */
  constructor(conn: Connection, boxPath: string) {
    this.#conn = conn;
    this.#path = `${boxPath}/code`;
  }

  createContext(options: CreateContextOptions = {}): Promise<CodeContext> {
    return this.#conn.call<CodeContext>('POST', `${this.#path}/contexts`, options);
  }

  listContexts(): Promise<CodeContext[]> {
    return this.#conn.call<CodeContext[]>('GET', `${this.#path}/contexts`);
  }

  async restartContext(context: string | CodeContext): Promise<void> {
    await this.#conn.call('POST', `${this.#path}/contexts/${encodeURIComponent(contextId(context))}/restart`);
  }

  async removeContext(context: string | CodeContext): Promise<void> {
    await this.#conn.call('DELETE', `${this.#path}/contexts/${encodeURIComponent(contextId(context))}`);
  }

  /** Nothing to release: every call is a request of its own. */
  async close(): Promise<void> {}

  async execute(code: string, options: ExecuteOptions = {}): Promise<Execution> {
    if (typeof code !== 'string') throw new BoxError('invalid code: must be a string', { field: 'code' });
    const body = JSON.stringify({
      code,
      ...(options.context !== undefined ? { context_id: contextId(options.context) } : {}),
      ...(options.language !== undefined ? { language: options.language } : {}),
      ...(options.envVars !== undefined ? { env_vars: options.envVars } : {}),
      ...(options.timeoutMs !== undefined ? { timeout_ms: options.timeoutMs } : {}),
    });
    const collector = new ExecutionCollector(options);
    const aborted = async () => {
      await collector.add({
        type: 'error',
        error: { name: 'ExecutionAborted', value: 'execution was aborted', traceback: '' },
      });
      return collector.execution;
    };
    let response: IncomingMessage;
    try {
      response = await this.#conn.answer('POST', `${this.#path}/execute`, body, options.signal);
    } catch (error) {
      if (options.signal?.aborted) return aborted();
      throw error;
    }
    let pending = '';
    response.setEncoding('utf8');
    try {
      for await (const chunk of response as AsyncIterable<string>) {
        pending += chunk;
        let nl = pending.indexOf('\n');
        while (nl >= 0) {
          const event = decodeEvent(pending.slice(0, nl));
          pending = pending.slice(nl + 1);
          if (event) await collector.add(event);
          nl = pending.indexOf('\n');
        }
        if (pending.length > MAX_LINE_BYTES) {
          throw new BoxError(`execute stream: a line is longer than ${MAX_LINE_BYTES} bytes`, {
            code: 'parse',
          });
        }
      }
    } catch (error) {
      response.destroy();
      if (error instanceof BoxError) throw error;
      if (options.signal?.aborted) return aborted();
      throw new BoxError(`execute stream: ${(error as Error).message}`, {
        code: 'unavailable',
        cause: error,
      });
    }
    if (!collector.ended) {
      await collector.add({
        type: 'error',
        error: { name: 'ExecutionAborted', value: 'the execute stream ended early', traceback: '' },
      });
    }
    return collector.execution;
  }
}
