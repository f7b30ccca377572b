/**
 * Dynamic Client Registration (RFC 7591) and management (RFC 7592) with openid-client 6 and oauth4webapi:
 * registration behind an initial access token, the registered client used at the token endpoint, read /
 * update / delete with the registration access token, open registration by policy, and every error row
 * (`invalid_token`, `invalid_redirect_uri`, `invalid_client_metadata`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { basic, postForm, startTestServer, type TestServer } from './oauth-fixtures.ts';

const INITIAL = 'initial-access-token-0123456789';
let t: TestServer;

before(async () => {
  t = await startTestServer({ oauth: { registration: { initialAccessTokens: [INITIAL] } } });
});
after(() => t?.close());

const register = (body: unknown, token: string | null = INITIAL) =>
  fetch(`${t.base}/connect/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
const manage = (method: string, clientId: string, token: string, body?: unknown) =>
  fetch(`${t.base}/connect/register/${clientId}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });

describe('registration with client libraries', () => {
  test('discovery advertises registration_endpoint', async () => {
    const meta = (await (await fetch(`${t.base}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >;
    assert.equal(meta.registration_endpoint, `${t.base}/connect/register`);
  });

  test('openid-client 6: dynamicClientRegistration, then client credentials as the new client', async () => {
    const config = await client.dynamicClientRegistration(
      new URL(t.base),
      {
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: 'client_secret_post',
        scope: 'profile',
      },
      undefined,
      { initialAccessToken: INITIAL, execute: [client.allowInsecureRequests] },
    );
    const registered = config.clientMetadata();
    assert.ok(registered.client_secret);
    assert.ok(registered.registration_access_token);
    const tokens = await client.clientCredentialsGrant(config, { scope: 'profile' });
    assert.equal(decodeJwt(tokens.access_token).client_id, registered.client_id);
  });

  test('oauth4webapi: a public client with redirect URIs; RFC 7592 read, update, delete', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(
        as,
        {
          redirect_uris: ['https://app.example.test/cb'],
          token_endpoint_auth_method: 'none',
          grant_types: ['authorization_code', 'refresh_token'],
          client_name: 'Example app',
        },
        { initialAccessToken: INITIAL, [oauth.allowInsecureRequests]: true },
      ),
    );
    assert.equal(registered.client_secret, undefined);
    const clientId = registered.client_id;
    const rat = registered.registration_access_token as string;
    assert.equal(registered.registration_client_uri, `${t.base}/connect/register/${clientId}`);
    const read = await manage('GET', clientId, rat);
    assert.equal(read.status, 200);
    assert.deepEqual(((await read.json()) as { redirect_uris: string[] }).redirect_uris, [
      'https://app.example.test/cb',
    ]);
    const updated = await manage('PUT', clientId, rat, {
      client_id: clientId,
      redirect_uris: ['https://app.example.test/cb2'],
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
    });
    assert.equal(updated.status, 200);
    assert.deepEqual((await t.server.store.getClient(clientId))?.redirectUris, [
      'https://app.example.test/cb2',
    ]);
    assert.equal((await manage('DELETE', clientId, rat)).status, 204);
    assert.equal(await t.server.store.getClient(clientId), undefined);
    assert.equal((await manage('GET', clientId, rat)).status, 401);
  });

  test('a private_key_jwt client registers its jwks and gets no secret', async () => {
    const res = await register({
      grant_types: ['client_credentials'],
      token_endpoint_auth_method: 'private_key_jwt',
      jwks: { keys: [{ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }] },
    });
    assert.equal(res.status, 201);
    const body = (await res.json()) as {
      client_id: string;
      client_secret?: string;
      token_endpoint_auth_method: string;
    };
    assert.equal(body.client_secret, undefined);
    assert.equal(body.token_endpoint_auth_method, 'private_key_jwt');
    assert.equal(
      (await t.server.store.getClient(body.client_id))?.metadata.tokenEndpointAuthMethod,
      'private_key_jwt',
    );
  });
});

describe('registration errors', () => {
  const rows: [string, unknown, string | null, number, string][] = [
    ['no initial access token', { grant_types: ['client_credentials'] }, null, 401, 'invalid_token'],
    [
      'a wrong initial access token',
      { grant_types: ['client_credentials'] },
      'wrong-token-0123456789',
      401,
      'invalid_token',
    ],
    [
      'redirect URI with a fragment',
      { redirect_uris: ['https://app.example.test/cb#x'] },
      INITIAL,
      400,
      'invalid_redirect_uri',
    ],
    [
      'authorization code without redirect URIs',
      { grant_types: ['authorization_code'] },
      INITIAL,
      400,
      'invalid_redirect_uri',
    ],
    [
      'a grant type the policy does not allow',
      { grant_types: ['password'] },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    [
      'a scope the policy does not allow',
      { grant_types: ['client_credentials'], scope: 'admin' },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    [
      'client_secret_jwt',
      { grant_types: ['client_credentials'], token_endpoint_auth_method: 'client_secret_jwt' },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    [
      'public client with client_credentials',
      { grant_types: ['client_credentials'], token_endpoint_auth_method: 'none' },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    [
      'response_types token',
      { redirect_uris: ['https://a.example.test/cb'], response_types: ['token'] },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    [
      'private_key_jwt without keys',
      { grant_types: ['client_credentials'], token_endpoint_auth_method: 'private_key_jwt' },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    [
      'a private key in jwks',
      {
        grant_types: ['client_credentials'],
        token_endpoint_auth_method: 'private_key_jwt',
        jwks: { keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'a', d: 'b' }] },
      },
      INITIAL,
      400,
      'invalid_client_metadata',
    ],
    ['not a JSON object', [1, 2], INITIAL, 400, 'invalid_client_metadata'],
  ];
  for (const [name, body, token, status, error] of rows) {
    test(`${name} → ${status} ${error}`, async () => {
      const before = (await t.server.store.listClients({ limit: 1 })).total;
      const res = await register(body, token);
      assert.equal(res.status, status);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(((await res.json()) as { error: string }).error, error);
      assert.equal((await t.server.store.listClients({ limit: 1 })).total, before, 'no client left behind');
    });
  }

  test('management: another client_id in the PUT body, a wrong token, an unknown client', async () => {
    const res = await register({ grant_types: ['client_credentials'] });
    const {
      client_id,
      registration_access_token: rat,
      client_secret,
    } = (await res.json()) as Record<string, string>;
    const other = await manage('PUT', client_id!, rat!, {
      client_id: 'someone-else',
      grant_types: ['client_credentials'],
    });
    assert.equal(other.status, 400);
    assert.equal(((await other.json()) as { error: string }).error, 'invalid_client_metadata');
    const wrong = await manage('GET', client_id!, 'not-the-token');
    assert.equal(wrong.status, 401);
    assert.match(wrong.headers.get('www-authenticate') ?? '', /invalid_token/);
    assert.equal((await manage('GET', 'no-such-client', rat!)).status, 401);
    // The registered client works at the token endpoint.
    const token = await postForm(
      t.base,
      '/connect/token',
      { grant_type: 'client_credentials' },
      { authorization: basic(client_id!, client_secret!) },
    );
    assert.equal(token.status, 200);
  });
});

describe('policy', () => {
  test('open registration needs no initial access token', async () => {
    const open = await startTestServer({ oauth: { registration: { open: true } } });
    try {
      const res = await fetch(`${open.base}/connect/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_types: ['client_credentials'] }),
      });
      assert.equal(res.status, 201);
    } finally {
      await open.close();
    }
  });

  test('registration off by default: not advertised, no endpoint', async () => {
    const off = await startTestServer();
    try {
      const meta = (await (
        await fetch(`${off.base}/.well-known/oauth-authorization-server`)
      ).json()) as Record<string, unknown>;
      assert.equal(meta.registration_endpoint, undefined);
      const res = await fetch(`${off.base}/connect/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(res.status, 404);
    } finally {
      await off.close();
    }
  });
});
