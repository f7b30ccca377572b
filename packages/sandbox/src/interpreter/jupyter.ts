/**
 * `JupyterInterpreter`: the contexts and executions of one box, driven from the host with
 * `@jupyterlab/services` against the box's Jupyter Server (`server.ts`). A context is one kernel (its id
 * is the kernel id) with one WebSocket connection; executions in a context run one after another (a
 * bounded queue); `execute` turns the kernel's IOPub messages into E2B-shaped events (`events.ts`).
 *
 * Bounds: contexts per box, output bytes per execution (past it the kernel is interrupted and the error
 * is `OutputLimitExceeded`), kernel message size (the WebSocket's `maxPayload`), queued executions per
 * context; a timeout or an abort interrupts the kernel, and restarts it when the interrupt does not end
 * the execution within `INTERRUPT_GRACE_MS`.
 */
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { BoxError, conflict, notFound } from '../errors.ts';
import { ExecutionCollector, resultFromBundle } from './events.ts';
import { type JupyterServer, startJupyterServer } from './server.ts';
import type {
  CodeContext,
  CodeInterpreter,
  CreateContextOptions,
  ExecuteOptions,
  Execution,
  ExecutionEvent,
  InterpreterBox,
  InterpreterLimits,
} from './types.ts';

/** Default execution timeout, ms (E2B's `runCode` default). */
export const DEFAULT_EXECUTION_TIMEOUT_MS = 60_000;
/** Time a new or restarted kernel gets to run its first (silent) code, ms. */
export const KERNEL_READY_MS = 60_000;
/**
 * Cells between two writes of IPython's history database in a Python context (`HistoryManager.db_cache_size`;
 * the rest is written when the kernel ends). IPython's default, 0, writes (and syncs) the SQLite file after
 * every cell from a second thread, which doubled the time of a warm `1+1` (35 ms against 18 ms at load 5);
 * the session's own history (`In`, `Out`, `%history`) is kept in memory either way.
 */
export const HISTORY_WRITE_CELLS = 1000;
/** Time an interrupted execution gets to end before its kernel is restarted, ms. */
export const INTERRUPT_GRACE_MS = 5000;

const DEFAULT_LIMITS: Required<InterpreterLimits> = {
  maxContexts: 16,
  maxOutputBytes: 16 * 1024 * 1024,
  maxMessageBytes: 64 * 1024 * 1024,
  maxQueued: 32,
};

/** Language names E2B accepts for the same kernel language. */
const LANGUAGE_ALIASES: Record<string, string> = { js: 'javascript', ts: 'typescript' };

/** `@jupyterlab/services`, loaded on first use (it pulls in a lot of modules). */
type Services = typeof import('@jupyterlab/services');

/** One context: its kernel (name of its kernelspec), connection and the tail of its execution queue. */
interface Context {
  info: CodeContext;
  kernelName: string;
  kernel: Kernel.IKernelConnection;
  queue: Promise<unknown>;
  queued: number;
}

function checkLanguage(language: unknown): string {
  if (language === undefined) return 'python';
  if (typeof language !== 'string' || !/^[a-z][a-z0-9+#-]{0,31}$/i.test(language)) {
    throw new BoxError('invalid code option language: must be a language name such as python', {
      field: 'language',
    });
  }
  const lower = language.toLowerCase();
  return LANGUAGE_ALIASES[lower] ?? lower;
}

/** Python that sets (`restore` false) or restores environment variables; values are JSON-quoted. */
function envCode(vars: Record<string, string>, restore: boolean): string {
  const json = JSON.stringify(JSON.stringify(vars));
  return restore
    ? `import os as __e2b_os\nfor __k, __v in __e2b_saved_env.items():\n    __e2b_os.environ.pop(__k, None) if __v is None else __e2b_os.environ.__setitem__(__k, __v)\ndel __e2b_saved_env, __e2b_os`
    : `import os as __e2b_os, json as __e2b_json\n__e2b_new = __e2b_json.loads(${json})\n__e2b_saved_env = {__k: __e2b_os.environ.get(__k) for __k in __e2b_new}\n__e2b_os.environ.update(__e2b_new)\ndel __e2b_new, __e2b_json`;
}

/**
 * A connection to a kernel of `server`. `console.debug` is silenced while it is made: `KernelConnection`
 * logs every WebSocket it opens with it, which would land on the stdout of every program using a
 * `CodeBox`. Restarts and shutdowns go through the REST API after the connection is disposed, so the
 * connection never logs the kernel's status changes either.
 */
function connect(
  services: Services,
  server: JupyterServer,
  model: { id: string; name: string },
): Kernel.IKernelConnection {
  const debug = console.debug;
  console.debug = () => {};
  try {
    return new services.KernelConnection({ model, serverSettings: server.settings, handleComms: false });
  } finally {
    console.debug = debug;
  }
}

/** The contexts (Jupyter kernels) of one box. */
export class JupyterInterpreter implements CodeInterpreter {
  readonly #box: InterpreterBox;
  readonly #limits: Required<InterpreterLimits>;
  #server: Promise<{ server: JupyterServer; services: Services }> | null = null;
  readonly #contexts = new Map<string, Context>();
  /** Default context id per language (E2B: one default context per language, made on first use). */
  readonly #defaults = new Map<string, Promise<Context>>();
  #closed = false;

  readonly #onServerExit: () => void;

  /**
   * @param box the box whose Jupyter Server this drives (started on first use).
   * @param limits bounds (defaults: 16 contexts, 16 MiB of output per execution, 64 MiB per kernel
   *   message, 32 queued executions per context).
   * @param onServerExit called when the box's Jupyter Server ends (the box stopped, or the server died).
   */
  constructor(box: InterpreterBox, limits: InterpreterLimits = {}, onServerExit: () => void = () => {}) {
    this.#box = box;
    this.#limits = { ...DEFAULT_LIMITS, ...limits };
    this.#onServerExit = onServerExit;
  }

  /** The running server (started on first use; started again after it exited). */
  #ensureServer(): Promise<{ server: JupyterServer; services: Services }> {
    if (this.#closed) return Promise.reject(conflict('code interpreter: closed'));
    if (!this.#server) {
      const starting = (async () => {
        const server = await startJupyterServer(this.#box, { maxMessageBytes: this.#limits.maxMessageBytes });
        const services = await import('@jupyterlab/services');
        void server.exited.then(() => {
          // The kernels died with the server: forget them, the next call starts a new server.
          if (this.#server === starting) this.#server = null;
          for (const context of this.#contexts.values()) context.kernel.dispose();
          this.#contexts.clear();
          this.#defaults.clear();
          void server.close();
          this.#onServerExit();
        });
        return { server, services };
      })();
      this.#server = starting;
      starting.catch(() => {
        if (this.#server === starting) this.#server = null;
      });
    }
    return this.#server;
  }

  async createContext(options: CreateContextOptions = {}): Promise<CodeContext> {
    return (await this.#create(options)).info;
  }

  async #create(options: CreateContextOptions): Promise<Context> {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('invalid context options: must be an object { language?, cwd? }', {
        field: 'options',
      });
    }
    const language = checkLanguage(options.language);
    if (options.cwd !== undefined && (typeof options.cwd !== 'string' || !options.cwd.startsWith('/'))) {
      throw new BoxError('invalid context option cwd: must be an absolute path in the box', { field: 'cwd' });
    }
    if (this.#contexts.size >= this.#limits.maxContexts) {
      throw conflict(
        `code interpreter: box ${this.#box.id} has ${this.#contexts.size} contexts, the limit (remove one first)`,
      );
    }
    const { server, services } = await this.#ensureServer();
    const specs = await services.KernelSpecAPI.getSpecs(server.settings);
    const spec = Object.entries(specs.kernelspecs).find(([, s]) => s?.language.toLowerCase() === language);
    if (!spec) {
      const known = [...new Set(Object.values(specs.kernelspecs).map((s) => s?.language))].join(', ');
      throw new BoxError(
        `invalid context option language: '${language}' has no kernel in box ${this.#box.id} (available: ${known})`,
        { field: 'language' },
      );
    }
    const model = await services.KernelAPI.startNew({ name: spec[0] }, server.settings);
    const context: Context = {
      info: { id: model.id, language, cwd: options.cwd ?? server.cwd },
      kernelName: model.name,
      kernel: connect(services, server, model),
      queue: Promise.resolve(),
      queued: 0,
    };
    this.#contexts.set(model.id, context);
    try {
      await this.#setUp(context);
    } catch (error) {
      await this.#remove(context);
      throw error;
    }
    return context;
  }

  /**
   * Moves a fresh (or restarted) Python kernel to its context's cwd and sets how often IPython writes its
   * history database (`HISTORY_WRITE_CELLS`). @throws BoxError naming `cwd`.
   */
  async #setUp(context: Context): Promise<void> {
    if (context.info.language !== 'python') return;
    const future = context.kernel.requestExecute({
      code:
        `try:\n    get_ipython().history_manager.db_cache_size = ${HISTORY_WRITE_CELLS}\nexcept Exception:\n    pass\n` +
        `import os as __e2b_os\n__e2b_os.chdir(${JSON.stringify(context.info.cwd)})\ndel __e2b_os`,
      silent: true,
      store_history: false,
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new BoxError(
            `code interpreter: kernel ${context.info.id} of box ${this.#box.id} did not answer within ${KERNEL_READY_MS} ms`,
            { code: 'timeout' },
          ),
        );
      }, KERNEL_READY_MS);
    });
    const reply = await Promise.race([future.done, late]).finally(() => clearTimeout(timer));
    if (reply.content.status !== 'ok') {
      throw new BoxError(`invalid context option cwd: cannot enter '${context.info.cwd}' in the box`, {
        field: 'cwd',
      });
    }
  }

  async listContexts(): Promise<CodeContext[]> {
    return [...this.#contexts.values()].map((c) => ({ ...c.info }));
  }

  #find(context: string | CodeContext | undefined): Context {
    const id = typeof context === 'object' && context !== null ? context.id : context;
    if (typeof id !== 'string') {
      throw new BoxError('invalid code option context: must be a context or its id', { field: 'context' });
    }
    const found = this.#contexts.get(id);
    if (!found) throw notFound(`code interpreter: no context '${id}' in box ${this.#box.id}`);
    return found;
  }

  async restartContext(context: string | CodeContext): Promise<void> {
    await this.#restart(this.#find(context));
  }

  /**
   * Restarts a context's kernel through the server's REST API with a new connection (the old one is
   * disposed first, which ends its pending executions), then moves it to the context's cwd.
   */
  async #restart(context: Context): Promise<void> {
    const { server, services } = await this.#ensureServer();
    context.kernel.dispose();
    await services.KernelAPI.restartKernel(context.info.id, server.settings);
    context.kernel = connect(services, server, { id: context.info.id, name: context.kernelName });
    await this.#setUp(context);
  }

  async removeContext(context: string | CodeContext): Promise<void> {
    await this.#remove(this.#find(context));
  }

  async #remove(context: Context): Promise<void> {
    this.#contexts.delete(context.info.id);
    for (const [language, pending] of this.#defaults) {
      if ((await pending.catch(() => null)) === context) this.#defaults.delete(language);
    }
    context.kernel.dispose();
    const running = await this.#server?.catch(() => null);
    if (running)
      await running.services.KernelAPI.shutdownKernel(context.info.id, running.server.settings).catch(
        () => {},
      );
  }

  /** The default context of `language`, created on first use. */
  #defaultContext(language: string): Promise<Context> {
    let pending = this.#defaults.get(language);
    if (!pending) {
      pending = this.#create({ language });
      this.#defaults.set(language, pending);
      pending.catch(() => this.#defaults.delete(language));
    }
    return pending;
  }

  async execute(code: string, options: ExecuteOptions = {}): Promise<Execution> {
    if (typeof code !== 'string') throw new BoxError('invalid code: must be a string', { field: 'code' });
    if (options === null || typeof options !== 'object') {
      throw new BoxError('invalid code options: must be an object', { field: 'options' });
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_EXECUTION_TIMEOUT_MS;
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0) {
      throw new BoxError('invalid code option timeoutMs: must be a non-negative integer (ms; 0: no limit)', {
        field: 'timeoutMs',
      });
    }
    const env = options.envVars;
    if (
      env !== undefined &&
      (env === null ||
        typeof env !== 'object' ||
        Object.entries(env).some(([k, v]) => k === '' || k.includes('=') || typeof v !== 'string'))
    ) {
      throw new BoxError('invalid code option envVars: must be an object of names (no "=") to strings', {
        field: 'envVars',
      });
    }
    const context =
      options.context !== undefined
        ? this.#find(options.context)
        : await this.#defaultContext(checkLanguage(options.language));
    if (env && Object.keys(env).length > 0 && context.info.language !== 'python') {
      throw new BoxError(`invalid code option envVars: not supported for ${context.info.language} contexts`, {
        field: 'envVars',
      });
    }
    if (context.queued >= this.#limits.maxQueued) {
      throw conflict(`code interpreter: context ${context.info.id} has ${context.queued} executions waiting`);
    }
    context.queued++;
    const run = context.queue.then(() => this.#run(context, code, options, timeoutMs));
    context.queue = run.catch(() => {});
    try {
      return await run;
    } finally {
      context.queued--;
    }
  }

  /** One execution on a context whose queue reached it. */
  async #run(context: Context, code: string, options: ExecuteOptions, timeoutMs: number): Promise<Execution> {
    const collector = new ExecutionCollector(options);
    const kernel = context.kernel;
    const env = options.envVars && Object.keys(options.envVars).length > 0 ? options.envVars : null;
    if (env)
      await kernel.requestExecute({ code: envCode(env, false), silent: true, store_history: false }).done;
    // Events are delivered in order: each waits for the previous callback.
    let delivery: Promise<void> = Promise.resolve();
    const emit = (event: ExecutionEvent) => {
      delivery = delivery.then(() => collector.add(event));
    };
    let outputBytes = 0;
    let stopped: 'timeout' | 'abort' | 'output' | null = null;
    let restartTimer: NodeJS.Timeout | undefined;
    /** The restart of a kernel that ignored the interrupt: the execution ends once it is done. */
    let restarting: Promise<void> | null = null;
    const stop = (why: 'timeout' | 'abort' | 'output') => {
      if (stopped) return;
      stopped = why;
      const error =
        why === 'timeout'
          ? { name: 'TimeoutError', value: `execution exceeded timeoutMs=${timeoutMs} and was interrupted` }
          : why === 'abort'
            ? { name: 'ExecutionAborted', value: 'execution was aborted and interrupted' }
            : {
                name: 'OutputLimitExceeded',
                value: `execution output exceeded ${this.#limits.maxOutputBytes} bytes and was interrupted`,
              };
      emit({ type: 'error', error: { ...error, traceback: '' } });
      kernel.interrupt().catch(() => {});
      restartTimer = setTimeout(() => {
        // The interrupt did not end it (code ignoring KeyboardInterrupt, a blocked C call): restart.
        restarting = this.#restart(context).catch(() => {});
      }, INTERRUPT_GRACE_MS);
    };
    // Executions of a context reach its kernel one at a time (the context queue), so the kernel has no
    // queued request to abort after an error; with `stop_on_error` it would abort for a moment every
    // execute request that arrives next, and the one sent right after an interrupted execution would be
    // answered `aborted` without running.
    const future = kernel.requestExecute({
      code,
      silent: false,
      store_history: true,
      allow_stdin: false,
      stop_on_error: false,
    });
    future.onIOPub = (msg: KernelMessage.IIOPubMessage) => {
      const type = msg.header.msg_type;
      const content = msg.content as Record<string, unknown>;
      let event: ExecutionEvent | null = null;
      if (type === 'stream') {
        const name = content.name === 'stderr' ? 'stderr' : 'stdout';
        event = { type: name, text: String(content.text ?? ''), timestamp: msg.header.date };
      } else if (type === 'execute_result' || type === 'display_data') {
        event = {
          type: 'result',
          result: resultFromBundle(
            (content.data ?? {}) as Record<string, unknown>,
            type === 'execute_result',
          ),
        };
      } else if (type === 'error') {
        const tb = Array.isArray(content.traceback) ? content.traceback.join('\n') : '';
        event = {
          type: 'error',
          error: { name: String(content.ename), value: String(content.evalue), traceback: tb },
        };
      } else if (type === 'execute_input') {
        emit({ type: 'number_of_executions', executionCount: Number(content.execution_count) });
      }
      if (!event || (stopped && event.type !== 'error')) return;
      if (event.type !== 'error') {
        outputBytes += JSON.stringify(event).length;
        if (outputBytes > this.#limits.maxOutputBytes) {
          stop('output');
          return;
        }
      }
      emit(event);
    };
    const timer = timeoutMs > 0 ? setTimeout(() => stop('timeout'), timeoutMs) : undefined;
    const onAbort = () => stop('abort');
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let unexpected = false;
    try {
      const reply = await future.done;
      const content = reply.content as unknown as Record<string, unknown>;
      if (content.status === 'error') {
        const tb = Array.isArray(content.traceback) ? content.traceback.join('\n') : '';
        emit({
          type: 'error',
          error: { name: String(content.ename ?? ''), value: String(content.evalue ?? ''), traceback: tb },
        });
      } else if (content.status === 'abort' || content.status === 'aborted') {
        emit({
          type: 'error',
          error: { name: 'ExecutionAborted', value: 'Execution was aborted', traceback: '' },
        });
      }
    } catch (error) {
      // The kernel went away (restarted by a timeout, died, or the server ended).
      unexpected = !stopped;
      if (unexpected) {
        emit({
          type: 'error',
          error: {
            name: 'KernelError',
            value: `the kernel ended: ${(error as Error).message}`,
            traceback: '',
          },
        });
      }
    } finally {
      clearTimeout(timer);
      clearTimeout(restartTimer);
      options.signal?.removeEventListener('abort', onAbort);
    }
    // The next execution of this context must find the restarted kernel and its new connection.
    if (restarting) await restarting;
    emit({ type: unexpected ? 'unexpected_end_of_execution' : 'end_of_execution' });
    await delivery;
    if (env && !unexpected && context.kernel === kernel) {
      await kernel
        .requestExecute({ code: envCode(env, true), silent: true, store_history: false })
        .done.catch(() => {});
    }
    return collector.execution;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const pending = this.#server;
    this.#server = null;
    for (const context of this.#contexts.values()) context.kernel.dispose();
    this.#contexts.clear();
    this.#defaults.clear();
    if (pending) await (await pending.catch(() => null))?.server.close();
  }
}
