/**
 * Brute-force limits on one server (SQLite, counters in memory): the password grant and the login page
 * answer 429 with `Retry-After` per IP and per account across IPs, a success gives its point back, the
 * first refusal of a window is audited once, refusals are counted in the metrics, and the settings are
 * checked (options and `AUTH_RATE_LIMIT_*` variables).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { configFromEnv } from '../src/env-config.ts';
import { RateLimits, rateLimitsFromEnv, resolveRateLimits } from '../src/ratelimit.ts';
import { basic, DEMO_SECRET, startTestServer, type TestServer } from './oauth-fixtures.ts';

function passwordGrant(t: TestServer, ip: string, username: string, password: string) {
  return t.server.app.inject({
    method: 'POST',
    url: '/connect/token',
    remoteAddress: ip,
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: basic('demo-service', DEMO_SECRET),
    },
    payload: new URLSearchParams({ grant_type: 'password', username, password }).toString(),
  });
}

describe('password grant', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({
      rateLimits: {
        password: { ip: { points: 3, durationSeconds: 600 }, account: { points: 4, durationSeconds: 600 } },
      },
    });
    for (const name of ['ann', 'bob', 'cid', 'dee', 'fay']) await t.createUser(name, `${name}-password-1`);
  });
  after(() => t.close());

  test('per IP: the 4th failure in the window is 429 temporarily_unavailable with Retry-After; other IPs are not limited', async () => {
    for (const name of ['ann', 'bob', 'cid']) {
      const res = await passwordGrant(t, '10.0.0.1', name, 'wrong');
      assert.equal(res.statusCode, 400);
      assert.equal(res.json().error, 'invalid_grant');
    }
    const limited = await passwordGrant(t, '10.0.0.1', 'dee', 'dee-password-1');
    assert.equal(limited.statusCode, 429);
    assert.deepEqual(limited.json(), {
      error: 'temporarily_unavailable',
      error_description: 'too many attempts; retry later',
    });
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= 600, `Retry-After ${retryAfter}`);
    assert.equal(limited.headers['cache-control'], 'no-store');
    assert.equal((await passwordGrant(t, '10.0.0.1', 'dee', 'dee-password-1')).statusCode, 429);
    // The refused attempts never reached the password check: dee has no failure counted.
    const dee = await t.server.store.findUserByName('dee');
    assert.equal(dee?.accessFailedCount, 0);
    // Another address is not limited.
    assert.equal((await passwordGrant(t, '10.0.0.2', 'dee', 'dee-password-1')).statusCode, 200);
    // The first refusal of the window is audited once, with the client and the address.
    const events = await t.server.store.listAudit({ category: 'Login', outcome: 'Denied', limit: 100 });
    const limitedEvents = events.items.filter((e) => e.failureCode === 'rate_limited');
    assert.equal(limitedEvents.length, 1);
    assert.equal(limitedEvents[0]!.clientId, 'demo-service');
    assert.equal(limitedEvents[0]!.remoteAddress, '10.0.0.1');
    assert.deepEqual(
      { ...(limitedEvents[0]!.details as object), retryAfterSeconds: 0 },
      {
        kind: 'password',
        scope: 'ip',
        retryAfterSeconds: 0,
      },
    );
    // Metrics count every refusal.
    const metrics = await t.server.app.inject({ method: 'GET', url: '/metrics' });
    assert.match(metrics.body, /auth_rate_limit_refusals_total\{kind="password",scope="ip"\} 2/);
    assert.match(
      metrics.body,
      /auth_token_requests_total\{grant_type="password",outcome="temporarily_unavailable"\} 2/,
    );
  });

  test('per account across IPs: failures from 4 addresses limit the 5th, from any address; other accounts are not limited', async () => {
    for (let i = 1; i <= 4; i++) {
      const res = await passwordGrant(t, `10.1.0.${i}`, 'fay', 'wrong');
      assert.equal(res.statusCode, 400, `attempt ${i}`);
    }
    const limited = await passwordGrant(t, '10.1.0.9', 'FAY', 'fay-password-1');
    assert.equal(limited.statusCode, 429);
    assert.equal((await passwordGrant(t, '10.1.0.9', 'cid', 'cid-password-1')).statusCode, 200);
  });

  test('a success gives its point back: failures only are counted', async () => {
    const ip = '10.2.0.1';
    assert.equal((await passwordGrant(t, ip, 'cid', 'wrong')).statusCode, 400);
    assert.equal((await passwordGrant(t, ip, 'cid', 'wrong')).statusCode, 400);
    assert.equal((await passwordGrant(t, ip, 'cid', 'cid-password-1')).statusCode, 200);
    assert.equal((await passwordGrant(t, ip, 'cid', 'cid-password-1')).statusCode, 200);
    assert.equal((await passwordGrant(t, ip, 'ann', 'wrong')).statusCode, 400);
    assert.equal((await passwordGrant(t, ip, 'ann', 'wrong')).statusCode, 429);
  });
});

describe('login page', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({
      rateLimits: { password: { ip: { points: 2, durationSeconds: 600 }, account: false } },
    });
    await t.createUser('eve', 'eve-password-1');
  });
  after(() => t.close());

  async function postLogin(ip: string, password: string) {
    const page = await t.server.app.inject({ method: 'GET', url: '/login', remoteAddress: ip });
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)?.[1];
    const cookie = page.cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    return t.server.app.inject({
      method: 'POST',
      url: '/login',
      remoteAddress: ip,
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
      payload: new URLSearchParams({ _csrf: csrf ?? '', username: 'eve', password }).toString(),
    });
  }

  test('failures go back to the form until the limit, then 429 with Retry-After and a page; no session', async () => {
    for (let i = 0; i < 2; i++) {
      const res = await postLogin('10.3.0.1', 'wrong');
      assert.equal(res.statusCode, 302);
      assert.match(String(res.headers.location), /err=1/);
    }
    const limited = await postLogin('10.3.0.1', 'eve-password-1');
    assert.equal(limited.statusCode, 429);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
    assert.match(String(limited.headers['content-type']), /text\/html/);
    assert.match(limited.body, /Too many sign-in attempts\. Try again in 10 minutes\./);
    assert.equal(
      limited.cookies.find((c) => c.name === 'seed_auth_session'),
      undefined,
    );
    assert.equal((await postLogin('10.3.0.2', 'eve-password-1')).statusCode, 302);
  });
});

describe('settings', () => {
  test('rateLimits: false turns the limits off', async () => {
    const t = await startTestServer({ rateLimits: false });
    try {
      assert.equal(t.server.limits, undefined);
      for (let i = 0; i < 5; i++)
        assert.equal((await passwordGrant(t, '10.4.0.1', 'admin', 'x')).statusCode, 400);
    } finally {
      await t.close();
    }
  });

  test('bad settings are refused naming the field', () => {
    assert.throws(
      () => resolveRateLimits({ password: { ip: { points: 0, durationSeconds: 60 } } }),
      /rateLimits\.password\.ip\.points: positive integer/,
    );
    assert.throws(
      () => resolveRateLimits({ totp: { account: { points: 5, durationSeconds: 1.5 } } }),
      /rateLimits\.totp\.account\.durationSeconds/,
    );
    assert.throws(() => resolveRateLimits({ sms: {} } as never), /rateLimits\.sms: unknown kind/);
    const merged = resolveRateLimits({ reset: { ip: false } });
    assert.equal(merged.reset.ip, false);
    assert.deepEqual(merged.password.ip, { points: 100, durationSeconds: 300 });
  });

  test('AUTH_RATE_LIMIT_<KIND>_<SCOPE> variables', () => {
    assert.deepEqual(
      rateLimitsFromEnv({ AUTH_RATE_LIMIT_PASSWORD_IP: '50/60', AUTH_RATE_LIMIT_TOTP_ACCOUNT: 'off' }),
      { password: { ip: { points: 50, durationSeconds: 60 } }, totp: { account: false } },
    );
    assert.throws(
      () => configFromEnv({ AUTH_RATE_LIMIT_RESET_IP: '10 per hour' }),
      /AUTH_RATE_LIMIT_RESET_IP: <attempts>\/<seconds>/,
    );
    assert.deepEqual(configFromEnv({ AUTH_RATE_LIMIT_RESET_IP: '3/3600' }).options.rateLimits, {
      reset: { ip: { points: 3, durationSeconds: 3600 } },
    });
  });

  test('the limiter other checks call: consume, refuse with the scope, reward', async () => {
    const limits = RateLimits.memory(
      resolveRateLimits({ totp: { ip: false, account: { points: 1, durationSeconds: 60 } } }),
    );
    const refused: string[] = [];
    limits.onRefused((kind, scope) => refused.push(`${kind}:${scope}`));
    assert.deepEqual(await limits.consume('totp', { ip: '1.2.3.4', account: 'u1' }), { ok: true });
    const second = await limits.consume('totp', { ip: '1.2.3.4', account: 'U1 ' });
    assert.equal(second.ok, false);
    assert.equal(!second.ok && second.scope, 'account');
    assert.equal(!second.ok && second.first, true);
    assert.deepEqual(refused, ['totp:account']);
    await limits.clearAccount('totp', 'u1');
    assert.deepEqual(await limits.consume('totp', { account: 'u1' }), { ok: true });
    await limits.reward('totp', { account: 'u1' });
    assert.deepEqual(await limits.consume('totp', { account: 'u1' }), { ok: true });
  });
});
