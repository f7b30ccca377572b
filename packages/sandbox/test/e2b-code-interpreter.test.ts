/**
 * The unmodified `@e2b/code-interpreter` SDK against `sandbox serve`: port 49999 of a
 * `code-interpreter-v1` sandbox is served from the host over the box's Jupyter kernels — the default
 * context starts with the sandbox; `runCode` keeps
 * state between calls, streams stdout/stderr to the callbacks, reports errors with their traceback and
 * matplotlib figures as PNG results; contexts are created, listed, keep their own state and are removed;
 * unknown contexts and bad bodies are refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NotFoundError, Sandbox } from '@e2b/code-interpreter';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { cleanupAll, ensureRegistry, testRuntime } from './runtime-helpers.ts';

const API_KEY = `e2b_${'c0de'.repeat(10)}`;
let server: RestServer;
let sbx: Sandbox;

before(async () => {
  ensureRegistry();
  server = await startRestServer({ runtime: testRuntime(), port: 0, apiKey: API_KEY });
  sbx = await Sandbox.create('code-interpreter-v1', {
    apiKey: API_KEY,
    apiUrl: server.url,
    sandboxUrl: server.url,
    requestTimeoutMs: 180_000,
  });
});

after(async () => {
  await sbx?.kill().catch(() => {});
  await server?.close();
  await cleanupAll();
});

describe('@e2b/code-interpreter against sandbox serve', { timeout: 600_000 }, () => {
  it('starts the default Python context with the sandbox, before any runCode', async () => {
    let contexts = await sbx.listCodeContexts();
    for (let i = 0; i < 1200 && contexts.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      contexts = await sbx.listCodeContexts();
    }
    assert.deepEqual(
      contexts.map((c) => [c.language, c.cwd]),
      [['python', '/home/user']],
    );
  });

  it('runCode keeps state between calls in the default context', async () => {
    const first = await sbx.runCode('x = 1', { timeoutMs: 180_000 });
    assert.equal(first.error, undefined);
    assert.equal(first.executionCount, 1, 'starting the context counted no execution');
    const second = await sbx.runCode('x += 1; x');
    assert.equal(second.error, undefined);
    assert.equal(second.text, '2');
    assert.equal(second.results.length, 1);
    assert.equal(second.results[0]?.isMainResult, true);
    assert.ok((second.executionCount ?? 0) > (first.executionCount ?? 0));
  });

  it('streams stdout and stderr to the callbacks, in order, and keeps them in the logs', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const execution = await sbx.runCode(
      'import sys\nfor i in range(3):\n    print("out", i, flush=True)\nprint("oops", file=sys.stderr, flush=True)',
      { onStdout: (m) => void out.push(m.line), onStderr: (m) => void err.push(m.line) },
    );
    assert.equal(out.join(''), 'out 0\nout 1\nout 2\n');
    assert.equal(err.join(''), 'oops\n');
    assert.deepEqual(execution.logs.stdout, out);
    assert.deepEqual(execution.logs.stderr, err);
  });

  it('reports an exception with its name, value and traceback; the kernel lives on', async () => {
    const errors: string[] = [];
    const execution = await sbx.runCode('y = 5\nraise ValueError("bad value " + str(y))', {
      onError: (e) => void errors.push(e.name),
    });
    assert.equal(execution.error?.name, 'ValueError');
    assert.equal(execution.error?.value, 'bad value 5');
    assert.match(execution.error?.traceback ?? '', /ValueError/);
    assert.deepEqual(errors, ['ValueError']);
    assert.equal((await sbx.runCode('y * 2')).text, '10');
  });

  it('returns a matplotlib figure as a PNG result', async () => {
    const execution = await sbx.runCode(
      'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
    );
    assert.equal(execution.error, undefined);
    const png = execution.results.find((r) => r.png !== undefined)?.png;
    assert.ok(png, `no PNG among ${JSON.stringify(execution.results.map((r) => r.formats()))}`);
    const bytes = Buffer.from(png, 'base64');
    assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.ok(bytes.length > 1000);
  });

  it('runs code in a second context with its own state and working directory', async () => {
    const context = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
    try {
      await sbx.runCode('x = 100', { context });
      assert.equal((await sbx.runCode('x', { context })).text, '100');
      assert.equal((await sbx.runCode('import os; os.getcwd()', { context })).text, '/tmp');
      // The default context still has its own x (2, from the first test).
      assert.equal((await sbx.runCode('x')).text, '2');
      const missing = await sbx.runCode('y', { context });
      assert.equal(missing.error?.name, 'NameError');
    } finally {
      await sbx.removeCodeContext(context);
    }
  });

  it('creates a context (a kernel in the box), lists it and removes it', async () => {
    const context = await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
    assert.equal(context.language, 'python');
    assert.equal(context.cwd, '/tmp');
    assert.ok((await sbx.listCodeContexts()).some((c) => c.id === context.id));
    await sbx.removeCodeContext(context);
    assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === context.id));
  });

  it('answers an unknown context with 404 and a bad body with 400', async () => {
    await assert.rejects(sbx.removeCodeContext('no-such-context'), NotFoundError);
    await assert.rejects(
      // The SDK leaves its request timer running when the answer is an error: keep it short.
      sbx.runCode('1', {
        context: { id: 'no-such-context', language: 'python', cwd: '/' },
        requestTimeoutMs: 5000,
      }),
      NotFoundError,
    );
    const headers = {
      'e2b-sandbox-id': sbx.sandboxId,
      'e2b-sandbox-port': '49999',
      'content-type': 'application/json',
    };
    const bad = await fetch(`${server.url}/execute`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ code: 1 }),
    });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { message: string }).message, /code/);
  });
});
