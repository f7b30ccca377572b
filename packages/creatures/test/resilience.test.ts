/**
 * Hostile requests against a real server in its own process (`fixtures/resilience-server.ts`, heap
 * limited to 256 MiB): each class is replayed and must be answered with its 4xx status and code (never
 * 5xx, never a reset before the answer), while the server's event loop is never held more than 50 ms
 * (`monitorEventLoopDelay` inside the server) and its memory stays bounded.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '../src/http/persisted.ts';
import { DEFAULT_PARSE_LIMITS } from '../src/parse-limits.ts';
import type { Stats } from './fixtures/resilience-server.ts';

const HERE = dirname(fileURLToPath(import.meta.url));
/** Longest the server's event loop may be held by one request class, in ms. */
const MAX_DELAY_MS = 50;
/**
 * Most the server's live memory (JavaScript heap after a full collection, plus buffers) may grow over
 * the suite, in bytes: its caches are bounded to 64 MiB of estimated documents, 2 × 16 MiB of answers,
 * 8 MiB of parsed bodies and 8 MiB of APQ texts.
 */
const MAX_LIVE_GROWTH = 128 * 1024 * 1024;
/** Most the server's RSS may grow over the suite, in bytes (V8 keeps heap pages it has grown into). */
const MAX_RSS_GROWTH = 256 * 1024 * 1024;

let child: ChildProcess;
let base = '';
let endpoint = '';
let start: Stats;

function ask<T>(message: string): Promise<T> {
  const reply = once(child, 'message') as Promise<[T]>;
  child.send(message);
  return reply.then(([value]) => value);
}

/** The server's memory after a full garbage collection (outside any measured window). */
async function memory(): Promise<Stats> {
  await ask('gc');
  return ask<Stats>('stats');
}

/** Asserts the server's live memory and RSS grew within their bounds since the suite started. */
async function assertMemoryBounded(name: string): Promise<void> {
  const now = await memory();
  const live = now.heapUsedBytes + now.arrayBuffersBytes - start.heapUsedBytes - start.arrayBuffersBytes;
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
  assert.ok(live < MAX_LIVE_GROWTH, `${name}: live memory grew by ${mib(live)}`);
  assert.ok(
    now.rssBytes - start.rssBytes < MAX_RSS_GROWTH,
    `${name}: RSS grew by ${mib(now.rssBytes - start.rssBytes)}`,
  );
}

/**
 * Clears the server's delay measures, runs `fn`, and asserts that the server's event loop was never
 * held more than 50 ms: by `monitorEventLoopDelay`'s wall-clock delay, unless the loop's thread was
 * not on a CPU for the excess (the delay then came from other processes on this shared machine, and
 * the time the thread's own work held the loop, measured from its CPU time, must be within 50 ms).
 */
async function bounded(name: string, fn: () => Promise<void>): Promise<Stats> {
  await ask('reset');
  await fn();
  const stats = await ask<Stats>('stats');
  if (process.env.RESILIENCE_VERBOSE) console.log(name, stats);
  const held = Math.min(stats.maxDelayMs, stats.maxHeldMs);
  assert.ok(
    held <= MAX_DELAY_MS,
    `${name}: the event loop was held ${held.toFixed(1)} ms (delay ${stats.maxDelayMs.toFixed(1)} ms, on CPU ${stats.maxHeldMs.toFixed(1)} ms; limit ${MAX_DELAY_MS} ms)`,
  );
  return stats;
}

async function post(body: unknown, accept = 'application/graphql-response+json') {
  const res = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    text,
    json: () => JSON.parse(text) as { errors?: { extensions?: { code?: string } }[] },
  };
}

async function expectRefused(query: string, code: string): Promise<void> {
  const res = await post({ query });
  assert.equal(res.status, 400, `${code}: ${res.text.slice(0, 300)}`);
  assert.equal(res.json().errors?.[0]?.extensions?.code, code, res.text.slice(0, 300));
}

/**
 * Sends `head` (and `body`) over a raw socket as fast as the socket takes it and resolves with all that
 * came back; rejects on a connection reset, which would mean the answer could be lost.
 */
function rawExchange(head: string, body?: Buffer): Promise<string> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      socket.end();
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    socket.on('connect', () => {
      socket.write(head);
      if (body) socket.write(body);
    });
  });
}

before(async () => {
  child = fork(join(HERE, 'fixtures', 'resilience-server.ts'), [], {
    execArgv: [
      '--conditions=seed-source',
      '--max-old-space-size=256',
      '--expose-gc',
      ...(process.env.RESILIENCE_SERVER_FLAGS?.split(' ') ?? []),
    ],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const [ready] = (await once(child, 'message')) as [{ port: number }];
  base = `http://127.0.0.1:${ready.port}`;
  endpoint = `${base}/graphql`;
  // A first valid and a first invalid query warm the code every class goes through.
  assert.equal((await post({ query: '{ creature(name: "Mew") { name } }' })).status, 200);
  assert.equal((await post({ query: '{ creature(name: "Mew") { nope } }' })).status, 400);
  start = await memory();
});

after(async () => {
  if (child.exitCode === null) {
    child.send('close');
    await once(child, 'exit');
  }
});

describe('resilience: hostile requests are answered 4xx, quickly, within bounded memory', () => {
  test('deep nesting of selections, values, inline fragments and list types is refused before parsing', async () => {
    await bounded('nesting', async () => {
      // 30-60 KB each, within the document length limit (64 Ki characters).
      await expectRefused(`{ ${'a{'.repeat(20_000)}b${'}'.repeat(20_000)} }`, 'QUERY_TOO_NESTED');
      await expectRefused(
        `{ creatures(type: ${'['.repeat(30_000)}"x"${']'.repeat(30_000)}) { name } }`,
        'QUERY_TOO_NESTED',
      );
      await expectRefused(
        `{ creature(name: ${'{a:'.repeat(15_000)}1${'}'.repeat(15_000)}) { name } }`,
        'QUERY_TOO_NESTED',
      );
      await expectRefused(`{ ${'...{'.repeat(6000)}__typename${'}'.repeat(6000)} }`, 'QUERY_TOO_NESTED');
      await expectRefused(
        `query ($v: ${'['.repeat(20_000)}Int${']'.repeat(20_000)}) { __typename }`,
        'QUERY_TOO_NESTED',
      );
    });
    // Over the token limit without nesting: 400 as well.
    const flat = `{ ${Array.from({ length: DEFAULT_PARSE_LIMITS.maxTokens }, (_, i) => `a${i}: __typename`).join(' ')} }`;
    await expectRefused(flat, 'QUERY_TOO_LARGE');
    assert.equal((await fetch(`${base}/healthz`)).status, 200);
  });

  test('fragments that each spread the previous one twice are costed once per fragment', async () => {
    const fragments = ['fragment F0 on Query { creature(name: "Mew") { name } }'];
    for (let i = 1; i <= 22; i++) fragments.push(`fragment F${i} on Query { ...F${i - 1} ...F${i - 1} }`);
    const query = `{ ...F22 } ${fragments.join(' ')}`;
    assert.ok(query.length < 1200);
    await bounded('fragment fan-out', async () => {
      await expectRefused(query, 'QUERY_TOO_COSTLY');
      // Fan-out in depth: each fragment nests the previous one twice under a field.
      const deep = ['fragment D0 on Creature { name }'];
      for (let i = 1; i <= 20; i++)
        deep.push(`fragment D${i} on Creature { evolutions { ...D${i - 1} ...D${i - 1} } }`);
      await expectRefused(`{ creature(name: "Mew") { ...D20 } } ${deep.join(' ')}`, 'QUERY_TOO_DEEP');
    });
  });

  test('a flood of distinct alias-heavy queries keeps memory bounded', async () => {
    for (let round = 0; round < 5; round++) {
      await bounded(`alias flood ${round}`, async () => {
        for (let i = 0; i < 60; i++) {
          const n = round * 60 + i;
          // 90 aliases of 11 tokens each: just within the token limit.
          const aliases = Array.from({ length: 90 }, (_, k) => `a${k}_${n}: creature(name: "Mew") { name }`);
          const res = await post({ query: `{ ${aliases.join(' ')} }` });
          assert.equal(res.status, 200, res.text.slice(0, 200));
        }
      });
    }
    await assertMemoryBounded('alias flood');
  });

  test('an APQ registration flood from one client is rate limited and keeps memory bounded', async () => {
    const queries = Array.from(
      { length: 400 },
      (_, i) => `{ a${i}: creature(name: "Mew") { name } # ${'x'.repeat(20_000)}\n}`,
    );
    await bounded('APQ flood', async () => {
      for (const query of queries) {
        const res = await post({
          query,
          extensions: { persistedQuery: { version: 1, sha256Hash: sha256Hex(query) } },
        });
        assert.equal(res.status, 200, res.text.slice(0, 200));
      }
    });
    const lookup = async (query: string) =>
      (await post({ extensions: { persistedQuery: { version: 1, sha256Hash: sha256Hex(query) } } })).json();
    // The first registrations of the window were kept; those past the client's limit were not.
    assert.equal((await lookup(queries[0]!)).errors, undefined);
    assert.equal((await lookup(queries[399]!)).errors?.[0]?.extensions?.code, 'PERSISTED_QUERY_NOT_FOUND');
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.match(metrics, /creatures_persisted_queries_total\{result="limited"\} 300/);
    await assertMemoryBounded('APQ flood');
  });

  test('a 1 MB URL gets 431 and a 2 MB body 413, each read in full before the connection closes', async () => {
    await bounded('huge URL and body', async () => {
      const url = await rawExchange(
        `GET /graphql?query=${'x'.repeat(1024 * 1024)} HTTP/1.1\r\nhost: x\r\n\r\n`,
      );
      assert.match(url, /^HTTP\/1\.1 431 /);
      assert.match(url, /"code":"REQUEST_HEADER_FIELDS_TOO_LARGE"/);
      const body = Buffer.alloc(2 * 1024 * 1024, 'x');
      const declared = await rawExchange(
        `POST /graphql HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`,
        body,
      );
      assert.match(declared, /^HTTP\/1\.1 413 /);
      assert.match(declared, /"code":"PAYLOAD_TOO_LARGE"/);
      const chunked = await rawExchange(
        'POST /graphql HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n',
        Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]),
      );
      assert.match(chunked, /^HTTP\/1\.1 413 /);
    });
  });

  test('@stream with a negative initialCount is a 400 naming the argument', async () => {
    for (const [query, variables] of [
      ['{ creatures(first: 3) @stream(initialCount: -1) { name } }', undefined],
      ['query ($n: Int!) { creatures(first: 3) @stream(initialCount: $n) { name } }', { n: -2 }],
    ] as const) {
      const res = await post({ query, variables }, 'multipart/mixed');
      assert.equal(res.status, 400, res.text);
      const error = res.json().errors?.[0] as { message: string; extensions?: { code?: string } };
      assert.equal(error.extensions?.code, 'BAD_USER_INPUT');
      assert.match(error.message, /initialCount/);
    }
  });
});
