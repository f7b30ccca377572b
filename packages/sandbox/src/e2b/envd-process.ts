/**
 * envd's `process.Process` Connect service (`proto/process/process.proto`) over box executions
 * (`JsBox.execWith`): Start streams a start event, the output (stdout/stderr, or pty bytes) and the end;
 * a client that drops the stream leaves the process running, and Connect reattaches to it by pid or tag;
 * List, SendInput, StreamInput, SendSignal (SIGTERM, SIGKILL), CloseStdin and Update (terminal size).
 * Streams send a keepalive after `Keepalive-Ping-Interval` seconds of quiet (default 50).
 *
 * A pid is the number this service gives the process in its sandbox (from 1000 up, never reused while
 * the server runs); the process inside the box has its own pid in the box's namespace.
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
/** The first pid given in a sandbox. */
const FIRST_PID = 1000;

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

  /** Starts a process and registers it under a fresh pid. */
  async start(
    request: EnvdRequest,
    config: ProcessConfig,
    pty: { cols: number; rows: number } | null,
    tag?: string,
  ): Promise<EnvdProcess> {
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
    let execution: JsExecution;
    try {
      execution = await request.box.execWith(config.cmd, [...config.args], env, {
        tty: pty !== null,
        ...(pty ? { ttySize: pty } : {}),
        cwd,
        user: request.user,
      });
    } catch (error) {
      throw connectErrorOf(error);
    }
    const pid = entry.next++;
    const { stdout, stderr, stdin } = execution.collect();
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
    const outputs = Promise.all([
      stdout.drainTo(data(pty ? 'pty' : 'stdout')),
      stderr.drainTo(data('stderr')),
    ]);
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
    return proc;
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

/** Events of `proc` to a stream: start first (for Start), then what comes until the end. */
async function* follow<T extends StartResponse | ConnectResponse>(
  proc: EnvdProcess,
  context: HandlerContext,
  wrap: (event: ProcessEvent) => T,
): AsyncGenerator<T> {
  const queue = new StreamQueue<ProcessEvent>();
  queue.push(create(ProcessEventSchema, { event: { case: 'start', value: { pid: proc.pid } } }));
  if (proc.end) {
    queue.push(proc.end);
    queue.close();
  } else {
    proc.listeners.add(queue);
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
      const proc = await table.start(request, req.process, pty, req.tag);
      if (req.stdin === false && !pty) proc.stdin.close().catch(() => {});
      yield* follow(proc, context, (event) => create(StartResponseSchema, { event }));
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
