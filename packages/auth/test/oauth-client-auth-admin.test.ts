/**
 * The OAuth extension settings of clients in the administration API: `metadata` on every client record,
 * `PUT /clients/{clientId}/metadata` (permission, validation with the store's field names, 404, audit), and
 * the OpenAPI document describing them.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { exportJWK, generateKeyPair } from 'jose';
import { type AdminFixture, adminFixture } from './admin-fixture.ts';

let f: AdminFixture;
let admin: string;
let reader: string;

before(async () => {
  f = await adminFixture();
  admin = (await f.caller('admin-1', ['auth.admin.**'])).token;
  reader = (await f.caller('reader-1', ['auth.admin.read'])).token;
  await f.store.createClient({
    clientId: 'svc',
    clientType: 'confidential',
    secretHash: await f.hasher.hash('s3cret-1'),
  });
});
after(() => f?.close());

test('a new client shows empty metadata; PUT sets it, GET and the list show it, the change is audited', async () => {
  assert.deepEqual((await f.call(admin, 'GET', 'clients/svc')).json().metadata, {});
  const { publicKey } = await generateKeyPair('ES256', { extractable: true });
  const metadata = {
    dpopBoundAccessTokens: true,
    requirePushedAuthorizationRequests: true,
    tokenEndpointAuthMethod: 'private_key_jwt',
    jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1' }] },
    allowedResources: ['https://api.example.test/'],
    tokenExchange: { subjectClients: ['web'], delegation: true },
  };
  const res = await f.call(admin, 'PUT', 'clients/svc/metadata', metadata);
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(res.json().metadata, metadata);
  assert.deepEqual((await f.call(reader, 'GET', 'clients/svc')).json().metadata, metadata);
  const listed = (await f.call(reader, 'GET', 'clients'))
    .json()
    .items.find((c: { clientId: string }) => c.clientId === 'svc');
  assert.deepEqual(listed.metadata, metadata);
  const audit = await f.store.listAudit({ category: 'Admin' });
  assert.ok(audit.items.some((e) => e.details?.action === 'client.metadata'));
  // `{}` clears it.
  assert.deepEqual((await f.call(admin, 'PUT', 'clients/svc/metadata', {})).json().metadata, {});
});

for (const [name, body, message] of [
  ['unknown field', { dpop: true }, /metadata|dpop/],
  ['wrong type', { dpopBoundAccessTokens: 'yes' }, /dpopBoundAccessTokens/],
  [
    'private key in jwks',
    { jwks: { keys: [{ kty: 'EC', crv: 'P-256', x: 'a', y: 'b', d: 'c' }] } },
    /private key/,
  ],
  [
    'jwks and jwksUri together',
    { jwks: { keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'a' }] }, jwksUri: 'https://k.example.test/jwks' },
    /mutually exclusive/,
  ],
  ['private_key_jwt without keys', { tokenEndpointAuthMethod: 'private_key_jwt' }, /needs jwks or jwksUri/],
  ['jwksUri over plain http on a public host', { jwksUri: 'http://k.example.test/jwks' }, /https/],
  ['resource with a fragment', { allowedResources: ['https://api.example.test/#x'] }, /fragment/],
  ['tokenExchange without subjectClients', { tokenExchange: { impersonation: true } }, /subjectClients/],
] as const) {
  test(`400: ${name}, nothing changed`, async () => {
    const before = (await f.call(admin, 'GET', 'clients/svc')).json().metadata;
    const res = await f.call(admin, 'PUT', 'clients/svc/metadata', body);
    assert.equal(res.statusCode, 400, res.body);
    assert.match(res.json().error, message);
    assert.deepEqual((await f.call(admin, 'GET', 'clients/svc')).json().metadata, before);
  });
}

test('403 without auth.admin.clients, 404 for an unknown client', async () => {
  assert.equal(
    (await f.call(reader, 'PUT', 'clients/svc/metadata', { dpopBoundAccessTokens: true })).statusCode,
    403,
  );
  assert.equal((await f.call(admin, 'PUT', 'clients/nobody/metadata', {})).statusCode, 404);
});

test('the OpenAPI document describes the route and the metadata fields', async () => {
  const doc = (await f.call(undefined, 'GET', 'openapi.json')).json();
  const route = doc.paths[`${f.base}/clients/{clientId}/metadata`]?.put;
  assert.ok(route, 'PUT /clients/{clientId}/metadata documented');
  const body = route.requestBody.content['application/json'].schema;
  for (const field of [
    'dpopBoundAccessTokens',
    'requirePushedAuthorizationRequests',
    'tokenEndpointAuthMethod',
    'jwks',
    'jwksUri',
    'allowedResources',
    'tokenExchange',
  ]) {
    assert.ok(body.properties[field], field);
  }
});
