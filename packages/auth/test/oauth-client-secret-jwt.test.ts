/**
 * `client_secret_jwt` client authentication (RFC 7523 §2.2, §3; OpenID Connect Core §9): the secret of a
 * client registered for it is stored sealed (AES-256-GCM under the server's client-secret key), never in
 * plain text; the administration API issues it when the method is chosen; openid-client 6 and oauth4webapi
 * authenticate with HS256 assertions keyed by it; refusals (wrong secret, replayed `jti`, wrong method,
 * altered sealed secret); dynamic registration; and a server without the key neither advertises nor accepts
 * the method.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { decodeJwt, SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { JWT_BEARER_ASSERTION_TYPE } from '../src/oauth/client-auth-jwt.ts';
import {
  ADMIN_PASSWORD,
  postForm,
  serviceToken,
  startTestServer,
  type TestServer,
} from './oauth-fixtures.ts';

const KEY = 'test-client-secret-key-0123456789abcdef';
const insecure = { execute: [client.allowInsecureRequests] };
const INITIAL = 'initial-access-token-0123456789';

let t: TestServer;
let admin: string;
/** The secret the administration API issued for `hmac-client`. */
let secret: string;

async function adminCall(method: string, path: string, body?: unknown) {
  const res = await fetch(`${t.base}/auth-admin/api/${path}`, {
    method,
    headers: {
      authorization: `Bearer ${admin}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** An HS256 client assertion for `clientId` keyed by `key`; `claims` override the defaults. */
function assertion(clientId: string, key: string, claims: Record<string, unknown> = {}, alg = 'HS256') {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: clientId,
    sub: clientId,
    aud: `${t.base}/connect/token`,
    jti: randomUUID(),
    iat: now,
    exp: now + 60,
    ...claims,
  })
    .setProtectedHeader({ alg })
    .sign(new TextEncoder().encode(key));
}

const credentials = (jwt: string) =>
  postForm(t.base, '/connect/token', {
    grant_type: 'client_credentials',
    scope: 'api',
    client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
    client_assertion: jwt,
  });

before(async () => {
  t = await startTestServer({
    oauth: { clientSecretKey: KEY, registration: { initialAccessTokens: [INITIAL] } },
  });
  const res = await serviceToken(t.base, {
    grant_type: 'password',
    username: 'admin',
    password: ADMIN_PASSWORD,
  });
  admin = ((await res.json()) as { access_token: string }).access_token;
  await t.createClient({
    clientId: 'hmac-client',
    clientType: 'confidential',
    secret: 'initial-hashed-secret-1',
    allowedGrantTypes: ['client_credentials'],
    allowedScopes: ['api'],
  });
});
after(() => t?.close());

describe('client_secret_jwt', () => {
  test('choosing it in the admin API issues a new secret stored sealed (never the secret itself); leaving it re-hashes', async () => {
    const before = await adminCall('GET', 'clients/hmac-client');
    assert.equal(before.body.secretStorage, 'hashed');
    const res = await adminCall('PUT', 'clients/hmac-client/metadata', {
      tokenEndpointAuthMethod: 'client_secret_jwt',
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.secretStorage, 'sealed');
    assert.equal(typeof res.body.clientSecret, 'string');
    secret = res.body.clientSecret;
    const stored = (await t.server.store.getClient('hmac-client'))!.secretHash!;
    assert.match(stored, /^sealed:v1:/);
    assert.ok(!stored.includes(secret), 'the stored form does not contain the secret');
    // Audited without the secret.
    const audit = await t.server.store.listAudit({ category: 'Admin' });
    const event = audit.items.find((e) => e.details?.action === 'client.metadata');
    assert.ok(event);
    assert.ok(((event.details?.changed ?? []) as string[]).includes('clientSecret'));
    assert.ok(!JSON.stringify(event).includes(secret));
    // Choosing it again keeps the secret (already sealed): nothing new is issued.
    const again = await adminCall('PUT', 'clients/hmac-client/metadata', {
      tokenEndpointAuthMethod: 'client_secret_jwt',
    });
    assert.equal(again.body.clientSecret, undefined);
  });

  test('discovery advertises client_secret_jwt and the HMAC algorithms', async () => {
    const config = await client.discovery(new URL(t.base), 'hmac-client', undefined, client.None(), insecure);
    const meta = config.serverMetadata();
    assert.ok(meta.token_endpoint_auth_methods_supported?.includes('client_secret_jwt'));
    assert.ok(meta.token_endpoint_auth_signing_alg_values_supported?.includes('HS256'));
  });

  test('openid-client 6: client credentials and introspection with ClientSecretJwt', async () => {
    const config = await client.discovery(
      new URL(t.base),
      'hmac-client',
      undefined,
      client.ClientSecretJwt(secret),
      insecure,
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: 'api' });
    assert.equal(decodeJwt(tokens.access_token).client_id, 'hmac-client');
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);
  });

  test('oauth4webapi: client credentials with ClientSecretJwt', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const c: oauth.Client = { client_id: 'hmac-client' };
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      c,
      oauth.ClientSecretJwt(secret),
      new URLSearchParams({ scope: 'api' }),
      { [oauth.allowInsecureRequests]: true },
    );
    const result = await oauth.processClientCredentialsResponse(as, c, response);
    assert.equal(decodeJwt(result.access_token).sub, 'hmac-client');
  });

  test('refusals: wrong secret, replayed jti, plain secret instead of an assertion, HS512 with the right key works', async () => {
    const wrong = await credentials(await assertion('hmac-client', `${secret}x`));
    assert.equal(wrong.status, 401);
    assert.equal(((await wrong.json()) as { error: string }).error, 'invalid_client');

    const jti = randomUUID();
    assert.equal((await credentials(await assertion('hmac-client', secret, { jti }))).status, 200);
    const replay = await credentials(await assertion('hmac-client', secret, { jti }));
    assert.equal(replay.status, 401);
    assert.match(((await replay.json()) as { error_description: string }).error_description, /replay/);

    const basicAuth = await postForm(
      t.base,
      '/connect/token',
      { grant_type: 'client_credentials', scope: 'api' },
      { authorization: `Basic ${Buffer.from(`hmac-client:${secret}`).toString('base64')}` },
    );
    assert.equal(basicAuth.status, 401, 'the registered method is the only one accepted');

    assert.equal((await credentials(await assertion('hmac-client', secret, {}, 'HS512'))).status, 200);
  });

  test('a sealed secret altered in the store, or copied onto another client, no longer opens', async () => {
    const stored = (await t.server.store.getClient('hmac-client'))!.secretHash!;
    await t.createClient({
      clientId: 'copy-client',
      clientType: 'confidential',
      secret: 'copy-client-secret-1',
      allowedGrantTypes: ['client_credentials'],
      allowedScopes: ['api'],
    });
    await t.server.store.setClientMetadata('copy-client', { tokenEndpointAuthMethod: 'client_secret_jwt' });
    await t.server.store.updateClient('copy-client', { secretHash: stored });
    const copied = await credentials(await assertion('copy-client', secret));
    assert.equal(copied.status, 401, 'the client id is authenticated data of the seal');

    const last = stored.at(-1) === 'A' ? 'B' : 'A';
    await t.server.store.updateClient('copy-client', { secretHash: `${stored.slice(0, -1)}${last}` });
    assert.equal((await credentials(await assertion('copy-client', secret))).status, 401);
  });

  test('leaving client_secret_jwt stores the same secret hashed again; Basic then works with it', async () => {
    const res = await adminCall('PUT', 'clients/hmac-client/metadata', {
      tokenEndpointAuthMethod: 'client_secret_basic',
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.secretStorage, 'hashed');
    assert.doesNotMatch((await t.server.store.getClient('hmac-client'))!.secretHash!, /^sealed:/);
    const basicAuth = await postForm(
      t.base,
      '/connect/token',
      { grant_type: 'client_credentials', scope: 'api' },
      { authorization: `Basic ${Buffer.from(`hmac-client:${secret}`).toString('base64')}` },
    );
    assert.equal(basicAuth.status, 200);
  });

  test('dynamic registration (RFC 7591) of a client_secret_jwt client: its secret authenticates HS256 assertions', async () => {
    const registered = await fetch(`${t.base}/connect/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${INITIAL}` },
      body: JSON.stringify({
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: 'client_secret_jwt',
      }),
    });
    assert.equal(registered.status, 201);
    const body = (await registered.json()) as {
      client_id: string;
      client_secret: string;
      token_endpoint_auth_method: string;
    };
    assert.equal(body.token_endpoint_auth_method, 'client_secret_jwt');
    assert.match((await t.server.store.getClient(body.client_id))!.secretHash!, /^sealed:v1:/);
    const tokens = await postForm(t.base, '/connect/token', {
      grant_type: 'client_credentials',
      client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
      client_assertion: await assertion(body.client_id, body.client_secret),
    });
    assert.equal(tokens.status, 200, await tokens.clone().text());
  });
});

describe('without a client-secret key', () => {
  let plain: TestServer;
  before(async () => {
    plain = await startTestServer();
  });
  after(() => plain?.close());

  test('client_secret_jwt is not advertised, and the admin API refuses it with 400 naming the field', async () => {
    const meta = (await (await fetch(`${plain.base}/.well-known/openid-configuration`)).json()) as {
      token_endpoint_auth_methods_supported: string[];
    };
    assert.ok(!meta.token_endpoint_auth_methods_supported.includes('client_secret_jwt'));
    const token = (await (
      await serviceToken(plain.base, { grant_type: 'password', username: 'admin', password: ADMIN_PASSWORD })
    ).json()) as { access_token: string };
    const res = await fetch(`${plain.base}/auth-admin/api/clients/demo-service/metadata`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${token.access_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tokenEndpointAuthMethod: 'client_secret_jwt' }),
    });
    assert.equal(res.status, 400);
    assert.match(
      ((await res.json()) as { error: string }).error,
      /tokenEndpointAuthMethod.*AUTH_CLIENT_SECRET_KEY/,
    );
    // Nothing changed: the demo client still authenticates with its secret.
    assert.equal(
      (await serviceToken(plain.base, { grant_type: 'client_credentials', scope: 'api' })).status,
      200,
    );
  });
});
