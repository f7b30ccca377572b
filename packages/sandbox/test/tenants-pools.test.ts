/**
 * Warm pools of the shared service belong to a tenant: a box creation of tenant B (or of the operator)
 * with the options of tenant A's pool starts a new box instead of taking A's ready box, A's pool keeps
 * its ready box, and A's own creation is handed that box.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { api, createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

let server: RestServer;
let url: string;
let keyA: string;
let keyB: string;

before(async () => {
  ensureRegistry();
  ({ server, url } = await startTenantServer());
  keyA = (await createKey(url, 'pool-a')).key;
  keyB = (await createKey(url, 'pool-b')).key;
});

after(async () => {
  await server?.close();
  await cleanupAll();
});

describe('warm pools per tenant', () => {
  it("another tenant's and the operator's creations never take a tenant's pooled box", async () => {
    const options = { memory_mib: 96 };
    const pool = await api(url, 'POST', '/v1/pools', keyA, { image: BUSYBOX, size: 1, options });
    assert.equal(pool.status, 201, JSON.stringify(pool.body));
    const filled = await api(url, 'GET', `/v1/pools/${pool.body.id}/filled`, keyA);
    assert.equal(filled.status, 200, JSON.stringify(filled.body));
    assert.equal(filled.body.ready, 1);
    // Every box created from here on is new; the pooled one was created before this mark.
    const mark = new Date().toISOString();

    for (const key of [keyB, OPERATOR_KEY]) {
      const other = await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, ...options });
      assert.equal(other.status, 201, JSON.stringify(other.body));
      assert.ok(other.body.created_at >= mark, 'a new box, not the pooled one');
      const still = await api(url, 'GET', `/v1/pools/${pool.body.id}`, keyA);
      assert.equal(still.body.ready, 1, "A's pool keeps its ready box");
      assert.equal((await api(url, 'GET', `/v1/boxes/${other.body.id}`, keyA)).status, 404);
    }

    const mine = await api(url, 'POST', '/v1/boxes', keyA, { image: BUSYBOX, ...options });
    assert.equal(mine.status, 201, JSON.stringify(mine.body));
    assert.ok(mine.body.created_at < mark, "A's creation is handed its pooled box");
    assert.equal((await api(url, 'GET', `/v1/boxes/${mine.body.id}`, keyA)).status, 200);
    assert.equal((await api(url, 'GET', `/v1/boxes/${mine.body.id}`, keyB)).status, 404);
  });
});
