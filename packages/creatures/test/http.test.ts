import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SqliteStore } from '../src/index.ts';
import { type Running, start } from './helpers.ts';

/** Sends a raw HTTP request and resolves with status, headers and body text. */
function raw(
  url: string,
  options: { method?: string; headers?: Record<string, string | number>; body?: string | Buffer } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

describe('HTTP safety', () => {
  let s: Running;
  before(async () => {
    s = await start({ bodyLimit: 2048 });
  });
  after(() => s.server.close());

  test('a body over the limit gets 413 (declared length and chunked)', async () => {
    const big = JSON.stringify({ query: `{ creatures { id } } # ${'x'.repeat(4096)}` });
    const declared = await raw(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) },
      body: big,
    });
    assert.equal(declared.status, 413);
    assert.match(declared.body, /exceeds the limit of 2048 bytes/);
    const chunked = await raw(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      body: big,
    });
    assert.equal(chunked.status, 413);
  });

  test('a query nested too deep is refused with a clear error and not executed', async () => {
    let nested = 'name';
    for (let i = 0; i < 13; i++) nested = `evolutions { ${nested} }`;
    const { status, body } = await s.gql(`{ creature(name: "Bulbasaur") { ${nested} } }`);
    assert.equal(status, 400);
    assert.equal(body.data, undefined);
    assert.match(body.errors![0]!.message, /Query depth 15 exceeds the maximum depth of 12/);
    assert.equal(body.errors![0]!.extensions?.code, 'QUERY_TOO_DEEP');
  });

  test('ordinary big queries pass the cost model: every creature with its evolutions and their attacks, nested evolutions', async () => {
    const all = await s.gql(
      '{ creatures { id name evolutions { name attacks { fast { name type damage } special { name type damage } } } } }',
    );
    assert.equal(all.status, 200);
    assert.equal(all.body.data.creatures.length, 151);
    const nested = await s.gql(
      '{ creatures { name evolutions { name evolutions { name evolutions { name evolutions { name previousEvolutions { name } } } } } } }',
    );
    assert.equal(nested.status, 200);
  });

  test('a too costly query is refused with an error naming the field and suggesting first:', async () => {
    const small = await start({ limits: { maxCost: 500 } });
    try {
      const costly = await small.gql('{ creatures { id name types attacks { fast { name } } } }');
      assert.equal(costly.status, 400);
      const error = costly.body.errors![0]!;
      assert.equal(error.extensions?.code, 'QUERY_TOO_COSTLY');
      assert.equal(error.extensions?.field, 'creatures');
      assert.match(error.message, /^Query cost [\d,]+ exceeds the maximum cost of 500/);
      assert.match(error.message, /The largest part is creatures: 151 items × \d+ per item/);
      assert.match(error.message, /creatures\(first: \d+\)/);
      const suggested = Number(/creatures\(first: (\d+)\)/.exec(error.message)![1]);
      // The suggestion fits, and a first: from a variable counts too.
      const fits = await small.gql(
        'query ($n: Int) { creatures(first: $n) { id name types attacks { fast { name } } } }',
        {
          n: suggested,
        },
      );
      assert.equal(fits.status, 200, JSON.stringify(fits.body.errors));
      assert.equal(fits.body.data.creatures.length, suggested);
      const tooMany = await small.gql(
        'query ($n: Int) { creatures(first: $n) { id name types attacks { fast { name } } } }',
        {
          n: suggested + 20,
        },
      );
      assert.equal(tooMany.body.errors![0]!.extensions?.code, 'QUERY_TOO_COSTLY');
      // A list without first: is named with a different hint.
      const inner = await small.gql(
        '{ creature(name: "Mew") { a: weaknesses b: weaknesses c: weaknesses } x: creature(name: "Mew") { attacks { special { name type damage } } } }',
      );
      assert.equal(inner.status, 200);
    } finally {
      await small.server.close();
    }
  });

  test('introspection (as the explorer sends it) passes the limits', async () => {
    const { getIntrospectionQuery } = await import('graphql');
    const { status, body } = await s.gql(getIntrospectionQuery());
    assert.equal(status, 200);
    assert.equal(body.data.__schema.queryType.name, 'Query');
  });

  test('CSRF guard: a simple (non-JSON) POST needs a GraphQL-Require-Preflight header', async () => {
    for (const contentType of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const res = await raw(s.endpoint, {
        method: 'POST',
        headers: { 'content-type': contentType },
        body: 'query=mutation{deleteCreature(id:"001"){id}}',
      });
      assert.equal(res.status, 400, contentType);
      assert.match(res.body, /CSRF guard/);
    }
    const withHeader = await raw(s.endpoint, {
      method: 'POST',
      headers: { 'content-type': 'text/plain', 'graphql-require-preflight': '1' },
      body: '{"query":"{ __typename }"}',
    });
    assert.equal(withHeader.status, 415);
    const bulbasaur = await s.gql('{ creature(id: "001") { id } }');
    assert.equal(bulbasaur.body.data.creature.id, '001');
  });

  test('malformed requests get 4xx, never 500', async () => {
    const cases: [string, Parameters<typeof raw>[1], number][] = [
      [
        'bad JSON',
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query": ' },
        400,
      ],
      ['JSON array', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '[1]' }, 400],
      [
        'query number',
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":1}' },
        400,
      ],
      ['no body', { method: 'POST', headers: { 'content-type': 'application/json' } }, 400],
      [
        'variables string',
        {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"query":"{__typename}","variables":"x"}',
        },
        400,
      ],
      ['GET without query', { method: 'GET', headers: { accept: 'application/json' } }, 400],
      ['PUT', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{}' }, 405],
      ['DELETE', { method: 'DELETE' }, 405],
      ['unacceptable accept', { method: 'GET', headers: { accept: 'image/png' } }, 406],
    ];
    for (const [name, options, status] of cases) {
      const res = await raw(s.endpoint, options);
      assert.equal(res.status, status, name);
    }
    const badVariables = await raw(`${s.endpoint}?query=%7B__typename%7D&variables=%7Bnot-json`, {
      headers: { accept: 'application/json' },
    });
    assert.equal(badVariables.status, 400);
    const syntax = await s.gql('{ creature(name: ) }');
    assert.equal(syntax.status, 400);
    assert.match(syntax.body.errors![0]!.message, /Syntax Error/);
    const unknownField = await s.gql('{ creature(name: "Mew") { power } }');
    assert.equal(unknownField.status, 400);
    assert.match(unknownField.body.errors![0]!.message, /Cannot query field "power" on type "Creature"/);
    const coercion = await s.gql('query ($n: Int!) { creatures(first: $n) { id } }', { n: 'three' });
    assert.equal(coercion.status, 400);
    assert.match(coercion.body.errors![0]!.message, /\$n/);
    const notFound = await raw(`${s.server.url}/nowhere`);
    assert.equal(notFound.status, 404);
  });

  test('/healthz answers 200 with status ok', async () => {
    const res = await fetch(`${s.server.url}/healthz`);
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { status: 'ok', creatures: 151 });
  });

  test('/ redirects to the explorer when there is no web build', async () => {
    const res = await fetch(`${s.server.url}/`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/graphql');
  });
});

describe('explorer page', () => {
  let s: Running;
  before(async () => {
    s = await start();
  });
  after(() => s.server.close());

  test('a browser GET of /graphql serves GraphiQL whose assets all come from this server', async () => {
    const res = await fetch(s.endpoint, { headers: { accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type')!, /text\/html/);
    assert.match(res.headers.get('content-security-policy')!, /script-src 'self'/);
    const html = await res.text();
    assert.doesNotMatch(html, /https?:\/\//);
    const assets = [...html.matchAll(/(?:src|href)="(\/graphql\/explorer\/[^"]+)"/g)].map((m) => m[1]!);
    assert.deepEqual(assets.sort(), [
      '/graphql/explorer/graphiql.min.css',
      '/graphql/explorer/graphiql.min.js',
      '/graphql/explorer/graphql-ws.min.js',
      '/graphql/explorer/init.js',
      '/graphql/explorer/react-dom.production.min.js',
      '/graphql/explorer/react.production.min.js',
    ]);
    for (const path of assets) {
      const asset = await fetch(`${s.server.url}${path}`);
      assert.equal(asset.status, 200, path);
      assert.ok((await asset.arrayBuffer()).byteLength > 100, path);
    }
    const graphiql = await (await fetch(`${s.server.url}/graphql/explorer/graphiql.min.js`)).text();
    assert.match(graphiql, /DocExplorer/);
  });
});

describe('web front end build', () => {
  const dir = mkdtempSync(join(tmpdir(), 'creatures-web-'));
  let s: Running;
  before(async () => {
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>creatures app</title>');
    writeFileSync(join(dir, 'assets', 'app.js'), 'console.log("app")');
    s = await start({ webRoot: dir });
  });
  after(async () => {
    await s.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('is served at / with SPA fallback, leaving /graphql and /healthz alone', async () => {
    const index = await fetch(`${s.server.url}/`);
    assert.match(await index.text(), /creatures app/);
    const js = await fetch(`${s.server.url}/assets/app.js`);
    assert.match(js.headers.get('content-type')!, /javascript/);
    const deep = await fetch(`${s.server.url}/creatures/025`);
    assert.equal(deep.status, 200);
    assert.match(await deep.text(), /creatures app/);
    const health = await fetch(`${s.server.url}/healthz`);
    assert.equal(((await health.json()) as { status: string }).status, 'ok');
    const gql = await s.gql('{ creature(id: "007") { name } }');
    assert.equal(gql.body.data.creature.name, 'Squirtle');
    const traversal = await raw(`${s.server.url}/../../etc/passwd`);
    assert.doesNotMatch(traversal.body, /root:/);
  });
});

describe('errors and CORS', () => {
  class BrokenStore extends SqliteStore {
    override listCreatures(): never {
      throw new Error('disk /var/secret/db is corrupt');
    }
  }

  test('unexpected errors are masked by default and shown with maskErrors: false', async () => {
    const masked = await start({ store: new BrokenStore({ path: ':memory:' }) });
    const shown = await start({ store: new BrokenStore({ path: ':memory:' }), maskErrors: false });
    try {
      const a = await masked.gql('{ creatures { id } }');
      assert.equal(a.status, 200);
      assert.equal(a.body.data, null);
      assert.deepEqual(
        a.body.errors!.map((e) => [e.message, e.extensions?.code]),
        [['Internal server error', 'INTERNAL_SERVER_ERROR']],
      );
      assert.doesNotMatch(JSON.stringify(a.body), /secret|stack|at /);
      const b = await shown.gql('{ creatures { id } }');
      assert.match(b.body.errors![0]!.message, /disk \/var\/secret\/db is corrupt/);
    } finally {
      await masked.server.close();
      await shown.server.close();
    }
  });

  test('CORS allows only the configured origins', async () => {
    const s = await start({ corsOrigins: ['https://app.example'] });
    try {
      const allowed = await fetch(s.endpoint, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.example',
          'access-control-request-method': 'POST',
          'access-control-request-headers': 'content-type',
        },
      });
      assert.equal(allowed.status, 204);
      assert.equal(allowed.headers.get('access-control-allow-origin'), 'https://app.example');
      assert.match(allowed.headers.get('access-control-allow-methods')!, /POST/);
      const other = await fetch(s.endpoint, {
        method: 'OPTIONS',
        headers: { origin: 'https://evil.example' },
      });
      assert.equal(other.headers.get('access-control-allow-origin'), null);
      for (let i = 0; i < 2; i++) {
        // The second answer comes from the response cache; it must carry the CORS headers too.
        const res = await fetch(s.endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: 'https://app.example' },
          body: JSON.stringify({ query: '{ creature(id: "004") { name } }' }),
        });
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('access-control-allow-origin'), 'https://app.example');
        assert.deepEqual(await res.json(), { data: { creature: { name: 'Charmander' } } });
      }
    } finally {
      await s.server.close();
    }
  });
});

describe('subscriptions over Server-Sent Events on /graphql', () => {
  test("a subscriber gets a mutation's change; close() ends the open stream", async () => {
    const s = await start();
    try {
      const baseline = s.server.store.events.listenerCount('change');
      const res = await fetch(s.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({
          query: 'subscription { creatureChanged { kind id name creature { types } } }',
        }),
      });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /text\/event-stream/);
      for (let i = 0; s.server.store.events.listenerCount('change') === baseline; i++) {
        assert.ok(i < 500, 'the subscription never started listening to the change feed');
        await new Promise((r) => setTimeout(r, 10));
      }
      const mutation = await s.gql(
        'mutation { updateCreature(id: "054", input: { name: "Psyduck Prime" }) { id } }',
      );
      assert.equal(mutation.body.errors, undefined);
      const reader = res.body!.getReader();
      let text = '';
      while (!/event: next\ndata: .*\n/.test(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
      }
      const data = /event: next\ndata: (.*)\n/.exec(text)?.[1];
      assert.deepEqual(JSON.parse(data!), {
        data: {
          creatureChanged: {
            kind: 'UPDATED',
            id: '054',
            name: 'Psyduck Prime',
            creature: { types: ['Water'] },
          },
        },
      });
      const closed = s.server.close();
      for (;;) {
        const { done } = await reader.read();
        if (done) break;
      }
      await closed;
    } finally {
      await s.server.close();
    }
  });

  test('a subscription over plain POST is a GraphQL error, not a 500', async () => {
    const s = await start();
    try {
      const { status, body } = await s.gql('subscription { messageChanged { kind } }');
      assert.ok(status === 200 || status === 400, String(status));
      assert.match(body.errors![0]!.message, /Subscriptions are not supported/);
    } finally {
      await s.server.close();
    }
  });
});

describe('shutdown', () => {
  test('close() lets an in-flight request finish, then refuses connections', async () => {
    const s = await start();
    const body = JSON.stringify({ query: '{ creature(name: "Onix") { id } }' });
    // close() is called once the server has the request (its headers parsed), before its body ends.
    const received = once(s.server.httpServer, 'request');
    let req!: ReturnType<typeof request>;
    const pending = new Promise<{ status: number; text: string }>((resolve, reject) => {
      req = request(
        s.endpoint,
        {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode!, text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
    });
    await received;
    const closed = s.server.close();
    // The body ends once the server has stopped listening, so the request is in flight throughout.
    for (const end = Date.now() + 30_000; s.server.httpServer.listening; ) {
      assert.ok(Date.now() < end, 'the server stops listening');
      await new Promise((r) => setTimeout(r, 5));
    }
    req.end(body.slice(10));
    const res = await pending;
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.text), { data: { creature: { id: '095' } } });
    await closed;
    await assert.rejects(fetch(s.endpoint, { method: 'POST', body }));
  });

  test('the creature-server command exits 1 with a clear message when the database cannot be opened', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'creatures-bad-db-'));
    try {
      const file = join(dir, 'a-file');
      writeFileSync(file, 'not a directory');
      const bin = join(import.meta.dirname, '..', 'bin', 'creature-server.ts');
      const child = spawn(process.execPath, [bin], {
        env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: join(file, 'x.db') },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let err = '';
      child.stderr.on('data', (c) => {
        err += c;
      });
      const [code] = await once(child, 'exit');
      assert.equal(code, 1);
      assert.match(err, /could not start with DATABASE_PATH=.*a-file\/x\.db/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the creature-server command logs JSON, serves, and exits 0 on SIGTERM', async () => {
    const bin = join(import.meta.dirname, '..', 'bin', 'creature-server.ts');
    const child = spawn(process.execPath, [bin], {
      env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: ':memory:', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8');
    const listening = new Promise<{ url: string }>((resolve) => {
      child.stdout.on('data', (chunk: string) => {
        out += chunk;
        for (const line of out.split('\n')) {
          if (line.includes('"listening"')) resolve(JSON.parse(line) as { url: string });
        }
      });
    });
    const { url } = await listening;
    const res = await fetch(url.replace('localhost', '127.0.0.1'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ creature(name: "Snorlax") { id } }' }),
    });
    assert.deepEqual(await res.json(), { data: { creature: { id: '143' } } });
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    assert.equal(code, 0);
    const lines = out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { msg: string });
    assert.deepEqual(lines.map((l) => l.msg).sort(), [
      'listening',
      'shutdown complete',
      'shutting down',
      'signal received',
    ]);
  });
});

describe('answer bytes', () => {
  test('plan answers and cached answers go out byte for byte, with the right length, non-ASCII and escapes included, several per connection', async () => {
    const query =
      '{ a: creature(name: "Nidoran♀") { name classification } b: creature(name: "Pikachu") { name } }';
    const expected = Buffer.from(
      JSON.stringify({
        data: {
          a: { name: 'Nidoran♀', classification: 'Poison Pin Pokémon' },
          b: { name: 'Pikachu' },
        },
      }),
    );
    for (const responseCacheSize of [0, 1000]) {
      const s = await start({ responseCacheSize });
      try {
        // Two rounds: the second answer of the cached server comes from its response cache.
        for (let round = 0; round < 2; round++) {
          const answers = await Promise.all(
            [0, 1, 2].map(
              () =>
                new Promise<{ length: string; bytes: Buffer }>((resolve, reject) => {
                  const body = JSON.stringify({ query });
                  const req = request(
                    s.endpoint,
                    { method: 'POST', headers: { 'content-type': 'application/json' } },
                    (res) => {
                      const chunks: Buffer[] = [];
                      res.on('data', (c: Buffer) => chunks.push(c));
                      res.on('end', () =>
                        resolve({
                          length: String(res.headers['content-length']),
                          bytes: Buffer.concat(chunks),
                        }),
                      );
                    },
                  );
                  req.on('error', reject);
                  req.end(body);
                }),
            ),
          );
          for (const { length, bytes } of answers) {
            assert.deepEqual(bytes, expected, `cache size ${responseCacheSize}, round ${round}`);
            assert.equal(length, String(expected.length));
          }
        }
      } finally {
        await s.server.close();
      }
    }
  });
});
