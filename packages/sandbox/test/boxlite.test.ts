/**
 * The BoxLite-style suite (`boxlite-suite.ts`) on the local runtime and on a REST runtime reached the
 * BoxLite way: `JsRuntime.rest(new RuntimeRestOptions({ url, credential: new ApiKeyCredential(key) }))`
 * against a server that requires that key; plus the credential and options classes themselves.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ApiKeyCredential, BoxError, JsRuntime, RuntimeRestOptions } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { boxliteSuite } from './boxlite-suite.ts';
import { cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

const KEY = 'sk_test_boxlite_suite';
let home: string | null = null;
let server: RestServer | null = null;

function sharedHome(): string {
  if (!home) {
    ensureRegistry();
    home = tempHome('sandbox-boxlite-');
  }
  return home;
}

describe('ApiKeyCredential and RuntimeRestOptions', () => {
  it('getToken, fromEnv, option checks', () => {
    assert.deepEqual(new ApiKeyCredential('k').getToken(), { token: 'k', expiresAt: null });
    assert.equal(ApiKeyCredential.fromEnv({}), null);
    assert.equal(ApiKeyCredential.fromEnv({ SANDBOX_API_KEY: 'env-key' })?.getToken().token, 'env-key');
    const options = new RuntimeRestOptions({ url: 'http://127.0.0.1:1' });
    assert.equal(options.credential, undefined);
    assert.throws(
      () => new RuntimeRestOptions({ url: 'ftp://x' }),
      (e: unknown) => e instanceof BoxError && e.field === 'url',
    );
    assert.throws(
      () => new RuntimeRestOptions({ url: 'http://x', prefix: 'v2' }),
      (e: unknown) => e instanceof BoxError && e.field === 'prefix',
    );
    assert.throws(
      () => new ApiKeyCredential(''),
      (e: unknown) => e instanceof BoxError && e.field === 'apiKey',
    );
  });
});

boxliteSuite('BoxLite-style use, local runtime', 'local', async () => ({
  runtime: testRuntime(sharedHome()),
}));

boxliteSuite('BoxLite-style use, REST runtime via JsRuntime.rest + ApiKeyCredential', 'rest', async () => {
  server = await startRestServer({ runtime: testRuntime(sharedHome()), port: 0, apiKey: KEY });
  // Without the key the server refuses (401 → code unauthenticated).
  const anonymous = JsRuntime.rest(new RuntimeRestOptions({ url: server.url }));
  await assert.rejects(
    anonymous.listInfo(),
    (e: unknown) => e instanceof BoxError && e.code === 'unauthenticated',
  );
  return {
    runtime: JsRuntime.rest(
      new RuntimeRestOptions({ url: server.url, credential: new ApiKeyCredential(KEY) }),
    ),
  };
});

describe('images.list() with BoxLite fields (local runtime)', () => {
  it('repository, tag, id and cachedAt beside the store fields', async () => {
    const runtime = testRuntime(sharedHome());
    await runtime.images.pull('busybox:latest');
    const busybox = (await runtime.images.list()).find((i) => i.reference.endsWith('/busybox:latest'));
    assert.ok(busybox, 'busybox is listed');
    assert.match(busybox.repository, /\/library\/busybox$|\/busybox$/);
    assert.equal(busybox.tag, 'latest');
    assert.equal(busybox.id, busybox.digest);
    assert.match(busybox.id, /^sha256:[0-9a-f]{64}$/);
    assert.equal(busybox.cachedAt, busybox.pulledAt);
  });
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
