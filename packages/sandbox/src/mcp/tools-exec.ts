/**
 * Command tools: `exec` runs a command to completion (stdin, timeout, progress
 * notifications while it runs, cancellation kills it, long output shortened with the full output — up to
 * `McpConfig.maxKeptBytes` — written to a file in the box), and `start_command` / `read_output` /
 * `send_input` / `kill_command` drive long-running commands.
 */
import { randomBytes } from 'node:crypto';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsExecution } from '../runtime/execution.ts';
import { BoundedOutput, shorten } from './output.ts';
import type { BackgroundCommand, McpSession } from './session.ts';
import { defineTool, progress, type ToolExtra } from './tool.ts';

/** Directory in the box holding the full output of shortened `exec` results. */
export const SPILL_DIR = '/tmp/mcp-output';
/** Interval of progress notifications of a running `exec`, ms. */
const PROGRESS_MS = 1000;

const boxArg = z.string().min(1).describe('box id or name');
const commandInput = {
  box: boxArg,
  cmd: z.string().min(1).describe("program to run, e.g. 'python3' or 'sh'"),
  args: z.array(z.string()).max(4096).default([]).describe("its arguments, e.g. ['-c', 'ls -l | wc -l']"),
  cwd: z
    .string()
    .regex(/^\//, 'must be an absolute path')
    .optional()
    .describe('working directory (absolute); default the box one'),
  env: z.record(z.string(), z.string()).optional().describe('extra environment variables'),
};

/** Structured form of one output stream. */
const streamShape = z.object({
  text: z.string(),
  truncated: z.boolean(),
  total_bytes: z.number().describe('bytes the command wrote on this stream'),
  full_output_path: z.string().nullable().describe('file in the box holding the whole output when truncated'),
});

/**
 * Starts `cmd` once the session's provider admits it (the tenant's exec quotas on a `sandbox serve` node);
 * the execution's output goes to bounded buffers.
 * @throws BoxError `quota_exceeded` from the admission; as `box.exec`.
 */
async function start(
  session: McpSession,
  box: JsBox,
  args: { cmd: string; args: string[]; cwd?: string | undefined; env?: Record<string, string> | undefined },
  timeoutSeconds?: number,
): Promise<{ execution: JsExecution; stdout: BoundedOutput; stderr: BoundedOutput; drained: Promise<void> }> {
  const keep = session.config.maxKeptBytes;
  const release = (await session.provider.admitExecution?.()) ?? (() => {});
  let execution: JsExecution;
  try {
    execution = await box.exec(args.cmd, args.args, args.env, false, undefined, timeoutSeconds, args.cwd);
  } catch (error) {
    release();
    throw error;
  }
  void execution.wait().then(release, release);
  const stdout = new BoundedOutput(keep);
  const stderr = new BoundedOutput(keep);
  const streams = execution.collect();
  const drained = Promise.all([
    streams.stdout.drainTo((t) => stdout.push(t)),
    streams.stderr.drainTo((t) => stderr.push(t)),
  ]).then(() => {});
  return { execution, stdout, stderr, drained };
}

/** Writes `data` to the stdin of `execution` (then closes it with `close`). */
async function feed(execution: JsExecution, data: string | undefined, close: boolean): Promise<void> {
  const { stdin } = execution.collect();
  if (data) await stdin.writeString(data);
  if (close) await stdin.close();
}

/** The structured stream, writing the kept output to a file in the box when it is shortened. */
async function streamResult(
  session: McpSession,
  box: JsBox,
  output: BoundedOutput,
  spillName: () => string,
): Promise<z.infer<typeof streamShape>> {
  const short = shorten(output.bytes(), session.config.maxOutputBytes);
  if (!short.truncated && !output.overflowed) {
    return { text: short.text, truncated: false, total_bytes: output.total, full_output_path: null };
  }
  const path = `${SPILL_DIR}/${spillName()}`;
  let where: string | null = path;
  try {
    await box.files.makeDir(SPILL_DIR);
    await box.files.write(path, output.bytes());
  } catch {
    where = null;
  }
  const kept = output.bytes().length;
  const note =
    `\n[output truncated: ${output.total} bytes written, the first ${Buffer.byteLength(short.text)} shown` +
    (where
      ? `; ${kept < output.total ? `the first ${kept} bytes are` : 'all of it is'} in ${where} (read_file with offset)`
      : '') +
    ']';
  return { text: short.text + note, truncated: true, total_bytes: output.total, full_output_path: where };
}

/** Registers the command tools. */
export function execTools(server: McpServer, session: McpSession): void {
  defineTool(server, session, {
    name: 'exec',
    title: 'Run a command',
    description:
      'Runs a command in a box to completion and returns its exit code, stdout and stderr (no shell: use ' +
      "cmd 'sh' with args ['-c', '...'] for pipes). Long output is shortened and marked truncated, with the " +
      'full output left in a file of the box. Cancelling the call kills the command. For servers or ' +
      'interactive programs use start_command.',
    input: {
      ...commandInput,
      stdin: z
        .string()
        .max(16 * 1024 * 1024)
        .optional()
        .describe('text written to the command stdin (then closed)'),
      timeout_seconds: z
        .number()
        .positive()
        .max(24 * 3600)
        .optional()
        .describe('kill the command after this long (exit code 137)'),
    },
    output: {
      exit_code: z.number(),
      stdout: streamShape,
      stderr: streamShape,
      error: z.string().nullable().describe('why the command ended abnormally (timeout, killed)'),
    },
    async run(args, extra) {
      const box = await session.box(args.box);
      const run = await start(session, box, args, args.timeout_seconds);
      const kill = () => void run.execution.kill().catch(() => {});
      extra.signal.addEventListener('abort', kill, { once: true });
      // Cancelled while the command was starting: the listener came too late to fire.
      if (extra.signal.aborted) kill();
      session.running.add(run.execution);
      const ticker = progressTicker(extra, run.stdout, run.stderr);
      try {
        await feed(run.execution, args.stdin, true);
        const [result] = await Promise.all([run.execution.wait(), run.drained]);
        if (extra.signal.aborted)
          throw new BoxError('the call was cancelled; the command was killed', { code: 'exec' });
        // The spill files of this call share one random stem, drawn only when output is shortened.
        let stem: string | undefined;
        const spill = (stream: string) => {
          stem ??= randomBytes(6).toString('hex');
          return `${stem}.${stream}`;
        };
        return {
          result: {
            exit_code: result.exitCode,
            stdout: await streamResult(session, box, run.stdout, () => spill('stdout')),
            stderr: await streamResult(session, box, run.stderr, () => spill('stderr')),
            error: result.errorMessage ?? null,
          },
        };
      } finally {
        if (ticker) clearInterval(ticker);
        session.running.delete(run.execution);
        extra.signal.removeEventListener('abort', kill);
      }
    },
  });

  defineTool(server, session, {
    name: 'start_command',
    title: 'Start a long-running command',
    description:
      'Starts a command in the background (a server, a watcher, an interactive program) and returns its ' +
      'command_id at once. Read its output with read_output, write to it with send_input, stop it with ' +
      'kill_command. It is killed when this MCP session ends.',
    input: commandInput,
    output: { command_id: z.string(), box: z.string() },
    async run(args) {
      const running = [...session.commands.values()].filter((c) => c.exitCode === null).length;
      if (running >= session.config.maxCommands) {
        throw new BoxError(
          `quota exceeded: at most ${session.config.maxCommands} running commands per session`,
          {
            code: 'quota_exceeded',
            field: 'commands',
          },
        );
      }
      const box = await session.box(args.box);
      const run = await start(session, box, args);
      const id = `cmd-${randomBytes(6).toString('hex')}`;
      const command: BackgroundCommand = {
        id,
        boxId: box.id,
        execution: run.execution,
        stdout: run.stdout,
        stderr: run.stderr,
        exitCode: null,
        done: Promise.resolve(),
      };
      command.done = Promise.all([run.execution.wait(), run.drained]).then(
        ([r]) => {
          command.exitCode = r.exitCode;
        },
        () => {
          command.exitCode = -1;
        },
      );
      session.commands.set(id, command);
      return { result: { command_id: id, box: box.id } };
    },
  });

  defineTool(server, session, {
    name: 'read_output',
    title: 'Read command output',
    description:
      'Returns the output a start_command command wrote since the last read_output, and its exit code once ' +
      'it has finished (null while it runs). wait_seconds waits for it to finish first, at most that long.',
    input: {
      command_id: z.string().min(1),
      wait_seconds: z.number().min(0).max(600).default(0),
    },
    output: {
      stdout: z.string(),
      stderr: z.string(),
      running: z.boolean(),
      exit_code: z.number().nullable(),
      more: z.boolean().describe('more output is waiting: call again'),
      dropped_bytes: z.number().describe('output past the kept limit that was not kept'),
    },
    readOnly: true,
    async run(args, extra) {
      const command = session.command(args.command_id);
      if (args.wait_seconds > 0 && command.exitCode === null) {
        await Promise.race([
          command.done,
          new Promise((resolve) => setTimeout(resolve, args.wait_seconds * 1000).unref()),
          new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true })),
        ]);
      }
      const half = Math.floor(session.config.maxOutputBytes / 2);
      const out = command.stdout.take(half);
      const err = command.stderr.take(half);
      const kept = command.stdout.bytes().length + command.stderr.bytes().length;
      return {
        result: {
          stdout: out.text,
          stderr: err.text,
          running: command.exitCode === null,
          exit_code: command.exitCode,
          more: out.remaining > 0 || err.remaining > 0,
          dropped_bytes: command.stdout.total + command.stderr.total - kept,
        },
      };
    },
  });

  defineTool(server, session, {
    name: 'send_input',
    title: 'Write to a command',
    description: 'Writes text to the stdin of a start_command command; close_stdin ends its input (EOF).',
    input: {
      command_id: z.string().min(1),
      data: z
        .string()
        .max(16 * 1024 * 1024)
        .default(''),
      close_stdin: z.boolean().default(false),
    },
    output: { command_id: z.string(), bytes: z.number() },
    async run(args) {
      const command = session.command(args.command_id);
      if (command.exitCode !== null) {
        throw new BoxError(`command ${command.id} has exited (code ${command.exitCode})`, {
          code: 'conflict',
        });
      }
      await feed(command.execution, args.data, args.close_stdin);
      return { result: { command_id: command.id, bytes: Buffer.byteLength(args.data) } };
    },
  });

  defineTool(server, session, {
    name: 'kill_command',
    title: 'Kill a command',
    description: 'Kills a start_command command (SIGKILL) and returns its exit code.',
    input: { command_id: z.string().min(1) },
    output: { command_id: z.string(), exit_code: z.number().nullable() },
    destructive: true,
    async run(args) {
      const command = session.command(args.command_id);
      if (command.exitCode === null) await command.execution.kill();
      await command.done;
      return { result: { command_id: command.id, exit_code: command.exitCode } };
    },
  });
}

/**
 * Sends a progress notification every second while a command runs (bytes of output so far), when the
 * caller asked for progress (a `progressToken`); else returns undefined.
 */
function progressTicker(
  extra: ToolExtra,
  stdout: BoundedOutput,
  stderr: BoundedOutput,
): NodeJS.Timeout | undefined {
  if (extra._meta?.progressToken === undefined) return undefined;
  let ticks = 0;
  const timer = setInterval(() => {
    ticks += 1;
    void progress(
      extra,
      ticks,
      `running for ${ticks} s; ${stdout.total + stderr.total} bytes of output so far`,
    );
  }, PROGRESS_MS);
  timer.unref();
  return timer;
}
