/**
 * Operability endpoints. `GET /healthz` and `GET /readyz` (liveness, and readiness that follows the store);
 * `GET /metrics` (Prometheus text format): request counts by route template and status, token requests by
 * grant type and outcome, credential validations and lockouts — counted from real requests to a real
 * server, and parsed with prom-client's own exposition rules (one sample per line).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DEMO_SECRET, serviceToken, startTestServer, type TestServer } from './oauth-fixtures.ts';

/** The value of the sample `name{labels}` in a text exposition, or undefined when it is absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries(
      [...(match[3] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[4]);
  }
  return undefined;
}

async function scrape(t: TestServer): Promise<string> {
  const res = await fetch(`${t.base}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return res.text();
}

describe('auth /metrics', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ maxAccessFailedCount: 3 });
    await t.createUser('carol', 'carol-password-1');
  });
  after(() => t.close());

  it('counts token requests by grant type and outcome, never by client or secret', async () => {
    assert.equal((await serviceToken(t.base, { grant_type: 'client_credentials' })).status, 200);
    assert.equal((await serviceToken(t.base, { grant_type: 'client_credentials' })).status, 200);
    assert.equal(
      (await serviceToken(t.base, { grant_type: 'refresh_token', refresh_token: 'nope' })).status,
      400,
    );
    assert.equal((await serviceToken(t.base, { grant_type: 'made-up-grant' })).status, 400);
    const text = await scrape(t);
    assert.equal(
      sample(text, 'auth_token_requests_total', { grant_type: 'client_credentials', outcome: 'issued' }),
      2,
    );
    assert.equal(
      sample(text, 'auth_token_requests_total', { grant_type: 'refresh_token', outcome: 'invalid_grant' }),
      1,
    );
    assert.equal(
      sample(text, 'auth_token_requests_total', { grant_type: 'other', outcome: 'unsupported_grant_type' }),
      1,
    );
    assert.ok(!text.includes(DEMO_SECRET));
    assert.ok(!text.includes('made-up-grant'));
  });

  it('counts credential validations by result and the lockout they cause', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await serviceToken(t.base, {
        grant_type: 'password',
        username: 'carol',
        password: 'wrong',
      });
      assert.equal(res.status, 400);
    }
    const locked = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'carol',
      password: 'carol-password-1',
    });
    assert.equal(locked.status, 400);
    const text = await scrape(t);
    assert.equal(sample(text, 'auth_credential_validations_total', { result: 'invalid_credentials' }), 3);
    assert.equal(sample(text, 'auth_credential_validations_total', { result: 'locked_out' }), 1);
    assert.equal(sample(text, 'auth_lockouts_total'), 1);
    assert.equal(
      sample(text, 'auth_token_requests_total', { grant_type: 'password', outcome: 'invalid_grant' }),
      4,
    );
  });

  it('labels requests by route template, so client-chosen paths do not add series', async () => {
    for (const id of ['a', 'b', 'c']) await fetch(`${t.base}/auth-admin/api/users/${id}`);
    await fetch(`${t.base}/no/such/path/${Date.now()}`);
    const text = await scrape(t);
    assert.equal(
      sample(text, 'auth_http_requests_total', {
        route: '/auth-admin/api/users/:id',
        method: 'GET',
        status: '401',
      }),
      3,
    );
    assert.equal(
      sample(text, 'auth_http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }),
      1,
    );
    assert.ok(!/no\/such\/path/.test(text));
    assert.ok(
      (sample(text, 'auth_http_request_duration_seconds_count', {
        route: '/connect/token',
        method: 'POST',
      }) ?? 0) >= 8,
    );
  });

  it('is absent with metrics: false', async () => {
    const quiet = await startTestServer({ metrics: false });
    try {
      assert.equal((await fetch(`${quiet.base}/metrics`)).status, 404);
      assert.equal(quiet.server.metrics, undefined);
    } finally {
      await quiet.close();
    }
  });
});

describe('auth health endpoints', () => {
  it('/healthz answers while the process serves; /readyz follows the store', async () => {
    const t = await startTestServer();
    try {
      const live = await fetch(`${t.base}/healthz`);
      assert.equal(live.status, 200);
      assert.deepEqual(await live.json(), { status: 'ok' });
      assert.equal(live.headers.get('cache-control'), 'no-store');
      const ready = await fetch(`${t.base}/readyz`);
      assert.equal(ready.status, 200);
      assert.deepEqual(await ready.json(), { status: 'ready' });
      // A store that no longer answers (its database closed) makes the instance unready, not dead.
      await t.server.store.close();
      const gone = await fetch(`${t.base}/readyz`);
      assert.equal(gone.status, 503);
      assert.deepEqual(await gone.json(), { status: 'unavailable' });
      assert.equal((await fetch(`${t.base}/healthz`)).status, 200);
    } finally {
      await t.server.app.close();
    }
  });
});
