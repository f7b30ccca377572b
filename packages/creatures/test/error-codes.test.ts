/**
 * The creature server's error codes have one table: `CREATURE_ERRORS` (`src/errors.ts`) is the README's
 * "Errors" table row for row, and every code the source raises as a `code: '…'` literal is one of its codes
 * (the helpers that take a code — `withCode`, `sendError`, `errorResponse` — are typed by the union). A
 * request whose handling fails gets `INTERNAL_SERVER_ERROR` and is logged.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { createFailHandler } from '../src/http/fail.ts';
import { CREATURE_ERRORS, type CreatureErrorCode } from '../src/index.ts';

const ROOT = join(import.meta.dirname, '..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

test('the README "Errors" table is CREATURE_ERRORS, row for row', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(
    readme.indexOf('## Errors'),
    readme.indexOf('\n## ', readme.indexOf('## Errors') + 1),
  );
  const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| ([^|]+) \| (.+) \|$/gm)].map((m) => [
    m[1],
    m[2]!.trim(),
    m[3]!.trim(),
  ]);
  const expected = Object.entries(CREATURE_ERRORS).map(([code, { status, when }]) => [
    code,
    status === null ? '— (WebSocket)' : String(status),
    when,
  ]);
  assert.deepEqual(rows, expected);
});

test('every code raised in src is in CREATURE_ERRORS', () => {
  const known = new Set<string>(Object.keys(CREATURE_ERRORS));
  const raised = new Map<string, string>();
  for (const file of sources(join(ROOT, 'src'))) {
    const text = readFileSync(file, 'utf8');
    // `code: 'X'` in extensions and error records (the helpers that take a code type it as CreatureErrorCode).
    for (const m of text.matchAll(/\bcode: '([A-Z][A-Z_]+)'/g)) raised.set(m[1]!, file);
  }
  assert.ok(raised.size >= 10, `found ${raised.size} codes in src`);
  for (const [code, file] of raised)
    assert.ok(known.has(code), `${code} (${file}) is not in CREATURE_ERRORS`);
  const statuses = new Set(Object.values(CREATURE_ERRORS).map((row) => row.status));
  for (const status of [400, 413, 415, 406, 500]) assert.ok(statuses.has(status as never), String(status));
  const code: CreatureErrorCode = 'QUERY_TOO_COSTLY';
  assert.equal(CREATURE_ERRORS[code].status, 400);
});

test('a request whose handling fails gets 500 INTERNAL_SERVER_ERROR and is logged; a started answer is cut', async () => {
  const logged: string[] = [];
  const fail = createFailHandler(
    pino({ level: 'error' }, { write: (line: string) => void logged.push(line) }),
  );
  const server = createServer((req, res) => {
    if (req.url === '/started') res.writeHead(200).write('{"data":');
    fail(req, res, new Error('disk on fire'));
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const res = await fetch(`${base}/graphql?q=1`);
    assert.equal(res.status, 500);
    assert.deepEqual(await res.json(), {
      errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }],
    });
    const line = JSON.parse(logged[0]!) as { msg: string; url: string; err: { message: string } };
    assert.deepEqual(
      [line.msg, line.url, line.err.message],
      ['request failed', '/graphql?q=1', 'disk on fire'],
    );
    // The head was out: the connection is cut, so the client never reads a complete answer.
    await assert.rejects(fetch(`${base}/started`).then((res) => res.text()));
  } finally {
    server.closeAllConnections();
    server.close();
  }
});
