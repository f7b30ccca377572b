/**
 * The server is usable as a library through the package entry point: `import { buildAuthServer } from
 * '@seed/auth'` builds a working token endpoint (issue 5, embedding).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildAuthServer, configFromEnv, DEMO_SERVICE_CLIENT_ID, SqliteAuthStore } from '@seed/auth';
import { basic, postForm } from './oauth-fixtures.ts';

test("'@seed/auth' exports buildAuthServer and configFromEnv; the embedded server issues tokens", async () => {
  const { options } = configFromEnv({
    AUTH_DEMO_CLIENT_SECRET: 'embedded-secret-1',
    AUTH_SIGNING_ALG: 'ES256',
  });
  const server = await buildAuthServer({
    ...options,
    store: new SqliteAuthStore(),
    oauth: { ...options.oauth, issuer: undefined },
    hashParams: { ln: 10, r: 8, p: 1 },
  });
  try {
    const base = await server.listen(0, '127.0.0.1');
    assert.equal(server.config.issuer, base);
    const res = await postForm(
      base,
      '/connect/token',
      { grant_type: 'client_credentials', scope: 'api' },
      { authorization: basic(DEMO_SERVICE_CLIENT_ID, 'embedded-secret-1') },
    );
    assert.equal(res.status, 200);
    const body = (await res.json()) as { access_token: string; token_type: string; scope: string };
    assert.equal(body.token_type, 'Bearer');
    assert.equal(body.scope, 'api');
    const verified = await server.tokenVerifier.verify(body.access_token);
    assert.equal(verified.kind, 'client');
    assert.equal(verified.subject, DEMO_SERVICE_CLIENT_ID);
    assert.deepEqual(verified.scopes, ['api']);
  } finally {
    await server.app.close();
  }
});
