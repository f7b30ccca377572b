/**
 * envd's `process.Process` Connect service (`proto/process/process.proto`) over box executions
 * (`JsBox.execWith`): Start streams a start event, the output (stdout/stderr, or pty bytes) and the end;
 * a client that drops the stream leaves the process running, and Connect reattaches to it by pid or tag;
 * List, SendInput, StreamInput, SendSignal (SIGTERM, SIGKILL), CloseStdin and Update (terminal size).
 * Streams send a keepalive after `Keepalive-Ping-Interval` seconds of quiet (default 50).
 *
 * A pid is the process's own id in the box's pid namespace: the command is started through
 * `/bin/sh -c 'echo $$; exec "$@"'`, whose first output line (taken off the output) is the pid that
 * `exec` keeps. When no such line comes (an image without `/bin/sh`), the service numbers the process
 * itself, from 1000 up, never reused while the server runs.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { JsExecution } from '../runtime/execution.ts';
import { type EnvdRequest, envdKey, homeOf } from './envd-context.ts';
import {
  type ConnectResponse,
  ConnectResponseSchema,
  type Process,
  type ProcessConfig,
  ProcessConfigSchema,
  type ProcessEvent,
  ProcessEventSchema,
  ProcessInfoSchema,
  type ProcessInput,
  type ProcessSelector,
  Signal,
  type StartResponse,
  StartResponseSchema,
} from './gen/process/process_pb.ts';
import { keepaliveMsOf, StreamQueue } from './queue.ts';
import { connectErrorOf } from './wire.ts';

/** Most processes started through envd that one sandbox may have running. */
export const MAX_PROCESSES_PER_SANDBOX = 256;
/** The first pid given in a sandbox to a process whose own pid is unknown. */
const FIRST_PID = 1000;
/** Prints the shell's pid, then replaces the shell with the command (`$0` `sh`, `$@` the command). */
const PID_SCRIPT = 'echo "$$"; exec "$@"';
/** Longest first line taken as the pid line, characters. */
const MAX_PID_LINE = 32;

/** The first output stream of a process started with {@link PID_SCRIPT}: its pid line, then its output. */
interface PidLine {
  /** Takes the stream's next text. */
  write(text: string): void;
  /** The stream ended. */
  end(): void;
  /** The pid of the first line; null when the stream ends or shows something else first. */
  readonly pid: Promise<number | null>;
  /** Sends the output after the pid line to `sink` (what came before this call first). */
  attach(sink: (text: string) => void): void;
}

/** A {@link PidLine} (see there). */
function pidLine(): PidLine {
  let seen = '';
  let done = false;
  let sink: ((text: string) => void) | null = null;
  const pending: string[] = [];
  const pass = (text: string) => {
    if (text === '') return;
    if (sink) sink(text);
    else pending.push(text);
  };
  let resolvePid: (pid: number | null) => void = () => {};
  const pid = new Promise<number | null>((resolve) => {
    resolvePid = resolve;
  });
  return {
    pid,
    write(text) {
      if (done) return pass(text);
      seen += text;
      const nl = seen.indexOf('\n');
      if (nl < 0 && seen.length <= MAX_PID_LINE) return;
      done = true;
      const line = nl < 0 ? '' : seen.slice(0, nl).replace(/\r$/, '');
      if (/^[1-9][0-9]{0,9}$/.test(line)) {
        resolvePid(Number(line));
        pass(seen.slice(nl + 1));
      } else {
        resolvePid(null);
        pass(seen);
      }
      seen = '';
    },
    end() {
      if (done) return;
      done = true;
      resolvePid(null);
      pass(seen);
    },
    attach(target) {
      sink = target;
      for (const text of pending.splice(0)) target(text);
    },
  };
}

/** A process started through envd. */
interface EnvdProcess {
  pid: number;
  tag?: string;
  config: ProcessConfig;
  execution: JsExecution;
  stdin: { write(data: Buffer): Promise<void>; close(): Promise<void> };
  pty: boolean;
  /** The streams attached to it (Start and Connect calls). */
  readonly listeners: Set<StreamQueue<ProcessEvent>>;
  /** Set once it ended. */
  end?: ProcessEvent;
}

/** The processes of every sandbox of one server, by box id then pid. */
export class ProcessTable {
  readonly #boxes = new Map<string, { next: number; processes: Map<number, EnvdProcess> }>();

  #of(boxId: string): { next: number; processes: Map<number, EnvdProcess> } {
    let entry = this.#boxes.get(boxId);
    if (!entry) {
      entry = { next: FIRST_PID, processes: new Map() };
      this.#boxes.set(boxId, entry);
    }
    return entry;
  }

  /** The running process `selector` names. @throws ConnectError `not_found`. */
  find(boxId: string, selector: ProcessSelector | undefined): EnvdProcess {
    const processes = this.#boxes.get(boxId)?.processes;
    const s = selector?.selector;
    let found: EnvdProcess | undefined;
    if (s?.case === 'pid') found = processes?.get(s.value);
    else if (s?.case === 'tag') found = [...(processes?.values() ?? [])].find((p) => p.tag === s.value);
    else throw new ConnectError('process selector: give pid or tag', Code.InvalidArgument);
    if (!found || found.end)
      throw new ConnectError(`process ${s.case} ${String(s.value)} not found`, Code.NotFound);
    return found;
  }

  /** The running processes of a box. */
  list(boxId: string): EnvdProcess[] {
    return [...(this.#boxes.get(boxId)?.processes.values() ?? [])].filter((p) => !p.end);
  }

  /**
   * Starts a process and registers it under its pid in the box (see the module comment); returns it
   * with the queue of the Start stream, which listens from the first output on.
   * @throws ConnectError `resource_exhausted` past {@link MAX_PROCESSES_PER_SANDBOX} or the tenant's
   *   exec quotas (`EnvdRequest.admit`), `already_exists` for a tag in use, or as the box's `execWith`.
   */
  async start(
    request: EnvdRequest,
    config: ProcessConfig,
    pty: { cols: number; rows: number } | null,
    tag?: string,
  ): Promise<{ proc: EnvdProcess; queue: StreamQueue<ProcessEvent> }> {
    const entry = this.#of(request.box.id);
    if (this.list(request.box.id).length >= MAX_PROCESSES_PER_SANDBOX) {
      throw new ConnectError(
        `at most ${MAX_PROCESSES_PER_SANDBOX} processes may run in a sandbox`,
        Code.ResourceExhausted,
      );
    }
    if (tag !== undefined && this.list(request.box.id).some((p) => p.tag === tag)) {
      throw new ConnectError(`a process with tag '${tag}' is running`, Code.AlreadyExists);
    }
    const env = { ...request.record.envVars, ...config.envs };
    const cwd = config.cwd
      ? config.cwd.startsWith('/')
        ? config.cwd
        : `${homeOf(request.user)}/${config.cwd}`
      : homeOf(request.user);
    let release: () => void;
    try {
      release = await request.admit();
    } catch (error) {
      throw connectErrorOf(error);
    }
    let execution: JsExecution;
    try {
      execution = await request.box.execWith(
        '/bin/sh',
        ['-c', PID_SCRIPT, 'sh', config.cmd, ...config.args],
        env,
        {
          tty: pty !== null,
          ...(pty ? { ttySize: pty } : {}),
          cwd,
          user: request.user,
        },
      );
    } catch (error) {
      release();
      throw connectErrorOf(error);
    }
    void execution.wait().then(release, release);
    const { stdout, stderr, stdin } = execution.collect();
    const first = pidLine();
    const stdoutDone = stdout.drainTo((text) => first.write(text));
    void stdoutDone.then(
      () => first.end(),
      () => first.end(),
    );
    const own = await first.pid;
    const pid = own !== null && !entry.processes.has(own) ? own : entry.next++;
    const proc: EnvdProcess = {
      pid,
      config,
      execution,
      stdin,
      pty: pty !== null,
      listeners: new Set(),
      ...(tag !== undefined ? { tag } : {}),
    };
    entry.processes.set(pid, proc);
    const emit = (event: ProcessEvent, bytes: number) => {
      for (const queue of proc.listeners) queue.push(event, bytes);
    };
    const data = (which: 'stdout' | 'stderr' | 'pty') => (text: string) => {
      const value = Buffer.from(text, 'utf8');
      emit(
        create(ProcessEventSchema, { event: { case: 'data', value: { output: { case: which, value } } } }),
        value.length,
      );
    };
    // The Start stream listens before any output is passed on (output may come with the pid line).
    const queue = new StreamQueue<ProcessEvent>();
    queue.push(startEvent(pid));
    proc.listeners.add(queue);
    first.attach(data(pty ? 'pty' : 'stdout'));
    const outputs = Promise.all([stdoutDone, stderr.drainTo(data('stderr'))]);
    execution.wait().then(
      async (result) => {
        await outputs;
        const signalled = result.exitCode > 128 && result.exitCode < 160;
        proc.end = create(ProcessEventSchema, {
          event: {
            case: 'end',
            value: {
              exitCode: result.exitCode,
              exited: !signalled,
              status: signalled
                ? `signal: ${signalName(result.exitCode - 128)}`
                : `exit status ${result.exitCode}`,
              ...(result.errorMessage ? { error: result.errorMessage } : {}),
            },
          },
        });
        emit(proc.end, 0);
        for (const queue of proc.listeners) queue.close();
        entry.processes.delete(pid);
      },
      (error: unknown) => {
        for (const queue of proc.listeners) queue.fail(connectErrorOf(error));
        entry.processes.delete(pid);
      },
    );
    return { proc, queue };
  }

  /** Forgets a removed box's processes. */
  forget(boxId: string): void {
    this.#boxes.delete(boxId);
  }
}

function signalName(n: number): string {
  return { 1: 'hangup', 2: 'interrupt', 9: 'killed', 15: 'terminated' }[n] ?? `signal ${n}`;
}

function requestOf(context: HandlerContext): EnvdRequest {
  const request = context.values.get(envdKey);
  if (!request) throw new ConnectError('no sandbox routed', Code.Internal);
  return request;
}

/** The start event of the process `pid`. */
function startEvent(pid: number): ProcessEvent {
  return create(ProcessEventSchema, { event: { case: 'start', value: { pid } } });
}

/**
 * Events of `proc` to a stream: start first, then what comes until the end. `listening` is a queue
 * already among `proc`'s listeners with its start event (Start's, from {@link ProcessTable.start}).
 */
async function* follow<T extends StartResponse | ConnectResponse>(
  proc: EnvdProcess,
  context: HandlerContext,
  wrap: (event: ProcessEvent) => T,
  listening?: StreamQueue<ProcessEvent>,
): AsyncGenerator<T> {
  let queue = listening;
  if (!queue) {
    queue = new StreamQueue<ProcessEvent>();
    queue.push(startEvent(proc.pid));
    if (proc.end) {
      queue.push(proc.end);
      queue.close();
    } else {
      proc.listeners.add(queue);
    }
  }
  const keepalive = () => create(ProcessEventSchema, { event: { case: 'keepalive', value: {} } });
  const bytesOf = (e: ProcessEvent) =>
    e.event.case === 'data' ? (e.event.value.output.value?.length ?? 0) : 0;
  try {
    const interval = keepaliveMsOf(context.requestHeader.get('keepalive-ping-interval'));
    for await (const event of queue.drain(context.signal, interval, keepalive, bytesOf)) yield wrap(event);
  } finally {
    proc.listeners.delete(queue);
  }
}

async function write(proc: EnvdProcess, input: ProcessInput | undefined): Promise<void> {
  const value = input?.input;
  if (!value?.case) throw new ConnectError('input: give stdin or pty bytes', Code.InvalidArgument);
  await proc.stdin.write(Buffer.from(value.value));
}

/** The `process.Process` implementation over one server's {@link ProcessTable}. */
export function processService(table: ProcessTable): ServiceImpl<typeof Process> {
  return {
    async *start(req, context) {
      const request = requestOf(context);
      if (!req.process || req.process.cmd === '')
        throw new ConnectError('process.cmd: required', Code.InvalidArgument);
      const size = req.pty?.size;
      const pty = req.pty ? { cols: size?.cols || 80, rows: size?.rows || 24 } : null;
      const { proc, queue } = await table.start(request, req.process, pty, req.tag);
      if (req.stdin === false && !pty) proc.stdin.close().catch(() => {});
      yield* follow(proc, context, (event) => create(StartResponseSchema, { event }), queue);
    },
    async *connect(req, context) {
      const proc = table.find(requestOf(context).box.id, req.process);
      yield* follow(proc, context, (event) => create(ConnectResponseSchema, { event }));
    },
    async list(_req, context) {
      return {
        processes: table.list(requestOf(context).box.id).map((p) =>
          create(ProcessInfoSchema, {
            pid: p.pid,
            config: create(ProcessConfigSchema, p.config),
            ...(p.tag !== undefined ? { tag: p.tag } : {}),
          }),
        ),
      };
    },
    async sendInput(req, context) {
      await write(table.find(requestOf(context).box.id, req.process), req.input);
      return {};
    },
    async streamInput(requests, context) {
      const boxId = requestOf(context).box.id;
      let proc: EnvdProcess | null = null;
      for await (const message of requests) {
        if (message.event.case === 'start') proc = table.find(boxId, message.event.value.process);
        else if (message.event.case === 'data') {
          if (!proc)
            throw new ConnectError('the first message must select the process (start)', Code.InvalidArgument);
          await write(proc, message.event.value.input);
        }
      }
      return {};
    },
    async sendSignal(req, context) {
      const proc = table.find(requestOf(context).box.id, req.process);
      if (req.signal === Signal.SIGKILL) await proc.execution.kill();
      else if (req.signal === Signal.SIGTERM) await proc.execution.signal('SIGTERM');
      else throw new ConnectError('signal: must be SIGNAL_SIGTERM or SIGNAL_SIGKILL', Code.InvalidArgument);
      return {};
    },
    async closeStdin(req, context) {
      await table.find(requestOf(context).box.id, req.process).stdin.close();
      return {};
    },
    async update(req, context) {
      const proc = table.find(requestOf(context).box.id, req.process);
      const size = req.pty?.size;
      if (size) {
        if (!proc.pty) throw new ConnectError('the process has no pty', Code.FailedPrecondition);
        if (size.cols < 1 || size.rows < 1 || size.cols > 10_000 || size.rows > 10_000) {
          throw new ConnectError('pty.size: cols and rows must be from 1 to 10000', Code.InvalidArgument);
        }
        await proc.execution.resize(size.cols, size.rows);
      }
      return {};
    },
  };
}
