/**
 * The code interpreter over the REST runtime: the shared `CodeBox.runCode` suite (`interpreter-suite.ts`)
 * through `new JsRuntime({ url })` and a `RestServer` started here; the code routes read raw (E2B's
 * `/execute` NDJSON lines, statuses of bad input, a dropped client interrupting the kernel); and the
 * NDJSON encoder and decoder.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type JsBox, JsRuntime } from '../src/index.ts';
// internal: the interpreter event codec is tested as a unit
import { decodeEvent, encodeEvent, resultFromBundle } from '../src/interpreter/events.ts';
// internal: the interpreter's event type (not exported)
import type { ExecutionEvent } from '../src/interpreter/types.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { codeInterpreterSuite } from './interpreter-suite.ts';
import { cleanupAll, ensureRegistry, testRuntime } from './runtime-helpers.ts';

let server: RestServer | null = null;
let local: JsRuntime | null = null;

/** The server (started on first use, on a fresh image store). */
async function restServer(): Promise<RestServer> {
  if (!server) {
    ensureRegistry();
    local = testRuntime();
    server = await startRestServer({ runtime: local, port: 0 });
  }
  return server;
}

describe('E2B /execute NDJSON encoding', () => {
  it('encodes every event type as E2B does and decodes it back', () => {
    const events: ExecutionEvent[] = [
      { type: 'stdout', text: 'hi\n', timestamp: '2026-01-01T00:00:00.000Z' },
      { type: 'stderr', text: 'warn\n', timestamp: '2026-01-01T00:00:00.001Z' },
      {
        type: 'result',
        result: resultFromBundle({ 'text/plain': "'abc'", 'image/png': 'iVBOR', 'x/custom': { a: 1 } }, true),
      },
      { type: 'error', error: { name: 'ValueError', value: 'bad', traceback: 'tb' } },
      { type: 'number_of_executions', executionCount: 3 },
      { type: 'end_of_execution' },
    ];
    const lines = events.map(encodeEvent);
    assert.ok(lines.every((l) => l.endsWith('\n') && !l.slice(0, -1).includes('\n')));
    assert.deepEqual(JSON.parse(lines[2] ?? ''), {
      type: 'result',
      text: 'abc',
      png: 'iVBOR',
      extra: { 'x/custom': { a: 1 } },
      is_main_result: true,
    });
    assert.deepEqual(JSON.parse(lines[3] ?? ''), {
      type: 'error',
      name: 'ValueError',
      value: 'bad',
      traceback: 'tb',
    });
    assert.deepEqual(JSON.parse(lines[4] ?? ''), { type: 'number_of_executions', execution_count: 3 });
    assert.deepEqual(
      lines.map((l) => decodeEvent(l)),
      events,
    );
    assert.equal(decodeEvent('{"type":"keepalive"}'), null);
    assert.throws(() => decodeEvent('{nope'), /not JSON/);
  });
});

codeInterpreterSuite(
  'CodeBox.runCode on the REST runtime',
  async () => new JsRuntime({ url: (await restServer()).url }),
);

describe('code routes read raw', () => {
  let box: JsBox;
  let base: string;

  before(async () => {
    const url = (await restServer()).url;
    box = await (local as JsRuntime).create({ image: 'python:slim', autoRemove: true });
    base = `${url}/v1/boxes/${box.id}/code`;
  });

  after(async () => {
    await box?.stop();
  });

  const post = (path: string, body: unknown) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('POST /execute answers E2B NDJSON: stdout, result, execution count, end', async () => {
    const res = await post('/execute', { code: 'print("hi")\n6 * 7' });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const lines = (await res.text())
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(
      lines.map((l) => l.type),
      ['number_of_executions', 'stdout', 'result', 'end_of_execution'],
    );
    assert.equal(lines[1]?.text, 'hi\n');
    assert.match(String(lines[1]?.timestamp), /^\d{4}-\d\d-\d\dT/);
    assert.deepEqual(lines[2], { type: 'result', text: '42', is_main_result: true });
  });

  it('bad input is a 4xx naming the problem, before any event', async () => {
    const unknown = await post('/execute', { code: '1', context_id: 'no-such-context' });
    assert.equal(unknown.status, 404);
    assert.match(((await unknown.json()) as { error: { message: string } }).error.message, /no-such-context/);
    const noCode = await post('/execute', { language: 'python' });
    assert.equal(noCode.status, 400);
    await noCode.body?.cancel();
    const badLanguage = await post('/contexts', { language: 'cobol' });
    assert.equal(badLanguage.status, 400);
    assert.match(((await badLanguage.json()) as { error: { message: string } }).error.message, /cobol/);
    const restart = await post('/contexts/nope/restart', {});
    assert.equal(restart.status, 404);
    await restart.body?.cancel();
    const otherBox = await fetch(`${base.replace(box.id, 'no-such-box')}/contexts`);
    assert.equal(otherBox.status, 404);
    await otherBox.body?.cancel();
  });

  it('a client that drops the stream interrupts the kernel: the context runs the next code', async () => {
    const ctx = (await (await post('/contexts', {})).json()) as { id: string };
    const aborter = new AbortController();
    const res = await fetch(`${base}/execute`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        code: 'import time\nprint("start", flush=True)\nwhile True:\n    time.sleep(0.05)',
        context_id: ctx.id,
        timeout_ms: 0,
      }),
      signal: aborter.signal,
    });
    const reader = res.body?.getReader();
    let seen = '';
    while (!seen.includes('start')) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      seen += Buffer.from(chunk.value).toString();
    }
    aborter.abort();
    // Without the interrupt the kernel would still be in the endless loop and this would never end.
    const next = await box.interpreter.execute('"after"', { context: ctx.id, timeoutMs: 30_000 });
    assert.equal(next.error, null);
    assert.equal(next.text, 'after');
  });
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
