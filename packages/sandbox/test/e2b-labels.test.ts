/**
 * Box labels (`JsBoxOptions.labels`, issue 29 "one box, two APIs"): a sandbox created with the unmodified
 * `e2b` SDK is a box labelled `e2b.template` and `e2b.metadata.<key>` in `GET /v1/boxes` (filtered with
 * `?label=`), in the REST client's `listInfo` and in `sandbox ps` (LABELS column, `--label` filter); labels
 * given through `POST /v1/boxes` are kept as written (no case conversion), bad ones are 400
 * `invalid_option` naming `labels`; a box handed out by a warm pool carries the create's labels.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Sandbox, type SandboxOpts } from 'e2b';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { cleanupAll, ensureRegistry, seededHome, testRuntime } from './runtime-helpers.ts';

const API_KEY = `e2b_${'1abe1'.repeat(8)}`;
const bin = join(import.meta.dirname, '..', 'bin', 'sandbox.ts');

let home: string;
let server: RestServer;
let opts: SandboxOpts;
let rest: JsRuntime;

before(async () => {
  ensureRegistry();
  home = seededHome('sandbox-e2b-labels-');
  server = await startRestServer({ runtime: testRuntime(home), port: 0, apiKey: API_KEY });
  opts = { apiKey: API_KEY, apiUrl: server.url, sandboxUrl: server.url, requestTimeoutMs: 120_000 };
  rest = new JsRuntime({ url: server.url, apiKey: API_KEY });
});

after(async () => {
  rest?.close();
  await server?.close();
  await cleanupAll();
});

/** A JSON request to the REST API with the key; status and parsed body. */
// biome-ignore lint/suspicious/noExplicitAny: bodies are inspected field by field
async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(server.url + path, {
    method,
    headers: {
      authorization: `Bearer ${API_KEY}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

/**
 * `sandbox <args>` on the server's home directory; status and output. Asynchronous: the server runs in
 * this process and must keep answering (a blocked event loop lets it drop the client's kept-alive sockets).
 */
function sandbox(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, '--home', home, '--registry', 'http://127.0.0.1:5000', ...args],
      { encoding: 'utf8', timeout: 60_000 },
      (error, stdout, stderr) => {
        const status = error ? (typeof error.code === 'number' ? error.code : null) : 0;
        resolve({ status, stdout, stderr });
      },
    );
  });
}

describe('box labels', { timeout: 300_000 }, () => {
  it('labels an E2B sandbox with its template and metadata in /v1/boxes, the REST client and sandbox ps', async () => {
    const sbx = await Sandbox.create('base', {
      ...opts,
      metadata: {
        userId: 'u-42',
        user_id: '42',
        purpose: 'label test',
        'Bad Key!': 'x',
        long: 'v'.repeat(300),
      },
    });
    try {
      const expected = {
        'e2b.template': 'base',
        'e2b.metadata.userid': 'u-42',
        'e2b.metadata.user_id': '42',
        'e2b.metadata.purpose': 'label test',
        'e2b.metadata.bad-key-': 'x',
      };
      const listed = await call('GET', '/v1/boxes');
      assert.equal(listed.status, 200);
      const box = listed.body.find((b: { name?: string }) => b.name === sbx.sandboxId);
      assert.ok(box, `sandbox ${sbx.sandboxId} is a box of GET /v1/boxes`);
      assert.deepEqual(box.labels, expected);
      assert.deepEqual((await call('GET', `/v1/boxes/${box.id}`)).body.labels, expected);
      // The SDK's own view keeps every metadata entry, the over-long one included.
      assert.equal((await sbx.getInfo()).metadata.long, 'v'.repeat(300));

      const ids = async (query: string) =>
        ((await call('GET', `/v1/boxes?${query}`)).body as { id: string }[]).map((b) => b.id);
      assert.deepEqual(await ids('label=e2b.template=base'), [box.id]);
      assert.deepEqual(await ids('label=e2b.template=base&label=e2b.metadata.user_id=42'), [box.id]);
      assert.deepEqual(await ids('label=e2b.metadata.purpose'), [box.id]);
      assert.deepEqual(await ids('label=e2b.metadata.user_id=43'), []);
      assert.deepEqual(await ids('label=e2b.template=code-interpreter-v1'), []);
      const bad = await call('GET', '/v1/boxes?label=Not%20A%20Key');
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error.code, 'invalid_option');
      assert.equal(bad.body.error.field, 'label');

      const viaClient = (await rest.listInfo()).find((info) => info.id === box.id);
      assert.deepEqual(viaClient?.labels, expected);

      const ps = await sandbox(['ps']);
      assert.equal(ps.status, 0, ps.stderr);
      assert.match(ps.stdout.split('\n')[0]!, /\bLABELS$/);
      const line = ps.stdout.split('\n').find((l) => l.startsWith(box.id));
      assert.ok(line, ps.stdout);
      assert.match(line, new RegExp(`\\s${sbx.sandboxId}\\s+running\\s+base:latest\\s`));
      assert.ok(
        line.endsWith(
          'e2b.template=base,e2b.metadata.userid=u-42,e2b.metadata.user_id=42,e2b.metadata.purpose=label test,e2b.metadata.bad-key-=x',
        ),
        line,
      );
      assert.equal((await sandbox(['ps', '-q', '--label', 'e2b.metadata.user_id=42'])).stdout, `${box.id}\n`);
      assert.equal((await sandbox(['ps', '-q', '--label', 'e2b.metadata.user_id=41'])).stdout, '');

      const run = await sandbox(['run', '-l', 'team=cli', '-l', 'tier=a=b', 'busybox:latest']);
      assert.equal(run.status, 0, run.stderr);
      const cliBox = run.stdout.trim();
      try {
        assert.equal((await sandbox(['ps', '-q', '--label', 'team=cli'])).stdout, `${cliBox}\n`);
        assert.deepEqual((await rest.getInfo(cliBox))?.labels, { team: 'cli', tier: 'a=b' });
        const badLabel = await sandbox(['run', '-l', 'Team=cli', 'busybox:latest']);
        assert.notEqual(badLabel.status, 0);
        assert.match(badLabel.stderr, /invalid box option labels: key 'Team'/);
      } finally {
        assert.equal((await sandbox(['rm', '-f', cliBox])).status, 0);
      }
    } finally {
      await sbx.kill();
    }
  });

  it('keeps labels given through POST /v1/boxes as written and refuses bad ones naming labels', async () => {
    for (const [labels, rule] of [
      [{ Upper: 'x' }, /key 'Upper' must be/],
      [{ '-lead': 'x' }, /key '-lead' must be/],
      [{ ok: 'v'.repeat(257) }, /at most 256 characters/],
      [{ ok: 1 }, /must be a string/],
      [Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])), /at most 64 labels/],
      [['a=b'], /must be an object/],
    ] as const) {
      const refused = await call('POST', '/v1/boxes', { image: 'busybox:latest', labels });
      assert.equal(refused.status, 400, JSON.stringify(labels).slice(0, 60));
      assert.equal(refused.body.error.code, 'invalid_option');
      assert.equal(refused.body.error.field, 'labels');
      assert.match(refused.body.error.message, rule);
    }
    assert.deepEqual(
      (await call('GET', '/v1/boxes')).body.filter((b: { image: string }) => b.image === 'busybox:latest'),
      [],
      'a refused create leaves no box',
    );

    const labels = { 'app.kubernetes.io/name': 'web', team_name: 'core', 'x-y': '' };
    const box = await rest.create({ image: 'busybox:latest', labels });
    try {
      assert.deepEqual((await box.info()).labels, labels);
      const wire = await call('GET', `/v1/boxes/${box.id}`);
      assert.deepEqual(wire.body.labels, labels, 'snake_case conversion leaves label keys alone');
      const plain = await rest.create({ image: 'busybox:latest' });
      try {
        assert.equal((await plain.info()).labels, undefined);
        assert.equal((await call('GET', `/v1/boxes/${plain.id}`)).body.labels, undefined);
      } finally {
        await rest.remove(plain.id, true);
      }
    } finally {
      await rest.remove(box.id, true);
    }
  });

  it('gives a box handed out by a warm pool the labels of the create', async () => {
    const pool = rest.pool({ image: 'busybox:latest', size: 1, options: { labels: { from: 'pool' } } });
    try {
      await pool.filled();
      let asked = new Date().toISOString();
      const labelled = await rest.create({ image: 'busybox:latest', labels: { from: 'create' } });
      try {
        const info = await labelled.info();
        assert.ok(info.createdAt < asked, 'the box was made by the pool before the create');
        assert.deepEqual(info.labels, { from: 'create' });
        await pool.filled();
        asked = new Date().toISOString();
        const unlabelled = await rest.create({ image: 'busybox:latest' });
        try {
          const plain = await unlabelled.info();
          assert.ok(plain.createdAt < asked, 'the box was made by the pool before the create');
          assert.equal(plain.labels, undefined);
        } finally {
          await rest.remove(unlabelled.id, true);
        }
      } finally {
        await rest.remove(labelled.id, true);
      }
    } finally {
      await pool.close();
    }
  });
});
