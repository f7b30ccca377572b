/**
 * The unmodified `@e2b/code-interpreter` SDK against `sandbox serve` (issue 29 "Stateful code
 * interpreter"): port 49999 of a `code-interpreter-v1` sandbox is served from the host over the box's
 * Jupyter kernels — contexts created, listed and removed; unknown contexts and bad bodies refused.
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
      sbx.runCode('1', { context: { id: 'no-such-context', language: 'python', cwd: '/' } }),
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
