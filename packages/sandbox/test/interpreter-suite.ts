/**
 * The stateful code interpreter through `CodeBox.runCode`, shared by the local runtime
 * (`boxes-code.test.ts`) and the REST runtime (`interpreter-rest.test.ts`): state across calls, output
 * callbacks, an error with its traceback, a matplotlib plot as PNG, a second context isolated from the
 * first, restart clearing state, a timeout interrupting the kernel (which stays usable) or restarting it
 * when the code ignores the interrupt, env vars of one execution, and bad input refused with the field
 * named.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoxError, CodeBox, type JsRuntime } from '../src/index.ts';
// internal: the interpreter's output message type (not exported)
import type { OutputMessage } from '../src/interpreter/types.ts';

/** PNG file signature, base64 of `\x89PNG\r\n\x1a\n`. */
const PNG_BASE64_PREFIX = 'iVBORw0KGgo';

/**
 * Registers the suite; `runtime()` is called once, before the first test. `restartAfterGrace` adds the
 * case of code ignoring the interrupt (≈ 12 s: the grace time, then the kernel's restart); the REST file
 * leaves it out, the server running the same interpreter code.
 */
export function codeInterpreterSuite(
  name: string,
  runtime: () => Promise<JsRuntime>,
  options: { restartAfterGrace?: boolean } = {},
): void {
  describe(name, () => {
    let box: CodeBox;

    before(async () => {
      box = new CodeBox({ runtime: await runtime() });
    });

    after(async () => {
      await box?.stop();
    });

    it('keeps state between calls of the default context', async () => {
      const first = await box.runCode('x = 1');
      assert.equal(first.error, null);
      assert.deepEqual(first.results, []);
      const second = await box.runCode('x += 1; x');
      assert.equal(second.error, null);
      assert.equal(second.text, '2');
      assert.deepEqual(second.results, [{ isMainResult: true, text: '2' }]);
      assert.ok(second.executionCount !== null && second.executionCount > (first.executionCount ?? 0));
      // run() keeps spec 002's meaning: a fresh python3 process, no kernel state.
      assert.equal(await box.run('print("x" in globals())'), 'False\n');
    });

    it('streams stdout and stderr to the callbacks in order and returns them in logs', async () => {
      const out: OutputMessage[] = [];
      const err: OutputMessage[] = [];
      const execution = await box.runCode(
        'import sys\nprint("one", flush=True)\nprint("warn", file=sys.stderr, flush=True)\nprint("two")',
        { onStdout: (m) => out.push(m), onStderr: (m) => err.push(m) },
      );
      assert.equal(out.map((m) => m.line).join(''), 'one\ntwo\n');
      assert.equal(err.map((m) => m.line).join(''), 'warn\n');
      assert.ok(out.every((m) => !m.error && m.timestamp > 1e15));
      assert.ok(err.every((m) => m.error));
      assert.equal(execution.logs.stdout.join(''), 'one\ntwo\n');
      assert.equal(execution.logs.stderr.join(''), 'warn\n');
    });

    it('reports an exception as error with name, value and traceback, and the context survives it', async () => {
      const errors: string[] = [];
      const execution = await box.runCode('def f():\n    return 1 / 0\nf()', {
        onError: (e) => errors.push(e.name),
      });
      assert.equal(execution.error?.name, 'ZeroDivisionError');
      assert.equal(execution.error?.value, 'division by zero');
      // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colours of IPython's traceback
      const plain = (execution.error?.traceback ?? '').replace(/\x1b\[[0-9;]*m/g, '');
      assert.match(plain, /return 1 \/ 0/);
      assert.deepEqual(errors, ['ZeroDivisionError']);
      assert.equal((await box.runCode('x')).text, '2');
    });

    it('returns a matplotlib figure as a PNG result, and rich results in their formats', async () => {
      const results: string[][] = [];
      const execution = await box.runCode(
        'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
        { onResult: (r) => results.push(Object.keys(r)) },
      );
      assert.equal(execution.error, null);
      const png = execution.results.find((r) => r.png !== undefined);
      assert.ok(png, `no png in ${JSON.stringify(results)}`);
      assert.equal(png.isMainResult, false);
      assert.ok(png.png?.startsWith(PNG_BASE64_PREFIX));
      assert.ok(Buffer.from(png.png ?? '', 'base64').length > 1000);
      const frame = await box.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2]})');
      assert.match(frame.results[0]?.html ?? '', /<table/);
      assert.equal(frame.results[0]?.isMainResult, true);
    });

    it('a second context has its own state, and restart clears a context', async () => {
      const ctx = await box.createCodeContext({ cwd: '/tmp' });
      assert.equal(ctx.language, 'python');
      assert.equal(ctx.cwd, '/tmp');
      const isolated = await box.runCode('x', { context: ctx });
      assert.equal(isolated.error?.name, 'NameError');
      assert.equal((await box.runCode('import os; os.getcwd()', { context: ctx.id })).text, '/tmp');
      await box.runCode('y = 41', { context: ctx });
      assert.equal((await box.runCode('y + 1', { context: ctx })).text, '42');
      assert.equal((await box.runCode('x')).text, '2', 'the default context is untouched');
      assert.ok((await box.listCodeContexts()).some((c) => c.id === ctx.id));
      await box.restartCodeContext(ctx);
      assert.equal((await box.runCode('y', { context: ctx })).error?.name, 'NameError');
      await box.removeCodeContext(ctx.id);
      assert.ok(!(await box.listCodeContexts()).some((c) => c.id === ctx.id));
      await assert.rejects(
        box.runCode('1', { context: ctx.id }),
        (e: unknown) => e instanceof BoxError && e.code === 'not_found',
      );
    });

    it('a timeout interrupts the kernel, which keeps its state and runs the next code', async () => {
      // The state is made by a code run of its own: within the timed run, a loaded machine could interrupt
      // the code before it got to the assignment.
      assert.equal((await box.runCode('z = 5')).error, null);
      const execution = await box.runCode('import time\nwhile True:\n    time.sleep(0.05)', {
        timeoutMs: 1000,
      });
      assert.equal(execution.error?.name, 'TimeoutError');
      const next = await box.runCode('z * 2');
      assert.equal(next.error, null);
      assert.equal(next.text, '10');
    });

    if (options.restartAfterGrace) {
      it('code that ignores the interrupt is ended by restarting its kernel after the grace time', async () => {
        const ctx = await box.createCodeContext();
        await box.runCode('kept = 1', { context: ctx });
        // 3 s for the code to ignore SIGINT before the timeout interrupts it (an interrupt that comes first
        // ends the code, and the kernel is not restarted).
        const stuck = await box.runCode(
          'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass',
          { context: ctx, timeoutMs: 3000 },
        );
        assert.equal(stuck.error?.name, 'TimeoutError');
        const next = await box.runCode('kept', { context: ctx, timeoutMs: 30_000 });
        assert.equal(next.error?.name, 'NameError', 'the kernel was restarted: its state is gone');
        await box.removeCodeContext(ctx);
      });
    }

    it('envVars apply to one execution only', async () => {
      const withEnv = await box.runCode('import os; os.environ.get("GREETING")', {
        envVars: { GREETING: 'hello "box"' },
      });
      assert.equal(withEnv.text, 'hello "box"');
      const after = await box.runCode('import os; os.environ.get("GREETING") is None');
      assert.equal(after.text, 'True');
    });

    it('refuses bad input naming the field', async () => {
      await assert.rejects(
        box.createCodeContext({ language: 'cobol' }),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && /cobol/.test(e.message),
      );
      await assert.rejects(
        box.createCodeContext({ cwd: 'relative' }),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && /cwd/.test(e.message),
      );
      await assert.rejects(
        box.runCode('1', { timeoutMs: -1 }),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && /timeout/i.test(e.message),
      );
    });
  });
}
