/**
 * Spec 001 "Authorization endpoint": `client_id` / `redirect_uri` failures answer 400 text/plain without
 * redirecting; later errors redirect 302 with `error`, `error_description` and `state` (values
 * `unauthorized_client`, `unsupported_response_type`, `invalid_scope`, `invalid_request`); users without a
 * session go to the login page and come back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  authorize,
  CookieJar,
  pkcePair,
  SPA_REDIRECT,
  startTestServer,
  submitLogin,
  type TestServer,
} from './oauth-fixtures.ts';

let t: TestServer;
let jar: CookieJar;
before(async () => {
  t = await startTestServer();
  await t.createUser('alice', 'alice-password-1');
  await t.createClient({
    clientId: 'no-code-client',
    clientType: 'public',
    redirectUris: [SPA_REDIRECT],
    allowedGrantTypes: ['refresh_token'],
  });
  await t.createClient({
    clientId: 'off-client',
    clientType: 'public',
    isEnabled: false,
    redirectUris: [SPA_REDIRECT],
    allowedGrantTypes: ['authorization_code'],
  });
  jar = new CookieJar();
  const res = await submitLogin(t.base, jar, 'alice', 'alice-password-1');
  assert.equal(res.status, 302);
});
after(() => t.close());

const { challenge } = pkcePair();
const good = (extra: Record<string, string | undefined> = {}): Record<string, string> => {
  const params: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: 'demo-spa',
    redirect_uri: SPA_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    scope: 'openid',
    state: 'xyz-123',
    ...extra,
  };
  return Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined)) as Record<
    string,
    string
  >;
};

async function expectPlain400(res: Response, pattern: RegExp): Promise<void> {
  assert.equal(res.status, 400);
  assert.equal(res.headers.get('location'), null, 'must not redirect');
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  assert.match(await res.text(), pattern);
}

function expectRedirectError(res: Response, error: string, state: string | null = 'xyz-123'): URL {
  assert.equal(res.status, 302);
  const location = new URL(res.headers.get('location') ?? 'about:blank');
  assert.equal(`${location.origin}${location.pathname}`, SPA_REDIRECT);
  assert.equal(location.searchParams.get('error'), error);
  assert.ok((location.searchParams.get('error_description') ?? '').length > 0);
  assert.equal(location.searchParams.get('state'), state);
  assert.equal(location.searchParams.get('code'), null);
  return location;
}

describe('400 text/plain, no redirect', () => {
  test('client_id missing', async () => {
    await expectPlain400(await authorize(t.base, jar, good({ client_id: undefined })), /client_id/);
  });
  test('client_id unknown', async () => {
    await expectPlain400(await authorize(t.base, jar, good({ client_id: 'nobody' })), /client_id/);
  });
  test('client disabled', async () => {
    await expectPlain400(await authorize(t.base, jar, good({ client_id: 'off-client' })), /client_id/);
  });
  test('redirect_uri not registered (even with other errors present)', async () => {
    const res = await authorize(
      t.base,
      jar,
      good({ redirect_uri: 'https://evil.example/cb', response_type: 'token' }),
    );
    await expectPlain400(res, /redirect_uri/);
  });
  test('redirect_uri differing only by a trailing path segment', async () => {
    await expectPlain400(
      await authorize(t.base, jar, good({ redirect_uri: `${SPA_REDIRECT}/x` })),
      /redirect_uri/,
    );
  });
});

describe('302 error redirects with state', () => {
  test('unsupported_response_type', async () => {
    expectRedirectError(
      await authorize(t.base, jar, good({ response_type: 'token' })),
      'unsupported_response_type',
    );
  });
  test('invalid_request: response_type missing', async () => {
    expectRedirectError(await authorize(t.base, jar, good({ response_type: undefined })), 'invalid_request');
  });
  test('unauthorized_client: authorization-code mode not enabled for the client', async () => {
    expectRedirectError(
      await authorize(t.base, jar, good({ client_id: 'no-code-client' })),
      'unauthorized_client',
    );
  });
  test('invalid_scope: scope exceeds AllowedScopes', async () => {
    expectRedirectError(await authorize(t.base, jar, good({ scope: 'openid admin' })), 'invalid_scope');
  });
  test('invalid_request: PKCE code_challenge missing (public client)', async () => {
    expectRedirectError(await authorize(t.base, jar, good({ code_challenge: undefined })), 'invalid_request');
  });
  test("invalid_request: code_challenge_method 'plain' refused", async () => {
    const res = await authorize(
      t.base,
      jar,
      good({ code_challenge_method: 'plain', code_challenge: 'p'.repeat(43) }),
    );
    expectRedirectError(res, 'invalid_request');
  });
  test('invalid_request: malformed code_challenge', async () => {
    expectRedirectError(await authorize(t.base, jar, good({ code_challenge: 'short' })), 'invalid_request');
  });
  test('without state the redirect carries no state', async () => {
    expectRedirectError(
      await authorize(t.base, jar, good({ state: undefined, response_type: 'token' })),
      'unsupported_response_type',
      null,
    );
  });
  test('prompt=none without a session: login_required', async () => {
    expectRedirectError(await authorize(t.base, new CookieJar(), good({ prompt: 'none' })), 'login_required');
  });
});

describe('success and login round trip', () => {
  test('signed-in user gets a code, the state and the issuer (RFC 9207)', async () => {
    const res = await authorize(t.base, jar, good());
    assert.equal(res.status, 302);
    const location = new URL(res.headers.get('location') ?? '');
    assert.ok((location.searchParams.get('code') ?? '').length >= 43);
    assert.equal(location.searchParams.get('state'), 'xyz-123');
    assert.equal(location.searchParams.get('iss'), t.base);
  });

  test('no session: redirect to the login page, then back to the same authorization request', async () => {
    const fresh = new CookieJar();
    const first = await authorize(t.base, fresh, good());
    assert.equal(first.status, 302);
    const login = new URL(first.headers.get('location') ?? '', t.base);
    assert.equal(login.pathname, '/login');
    const returnTo = login.searchParams.get('return_to') ?? '';
    assert.ok(returnTo.startsWith('/connect/authorize?'));
    const posted = await submitLogin(t.base, fresh, 'alice', 'alice-password-1', returnTo);
    assert.equal(posted.status, 302);
    assert.equal(posted.headers.get('location'), returnTo);
    const back = await fetch(new URL(returnTo, t.base), {
      headers: { cookie: fresh.header() },
      redirect: 'manual',
    });
    assert.equal(back.status, 302);
    assert.ok(new URL(back.headers.get('location') ?? '').searchParams.get('code'));
  });
});
