/**
 * The body-bytes cache (`src/bytes-cache.ts`) behind the fast path and the response cache of POST
 * queries: it answers only for the exact bytes and variant it holds, whatever the fingerprints do.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BytesKeyedCache, fingerprintOf } from '../src/bytes-cache.ts';

const body = (text: string) => Buffer.from(text, 'utf8');

test('a body is found by equal bytes only, within its own variant, and kept as a copy', () => {
  const cache = new BytesKeyedCache<string>({ max: 100, maxKeyBytes: 1024 });
  const sent = body('{"query":"{ creature(name: \\"Pikachu\\") { id } }"}');
  cache.set(sent, 'pikachu', 0);
  sent[0] = 0x20; // the request's buffer changes after the fact; the cache holds its own copy
  assert.equal(cache.get(body('{"query":"{ creature(name: \\"Pikachu\\") { id } }"}'), 0), 'pikachu');
  assert.equal(cache.get(body('{"query":"{ creature(name: \\"Pikachu\\") { id } }"}'), 1), undefined);
  assert.equal(cache.get(body('{"query":"{ creature(name: \\"Raichu\\") { id } }"}'), 0), undefined);
});

test('bodies that share a fingerprint never get each other’s value', () => {
  // Two bodies of the same length that differ only in one byte the fingerprint does not sample.
  const a = body(`{"query":"{ creatures { ${'id '.repeat(100)}} }","pad":"${'x'.repeat(60)}"}`);
  const b = Buffer.from(a);
  const sampledAt = new Set<number>();
  const tail = a.length - 24;
  const step = (tail >>> 5) + 1;
  for (let i = 0; i < tail; i += step) sampledAt.add(i);
  const unsampled = [...Array(tail).keys()].find((i) => !sampledAt.has(i))!;
  b[unsampled] = a[unsampled] === 0x41 ? 0x42 : 0x41;
  assert.equal(fingerprintOf(a, 0), fingerprintOf(b, 0), 'the two bodies collide');
  const cache = new BytesKeyedCache<string>({ max: 100, maxKeyBytes: 4096 });
  cache.set(a, 'a');
  assert.equal(cache.get(b), undefined, 'a colliding body is a miss, not the other value');
  cache.set(b, 'b');
  assert.equal(cache.get(b), 'b');
  assert.equal(cache.get(a), undefined, 'the later body took the slot');
});

test('bodies over maxKeyBytes are neither kept nor found; max bounds the entries', () => {
  const cache = new BytesKeyedCache<number>({ max: 3, maxKeyBytes: 16 });
  cache.set(body('x'.repeat(17)), 1);
  assert.equal(cache.get(body('x'.repeat(17))), undefined);
  assert.equal(cache.size, 0);
  for (let i = 0; i < 5; i++) cache.set(body(`{"n":${i}}`), i);
  assert.equal(cache.size, 3);
  assert.equal(cache.get(body('{"n":4}')), 4);
  assert.equal(cache.get(body('{"n":0}')), undefined, 'the least recently used went first');
  cache.clear();
  assert.equal(cache.get(body('{"n":4}')), undefined);
});
