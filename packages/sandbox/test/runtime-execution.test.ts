/**
 * `JsExecution` streams (spec 002 "Execution"): line-based readers, null at the end, each stream taken
 * once, stdin, kill, and no deadlock when one stream is not read. Driven by real host processes through
 * the engine's `EngineProcess` shape (the same streams a box command has); runtime.test.ts covers boxes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
// internal: an engine process double drives the execution unit
import type { EngineProcess } from '../src/engine/types.ts';
import { BoxError, JsExecution } from '../src/index.ts';
// internal: the execution's report type (not exported)
import type { ExecutionReport } from '../src/runtime/execution.ts';

function hostProcess(script: string): EngineProcess {
  const child = spawn('/bin/sh', ['-c', script], { stdio: ['pipe', 'pipe', 'pipe'] });
  child.stdin.on('error', () => {});
  return {
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    exited: new Promise((resolve) =>
      child.on('exit', (code, signal) => resolve(code ?? (signal === 'SIGKILL' ? 137 : 128))),
    ),
    kill: async (signal = 'SIGKILL') => {
      child.kill(signal);
    },
  };
}

function start(script: string): { execution: JsExecution; report: Promise<ExecutionReport> } {
  let done: (r: ExecutionReport) => void = () => {};
  const report = new Promise<ExecutionReport>((resolve) => {
    done = resolve;
  });
  return { execution: new JsExecution(hostProcess(script), done), report };
}

describe('JsExecution', () => {
  it('reads stdout and stderr line by line, null at the end and after it', async () => {
    const { execution } = start("printf 'a\\nb\\nlast'; echo err >&2; exit 3");
    const stdout = await execution.stdout();
    const stderr = await execution.stderr();
    assert.equal(await stdout.next(), 'a');
    assert.equal(await stdout.next(), 'b');
    assert.equal(await stdout.next(), 'last');
    assert.equal(await stdout.next(), null);
    assert.equal(await stdout.next(), null);
    assert.equal(await stderr.next(), 'err');
    assert.equal(await stderr.next(), null);
    assert.deepEqual(await execution.wait(), { exitCode: 3 });
  });

  it('gives each stream once', async () => {
    const { execution } = start('true');
    await execution.stdout();
    await assert.rejects(execution.stdout(), BoxError);
    await execution.stdin();
    await assert.rejects(execution.stdin(), /already taken/);
    assert.match(await execution.id(), /^[0-9A-HJKMNP-TV-Z]{26}$/);
    await execution.wait();
  });

  it('does not deadlock on a 10 MB stderr burst while only stdout is read', async () => {
    const { execution, report } = start(
      'head -c 10485760 /dev/zero | tr "\\0" "x" | fold -w 1000 >&2; echo done',
    );
    const stdout = await execution.stdout();
    assert.equal(await stdout.next(), 'done');
    assert.equal(await stdout.next(), null);
    assert.equal((await execution.wait()).exitCode, 0);
    const stderr = await execution.stderr();
    let lines = 0;
    while ((await stderr.next()) !== null) lines++;
    assert.equal(lines, 10486); // 10485760 bytes folded at 1000 columns; the last line unterminated
    assert.equal((await report).bytesReceived, 10485760 + 10485 + 5);
  });

  it('writes stdin (Buffer and string) and counts the bytes sent', async () => {
    const { execution, report } = start('cat; echo end');
    const stdin = await execution.stdin();
    await stdin.write(Buffer.from('one\n'));
    await stdin.writeString('twö\n');
    await stdin.close();
    const stdout = await execution.stdout();
    assert.equal(await stdout.next(), 'one');
    assert.equal(await stdout.next(), 'twö');
    assert.equal(await stdout.next(), 'end');
    assert.equal((await execution.wait()).exitCode, 0);
    assert.equal((await report).bytesSent, 4 + 5);
    await assert.rejects(stdin.writeString('late'), /closed/);
  });

  it('kill() sends SIGKILL: exit code 137', async () => {
    const { execution } = start('trap "" TERM; sleep 30');
    await execution.kill();
    assert.equal((await execution.wait()).exitCode, 137);
  });
});
