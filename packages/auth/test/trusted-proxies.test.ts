/**
 * Trusted proxies (`trustedProxies` / `AUTH_TRUSTED_PROXIES`): over real HTTP to a listening server, the
 * per-IP brute-force limit and the audit log use the client address forwarded in `X-Forwarded-For` or
 * `Forwarded` (RFC 7239) only when the TCP peer is a trusted proxy; without the setting, or from another
 * peer, the headers are ignored and cannot be used to dodge the per-IP limit. Plus the address walk itself
 * (chains of proxies, spoofed left-most entries, IPv6, malformed headers) and the settings' errors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { TrustedProxies } from '../src/client-address.ts';
import { configFromEnv } from '../src/env-config.ts';
import { basic, DEMO_SECRET, startTestServer, type TestServer } from './oauth-fixtures.ts';

const LIMITS = {
  password: { ip: { points: 2, durationSeconds: 600 }, account: false as const },
};

/** A password grant over HTTP from this process (peer 127.0.0.1) with extra forwarding headers. */
function passwordGrant(t: TestServer, username: string, password: string, headers: Record<string, string>) {
  return fetch(`${t.base}/connect/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: basic('demo-service', DEMO_SECRET),
      ...headers,
    },
    body: new URLSearchParams({ grant_type: 'password', username, password }),
  });
}

async function deniedAddresses(t: TestServer, failureCode: string): Promise<(string | null)[]> {
  const page = await t.server.store.listAudit({ category: 'Login', outcome: 'Denied', limit: 100 });
  return page.items
    .filter((e) => e.failureCode === failureCode)
    .map((e) => e.remoteAddress ?? null)
    .reverse();
}

describe('behind a trusted proxy (127.0.0.1 trusted)', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ rateLimits: LIMITS, trustedProxies: ['127.0.0.1', '10.0.0.0/8'] });
    await t.createUser('ann', 'ann-password-1');
  });
  after(() => t.close());

  test('X-Forwarded-For names the client: its failures are limited per forwarded address and audited with it', async () => {
    const xff = { 'x-forwarded-for': '198.51.100.7' };
    assert.equal((await passwordGrant(t, 'ann', 'wrong', xff)).status, 400);
    assert.equal((await passwordGrant(t, 'ann', 'wrong', xff)).status, 400);
    const limited = await passwordGrant(t, 'ann', 'ann-password-1', xff);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) >= 1);
    // Another client behind the same proxy is not limited.
    const other = await passwordGrant(t, 'ann', 'ann-password-1', { 'x-forwarded-for': '198.51.100.8' });
    assert.equal(other.status, 200);
    assert.deepEqual(await deniedAddresses(t, 'invalid_credentials'), ['198.51.100.7', '198.51.100.7']);
    assert.deepEqual(await deniedAddresses(t, 'rate_limited'), ['198.51.100.7']);
  });

  test('Forwarded (RFC 7239): a quoted IPv6 node with a port; a chain through a trusted 10.x proxy ends at the client', async () => {
    assert.equal(
      (await passwordGrant(t, 'ann', 'wrong', { forwarded: 'for="[2001:db8:cafe::17]:4711";proto=https' }))
        .status,
      400,
    );
    // client → 10.1.2.3 (trusted) → 127.0.0.1 (trusted peer); the left-most entry was sent by the client.
    assert.equal(
      (
        await passwordGrant(t, 'ann', 'wrong', {
          forwarded: 'for=192.0.2.99, for=203.0.113.4;by=10.1.2.3, for=10.1.2.3',
        })
      ).status,
      400,
    );
    const addresses = await deniedAddresses(t, 'invalid_credentials');
    assert.deepEqual(addresses.slice(-2), ['2001:db8:cafe::17', '203.0.113.4']);
  });

  test('a client cannot pick its address: the left-most X-Forwarded-For entry it adds is not read past an untrusted hop', async () => {
    // The client 203.0.113.50 sends "X-Forwarded-For: 192.0.2.1"; the proxy appends the client's address.
    const spoof = { 'x-forwarded-for': '192.0.2.1, 203.0.113.50' };
    assert.equal((await passwordGrant(t, 'ann', 'wrong', spoof)).status, 400);
    assert.equal(
      (await passwordGrant(t, 'ann', 'wrong', { 'x-forwarded-for': '192.0.2.2, 203.0.113.50' })).status,
      400,
    );
    assert.equal((await passwordGrant(t, 'ann', 'ann-password-1', spoof)).status, 429);
    assert.deepEqual((await deniedAddresses(t, 'invalid_credentials')).slice(-2), [
      '203.0.113.50',
      '203.0.113.50',
    ]);
  });
});

describe('without trusted proxies (the default)', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer({ rateLimits: LIMITS });
    await t.createUser('bob', 'bob-password-1');
  });
  after(() => t.close());

  test('forwarding headers are ignored: the peer address is limited and audited, whatever the headers say', async () => {
    assert.equal((await passwordGrant(t, 'bob', 'wrong', { 'x-forwarded-for': '198.51.100.1' })).status, 400);
    assert.equal((await passwordGrant(t, 'bob', 'wrong', { forwarded: 'for=198.51.100.2' })).status, 400);
    const limited = await passwordGrant(t, 'bob', 'bob-password-1', { 'x-forwarded-for': '198.51.100.3' });
    assert.equal(limited.status, 429, 'new forwarded addresses do not reset the per-IP count');
    assert.deepEqual(await deniedAddresses(t, 'invalid_credentials'), ['127.0.0.1', '127.0.0.1']);
    assert.deepEqual(await deniedAddresses(t, 'rate_limited'), ['127.0.0.1']);
  });
});

describe('TrustedProxies', () => {
  const proxies = new TrustedProxies(['10.0.0.0/8', '192.168.1.5', 'fd00::/8']);

  test('an untrusted peer is the client; its headers are not read', () => {
    assert.equal(proxies.resolve('203.0.113.1', { 'x-forwarded-for': '1.2.3.4' }), '203.0.113.1');
    assert.equal(proxies.resolve('::ffff:203.0.113.1', { forwarded: 'for=1.2.3.4' }), '203.0.113.1');
  });

  test('trusted peers hand over hop by hop, right to left, up to the first untrusted address', () => {
    assert.equal(proxies.resolve('::ffff:10.0.0.1', { 'x-forwarded-for': '1.1.1.1, 2.2.2.2' }), '2.2.2.2');
    assert.equal(
      proxies.resolve('192.168.1.5', { 'x-forwarded-for': '1.1.1.1, 2.2.2.2, 10.9.9.9, fd00::3' }),
      '2.2.2.2',
    );
    // Every hop trusted: the oldest one named is the client.
    assert.equal(proxies.resolve('10.0.0.1', { 'x-forwarded-for': '10.0.0.2, 10.0.0.3' }), '10.0.0.2');
    // Forwarded wins over X-Forwarded-For; IPv4 with a port.
    assert.equal(
      proxies.resolve('10.0.0.1', { forwarded: 'for="192.0.2.43:47011"', 'x-forwarded-for': '5.5.5.5' }),
      '192.0.2.43',
    );
  });

  test('unknown or obfuscated nodes, malformed headers and empty lists stop at the last address known', () => {
    assert.equal(proxies.resolve('10.0.0.1', { forwarded: 'for=unknown' }), '10.0.0.1');
    assert.equal(proxies.resolve('10.0.0.1', { forwarded: 'for=_hidden, for=10.0.0.7' }), '10.0.0.7');
    assert.equal(proxies.resolve('10.0.0.1', { forwarded: 'for=1.2.3.4;;;"' }), '10.0.0.1');
    assert.equal(proxies.resolve('10.0.0.1', { 'x-forwarded-for': 'not-an-ip' }), '10.0.0.1');
    assert.equal(proxies.resolve('10.0.0.1', {}), '10.0.0.1');
    assert.equal(new TrustedProxies([]).resolve('10.0.0.1', { 'x-forwarded-for': '1.2.3.4' }), '10.0.0.1');
  });

  test('only the nearest 32 hops are read', () => {
    const chain = ['198.51.100.1', ...Array.from({ length: 40 }, (_, i) => `10.0.${i}.1`)].join(', ');
    assert.equal(proxies.resolve('10.0.0.1', { 'x-forwarded-for': chain }), '10.0.8.1');
  });

  test('bad entries are refused naming the setting and the entry; AUTH_TRUSTED_PROXIES is read', () => {
    assert.throws(
      () => new TrustedProxies(['10.0.0.0/33']),
      /trustedProxies: "10\.0\.0\.0\/33" is not an IP address or CIDR range/,
    );
    assert.throws(() => new TrustedProxies(['proxy.example']), /trustedProxies: "proxy\.example"/);
    assert.throws(() => TrustedProxies.parse('10.0.0.1, ::1/abc'), /AUTH_TRUSTED_PROXIES: "::1\/abc"/);
    assert.throws(() => configFromEnv({ AUTH_TRUSTED_PROXIES: '10.0.0.1/-1' }), /AUTH_TRUSTED_PROXIES/);
    assert.deepEqual(configFromEnv({ AUTH_TRUSTED_PROXIES: ' 10.0.0.0/8 , ::1 ' }).options.trustedProxies, [
      '10.0.0.0/8',
      '::1/128',
    ]);
    assert.equal(configFromEnv({}).options.trustedProxies, undefined);
  });
});
