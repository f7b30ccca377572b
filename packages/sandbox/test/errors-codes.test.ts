/**
 * The error codes table (`BOX_ERROR_CODES`): each code is documented with its HTTP status in the
 * `src/errors.ts` docstring and the README "Errors" section, the REST server answers a `BoxError` of that
 * code with that status and the code in the body (a real Fastify server with the server's hooks), and the
 * REST client turns the answer back into a `BoxError` with the same code. An unknown box is `not_found`
 * on the box routes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { BOX_ERROR_CODES, BoxError, type BoxErrorCode, isBoxErrorCode } from '../src/errors.ts';
import { Authenticator } from '../src/rest/auth.ts';
import { installHooks } from '../src/rest/hooks.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { boxErrorOf, STATUS_OF_CODE } from '../src/rest/wire.ts';
import { cleanupAll, tempHome, testRuntime } from './runtime-helpers.ts';

const root = join(import.meta.dirname, '..');

/** `code → status` from the rows of a Markdown table whose first cell lists codes in backticks. */
function documentedStatuses(markdown: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of markdown.split('\n')) {
    const cells = line
      .replace(/^\s*\*?\s*/, '')
      .split('|')
      .map((c) => c.trim());
    if (cells.length < 4) continue;
    const codes = [...cells[1]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!).filter(isBoxErrorCode);
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
  it('every code is in the errors.ts docstring and in README "Errors", with the status the server uses', () => {
    const source = readFileSync(join(root, 'src', 'errors.ts'), 'utf8');
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const errorsSection = readme.slice(
      readme.indexOf('\n## Errors'),
      readme.indexOf('\n## ', readme.indexOf('\n## Errors') + 1),
    );
    for (const [where, table] of [
      ['src/errors.ts', documentedStatuses(source)],
      ['README Errors', documentedStatuses(errorsSection)],
    ] as const) {
      assert.deepEqual(
        [...table.keys()].sort(),
        [...BOX_ERROR_CODES].sort(),
        `${where} lists every code once`,
      );
      for (const code of BOX_ERROR_CODES) {
        assert.equal(table.get(code), STATUS_OF_CODE[code].status, `${where}: status of ${code}`);
      }
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
      const code = request.params.code as BoxErrorCode;
      throw new BoxError(`failing with ${code}`, {
        code,
        ...(code === 'invalid_option' ? { field: 'x' } : {}),
      });
    });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });

  after(() => app.close());

  for (const code of BOX_ERROR_CODES) {
    it(`${code} → ${STATUS_OF_CODE[code].status}, and back to ${code} in the client`, async () => {
      const answer = await fetch(`${base}/throw/${code}`);
      assert.equal(answer.status, STATUS_OF_CODE[code].status);
      const body = (await answer.json()) as { error: { code: string; type: string; message: string } };
      assert.equal(body.error.code, code);
      assert.equal(body.error.type, STATUS_OF_CODE[code].type);
      const rebuilt = boxErrorOf(answer.status, body, 'test');
      assert.ok(rebuilt instanceof BoxError);
      assert.equal(rebuilt.code, code);
      assert.equal(rebuilt.message, `failing with ${code}`);
    });
  }
});

describe('an unknown box over REST', () => {
  let server: RestServer;

  before(async () => {
    server = await startRestServer({ runtime: testRuntime(tempHome('sandbox-codes-')), port: 0 });
  });

  after(async () => {
    await server.close();
    await cleanupAll();
  });

  it('is not_found (404) on the box routes', async () => {
    for (const path of ['/v1/boxes/no-such-box', '/v1/boxes/no-such-box/files?path=/']) {
      const answer = await fetch(`${server.url}${path}`);
      assert.equal(answer.status, 404, path);
      assert.equal(((await answer.json()) as { error: { code: string } }).error.code, 'not_found', path);
    }
  });
});
