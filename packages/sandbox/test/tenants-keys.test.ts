/**
 * Managed API keys and tenant credentials of the shared service: keys shown once and stored hashed,
 * listed by id and prefix, sent as `Authorization: Bearer` or `X-API-KEY`, carrying permissions, revoked
 * and expired without a restart (also when `sandbox keys` writes the key file beside the running server);
 * bad key requests name the field; access tokens act as their `tenant` claim (else `sub`, unless the
 * server requires the claim), a malformed one is 401, a token or key naming the reserved tenant
 * `operator` without `sandbox.operator` is refused (the operator's box untouched), and a key and a token of one tenant see the same boxes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { RestServer } from '../src/rest/server.ts';
import { BUSYBOX, cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { api, createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

const BIN = fileURLToPath(new URL('../bin/sandbox.ts', import.meta.url));
let server: RestServer;
let url: string;
let stateDir: string;
let jwks: Server;
let privateKey: CryptoKey;

before(async () => {
  ensureRegistry();
  const pair = await generateKeyPair('ES256');
  privateKey = pair.privateKey as CryptoKey;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  const jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
  let home: string;
  ({ server, url, home } = await startTenantServer({ jwt: { jwksUrl, audience: 'sandbox' } }));
  stateDir = join(home, 'serve');
});

after(async () => {
  await server?.close();
  jwks?.close();
  await cleanupAll();
});

function token(claims: Record<string, unknown>, subject = 'user-1'): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
    .setAudience('sandbox')
    .setSubject(subject)
    .setIssuedAt()
    .setExpirationTime('5m')
    .sign(privateKey);
}

/**
 * Runs `sandbox keys …` beside the server. Asynchronously: a synchronous spawn would stall the server in
 * this process too, and the client's kept-alive connection could then meet the server closing it.
 */
function cli(...args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, 'keys', '--state-dir', stateDir, ...args]);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr += text;
    });
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}

describe('managed API keys', () => {
  it('shown once, stored hashed, listed by id and prefix; Bearer or X-API-KEY; permissions hold', async () => {
    const { key, id } = await createKey(url, 'acme');
    assert.match(key, /^e2b_[0-9a-f]{40}$/);
    const file = readFileSync(join(stateDir, 'keys.json'), 'utf8');
    assert.ok(!file.includes(key.slice(4)), 'the key file holds the key');
    const list = await api(url, 'GET', '/v1/keys', OPERATOR_KEY);
    const listed = list.body.find((k: { id: string }) => k.id === id);
    assert.equal(listed.prefix, key.slice(0, 10));
    assert.equal(listed.tenant, 'acme');
    assert.ok(!JSON.stringify(list.body).includes(key.slice(10)));
    assert.equal((await api(url, 'GET', '/v1/boxes', key)).status, 200);
    assert.equal((await api(url, 'GET', '/v1/boxes', null, undefined, { 'x-api-key': key })).status, 200);
    // A tenant key is no operator.
    assert.equal((await api(url, 'GET', '/v1/keys', key)).status, 403);
    const reader = await createKey(url, 'acme', { permissions: ['sandbox.boxes.read'] });
    assert.equal((await api(url, 'GET', '/v1/boxes', reader.key)).status, 200);
    const refused = await api(url, 'POST', '/v1/boxes', reader.key, { image: BUSYBOX });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'missing_permission');
    // An unknown key of the right shape is 401.
    assert.equal((await api(url, 'GET', '/v1/boxes', `e2b_${'0'.repeat(40)}`)).status, 401);
    // The audit log: who (tenant, key id) did what with which outcome, by tenant and time; nothing secret.
    const audit = await api(url, 'GET', '/v1/audit?tenant=acme', OPERATOR_KEY);
    assert.ok(
      audit.body.some(
        (e: Record<string, unknown>) => e.key_id === id && e.route === '/v1/boxes' && e.status === 200,
      ),
    );
    assert.ok(audit.body.every((e: Record<string, unknown>) => e.tenant === 'acme'));
    const later = new Date(Date.now() + 60_000).toISOString();
    assert.deepEqual((await api(url, 'GET', `/v1/audit?tenant=acme&since=${later}`, OPERATOR_KEY)).body, []);
    assert.ok(
      (await api(url, 'GET', '/v1/audit', key)).body.every(
        (e: Record<string, unknown>) => e.tenant === 'acme',
      ),
    );
    // The refused unknown key above is audited without a tenant.
    const refusals = await api(url, 'GET', '/v1/audit', OPERATOR_KEY);
    assert.ok(
      refusals.body.some(
        (e: Record<string, unknown>) =>
          e.tenant === '-' && e.status === 401 && e.error === 'invalid_credentials',
      ),
    );
    const log = readFileSync(join(stateDir, 'audit.jsonl'), 'utf8');
    assert.ok(!log.includes(key.slice(4)) && !log.includes(OPERATOR_KEY));
  });

  it('revoked and expired without a restart, also from the sandbox keys command', async () => {
    const { key, id } = await createKey(url, 'acme');
    assert.equal((await api(url, 'DELETE', `/v1/keys/${id}`, OPERATOR_KEY)).status, 204);
    const revoked = await api(url, 'GET', '/v1/boxes', key);
    assert.equal(revoked.status, 401);
    assert.match(revoked.headers.get('www-authenticate') ?? '', /^Bearer/);

    const created = await cli('create', '--tenant', 'cli-tenant', '--json');
    assert.equal(created.status, 0, created.stderr);
    const fromCli = JSON.parse(created.stdout);
    assert.equal((await api(url, 'GET', '/v1/boxes', fromCli.key)).status, 200);
    const listed = await cli('list', '--tenant', 'cli-tenant');
    assert.match(listed.stdout, new RegExp(`${fromCli.id}\\s+${fromCli.key.slice(0, 10)}\\s+cli-tenant`));
    assert.ok(!listed.stdout.includes(fromCli.key));
    assert.equal((await cli('revoke', fromCli.id)).status, 0);
    assert.equal((await api(url, 'GET', '/v1/boxes', fromCli.key)).status, 401);
    const badCli = await cli('create', '--tenant', 'x', '--expires', 'tomorrow');
    assert.notEqual(badCli.status, 0);
    assert.match(badCli.stderr, /--expires/);

    // Expiry a few seconds ahead: a loaded machine may take a second or two to make the key and call.
    const soon = await createKey(url, 'acme', { expires_at: new Date(Date.now() + 4000).toISOString() });
    assert.equal((await api(url, 'GET', '/v1/boxes', soon.key)).status, 200);
    for (let i = 0; i < 300 && (await api(url, 'GET', '/v1/boxes', soon.key)).status === 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.equal((await api(url, 'GET', '/v1/boxes', soon.key)).status, 401);
  });

  it('bad key requests name the field and the rule', async () => {
    for (const [body, field] of [
      [{ tenant: 'not a tenant!' }, 'tenant'],
      [{ tenant: 'acme', permissions: ['sandbox.everything'] }, 'permissions'],
      [{ tenant: 'acme', expires_at: '2001-01-01T00:00:00Z' }, 'expires_at'],
      [{ tenant: 'acme', expires_at: 'soon' }, 'expires_at'],
      [{ tenant: 'acme', extra: 1 }, 'extra'],
    ] as const) {
      const answer = await api(url, 'POST', '/v1/keys', OPERATOR_KEY, body);
      assert.equal(answer.status, 400, JSON.stringify(answer.body));
      assert.match(answer.body.error.field ?? answer.body.error.message, new RegExp(field));
    }
    assert.equal((await api(url, 'DELETE', '/v1/keys/01ARZ3NDEKTSV4RRFFQ69G5FAV', OPERATOR_KEY)).status, 404);
  });
});

describe('access tokens as tenants', () => {
  it('tenant claim (else sub); malformed is 401; a key and a token of one tenant share boxes', async () => {
    const { key } = await createKey(url, 'shared');
    const box = await api(url, 'POST', '/v1/boxes', key, { image: BUSYBOX, name: 'web' });
    assert.equal(box.status, 201, JSON.stringify(box.body));
    const scope = 'sandbox.boxes.read sandbox.boxes.write sandbox.exec';
    const sameTenant = await token({ scope, tenant: 'shared' });
    assert.equal((await api(url, 'GET', '/v1/boxes/web', sameTenant)).body.id, box.body.id);
    const bySubject = await token({ scope }, 'someone-else');
    assert.equal((await api(url, 'GET', '/v1/boxes/web', bySubject)).status, 404);
    assert.deepEqual((await api(url, 'GET', '/v1/boxes', bySubject)).body, []);
    for (const claims of [
      { scope, tenant: 'has spaces' },
      { scope, tenant: 42 },
      { scope, tenant: '' },
    ]) {
      const answer = await api(url, 'GET', '/v1/boxes', await token(claims));
      assert.equal(answer.status, 401);
      assert.equal(answer.body.error.code, 'invalid_tenant');
    }
    const badSubject = await api(url, 'GET', '/v1/boxes', await token({ scope }, 'sub with spaces'));
    assert.equal(badSubject.status, 401);
    assert.equal((await api(url, 'DELETE', '/v1/boxes/web?force=true', sameTenant)).status, 204);
  });

  it('a token or key naming the operator tenant is no operator; only sandbox.operator makes one', async () => {
    const scope = 'sandbox.boxes.read sandbox.boxes.write sandbox.exec';
    const ops = await api(url, 'POST', '/v1/boxes', OPERATOR_KEY, { image: BUSYBOX, name: 'ops-only' });
    assert.equal(ops.status, 201, JSON.stringify(ops.body));
    for (const named of [
      await token({ scope }, 'operator'),
      await token({ scope, tenant: 'operator' }),
      await token({ scope, tenant: 'OPERATOR' }, 'user-2'),
    ]) {
      for (const [method, path] of [
        ['GET', '/v1/boxes'],
        ['GET', `/v1/boxes/${ops.body.id}`],
        ['DELETE', `/v1/boxes/${ops.body.id}?force=true`],
      ] as const) {
        const answer = await api(url, method, path, named);
        assert.equal(answer.status, 401, `${method} ${path}`);
        assert.equal(answer.body.error.code, 'invalid_tenant');
      }
    }
    const refused = await api(url, 'POST', '/v1/keys', OPERATOR_KEY, { tenant: 'operator' });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.field, 'tenant');
    const viaCli = await cli('create', '--tenant', 'Operator');
    assert.notEqual(viaCli.status, 0);
    assert.match(viaCli.stderr, /reserved/);
    // The operator's box is untouched; a token holding sandbox.operator is the operator.
    const operatorToken = await token({ scope: `${scope} sandbox.operator`, tenant: 'operator' });
    const seen = await api(url, 'GET', `/v1/boxes/${ops.body.id}`, operatorToken);
    assert.equal(seen.status, 200);
    assert.equal(seen.body.state.running, true);
    assert.equal((await api(url, 'DELETE', `/v1/boxes/${ops.body.id}?force=true`, OPERATOR_KEY)).status, 204);
  });

  it('with requireTenantClaim a token without a tenant claim is 401', async () => {
    const strict = await startTenantServer({
      jwt: {
        jwksUrl: `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`,
        audience: 'sandbox',
        requireTenantClaim: true,
      },
    });
    try {
      const scope = 'sandbox.boxes.read';
      const missing = await api(strict.url, 'GET', '/v1/boxes', await token({ scope }, 'tenant-like-sub'));
      assert.equal(missing.status, 401);
      assert.equal(missing.body.error.code, 'invalid_tenant');
      assert.match(missing.body.error.message, /tenant claim is missing/);
      const present = await api(strict.url, 'GET', '/v1/boxes', await token({ scope, tenant: 'acme' }));
      assert.equal(present.status, 200);
    } finally {
      await strict.server.close();
    }
  });
});
