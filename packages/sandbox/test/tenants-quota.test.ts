/**
 * Quotas, admission and rate limits of the shared service: 100 concurrent
 * creates of one tenant at a quota of 10 create exactly 10 (the others 429 `quota_exceeded` naming
 * `running_boxes`), the limits file is re-read when it changes, the node refuses what it cannot hold
 * (503 `capacity` with `Retry-After`, or 400 for more CPUs than it has) for tenants and the operator
 * alike, exec starts are rate limited per tenant (429 with `Retry-After`), `GET /v1/usage` and
 * `runtime.usage()` count what the tenant holds, and the SDK's REST client surfaces 429/503 as
 * `BoxError` codes with the retry hint.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Sandbox } from 'e2b';
import { BoxError, JsRuntime } from '../src/index.ts';
import type { RestServer } from '../src/rest/server.ts';
import { ok, toolError } from './mcp-helpers.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { api, createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

let server: RestServer;
let url: string;
let key: string;
let local: JsRuntime;
const limitsFile = join(mkdtempSync(join(tmpdir(), 'sandbox-limits-')), 'limits.json');

/** Replaces the limits file atomically (the server notices the new file at its next check). */
function writeLimits(doc: unknown): void {
  writeFileSync(`${limitsFile}.tmp`, JSON.stringify(doc));
  renameSync(`${limitsFile}.tmp`, limitsFile);
}

const tenantLimits = {
  running_boxes: 10,
  create_per_minute: null,
  exec_per_second: 2,
  files_per_second: null,
  vcpus: null,
  memory_mib: null,
  disk_gb: null,
};

before(async () => {
  ensureRegistry();
  writeLimits({ defaults: tenantLimits });
  ({ server, url, runtime: local } = await startTenantServer({ limitsFile }));
  key = (await createKey(url, 'quota-tenant')).key;
});

after(async () => {
  await server?.close();
  await cleanupAll();
});

describe('quotas and admission', { timeout: 300_000 }, () => {
  it('100 concurrent creates at a quota of 10 create exactly 10; usage counts them', async () => {
    const answers = await Promise.all(
      Array.from({ length: 100 }, () =>
        api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, memory_mib: 64 }),
      ),
    );
    const created = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status === 429);
    assert.equal(
      created.length,
      10,
      JSON.stringify(answers.find((a) => a.status !== 201 && a.status !== 429)?.body),
    );
    assert.equal(
      refused.length,
      90,
      JSON.stringify(answers.filter((a) => a.status !== 201 && a.status !== 429).map((a) => a.body)),
    );
    for (const answer of refused) {
      assert.equal(answer.body.error.code, 'quota_exceeded');
      assert.equal(answer.body.error.field, 'running_boxes');
    }
    // Nothing overcommitted: the runtime holds exactly the 10.
    const all = await local.listInfo();
    assert.equal(all.filter((i) => i.state.running).length, 10);
    const usage = await api(url, 'GET', '/v1/usage', key);
    assert.equal(usage.status, 200);
    assert.deepEqual(
      { tenant: usage.body.tenant, ...usage.body.usage },
      {
        tenant: 'quota-tenant',
        running_boxes: 10,
        vcpus: 10,
        memory_mib: 640,
        disk_gb: 100,
        snapshot_bytes: 0,
        running_executions: 0,
      },
    );
    assert.equal(usage.body.limits.running_boxes, 10);
    // Prometheus, per tenant (operators only: the figures name tenants).
    const metrics = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${OPERATOR_KEY}` } });
    const text = await metrics.text();
    assert.match(text, /sandbox_tenant_running_boxes\{tenant="quota-tenant"\} 10\n/);
    assert.match(text, /sandbox_tenant_memory_mib\{tenant="quota-tenant"\} 640\n/);
    assert.equal(
      (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${key}` } })).status,
      403,
    );
    // The SDK: runtime.usage(), and 429 as BoxError quota_exceeded naming the quota.
    const sdk = new JsRuntime({ url, apiKey: key });
    assert.equal((await sdk.usage()).usage.runningBoxes, 10);
    await assert.rejects(
      sdk.create({ image: BUSYBOX }),
      (e: unknown) => e instanceof BoxError && e.code === 'quota_exceeded' && e.field === 'running_boxes',
    );
    // Another tenant is not bound by this one's use.
    const other = (await createKey(url, 'other-tenant')).key;
    const box = await api(url, 'POST', '/v1/boxes', other, { image: BUSYBOX, memory_mib: 64 });
    assert.equal(box.status, 201, JSON.stringify(box.body));
  });

  it('the limits file is re-read on change: a raised quota admits the next box', async () => {
    writeLimits({ defaults: { ...tenantLimits, running_boxes: 11 } });
    const answer = await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, memory_mib: 64 });
    assert.equal(answer.status, 201, JSON.stringify(answer.body));
    const again = await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, memory_mib: 64 });
    assert.equal(again.status, 429);
    // An invalid file leaves the last valid limits in force.
    writeFileSync(limitsFile, '{"defaults": {"running_boxes": "many"}}');
    assert.equal((await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, memory_mib: 64 })).status, 429);
    assert.equal((await api(url, 'GET', '/v1/usage', key)).body.limits.running_boxes, 11);
  });

  it('the node refuses what it cannot hold: 503 capacity with Retry-After, 400 beyond its CPUs', async () => {
    const cpus = await api(url, 'POST', '/v1/boxes', OPERATOR_KEY, { image: BUSYBOX, cpus: 64 });
    assert.equal(cpus.status, 400);
    assert.equal(cpus.body.error.field, 'cpus');
    const disk = await api(url, 'POST', '/v1/boxes', OPERATOR_KEY, {
      image: BUSYBOX,
      disk_size_gb: 1_000_000,
    });
    assert.equal(disk.status, 503, JSON.stringify(disk.body));
    assert.equal(disk.body.error.code, 'capacity');
    assert.equal(disk.body.error.field, 'disk');
    assert.equal(disk.headers.get('retry-after'), '5');
    writeLimits({
      defaults: { ...tenantLimits, running_boxes: 100 },
      node: { memory_overcommit: 0.0001, retry_after_s: 7 },
    });
    const before = (await local.listInfo()).length;
    const memory = await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, memory_mib: 64 });
    assert.equal(memory.status, 503, JSON.stringify(memory.body));
    assert.equal(memory.body.error.field, 'memory');
    assert.equal(memory.headers.get('retry-after'), '7');
    const sdk = new JsRuntime({ url, apiKey: key });
    await assert.rejects(
      sdk.create({ image: BUSYBOX }),
      (e: unknown) => e instanceof BoxError && e.code === 'capacity' && e.retryAfterMs === 7000,
    );
    assert.equal((await local.listInfo()).length, before);
    writeLimits({ defaults: { ...tenantLimits, running_boxes: 100 } });
  });

  it("a warm pool's ready boxes count as the tenant's running boxes", async () => {
    writeLimits({
      defaults: { ...tenantLimits, running_boxes: 100 },
      tenants: { 'pool-tenant': { running_boxes: 2 } },
    });
    const poolKey = (await createKey(url, 'pool-tenant')).key;
    const options = { memory_mib: 64 };
    const tooBig = await api(url, 'POST', '/v1/pools', poolKey, { image: BUSYBOX, size: 3, options });
    assert.equal(tooBig.status, 429, JSON.stringify(tooBig.body));
    assert.equal(tooBig.body.error.field, 'running_boxes');
    const pool = await api(url, 'POST', '/v1/pools', poolKey, { image: BUSYBOX, size: 2, options });
    assert.equal(pool.status, 201, JSON.stringify(pool.body));
    assert.equal((await api(url, 'GET', '/v1/usage', poolKey)).body.usage.running_boxes, 2);
    assert.equal(
      (await api(url, 'POST', '/v1/boxes', poolKey, { image: BUSYBOX, memory_mib: 128 })).status,
      429,
    );
    assert.equal((await api(url, 'DELETE', `/v1/pools/${pool.body.id}`, poolKey)).status, 204);
    assert.equal(
      (await api(url, 'POST', '/v1/boxes', poolKey, { image: BUSYBOX, memory_mib: 128 })).status,
      201,
    );
  });

  it('exec starts are rate limited per tenant: 429 with Retry-After naming exec_per_second', async () => {
    const list = await api(url, 'GET', '/v1/boxes', key);
    const box = list.body[0].id;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => api(url, 'POST', `/v1/boxes/${box}/executions`, key, { cmd: 'true' })),
    );
    const limited = answers.filter((a) => a.status === 429);
    assert.ok(
      limited.length >= 1 && answers.some((a) => a.status === 201),
      JSON.stringify(answers.map((a) => a.status)),
    );
    assert.equal(limited[0]!.body.error.field, 'exec_per_second');
    assert.match(limited[0]!.headers.get('retry-after') ?? '', /^\d+$/);
    // The operator is not rate limited.
    const operator = await Promise.all(
      Array.from({ length: 5 }, () =>
        api(url, 'POST', `/v1/boxes/${box}/executions`, OPERATOR_KEY, { cmd: 'true' }),
      ),
    );
    assert.deepEqual(
      operator.map((a) => a.status),
      [201, 201, 201, 201, 201],
    );
  });

  it('running executions are bounded per tenant: 429 naming running_executions, freed when one ends', async () => {
    writeLimits({
      defaults: { ...tenantLimits, running_boxes: 100 },
      tenants: { 'exec-tenant': { running_executions: 2, exec_per_second: null } },
    });
    const execKey = (await createKey(url, 'exec-tenant')).key;
    const made = await api(url, 'POST', '/v1/boxes', execKey, { image: BUSYBOX, memory_mib: 64 });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const box = made.body.id;
    const start = () =>
      api(url, 'POST', `/v1/boxes/${box}/executions`, execKey, { cmd: 'sleep', args: ['600'] });
    const answers = await Promise.all(Array.from({ length: 8 }, start));
    const started = answers.filter((a) => a.status === 201);
    assert.equal(started.length, 2, JSON.stringify(answers.map((a) => a.status)));
    for (const refused of answers.filter((a) => a.status !== 201)) {
      assert.equal(refused.status, 429);
      assert.equal(refused.body.error.code, 'quota_exceeded');
      assert.equal(refused.body.error.field, 'running_executions');
    }
    const usage = await api(url, 'GET', '/v1/usage', execKey);
    assert.equal(usage.body.usage.running_executions, 2);
    assert.equal(usage.body.limits.running_executions, 2);
    // Both sleeps still run: the refusals started nothing.
    const ps = await api(url, 'POST', `/v1/boxes/${box}/executions`, OPERATOR_KEY, { cmd: 'ps' });
    assert.equal(ps.status, 201, 'the operator is not bound by the tenant quota');
    const killed = await api(url, 'POST', `/v1/boxes/${box}/executions/${started[0]!.body.id}/kill`, execKey);
    assert.equal(killed.status, 200);
    let running = 2;
    for (let i = 0; i < 600 && running > 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      running = (await api(url, 'GET', '/v1/usage', execKey)).body.usage.running_executions;
    }
    assert.equal(running, 1, 'the ended command gave its slot back');
    assert.equal((await start()).status, 201);
    assert.equal((await start()).status, 429);
    writeLimits({ defaults: { ...tenantLimits, running_boxes: 100 } });
  });

  it('commands started through MCP at /mcp count against the same running-executions quota', async () => {
    writeLimits({
      defaults: { ...tenantLimits, running_boxes: 100 },
      tenants: { 'mcp-exec-tenant': { running_executions: 1, exec_per_second: null } },
    });
    const mcpKey = (await createKey(url, 'mcp-exec-tenant')).key;
    const transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${mcpKey}` } },
    });
    const client = new Client({ name: 'quota-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const box = (await ok(client, 'create_box', { image: BUSYBOX, memory_mib: 64 })).id;
      const sleeper = await ok(client, 'start_command', { box, cmd: 'sleep', args: ['600'] });
      assert.match(await toolError(client, 'exec', { box, cmd: 'true' }), /running_executions/);
      assert.equal((await api(url, 'GET', '/v1/usage', mcpKey)).body.usage.running_executions, 1);
      await ok(client, 'kill_command', { command_id: sleeper.command_id });
      let running = 1;
      for (let i = 0; i < 600 && running > 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        running = (await api(url, 'GET', '/v1/usage', mcpKey)).body.usage.running_executions;
      }
      assert.equal(running, 0, 'the killed command gave its slot back');
      assert.equal(
        (await ok(client, 'exec', { box, cmd: 'echo', args: ['again'] })).stdout.text.trim(),
        'again',
      );
    } finally {
      await client.close();
      writeLimits({ defaults: { ...tenantLimits, running_boxes: 100 } });
    }
  });

  it('commands started through the E2B API count against the same running-executions quota', async () => {
    writeLimits({
      defaults: { ...tenantLimits, running_boxes: 100 },
      tenants: { 'e2b-exec-tenant': { running_executions: 1, exec_per_second: null } },
    });
    const e2bKey = (await createKey(url, 'e2b-exec-tenant')).key;
    const sbx = await Sandbox.create('base', { apiKey: e2bKey, apiUrl: url, sandboxUrl: url });
    try {
      const sleeper = await sbx.commands.run('sleep 600', { background: true });
      await assert.rejects(sbx.commands.run('true'), /running_executions/);
      const usage = await api(url, 'GET', '/v1/usage', e2bKey);
      assert.equal(usage.body.usage.running_executions, 1);
      await sleeper.kill();
      let running = 1;
      for (let i = 0; i < 600 && running > 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 25));
        running = (await api(url, 'GET', '/v1/usage', e2bKey)).body.usage.running_executions;
      }
      assert.equal(running, 0, 'the killed command gave its slot back');
      assert.equal((await sbx.commands.run('echo again')).stdout.trim(), 'again');
    } finally {
      await sbx.kill();
      writeLimits({ defaults: { ...tenantLimits, running_boxes: 100 } });
    }
  });
});
