/**
 * Token Exchange (RFC 8693) with openid-client 6 and oauth4webapi against the real server: impersonation,
 * delegation with the `act` claim (nested on a second exchange), audience restriction through `resource`,
 * the exchanged token on the permission middleware, the audit trail, and every error row of §2.2.2 and the
 * per-client policy.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { liveClock, resourceServer } from './oauth-dpop-helpers.ts';
import { basic, postForm, serviceToken, startTestServer, type TestServer } from './oauth-fixtures.ts';

const GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';
const ORDERS = 'https://orders.example.test/';
const insecure = { execute: [client.allowInsecureRequests] };

let t: TestServer;
let rs: Awaited<ReturnType<typeof resourceServer>>;
let aliceToken: string;
let alice: { id: string };

async function exchanger(
  clientId: string,
  tokenExchange: Record<string, unknown> | undefined,
  grants: string[] = [GRANT, 'client_credentials'],
) {
  await t.createClient({
    clientId,
    clientType: 'confidential',
    secret: `${clientId}-secret`,
    allowedGrantTypes: grants,
    allowedScopes: ['api', 'profile'],
  });
  await t.server.store.setClientMetadata(clientId, {
    allowedResources: [ORDERS],
    ...(tokenExchange ? { tokenExchange: tokenExchange as never } : {}),
  });
}

const exchange = (clientId: string, params: Record<string, string>) =>
  postForm(
    t.base,
    '/connect/token',
    { grant_type: GRANT, ...params },
    { authorization: basic(clientId, `${clientId}-secret`) },
  );

before(async () => {
  t = await startTestServer();
  liveClock(t.clock);
  alice = await t.createUser('alice', 'alice-password-1', { directPermissions: ['shop.orders.read'] });
  rs = await resourceServer(t.server);
  const res = await serviceToken(t.base, {
    grant_type: 'password',
    username: 'alice',
    password: 'alice-password-1',
    scope: 'api profile',
  });
  aliceToken = ((await res.json()) as { access_token: string }).access_token;
  await exchanger('gateway', { subjectClients: ['demo-service'], impersonation: true, delegation: true });
  await exchanger('delegate-only', { subjectClients: ['*'], delegation: true });
  await exchanger('spa-only', { subjectClients: ['demo-spa'], impersonation: true });
  await exchanger('no-policy', undefined);
});
after(async () => {
  await rs?.app.close();
  await t?.close();
});

describe('token exchange with client libraries', () => {
  let config: client.Configuration;
  before(async () => {
    config = await client.discovery(
      new URL(t.base),
      'gateway',
      undefined,
      client.ClientSecretBasic('gateway-secret'),
      insecure,
    );
  });

  test('discovery lists the grant type', () => {
    assert.ok(config.serverMetadata().grant_types_supported?.includes(GRANT));
  });

  test('openid-client 6, impersonation: the new token names the user, for the exchanging client, no act', async () => {
    const tokens = await client.genericGrantRequest(config, GRANT, {
      subject_token: aliceToken,
      subject_token_type: AT,
      scope: 'api',
    });
    assert.equal(tokens.issued_token_type, AT);
    const claims = decodeJwt(tokens.access_token);
    assert.equal(claims.sub, alice.id);
    assert.equal(claims.client_id, 'gateway');
    assert.equal(claims.scope, 'api');
    assert.equal(claims.act, undefined);
    // The exchanged token is a user token the permission middleware accepts.
    const res = await fetch(rs.url, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    assert.equal(res.status, 200);
  });

  test('openid-client 6, delegation: act names the actor; a second exchange nests the first actor', async () => {
    const actor = (await client.clientCredentialsGrant(config, { scope: 'api' })).access_token;
    const first = await client.genericGrantRequest(config, GRANT, {
      subject_token: aliceToken,
      subject_token_type: AT,
      actor_token: actor,
      actor_token_type: AT,
    });
    assert.deepEqual(decodeJwt(first.access_token).act, { sub: 'gateway', client_id: 'gateway' });
    // The delegated token is itself the actor of a further exchange: act.act keeps the chain (§4.1).
    const second = await client.genericGrantRequest(config, GRANT, {
      subject_token: aliceToken,
      subject_token_type: AT,
      actor_token: first.access_token,
      actor_token_type: AT,
    });
    assert.deepEqual(decodeJwt(second.access_token).act, {
      sub: alice.id,
      client_id: 'gateway',
      act: { sub: 'gateway', client_id: 'gateway' },
    });
  });

  test('oauth4webapi genericTokenEndpointRequest with resource: aud restricted', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const c: oauth.Client = { client_id: 'gateway' };
    const response = await oauth.genericTokenEndpointRequest(
      as,
      c,
      oauth.ClientSecretBasic('gateway-secret'),
      GRANT,
      { subject_token: aliceToken, subject_token_type: AT, resource: ORDERS },
      { [oauth.allowInsecureRequests]: true },
    );
    const tokens = await oauth.processGenericTokenEndpointResponse(as, c, response);
    assert.equal(decodeJwt(tokens.access_token).aud, ORDERS);
  });

  test('exchanges are audited (granted and refused)', async () => {
    const page = await t.server.store.listAudit({ category: 'Token', clientId: 'gateway', limit: 100 });
    const granted = page.items.filter(
      (e) => e.details?.action === 'token_exchange' && e.outcome === 'Success',
    );
    assert.ok(granted.length >= 3);
    assert.ok(granted.some((e) => e.details?.mode === 'delegation' && e.details?.actor === 'gateway'));
    assert.ok(granted.every((e) => e.subjectId === alice.id));
  });
});

describe('token exchange errors (RFC 8693 §2.2.2 and the client policy)', () => {
  const rows: [string, string, () => Record<string, string>, string][] = [
    ['missing subject_token', 'gateway', () => ({ subject_token_type: AT }), 'invalid_request'],
    ['missing subject_token_type', 'gateway', () => ({ subject_token: aliceToken }), 'invalid_request'],
    [
      'unsupported subject_token_type',
      'gateway',
      () => ({
        subject_token: aliceToken,
        subject_token_type: 'urn:ietf:params:oauth:token-type:refresh_token',
      }),
      'unsupported_token_type',
    ],
    [
      'actor_token without actor_token_type',
      'gateway',
      () => ({ subject_token: aliceToken, subject_token_type: AT, actor_token: aliceToken }),
      'invalid_request',
    ],
    [
      'requested_token_type refresh_token',
      'gateway',
      () => ({
        subject_token: aliceToken,
        subject_token_type: AT,
        requested_token_type: 'urn:ietf:params:oauth:token-type:refresh_token',
      }),
      'unsupported_token_type',
    ],
    [
      'an invalid subject_token',
      'gateway',
      () => ({ subject_token: 'not-a-token', subject_token_type: AT }),
      'invalid_request',
    ],
    [
      'an invalid actor_token',
      'gateway',
      () => ({
        subject_token: aliceToken,
        subject_token_type: AT,
        actor_token: 'nope',
        actor_token_type: AT,
      }),
      'invalid_request',
    ],
    [
      'scope beyond the subject token',
      'gateway',
      () => ({ subject_token: aliceToken, subject_token_type: AT, scope: 'openid' }),
      'invalid_scope',
    ],
    [
      'resource not allowed',
      'gateway',
      () => ({ subject_token: aliceToken, subject_token_type: AT, resource: 'https://evil.example.test/' }),
      'invalid_target',
    ],
    [
      'impersonation by a delegation-only client',
      'delegate-only',
      () => ({ subject_token: aliceToken, subject_token_type: AT }),
      'unauthorized_client',
    ],
    [
      'a subject token of a client not in the policy',
      'spa-only',
      () => ({ subject_token: aliceToken, subject_token_type: AT }),
      'unauthorized_client',
    ],
    [
      'a client without exchange policy',
      'no-policy',
      () => ({ subject_token: aliceToken, subject_token_type: AT }),
      'unauthorized_client',
    ],
  ];
  for (const [name, clientId, params, error] of rows) {
    test(`${name} → 400 ${error}`, async () => {
      const res = await exchange(clientId, params());
      assert.equal(res.status, 400);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(((await res.json()) as { error: string }).error, error);
    });
  }

  test('a client without the grant type → unauthorized_client', async () => {
    const res = await serviceToken(t.base, {
      grant_type: GRANT,
      subject_token: aliceToken,
      subject_token_type: AT,
    });
    assert.equal(((await res.json()) as { error: string }).error, 'unauthorized_client');
  });

  test('the subject token of a user disabled since → invalid_request (and the refusal is audited)', async () => {
    const bob = await t.createUser('bob', 'bob-password-1');
    const res = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'bob',
      password: 'bob-password-1',
      scope: 'api',
    });
    const bobToken = ((await res.json()) as { access_token: string }).access_token;
    await t.server.store.updateUser(bob.id, { isEnabled: false });
    const refused = await exchange('gateway', { subject_token: bobToken, subject_token_type: AT });
    assert.equal(((await refused.json()) as { error: string }).error, 'invalid_request');
    const page = await t.server.store.listAudit({
      category: 'Token',
      outcome: 'Denied',
      clientId: 'gateway',
    });
    assert.ok(
      page.items.some((e) => e.details?.action === 'token_exchange' && e.failureCode === 'invalid_request'),
    );
  });

  test('token exchange off on the server: not advertised, unsupported_grant_type', async () => {
    const off = await startTestServer({ oauth: { grantTypes: ['client_credentials'] } });
    try {
      const meta = (await (await fetch(`${off.base}/.well-known/oauth-authorization-server`)).json()) as {
        grant_types_supported: string[];
      };
      assert.ok(!meta.grant_types_supported.includes(GRANT));
      const res = await serviceToken(off.base, {
        grant_type: GRANT,
        subject_token: 'x',
        subject_token_type: AT,
      });
      assert.equal(((await res.json()) as { error: string }).error, 'unsupported_grant_type');
    } finally {
      await off.close();
    }
  });
});
