/**
 * Tenants cannot see each other: a suite GENERATED from the server's
 * OpenAPI document drives tenant B through every operation against tenant A's resources — a new route
 * is swept automatically, and a route with a path parameter this suite does not know fails it — and
 * asserts 404 (never 403, existence is not disclosed), operator-only routes 403, lists without A's
 * resources; then that A's box, file, volume, pool, execution and tunnel are untouched. The WebSocket
 * exec streams and CONNECT tunnels are driven by hand (OpenAPI has no such operations), and their
 * refusals are audited (tenant, resources named, status and code; `-` for a refused credential). Also: names are
 * unique per tenant, the operator sees every tenant, a tenant cannot mount another's volume by name.
 */
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import type { RestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { api, createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

let server: RestServer;
let url: string;
let keyA: string;
let keyB: string;
/** Tenant A's resources, by the path parameter that names them. */
const own: Record<string, string> = {};
let boxA = '';
let tunnelA = '';

before(async () => {
  ensureRegistry();
  ({ server, url } = await startTenantServer());
  keyA = (await createKey(url, 'tenant-a')).key;
  keyB = (await createKey(url, 'tenant-b')).key;
  const box = await api(url, 'POST', '/v1/boxes', keyA, {
    image: BUSYBOX,
    name: 'shared-name',
    volumes: [{ managed_volume: 'data', guest_path: '/data' }],
  });
  assert.equal(box.status, 201, JSON.stringify(box.body));
  boxA = box.body.id;
  assert.equal(box.body.name, 'shared-name');
  const put = await api(
    url,
    'PUT',
    `/v1/boxes/${boxA}/files/content?path=/data/secret.txt`,
    keyA,
    Buffer.from('A only'),
  );
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const volumes = await api(url, 'GET', '/v1/volumes', keyA);
  assert.equal(volumes.body.length, 1);
  assert.equal(volumes.body[0].name, 'data');
  const exec = await api(url, 'POST', `/v1/boxes/${boxA}/executions`, keyA, { cmd: 'sleep', args: ['600'] });
  assert.equal(exec.status, 201, JSON.stringify(exec.body));
  const pool = await api(url, 'POST', '/v1/pools', keyA, { image: BUSYBOX, size: 1 });
  assert.equal(pool.status, 201, JSON.stringify(pool.body));
  const preview = await api(url, 'POST', `/v1/boxes/${boxA}/previews`, keyA, { port: 8080 });
  assert.equal(preview.status, 201, JSON.stringify(preview.body));
  const tunnel = await api(url, 'POST', `/v1/boxes/${boxA}/tunnels`, keyA, { port: 8080 });
  assert.equal(tunnel.status, 201, JSON.stringify(tunnel.body));
  tunnelA = tunnel.body.id;
  Object.assign(own, {
    box: boxA,
    execution: exec.body.id,
    volume: volumes.body[0].id,
    pool: pool.body.id,
    preview: preview.body.id,
    name: 'snap-a',
    key: 'unused',
    // A's box holds them: the box lookup answers first.
    context: 'a-context',
    sandboxID: boxA,
    sandboxId: boxA,
    id: tunnelA,
  });
});

after(async () => {
  await server?.close();
  await cleanupAll();
});

/** Values of query parameters and body fields a valid request needs, by name. */
const VALUES: Record<string, unknown> = {
  path: '/data/secret.txt',
  reference: BUSYBOX,
  cmd: 'true',
  port: 8080,
  signal: 'SIGTERM',
  cols: 80,
  rows: 24,
  from: '/data/secret.txt',
  to: '/data/moved.txt',
  target: '/data/secret.txt',
  timeout_ms: 60_000,
  tenant: 'tenant-b',
  image: BUSYBOX,
  size: 1,
  code: 'print(1)',
  allow_net: ['example.com'],
};

// biome-ignore lint/suspicious/noExplicitAny: OpenAPI operation objects are read field by field
type Operation = any;

/** A minimal valid JSON body of `schema` (its required fields), resolving `$ref`s against the document. */
// biome-ignore lint/suspicious/noExplicitAny: schemas are plain JSON
function sample(schema: any, doc: any): unknown {
  if (schema?.$ref)
    return sample(
      doc.components.schemas[schema.$ref.replace(/^#\/components\/schemas\//, '').replace(/#$/, '')],
      doc,
    );
  if (schema?.type === 'object' || schema?.properties) {
    const out: Record<string, unknown> = {};
    for (const field of schema.required ?? []) {
      assert.ok(
        field in VALUES,
        `the generated suite has no value for body field '${field}': add one to VALUES`,
      );
      out[field] = VALUES[field];
    }
    return out;
  }
  return {};
}

describe('two tenants through every route of the OpenAPI document', { timeout: 300_000 }, () => {
  it("B gets 404 for each of A's resources, 403 on operator routes, lists without A; A untouched", async () => {
    const doc = (await api(url, 'GET', '/v1/openapi.json', null)).body;
    const swept: string[] = [];
    for (const [template, item] of Object.entries(doc.paths as Record<string, Record<string, Operation>>)) {
      for (const [method, operation] of Object.entries(item)) {
        if (!['get', 'post', 'put', 'delete', 'patch'].includes(method)) continue;
        const label = `${method.toUpperCase()} ${template}`;
        const params = [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
        for (const param of params)
          assert.ok(
            param in own,
            `${label}: unknown path parameter '${param}': teach the suite whose resource it names`,
          );
        const path = template.replace(/\{([^}]+)\}/g, (_, p: string) => encodeURIComponent(own[p]!));
        const query = new URLSearchParams();
        for (const parameter of operation.parameters ?? []) {
          if (parameter.in === 'query' && parameter.required)
            query.set(parameter.name, String(VALUES[parameter.name] ?? '1'));
        }
        const content = operation.requestBody?.content ?? {};
        let body: unknown;
        if (content['application/json']) body = sample(content['application/json'].schema, doc);
        else if (Object.keys(content).length > 0) body = Buffer.from('bytes');
        const target = query.size > 0 ? `${path}?${query}` : path;
        const scopes: string[] = (operation.security ?? []).flatMap((s: Record<string, string[]>) =>
          Object.values(s).flat(),
        );
        if (scopes.length === 0) continue; // public: the document itself
        swept.push(label);
        if (scopes.includes('sandbox.operator')) {
          const answer = await api(url, method.toUpperCase(), target, keyB, body);
          assert.equal(answer.status, 403, `${label} as tenant B: ${JSON.stringify(answer.body)}`);
          continue;
        }
        if (params.length > 0) {
          const answer = await api(url, method.toUpperCase(), target, keyB, body);
          assert.equal(
            answer.status,
            404,
            `${label} as tenant B on A's resource: ${answer.status} ${JSON.stringify(answer.body)}`,
          );
          continue;
        }
        if (method === 'get') {
          const answer = await api(url, 'GET', target, keyB);
          if (answer.status === 426) continue; // the WebSocket stream without an upgrade (driven below)
          // Protocol endpoints outside /v1 (e.g. MCP without a session) may refuse a bare GET: never a 5xx.
          if (template.startsWith('/v1/')) {
            assert.equal(answer.status, 200, `${label} as tenant B: ${JSON.stringify(answer.body)}`);
          } else assert.ok(answer.status < 500, `${label} as tenant B: ${answer.status}`);
          if (template === '/v1/audit') {
            // B's own entries (they name the ids B tried), never A's.
            assert.ok(answer.body.length > 0);
            for (const entry of answer.body) assert.equal(entry.tenant, 'tenant-b');
            continue;
          }
          const text = JSON.stringify(answer.body);
          for (const [kind, id] of Object.entries(own)) {
            if (['box', 'volume', 'pool', 'execution', 'preview'].includes(kind))
              assert.ok(!text.includes(id), `${label} shows A's ${kind} to B`);
          }
          assert.ok(!text.includes('tenant-a'), `${label} names tenant A to B`);
        }
        // Creations without a path parameter make B's own resources (names per tenant: below).
      }
    }
    assert.ok(swept.length >= 40, `only ${swept.length} operations swept`);

    // A's resources are untouched.
    const box = await api(url, 'GET', `/v1/boxes/${boxA}`, keyA);
    assert.equal(box.status, 200);
    assert.equal(box.body.state.running, true);
    const file = await api(url, 'GET', `/v1/boxes/${boxA}/files/content?path=/data/secret.txt`, keyA);
    assert.equal(file.body, 'A only');
    const exec = await api(url, 'GET', `/v1/boxes/${boxA}/executions/${own.execution}`, keyA);
    assert.equal(exec.body.status, 'running');
    assert.equal((await api(url, 'GET', `/v1/pools/${own.pool}`, keyA)).status, 200);
    assert.equal((await api(url, 'GET', `/v1/volumes/${own.volume}`, keyA)).status, 200);
    assert.equal((await api(url, 'GET', `/v1/boxes/${boxA}/previews`, keyA)).body.length, 1);
  });

  it("WebSocket exec streams and CONNECT tunnels: 404 for B, A's tunnel still prepared", async () => {
    const ws = url.replace(/^http/, 'ws');
    const status = (path: string) =>
      new Promise<number>((resolve, reject) => {
        const socket = new WebSocket(ws + path, { headers: { authorization: `Bearer ${keyB}` } });
        socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        socket.once('open', () => {
          socket.close();
          resolve(101);
        });
        socket.once('error', reject);
      });
    assert.equal(await status(`/v1/boxes/${boxA}/executions/${own.execution}/attach`), 404);
    assert.equal(await status(`/v1/boxes/${boxA}/executions/attach`), 404);
    assert.equal(await status('/v1/boxes/shared-name/executions/attach'), 404);
    // The multiplexed stream: a start in A's box is answered 404 on the stream.
    const mux = new WebSocket(`${ws}/v1/executions/stream`, { headers: { authorization: `Bearer ${keyB}` } });
    await new Promise((resolve, reject) => {
      mux.once('open', resolve);
      mux.once('error', reject);
    });
    const answer = new Promise<{ type: string; status: number }>((resolve) =>
      mux.on('message', (data, binary) => {
        if (!binary) resolve(JSON.parse(data.toString()));
      }),
    );
    mux.send(JSON.stringify({ type: 'start', stream: 1, box: boxA, cmd: 'true' }));
    const frame = await answer;
    assert.equal(frame.type, 'error');
    assert.equal(frame.status, 404);
    mux.close();
    const connect = (key: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(`${url}/v1/tunnels/${tunnelA}`, {
          method: 'CONNECT',
          headers: { authorization: `Bearer ${key}` },
        });
        req.once('connect', (res, socket) => {
          socket.destroy();
          resolve(res.statusCode ?? 0);
        });
        req.once('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.once('error', reject);
        req.end();
      });
    assert.equal(await connect(keyB), 404);
    // Still A's: the one-shot tunnel was not consumed by B (nothing listens on 8080: the box side fails).
    assert.equal(await connect(keyA), 502);
    // A refused credential on an upgrade.
    const refused = await new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(`${ws}/v1/executions/stream`, {
        headers: { authorization: 'Bearer e2b_0000000000000000000000000000000000000000' },
      });
      socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      socket.once('error', reject);
    });
    assert.equal(refused, 401);

    // Each refusal is audited like an HTTP route: who, what it named, the outcome.
    const entries = (await api(url, 'GET', '/v1/audit', OPERATOR_KEY)).body as Record<string, unknown>[];
    const has = (expected: Record<string, unknown>) =>
      assert.ok(
        entries.some((e) =>
          Object.entries(expected).every(([k, v]) => JSON.stringify(e[k]) === JSON.stringify(v)),
        ),
        `audited: ${JSON.stringify(expected)}`,
      );
    has({
      tenant: 'tenant-b',
      method: 'GET',
      route: '/v1/boxes/:box/executions/:execution/attach',
      resource: { box: boxA, execution: own.execution },
      status: 404,
      error: 'not_found',
    });
    has({
      tenant: 'tenant-b',
      route: '/v1/boxes/:box/executions/attach',
      resource: { box: 'shared-name' },
      status: 404,
      error: 'not_found',
    });
    has({
      tenant: 'tenant-b',
      method: 'CONNECT',
      route: '/v1/tunnels/:id',
      resource: { tunnel: tunnelA },
      status: 404,
      error: 'tunnel_not_found',
    });
    has({
      tenant: 'tenant-a',
      method: 'CONNECT',
      route: '/v1/tunnels/:id',
      resource: { box: boxA, tunnel: tunnelA },
      status: 502,
      error: 'tunnel_failed',
    });
    has({ tenant: '-', route: '/v1/executions/stream', status: 401, error: 'invalid_credentials' });
    // No refused request is recorded as accepted.
    assert.ok(
      !entries.some(
        (e) => e.tenant === 'tenant-b' && (e.status === 101 || e.status === 200) && e.method === 'CONNECT',
      ),
    );
  });

  it('the E2B control routes (every registered route outside /v1 naming a sandbox): 404 for B, A untouched', async () => {
    const created = await api(url, 'POST', '/sandboxes', null, { templateID: 'base' }, { 'x-api-key': keyA });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id: string = created.body.sandboxID;
    const swept = new Set<string>();
    for (const route of server.routes) {
      const label = `${route.method} ${route.url}`;
      if (
        route.url.startsWith('/v1') ||
        route.method === 'HEAD' ||
        !route.url.includes(':') ||
        swept.has(label)
      )
        continue;
      swept.add(label);
      const params = [...route.url.matchAll(/:([A-Za-z]+)/g)].map((m) => m[1]!);
      assert.deepEqual(params, ['id'], `${label}: teach the suite what its path parameters name`);
      const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : { timeout: 60 };
      const answer = await api(url, route.method, route.url.replace(':id', id), null, body, {
        'x-api-key': keyB,
      });
      assert.equal(answer.status, 404, `${label} as tenant B: ${JSON.stringify(answer.body)}`);
    }
    assert.ok(swept.size >= 8, `only ${swept.size} E2B routes swept`);
    const listB = await api(url, 'GET', '/sandboxes', null, undefined, { 'x-api-key': keyB });
    assert.ok(!JSON.stringify(listB.body).includes(id));
    const mine = await api(url, 'GET', `/sandboxes/${id}`, null, undefined, { 'x-api-key': keyA });
    assert.equal(mine.status, 200);
    assert.equal(mine.body.state, 'running');
  });

  it("names per tenant, volumes by name stay the tenant's, the operator sees all, ids are ULIDs", async () => {
    const b = await api(url, 'POST', '/v1/boxes', keyB, {
      image: BUSYBOX,
      name: 'shared-name',
      volumes: [{ managed_volume: 'data', guest_path: '/data' }],
    });
    assert.equal(b.status, 201, JSON.stringify(b.body));
    assert.match(b.body.id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.notEqual(b.body.id, boxA);
    // B's `data` is B's own volume: A's file is not there.
    const read = await api(url, 'GET', `/v1/boxes/shared-name/files/content?path=/data/secret.txt`, keyB);
    assert.equal(read.status, 404, JSON.stringify(read.body));
    const again = await api(url, 'POST', '/v1/boxes', keyB, { image: BUSYBOX, name: 'shared-name' });
    assert.equal(again.status, 409);
    const listB = await api(url, 'GET', '/v1/boxes', keyB);
    assert.deepEqual(
      listB.body.map((i: { id: string }) => i.id),
      [b.body.id],
    );
    const all = await api(url, 'GET', '/v1/boxes', OPERATOR_KEY);
    const ids = all.body.map((i: { id: string }) => i.id);
    assert.ok(ids.includes(boxA) && ids.includes(b.body.id));
    assert.equal((await api(url, 'GET', `/v1/boxes/${boxA}`, OPERATOR_KEY)).status, 200);
    const volumesB = await api(url, 'GET', '/v1/volumes', keyB);
    assert.equal(volumesB.body.length, 1);
    assert.notEqual(volumesB.body[0].id, own.volume);
    assert.equal((await api(url, 'DELETE', `/v1/boxes/shared-name?force=true`, keyB)).status, 204);
    assert.equal((await api(url, 'GET', `/v1/boxes/shared-name`, keyA)).body.id, boxA);
  });
});
