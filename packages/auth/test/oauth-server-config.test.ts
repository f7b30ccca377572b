/**
 * The server's configuration from the environment and the bootstrap of an empty store (issue 5): an
 * administrator with a generated password and the two demo clients, created once, usable at once.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { configFromEnv } from '../src/env-config.ts';
import { buildAuthServer, DEFAULT_AUTH_PORT, DEFAULT_DATABASE_PATH } from '../src/server.ts';
import { basic, postForm } from './oauth-fixtures.ts';

describe('configFromEnv', () => {
  test('defaults: port 4100, database under .data of the working directory, issuer on localhost', () => {
    const { port, host, options } = configFromEnv({});
    assert.equal(port, DEFAULT_AUTH_PORT);
    assert.equal(port, 4100);
    assert.equal(host, 'localhost');
    assert.equal(options.databasePath, DEFAULT_DATABASE_PATH);
    assert.equal(DEFAULT_DATABASE_PATH, join(process.cwd(), '.data', 'auth.sqlite'));
    assert.equal(options.oauth?.issuer, 'http://localhost:4100');
    assert.equal(options.signingAlg, 'RS256');
    assert.equal(options.bootstrap?.adminPassword, undefined);
  });

  test('reads the variables', () => {
    const { port, options } = configFromEnv({
      AUTH_PORT: '4321',
      AUTH_DATABASE_PATH: '/tmp/x.sqlite',
      AUTH_ADMIN_USERNAME: 'root',
      AUTH_ADMIN_PASSWORD: 'pw-from-env-1',
      AUTH_DEMO_CLIENT_SECRET: 'demo-from-env-1',
      AUTH_SIGNING_ALG: 'ES256',
      AUTH_ISSUER: 'https://auth.example.test',
      AUTH_ACCESS_TOKEN_TTL: '300',
    });
    assert.equal(port, 4321);
    assert.equal(options.databasePath, '/tmp/x.sqlite');
    assert.deepEqual(options.bootstrap, {
      adminUserName: 'root',
      adminPassword: 'pw-from-env-1',
      demoClientSecret: 'demo-from-env-1',
    });
    assert.equal(options.signingAlg, 'ES256');
    assert.equal(options.oauth?.issuer, 'https://auth.example.test');
    assert.equal(options.oauth?.accessTokenTtlSeconds, 300);
  });

  test('invalid values name the variable', () => {
    assert.throws(() => configFromEnv({ AUTH_PORT: 'http' }), /AUTH_PORT/);
    assert.throws(() => configFromEnv({ AUTH_SIGNING_ALG: 'HS256' }), /AUTH_SIGNING_ALG/);
    assert.throws(() => configFromEnv({ AUTH_ACCESS_TOKEN_TTL: '-5' }), /AUTH_ACCESS_TOKEN_TTL/);
  });

  test('an issuer with a query or a trailing slash is refused (RFC 8414 §2)', async () => {
    await assert.rejects(
      buildAuthServer({ databasePath: ':memory:', oauth: { issuer: 'http://localhost:1/?x=1' } }),
      /issuer/,
    );
    await assert.rejects(
      buildAuthServer({ databasePath: ':memory:', oauth: { issuer: 'http://localhost:1/' } }),
      /issuer/,
    );
  });
});

describe('bootstrap of an empty store', () => {
  const dir = mkdtempSync(join(tmpdir(), 'auth-bootstrap-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const databasePath = join(dir, 'auth.sqlite');
  let adminPassword = '';
  let demoSecret = '';

  test('first start: admin with a generated password, demo-spa and demo-service with a generated secret', async () => {
    const server = await buildAuthServer({ databasePath, hashParams: { ln: 10, r: 8, p: 1 } });
    try {
      const base = await server.listen(0, '127.0.0.1');
      const { admin, clients, generatedDemoClientSecret } = server.bootstrap;
      assert.equal(admin?.user.userName, 'admin');
      assert.deepEqual(admin?.user.roles, ['administrator']);
      assert.ok((admin?.generatedPassword ?? '').length >= 20);
      assert.ok((generatedDemoClientSecret ?? '').length >= 20);
      adminPassword = admin!.generatedPassword!;
      demoSecret = generatedDemoClientSecret!;
      const spa = clients.find((c) => c.clientId === 'demo-spa');
      const service = clients.find((c) => c.clientId === 'demo-service');
      assert.equal(spa?.clientType, 'public');
      assert.deepEqual([...(spa?.allowedGrantTypes ?? [])].sort(), ['authorization_code', 'refresh_token']);
      assert.ok(spa?.redirectUris.every((u) => /^http:\/\/(localhost|127\.0\.0\.1)[:/]/.test(u)));
      assert.equal(service?.clientType, 'confidential');
      assert.deepEqual([...(service?.allowedGrantTypes ?? [])].sort(), [
        'client_credentials',
        'password',
        'refresh_token',
      ]);

      // The generated credentials work at once.
      const res = await postForm(
        base,
        '/connect/token',
        { grant_type: 'password', username: 'admin', password: adminPassword },
        { authorization: basic('demo-service', demoSecret) },
      );
      assert.equal(res.status, 200);
    } finally {
      await server.app.close();
    }
  });

  test('second start on the same file: nothing is created or printed again; the keys are kept', async () => {
    const server = await buildAuthServer({ databasePath, hashParams: { ln: 10, r: 8, p: 1 } });
    try {
      const base = await server.listen(0, '127.0.0.1');
      assert.equal(server.bootstrap.admin, undefined);
      assert.equal(server.bootstrap.clients.length, 0);
      assert.equal(server.bootstrap.generatedDemoClientSecret, undefined);
      assert.equal((await server.store.listUsers()).total, 1);
      const res = await postForm(
        base,
        '/connect/token',
        { grant_type: 'client_credentials' },
        { authorization: basic('demo-service', demoSecret) },
      );
      assert.equal(res.status, 200);
      assert.equal(server.keys.jwks().keys.length, 1, 'the signing key of the first start is reused');
    } finally {
      await server.app.close();
    }
  });
});
