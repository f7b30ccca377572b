/**
 * `private_key_jwt` client authentication (RFC 7523 §2.2, §3; OIDC Core §9) with inline `jwks` and with a
 * `jwks_uri`, driven by openid-client 6 and oauth4webapi; every refusal row; assertion replay across two
 * server instances sharing one SQLite file; resource indicators (RFC 8707) restricting the token audience.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type CryptoKey, decodeJwt, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { JWT_BEARER_ASSERTION_TYPE } from '../src/oauth/client-auth-jwt.ts';
import { liveClock } from './oauth-dpop-helpers.ts';
import { basic, postForm, startTestServer, type TestServer } from './oauth-fixtures.ts';

const insecure = { execute: [client.allowInsecureRequests] };
const API = 'https://api.example.test/';
const OTHER = 'https://other.example.test/orders';

let t: TestServer;
let key: { privateKey: CryptoKey; jwk: JWK };
let jwksServer: Server;
let remoteKey: { privateKey: CryptoKey; jwk: JWK };

async function signingKey(kid: string): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}

/** Registers a confidential `private_key_jwt` client on `server`. */
async function jwtClient(
  server: TestServer,
  clientId: string,
  metadata: Record<string, unknown>,
): Promise<void> {
  await server.createClient({
    clientId,
    clientType: 'confidential',
    secret: randomUUID(),
    allowedGrantTypes: ['client_credentials'],
    allowedScopes: ['api'],
  });
  await server.server.store.setClientMetadata(clientId, {
    tokenEndpointAuthMethod: 'private_key_jwt',
    allowedResources: [API, OTHER],
    ...metadata,
  });
}

before(async () => {
  t = await startTestServer();
  liveClock(t.clock);
  key = await signingKey('k1');
  await jwtClient(t, 'jwt-client', { jwks: { keys: [key.jwk] } });
  remoteKey = await signingKey('r1');
  jwksServer = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [remoteKey.jwk] })),
  );
  await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
  const address = jwksServer.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  await jwtClient(t, 'jwt-remote', { jwksUri: `http://127.0.0.1:${port}/jwks.json` });
});
after(async () => {
  await t?.close();
  jwksServer?.close();
});

/** A client assertion for `clientId` signed with `signer`; `claims` override the defaults. */
function assertion(
  clientId: string,
  signer: { privateKey: CryptoKey; jwk: JWK },
  claims: Record<string, unknown> = {},
  alg = 'ES256',
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload: Record<string, unknown> = {
    iss: clientId,
    sub: clientId,
    aud: `${t.base}/connect/token`,
    jti: randomUUID(),
    iat: now,
    exp: now + 60,
    ...claims,
  };
  for (const [name, value] of Object.entries(payload)) if (value === undefined) delete payload[name];
  return new SignJWT(payload).setProtectedHeader({ alg, kid: signer.jwk.kid }).sign(signer.privateKey);
}

const tokenWith = (params: Record<string, string>, headers: Record<string, string> = {}) =>
  postForm(t.base, '/connect/token', { grant_type: 'client_credentials', scope: 'api', ...params }, headers);

describe('private_key_jwt with client libraries', () => {
  test('discovery advertises private_key_jwt and its signing algorithms', async () => {
    const config = await client.discovery(new URL(t.base), 'jwt-client', undefined, client.None(), insecure);
    const meta = config.serverMetadata();
    assert.ok(meta.token_endpoint_auth_methods_supported?.includes('private_key_jwt'));
    assert.ok(meta.token_endpoint_auth_signing_alg_values_supported?.includes('ES256'));
    assert.ok(!meta.token_endpoint_auth_signing_alg_values_supported?.some((alg) => alg.startsWith('HS')));
  });

  test('openid-client 6: client credentials and introspection with PrivateKeyJwt (inline jwks)', async () => {
    const config = await client.discovery(
      new URL(t.base),
      'jwt-client',
      undefined,
      client.PrivateKeyJwt(key.privateKey),
      insecure,
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: 'api' });
    assert.equal(decodeJwt(tokens.access_token).client_id, 'jwt-client');
    const introspection = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(introspection.active, true);
  });

  test('openid-client 6: a key published at jwks_uri', async () => {
    const config = await client.discovery(
      new URL(t.base),
      'jwt-remote',
      undefined,
      client.PrivateKeyJwt(remoteKey.privateKey),
      insecure,
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: 'api' });
    assert.equal(decodeJwt(tokens.access_token).sub, 'jwt-remote');
  });

  test('oauth4webapi: client credentials with PrivateKeyJwt and a resource indicator', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const c: oauth.Client = { client_id: 'jwt-client' };
    const response = await oauth.clientCredentialsGrantRequest(
      as,
      c,
      oauth.PrivateKeyJwt(key.privateKey),
      { scope: 'api', resource: API },
      { [oauth.allowInsecureRequests]: true },
    );
    const tokens = await oauth.processClientCredentialsResponse(as, c, response);
    assert.equal(decodeJwt(tokens.access_token).aud, API);
  });
});

describe('private_key_jwt refusals (RFC 7523 §3)', () => {
  const invalidClient: [string, () => Promise<Record<string, string>>][] = [
    [
      'iss is another client',
      async () => ({ client_assertion: await assertion('jwt-client', key, { iss: 'demo-service' }) }),
    ],
    [
      'sub is another client',
      async () => ({ client_assertion: await assertion('jwt-client', key, { sub: 'demo-service' }) }),
    ],
    [
      'aud names another server',
      async () => ({
        client_assertion: await assertion('jwt-client', key, { aud: 'https://elsewhere.test/token' }),
      }),
    ],
    [
      'expired',
      async () => ({
        client_assertion: await assertion('jwt-client', key, { exp: Math.floor(Date.now() / 1000) - 60 }),
      }),
    ],
    [
      'exp too far ahead',
      async () => ({
        client_assertion: await assertion('jwt-client', key, { exp: Math.floor(Date.now() / 1000) + 7200 }),
      }),
    ],
    ['no exp', async () => ({ client_assertion: await assertion('jwt-client', key, { exp: undefined }) })],
    ['no jti', async () => ({ client_assertion: await assertion('jwt-client', key, { jti: undefined }) })],
    [
      'signed by a key the client did not register',
      async () => ({ client_assertion: await assertion('jwt-client', await signingKey('k1')) }),
    ],
    [
      'HS256 (symmetric) signature',
      async () => {
        const now = Math.floor(Date.now() / 1000);
        const jwt = await new SignJWT({
          iss: 'jwt-client',
          sub: 'jwt-client',
          aud: `${t.base}/connect/token`,
          jti: randomUUID(),
          exp: now + 60,
        })
          .setProtectedHeader({ alg: 'HS256' })
          .sign(new Uint8Array(32));
        return { client_assertion: jwt };
      },
    ],
    [
      'unsupported client_assertion_type',
      async () => ({
        client_assertion: await assertion('jwt-client', key),
        client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:saml2-bearer',
      }),
    ],
    [
      'client not registered for private_key_jwt',
      async () => ({ client_assertion: await assertion('demo-service', key) }),
    ],
    ['unknown client', async () => ({ client_assertion: await assertion('no-such-client', key) })],
  ];
  for (const [name, params] of invalidClient) {
    test(`${name} → 401 invalid_client`, async () => {
      const res = await tokenWith({ client_assertion_type: JWT_BEARER_ASSERTION_TYPE, ...(await params()) });
      assert.equal(res.status, 401);
      assert.match(res.headers.get('www-authenticate') ?? '', /^Basic/);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_client');
    });
  }

  test('a replayed assertion → invalid_client; its first use succeeded', async () => {
    const jwt = await assertion('jwt-client', key);
    const params = { client_assertion_type: JWT_BEARER_ASSERTION_TYPE, client_assertion: jwt };
    assert.equal((await tokenWith(params)).status, 200);
    const replay = await tokenWith(params);
    assert.equal(replay.status, 401);
    assert.match(((await replay.json()) as { error_description: string }).error_description, /already used/);
  });

  test('client_assertion without client_assertion_type → 400 invalid_request', async () => {
    const res = await tokenWith({ client_assertion: await assertion('jwt-client', key) });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: string }).error, 'invalid_request');
  });

  test('an assertion together with a client secret → 400 invalid_request', async () => {
    const res = await tokenWith(
      {
        client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
        client_assertion: await assertion('jwt-client', key),
      },
      { authorization: basic('jwt-client', 'whatever') },
    );
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: string }).error, 'invalid_request');
  });

  test('a private_key_jwt client using its (generated) secret → invalid_client', async () => {
    await t.createClient({
      clientId: 'jwt-secret',
      clientType: 'confidential',
      secret: 'known-secret-1',
      allowedGrantTypes: ['client_credentials'],
      allowedScopes: ['api'],
    });
    assert.equal((await tokenWith({}, { authorization: basic('jwt-secret', 'known-secret-1') })).status, 200);
    await t.server.store.setClientMetadata('jwt-secret', {
      tokenEndpointAuthMethod: 'private_key_jwt',
      jwks: { keys: [key.jwk] },
    });
    const res = await tokenWith({}, { authorization: basic('jwt-secret', 'known-secret-1') });
    assert.equal(res.status, 401);
    assert.equal(((await res.json()) as { error: string }).error, 'invalid_client');
  });
});

describe('resource indicators (RFC 8707)', () => {
  const withResources = async (...resources: string[]) => {
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      scope: 'api',
      client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
      client_assertion: await assertion('jwt-client', key),
    });
    for (const resource of resources) form.append('resource', resource);
    return fetch(`${t.base}/connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
  };

  test('one resource → aud is that resource; two → aud lists both', async () => {
    const one = (await (await withResources(OTHER)).json()) as { access_token: string };
    assert.equal(decodeJwt(one.access_token).aud, OTHER);
    const two = (await (await withResources(API, OTHER)).json()) as { access_token: string };
    assert.deepEqual(decodeJwt(two.access_token).aud, [API, OTHER]);
  });

  test('no resource → the default audience', async () => {
    const body = (await (await withResources()).json()) as { access_token: string };
    assert.equal(decodeJwt(body.access_token).aud, 'seed');
  });

  for (const [name, resource] of [
    ['not allowed for the client', 'https://evil.example.test/'],
    ['relative URI', '/api'],
    ['with a fragment', `${API}#x`],
  ]) {
    test(`${name} → 400 invalid_target`, async () => {
      const res = await withResources(resource!);
      assert.equal(res.status, 400);
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_target');
    });
  }
});

describe('assertion replay across two instances on one SQLite file', () => {
  let dir: string;
  let one: TestServer;
  let two: TestServer;
  const ISSUER = 'https://as.example.test';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'seed-pkjwt-'));
    const databasePath = join(dir, 'auth.sqlite');
    one = await startTestServer({ store: undefined, databasePath, oauth: { issuer: ISSUER } });
    two = await startTestServer({ store: undefined, databasePath, oauth: { issuer: ISSUER } });
    liveClock(one.clock);
    liveClock(two.clock);
    await jwtClient(one, 'jwt-client', { jwks: { keys: [key.jwk] } });
  });
  after(async () => {
    await one?.close();
    await two?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('an assertion accepted by one instance is refused by the other', async () => {
    const jwt = await assertion('jwt-client', key, { aud: ISSUER });
    const params = {
      grant_type: 'client_credentials',
      scope: 'api',
      client_assertion_type: JWT_BEARER_ASSERTION_TYPE,
      client_assertion: jwt,
    };
    assert.equal((await postForm(one.base, '/connect/token', params)).status, 200);
    const replay = await postForm(two.base, '/connect/token', params);
    assert.equal(replay.status, 401);
    assert.equal(((await replay.json()) as { error: string }).error, 'invalid_client');
  });
});
