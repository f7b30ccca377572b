/**
 * `GET /metrics` of the REST runtime server (`src/rest/metrics.ts`): a real server over a real local
 * runtime (busybox from the local registry); scrapes before and after creating a box and running
 * commands show the counts moving, and every line of the exposition follows the Prometheus text
 * format (version 0.0.4): `# HELP`/`# TYPE` before each family's samples, one sample per line.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { JsRuntime } from '../src/index.ts';
import { RestServer, startRestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

const API_KEY = 'metrics-key-0123456789abcdef';
const SAMPLE =
  /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*)\})? (\S+)$/;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/**
 * The samples of a text exposition; fails the test on a line that is neither a comment nor a sample, a
 * sample whose family has no `# TYPE` before it, or a value that is not a number.
 */
function parseExposition(text: string): Sample[] {
  const typed = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      if (meta[1] === 'TYPE') {
        assert.match(meta[3]!, /^(counter|gauge|histogram|summary|untyped)$/, line);
        typed.set(meta[2]!, meta[3]!);
      }
      continue;
    }
    const match = SAMPLE.exec(line);
    assert.ok(match, `not an exposition line: ${line}`);
    const name = match[1]!;
    const family = name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(typed.has(name) || typed.has(family), `no # TYPE before ${name}`);
    const value = Number(match[3] === '+Inf' ? Number.POSITIVE_INFINITY : match[3]);
    assert.ok(!Number.isNaN(value) || match[3] === 'NaN', `bad value in ${line}`);
    const labels = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [
        m[1]!,
        m[2]!,
      ]),
    );
    samples.push({ name, labels, value });
  }
  return samples;
}

/** The value of `name{labels…}` (labels given must match; others are ignored), or 0 when absent. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return found.reduce((sum, s) => sum + s.value, 0);
}

describe('sandbox serve: GET /metrics', () => {
  let local: JsRuntime;
  let server: RestServer;
  const auth = { authorization: `Bearer ${API_KEY}` };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(server.url + path, {
      method,
      headers: body === undefined ? auth : { ...auth, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const scrape = async () => {
    const res = await fetch(`${server.url}/metrics`, { headers: auth });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return parseExposition(await res.text());
  };
  const exited = async (box: string, id: string) => {
    for (;;) {
      const status = await call('GET', `/v1/boxes/${box}/executions/${id}`);
      if (status.body.status === 'exited') return status.body.exit_code;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };

  before(async () => {
    ensureRegistry();
    local = testRuntime(tempHome('sandbox-metrics-'));
    server = await startRestServer({ runtime: local, port: 0, apiKey: API_KEY });
  });
  after(async () => {
    await server.close();
    await cleanupAll();
  });

  it('needs the API key like /v1/metrics', async () => {
    const res = await fetch(`${server.url}/metrics`);
    assert.equal(res.status, 401);
  });

  it('counts boxes, executions by outcome, and requests by route template and status', async () => {
    const before = await scrape();
    assert.equal(value(before, 'sandbox_boxes_running'), 0);
    assert.equal(value(before, 'sandbox_boxes_created_total'), 0);
    assert.ok(value(before, 'sandbox_process_resident_memory_bytes') > 0);

    const created = await call('POST', '/v1/boxes', { image: BUSYBOX, name: 'metrics-box' });
    assert.equal(created.status, 201);
    const box = created.body.id as string;
    const ok = await call('POST', `/v1/boxes/${box}/executions`, { cmd: 'true' });
    const fail = await call('POST', `/v1/boxes/${box}/executions`, { cmd: 'sh', args: ['-c', 'exit 3'] });
    assert.equal(await exited(box, ok.body.id as string), 0);
    assert.equal(await exited(box, fail.body.id as string), 3);
    const missing = await call('POST', '/v1/boxes/no-such-box/executions', { cmd: 'true' });
    assert.equal(missing.status, 404);

    const after = await scrape();
    assert.equal(value(after, 'sandbox_boxes_running'), 1);
    assert.equal(value(after, 'sandbox_boxes_created_total'), 1);
    assert.equal(value(after, 'sandbox_boxes_failed_total'), 0);
    assert.equal(value(after, 'sandbox_executions_started_total'), 2);
    assert.equal(value(after, 'sandbox_executions_finished_total', { outcome: 'exit_zero' }), 1);
    assert.equal(value(after, 'sandbox_executions_finished_total', { outcome: 'exit_nonzero' }), 1);
    assert.equal(value(after, 'sandbox_executions_running'), 0);
    assert.ok(value(after, 'sandbox_commands_executed_total') >= 2);
    assert.equal(value(after, 'sandbox_exec_errors_total'), 1);
    const route = '/v1/boxes/:box/executions';
    assert.equal(value(after, 'sandbox_http_requests_total', { route, method: 'POST', status: '201' }), 2);
    assert.equal(value(after, 'sandbox_http_requests_total', { route, method: 'POST', status: '404' }), 1);
    assert.equal(
      value(after, 'sandbox_http_requests_total', { route: '/v1/boxes', method: 'POST', status: '201' }),
      1,
    );
    assert.equal(value(after, 'sandbox_http_request_duration_seconds_count', { route, method: 'POST' }), 3);
    // No label carries a box id, a name or the key.
    const labelValues = after.flatMap((s) => Object.values(s.labels)).join(' ');
    assert.doesNotMatch(labelValues, new RegExp(`${box}|metrics-box|no-such-box|${API_KEY}`));

    assert.equal((await call('POST', `/v1/boxes/${box}/stop`)).status, 200);
    assert.equal(value(await scrape(), 'sandbox_boxes_running'), 0);
  });

  it('is off with metrics: false', async () => {
    const quiet = new RestServer({ runtime: local, port: 0, metrics: false });
    await quiet.listen();
    try {
      assert.equal((await fetch(`${quiet.url}/metrics`)).status, 404);
    } finally {
      await quiet.close();
    }
  });
});
