/**
 * Brute-force limits shared by two auth server processes on one real PostgreSQL (counters in the
 * `rate_limits` table through rate-limiter-flexible): failed password grants on instance A and instance B
 * add up, so the attempt after the limit is refused with 429 on either instance, and the table holds
 * hashed keys only (no user name or address in clear).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { PostgresAuthStore } from '../src/store/postgres.ts';
import { type Instance, startInstance } from './multi-instance-fixture.ts';
import { basic, postForm } from './oauth-fixtures.ts';

const SECRET = 'demo-service-secret-1';

let cluster: PostgresCluster;
let url: string;
let a: Instance;
let b: Instance;

before(async () => {
  cluster = await startPostgres();
  url = await cluster.createDatabase('auth');
  const env = {
    AUTH_DATABASE_URL: url,
    AUTH_ISSUER: 'http://127.0.0.1:1',
    AUTH_ADMIN_PASSWORD: 'admin-password-1',
    AUTH_DEMO_CLIENT_SECRET: SECRET,
    AUTH_RATE_LIMIT_PASSWORD_IP: '5/600',
    AUTH_RATE_LIMIT_PASSWORD_ACCOUNT: '3/600',
  };
  a = await startInstance(env);
  b = await startInstance(env);
});

after(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await cluster?.stop();
});

function passwordGrant(base: string, username: string, password: string) {
  return postForm(
    base,
    '/connect/token',
    { grant_type: 'password', username, password },
    { authorization: basic('demo-service', SECRET) },
  );
}

test('failures on two instances add up: per account, then per IP, 429 with Retry-After on either instance', async () => {
  // Account 'admin': 3 failures over A, B, A; the 4th attempt (even the right password) is refused on B and on A.
  for (const [i, instance] of [a, b, a].entries()) {
    const res = await passwordGrant(instance.base, 'admin', `wrong-${i}`);
    assert.equal(res.status, 400, `attempt ${i + 1}`);
    assert.equal(((await res.json()) as { error: string }).error, 'invalid_grant');
  }
  for (const instance of [b, a]) {
    const res = await passwordGrant(instance.base, 'admin', 'admin-password-1');
    assert.equal(res.status, 429);
    assert.equal(((await res.json()) as { error: string }).error, 'temporarily_unavailable');
    assert.ok(Number(res.headers.get('retry-after')) >= 1);
  }
  // Per IP (every request comes from 127.0.0.1): 5 failures counted so far (3 + the 2 refused above
  // were refused by the account counter after the IP counter took its point), so the next is refused
  // by the IP counter whichever account it names.
  const other = await passwordGrant(b.base, 'nobody', 'x');
  assert.equal(other.status, 429);

  const store = await PostgresAuthStore.open({ url, maxConnections: 1 });
  try {
    const rows = await store
      .rateLimitClient()
      .query({ text: 'SELECT key, points FROM rate_limits ORDER BY key' });
    const keys = (rows.rows as { key: string; points: number }[]).map((r) => r.key);
    assert.ok(keys.some((k) => k.startsWith('password:ip:')));
    assert.ok(keys.some((k) => k.startsWith('password:account:')));
    for (const key of keys) assert.doesNotMatch(key, /admin|127\.0\.0\.1/);
    const audit = await store.listAudit({ category: 'Login', outcome: 'Denied', limit: 100 });
    const limited = audit.items.filter((e) => e.failureCode === 'rate_limited');
    assert.deepEqual(limited.map((e) => (e.details as { scope: string }).scope).sort(), ['account', 'ip']);
  } finally {
    await store.close();
  }
});
