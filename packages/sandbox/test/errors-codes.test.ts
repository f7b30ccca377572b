/**
 * The error codes table (`ERROR_CODES` in `src/errors.ts`): every code is in the README "Errors" table
 * with the status the server answers it with; the server answers an error of each code with that status,
 * type and code, and the REST client rebuilds the code's `BoxError.code`; the OpenAPI `Error` schema
 * enumerates exactly the table's codes; and real routes of a running server answer each code they can emit
 * (the ones that need a running command or a box port are driven here too; the rest name the test file that
 * drives them). That no route emits a code outside the table is the type checker's job: `HttpError` takes
 * only an `ErrorCode`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { WebSocket } from 'ws';
// internal: the full wire-code table (public and REST-only codes) is checked
import { ERROR_CODES, type ErrorCode, isErrorCode } from '../src/errors.ts';
import { BOX_ERROR_CODES } from '../src/index.ts';
// internal: the REST error hooks are tested on a bare Fastify app
import { Authenticator } from '../src/rest/auth.ts';
// internal: the REST error hooks are tested on a bare Fastify app
import { installHooks } from '../src/rest/hooks.ts';
import type { RestServer } from '../src/rest/server.ts';
// internal: the REST error mapping is tested as a unit
import { boxErrorOf, HttpError } from '../src/rest/wire.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { type Answer, api, createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

const root = join(import.meta.dirname, '..');
const CODES = Object.keys(ERROR_CODES) as ErrorCode[];

/** `code → status` from the rows of a Markdown table whose first cell lists codes in backticks. */
function documentedStatuses(markdown: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of markdown.split('\n')) {
    const cells = line
      .replace(/^\s*\*?\s*/, '')
      .split('|')
      .map((c) => c.trim());
    if (cells.length < 4) continue;
    const codes = [...cells[1]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).filter(isErrorCode);
    const statuses = [...cells.at(-2)!.matchAll(/\b(\d{3})\b/g)].map((m) => Number(m[1]));
    if (codes.length === 0 || statuses.length === 0) continue;
    // One status for all codes of the row, or one each, in order.
    for (const [i, code] of codes.entries()) {
      out.set(code, statuses.length === codes.length ? statuses[i]! : statuses[0]!);
    }
  }
  return out;
}

describe('error codes table', () => {
  it('every code is in README "Errors" with the status of ERROR_CODES', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const errorsSection = readme.slice(
      readme.indexOf('\n## Errors'),
      readme.indexOf('\n## ', readme.indexOf('\n## Errors') + 1),
    );
    const table = documentedStatuses(errorsSection);
    assert.deepEqual([...table.keys()].sort(), [...CODES].sort(), 'README Errors lists every code once');
    for (const code of CODES) assert.equal(table.get(code), ERROR_CODES[code].status, `status of ${code}`);
  });

  it('each BoxError code is its own SDK code; every other code maps to a BoxError code', () => {
    for (const code of BOX_ERROR_CODES) assert.equal(ERROR_CODES[code].sdk, code);
    for (const code of CODES) {
      assert.ok((BOX_ERROR_CODES as readonly string[]).includes(ERROR_CODES[code].sdk), code);
    }
  });
});

describe('each code over HTTP', () => {
  let app: FastifyInstance;
  let base: string;

  before(async () => {
    app = Fastify();
    installHooks(app, new Authenticator({}));
    app.get<{ Params: { code: string } }>('/throw/:code', async (request) => {
      throw new HttpError(request.params.code as ErrorCode, `failing with ${request.params.code}`);
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });

  after(() => app.close());

  for (const code of CODES) {
    const { status, type, sdk } = ERROR_CODES[code];
    it(`${code} → ${status} ${type}, and ${sdk} in the client`, async () => {
      const answer = await fetch(`${base}/throw/${code}`);
      assert.equal(answer.status, status);
      const body = (await answer.json()) as { error: { code: string; type: string; message: string } };
      assert.equal(body.error.code, code);
      assert.equal(body.error.type, type);
      const rebuilt = boxErrorOf(answer.status, body, 'test');
      assert.equal(rebuilt.code, sdk);
      assert.equal(rebuilt.message, `failing with ${code}`);
    });
  }
});

describe('real routes', () => {
  let server: RestServer;
  let url: string;
  let key: string;
  let readOnly: string;
  /** Codes answered by the routes below. */
  const seen = new Set<string>();

  before(async () => {
    ensureRegistry();
    ({ server, url } = await startTenantServer({ jwt: { jwksUrl: 'http://127.0.0.1:9/jwks.json' } }));
    key = (await createKey(url, 'codes')).key;
    readOnly = (await createKey(url, 'codes', { permissions: ['sandbox.boxes.read'] })).key;
  });

  after(async () => {
    await server?.close();
    await cleanupAll();
  });

  function expect(answer: Answer, code: ErrorCode, what: string): void {
    assert.equal(answer.body?.error?.code, code, `${what}: ${JSON.stringify(answer.body)}`);
    assert.equal(answer.status, ERROR_CODES[code].status, what);
    seen.add(code);
  }

  /** Status and body of a raw-socket answer (CONNECT or a refused upgrade). */
  function connect(path: string, credential: string): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${url}${path}`, {
        method: 'CONNECT',
        headers: { authorization: `Bearer ${credential}` },
      });
      const read = (status: number, stream: NodeJS.ReadableStream) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({ status, headers: new Headers(), body: text ? JSON.parse(text) : null });
        });
      };
      // Node answers any status of a CONNECT with 'connect'; the error body follows on the socket.
      req.once('connect', (res, socket, head) => {
        const chunks: Buffer[] = [head];
        if (res.statusCode === 200) {
          socket.destroy();
          resolve({ status: 200, headers: new Headers(), body: null });
          return;
        }
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('end', () => {
          const text = Buffer.concat(chunks).toString();
          resolve({
            status: res.statusCode ?? 0,
            headers: new Headers(),
            body: text ? JSON.parse(text) : null,
          });
        });
      });
      req.once('response', (res) => read(res.statusCode ?? 0, res));
      req.once('error', reject);
      req.end();
    });
  }

  it('answer the request and credential codes', async () => {
    expect(await api(url, 'GET', '/v1/no-such-route', key), 'route_not_found', 'unknown route');
    expect(await api(url, 'GET', '/v1/boxes', null), 'missing_credentials', 'no credential');
    expect(
      await api(url, 'GET', '/v1/boxes', 'e2b_0000000000000000000000000000000000000000'),
      'invalid_credentials',
      'unknown key',
    );
    expect(await api(url, 'GET', '/v1/boxes', 'not.a.token'), 'invalid_token', 'malformed token');
    expect(
      await api(url, 'POST', '/v1/boxes', readOnly, { image: BUSYBOX }),
      'missing_permission',
      'read-only key',
    );
    expect(await api(url, 'GET', '/v1/boxes/no-such-box', key), 'not_found', 'unknown box');
    expect(await api(url, 'GET', '/v1/volumes/no-such-volume', key), 'volume_not_found', 'unknown volume');
    expect(
      await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, no_such: 1 }),
      'unknown_field',
      'unknown field',
    );
    expect(
      await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, cpus: -1 }),
      'invalid_option',
      'bad cpus',
    );
    expect(await api(url, 'POST', '/v1/boxes', key, [1]), 'invalid_body', 'array body');
    expect(
      await api(url, 'POST', '/v1/boxes', key, Buffer.from('{}'), { 'content-type': 'text/csv' }),
      'unsupported_media_type',
      'CSV body',
    );
    expect(
      await api(url, 'POST', '/v1/boxes', key, Buffer.from(JSON.stringify({ image: 'x'.repeat(5 << 20) })), {
        'content-type': 'application/json',
      }),
      'body_too_large',
      '5 MiB body',
    );
    expect(await api(url, 'GET', '/v1/executions/stream', key), 'upgrade_required', 'stream without upgrade');
    expect(
      await connect('/v1/tunnels/01ARZ3NDEKTSV4RRFFQ69G5FAV', key),
      'tunnel_not_found',
      'unknown tunnel',
    );
    expect(await api(url, 'GET', '/preview/pv_nosuchtoken/', null), 'preview_not_found', 'unknown preview');
  });

  it('answer the codes of boxes, commands, tunnels and previews', async () => {
    const box = await api(url, 'POST', '/v1/boxes', key, {
      image: BUSYBOX,
      name: 'codes-box',
      memory_mib: 64,
    });
    assert.equal(box.status, 201, JSON.stringify(box.body));
    expect(
      await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, name: 'codes-box' }),
      'conflict',
      'name taken',
    );
    expect(
      await api(url, 'POST', '/v1/boxes', key, { image: '127.0.0.1:5000/no/such:image' }),
      'image',
      'no image',
    );
    const exec = await api(url, 'POST', `/v1/boxes/${box.body.id}/executions`, key, {
      cmd: 'sleep',
      args: ['600'],
    });
    assert.equal(exec.status, 201, JSON.stringify(exec.body));
    const ws = url.replace(/^http/, 'ws');
    const attach = `${ws}/v1/boxes/${box.body.id}/executions/${exec.body.id}/attach`;
    const first = new WebSocket(attach, { headers: { authorization: `Bearer ${key}` } });
    await new Promise((resolve, reject) => {
      first.once('open', resolve);
      first.once('error', reject);
    });
    const second = await new Promise<Answer>((resolve, reject) => {
      const socket = new WebSocket(attach, { headers: { authorization: `Bearer ${key}` } });
      socket.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: new Headers(),
            body: JSON.parse(Buffer.concat(chunks).toString()),
          }),
        );
      });
      socket.once('error', reject);
    });
    first.close();
    expect(second, 'already_attached', 'second attach');
    // Nothing listens on port 8080 of the box.
    const tunnel = await api(url, 'POST', `/v1/boxes/${box.body.id}/tunnels`, key, { port: 8080 });
    assert.equal(tunnel.status, 201, JSON.stringify(tunnel.body));
    expect(await connect(`/v1/tunnels/${tunnel.body.id}`, key), 'tunnel_failed', 'closed box port (tunnel)');
    const preview = await api(url, 'POST', `/v1/boxes/${box.body.id}/previews`, key, { port: 8080 });
    assert.equal(preview.status, 201, JSON.stringify(preview.body));
    expect(
      await api(url, 'GET', new URL(preview.body.url).pathname, null),
      'preview_unreachable',
      'closed box port (preview)',
    );
    assert.equal((await api(url, 'DELETE', `/v1/boxes/${box.body.id}?force=true`, OPERATOR_KEY)).status, 204);
  });

  it('every code is answered by a route here or in the test file named for it', () => {
    /** Codes whose conditions need another server set-up; each file asserts the code. */
    const elsewhere: Partial<Record<ErrorCode, string>> = {
      quota_exceeded: 'tenants-quota.test.ts',
      capacity: 'tenants-quota.test.ts',
      invalid_tenant: 'tenants-keys.test.ts',
      timeout: 'rest-server.test.ts',
      unsupported: 'rest-server.test.ts',
    };
    for (const [code, file] of Object.entries(elsewhere)) {
      assert.ok(
        readFileSync(join(root, 'test', file), 'utf8').includes(`'${code}'`),
        `${file} asserts ${code}`,
      );
    }
    /** Codes no route answers on purpose, with why. */
    const notByRoutes: Partial<Record<ErrorCode, string>> = {
      unauthenticated: 'the REST client rebuilds it from the credential codes (checked above)',
      permission_denied: 'the REST client rebuilds it from missing_permission and loopback_only',
      unavailable:
        'the REST client when the server cannot be reached; tunnel_failed and preview_unreachable map to it',
      loopback_only: 'needs a non-loopback client of a server without credentials',
      exec: 'a command that cannot start in a box (SDK level: runtime tests)',
      parse: 'unparsable command output (SDK level)',
      internal: 'a bug or host failure',
      execution_not_found: 'a multiplexed execution ended under its client (exec-sockets)',
    };
    const missing = CODES.filter((c) => !seen.has(c) && !(c in elsewhere) && !(c in notByRoutes));
    assert.deepEqual(missing, [], 'codes neither driven nor accounted for');
  });
});
