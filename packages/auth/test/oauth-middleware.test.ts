/**
 * Tokens issued by the token endpoint, checked by the core's permission middleware on a separate resource
 * server that knows only the issuer's public JWKS (fetched over HTTP) and the store: accepted while the
 * subject holds the permission; refused with `SubjectDisabled` (403) once the user is disabled, locked or
 * has a new password (spec 001 state rule); key rotation keeps old tokens valid.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { createRemoteJWKSet } from 'jose';
import { AuthorizationService } from '../src/authorization.ts';
import { authPlugin } from '../src/middleware/fastify.ts';
import { JwtTokenVerifier } from '../src/token-verifier.ts';
import { serviceToken, startTestServer, type TestServer } from './oauth-fixtures.ts';

let t: TestServer;
let api: FastifyInstance;

before(async () => {
  t = await startTestServer();
  await t.createUser('reader', 'reader-password-1', { directPermissions: ['shop.orders.read'] });
  await t.createUser('nobody-special', 'plain-password-1');
  await t.server.store.updateClient('demo-service', { permissions: ['shop.orders.*'] });
  const tokenVerifier = new JwtTokenVerifier({
    // No cool-down: the resource server refetches the JWKS as soon as it meets an unknown `kid`.
    key: createRemoteJWKSet(new URL(`${t.base}/.well-known/jwks.json`), { cooldownDuration: 0 }),
    issuer: t.base,
    audience: 'seed',
    typ: 'at+jwt',
    now: () => t.clock.now,
  });
  api = Fastify();
  await api.register(authPlugin, {
    service: new AuthorizationService({ store: t.server.store, tokenVerifier }),
  });
  api.get('/orders', { config: { auth: { permission: 'shop.orders.read' } } }, async (req) => ({
    subject: req.auth.subject?.id,
  }));
});
after(async () => {
  await api?.close();
  await t?.close();
});

async function userToken(userName: string, password: string): Promise<string> {
  const res = await serviceToken(t.base, {
    grant_type: 'password',
    username: userName,
    password,
    scope: 'api',
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { access_token: string }).access_token;
}

const getOrders = (token: string) =>
  api.inject({ method: 'GET', url: '/orders', headers: { authorization: `Bearer ${token}` } });

describe('issued tokens on a protected route', () => {
  test('a user holding the permission is let through', async () => {
    const res = await getOrders(await userToken('reader', 'reader-password-1'));
    assert.equal(res.statusCode, 200, res.body);
  });

  test('a user without it gets 403 NoMatchingGrant', async () => {
    const res = await getOrders(await userToken('nobody-special', 'plain-password-1'));
    assert.equal(res.statusCode, 403);
    assert.deepEqual(res.json(), {
      error: 'forbidden',
      error_description: 'NoMatchingGrant',
      permission: 'shop.orders.read',
    });
  });

  test('a client-credentials token acts with the client’s Permissions', async () => {
    const res = await serviceToken(t.base, { grant_type: 'client_credentials', scope: 'api' });
    const { access_token } = (await res.json()) as { access_token: string };
    const ok = await getOrders(access_token);
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal(ok.json().subject, 'demo-service');
  });

  test('the same token is refused with SubjectDisabled after the user is disabled', async () => {
    const token = await userToken('reader', 'reader-password-1');
    assert.equal((await getOrders(token)).statusCode, 200);
    const reader = await t.server.store.findUserByName('reader');
    await t.server.store.updateUser(reader!.id, { isEnabled: false });
    try {
      const res = await getOrders(token);
      assert.equal(res.statusCode, 403);
      assert.equal(res.json().error, 'forbidden');
      assert.equal(res.json().error_description, 'SubjectDisabled');
    } finally {
      await t.server.store.updateUser(reader!.id, { isEnabled: true });
    }
  });

  test('…and after a password reset (security stamp changed)', async () => {
    const token = await userToken('reader', 'reader-password-1');
    const reader = await t.server.store.findUserByName('reader');
    await t.server.store.setPasswordHash(reader!.id, await t.server.hasher.hash('reader-password-2'));
    const res = await getOrders(token);
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error_description, 'SubjectDisabled');
    assert.equal((await getOrders(await userToken('reader', 'reader-password-2'))).statusCode, 200);
  });

  test('a tampered or expired token is 401 invalid_token', async () => {
    const token = await userToken('reader', 'reader-password-2');
    const tampered = await getOrders(`${token.slice(0, -4)}AAAA`);
    assert.equal(tampered.statusCode, 401);
    assert.equal(tampered.headers['www-authenticate'], 'Bearer error="invalid_token"');
    t.clock.now += 601_000;
    try {
      const expired = await getOrders(token);
      assert.equal(expired.statusCode, 401);
      assert.equal(expired.json().error, 'invalid_token');
    } finally {
      t.clock.now -= 601_000;
    }
  });
});

describe('signing-key rotation', () => {
  test('after rotation the JWKS publishes both keys; old and new tokens are accepted', async () => {
    const before = await userToken('reader', 'reader-password-2');
    const oldKid = t.server.keys.active().kid;
    await t.server.keys.rotate({ immediate: true });
    const newKid = t.server.keys.active().kid;
    assert.notEqual(newKid, oldKid);
    const jwks = (await (await fetch(`${t.base}/.well-known/jwks.json`)).json()) as {
      keys: { kid: string }[];
    };
    assert.deepEqual(jwks.keys.map((k) => k.kid).sort(), [oldKid, newKid].sort());
    const afterwards = await userToken('reader', 'reader-password-2');
    assert.equal(JSON.parse(Buffer.from(afterwards.split('.')[0]!, 'base64url').toString()).kid, newKid);
    assert.equal((await getOrders(afterwards)).statusCode, 200);
    assert.equal((await getOrders(before)).statusCode, 200, 'tokens signed with the retired key stay valid');
  });

  test('a scheduled rotation publishes the next key before it signs with it', async () => {
    const current = t.server.keys.active().kid;
    const before = t.server.keys.jwks().keys.map((k) => k.kid);
    t.clock.now += 1000;
    await t.server.keys.rotate();
    const next = t.server.keys
      .jwks()
      .keys.map((k) => k.kid)
      .find((kid) => !before.includes(kid));
    assert.ok(next, 'the new key is in the JWKS');
    assert.equal(t.server.keys.active().kid, current, 'but does not sign yet');
    const early = await userToken('reader', 'reader-password-2');
    assert.equal(JSON.parse(Buffer.from(early.split('.')[0]!, 'base64url').toString()).kid, current);
    t.clock.now += 10 * 60_000;
    try {
      assert.equal(t.server.keys.active().kid, next, 'it signs once the publication period has passed');
      const late = await userToken('reader', 'reader-password-2');
      assert.equal(JSON.parse(Buffer.from(late.split('.')[0]!, 'base64url').toString()).kid, next);
      assert.equal((await getOrders(late)).statusCode, 200);
      assert.ok(
        t.server.keys.jwks().keys.some((k) => k.kid === current),
        'the previous key stays published for the tokens it signed',
      );
    } finally {
      t.clock.now -= 10 * 60_000 + 1000;
    }
  });

  test('a retired key leaves the JWKS once its TTL has passed', async () => {
    const active = t.server.keys.active().kid;
    const retired = t.server.keys
      .jwks()
      .keys.map((k) => k.kid)
      .filter((kid) => kid !== active);
    assert.ok(retired.length >= 1);
    t.clock.now += 2 * 24 * 3600_000;
    try {
      await t.server.keys.rotate({ immediate: true });
      const kids = t.server.keys.jwks().keys.map((k) => k.kid);
      const fresh = t.server.keys.active().kid;
      assert.deepEqual(
        kids.sort(),
        [active, fresh].sort(),
        'only the key retired just now and the new one remain',
      );
      for (const kid of retired) assert.ok(!kids.includes(kid));
    } finally {
      t.clock.now -= 2 * 24 * 3600_000;
    }
  });
});
