/**
 * Every response header built from user input stays a valid header, and a client's mistake there is a
 * 302 or 4xx, never a 500: the login page's `return_to` (CR, LF, space, control and non-ASCII characters
 * fall back to the login page itself), the authorization endpoint's redirects (`state`, `return_to`), and
 * the administration API's `Location`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { safeReturnTo } from '../src/login/index.ts';
import {
  ADMIN_PASSWORD,
  authorize,
  CookieJar,
  pkcePair,
  postForm,
  SPA_REDIRECT,
  serviceToken,
  startTestServer,
  type TestServer,
} from './oauth-fixtures.ts';

let t: TestServer;
before(async () => {
  t = await startTestServer();
  await t.createUser('alice', 'alice-password-1');
});
after(() => t.close());

const authorizeQuery = (extra: Record<string, string> = {}) =>
  new URLSearchParams({
    response_type: 'code',
    client_id: 'demo-spa',
    redirect_uri: SPA_REDIRECT,
    code_challenge: pkcePair().challenge,
    code_challenge_method: 'S256',
    state: 's1',
    ...extra,
  });

/** The login form's CSRF field and cookies. */
async function loginForm(jar: CookieJar): Promise<string> {
  const page = await fetch(`${t.base}/login`, { headers: { cookie: jar.header() } });
  jar.take(page);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1];
  assert.ok(csrf);
  return csrf;
}

/** Headers may hold only tab, visible ASCII and bytes 0x80–0xff (Node's rule); ours hold visible ASCII. */
const assertHeaderSafe = (value: string | null) => {
  assert.ok(value !== null);
  assert.match(value, /^[\x21-\x7e]+$/, `header value ${JSON.stringify(value)}`);
};

const BAD_RETURN_TO = [
  `/connect/authorize?${authorizeQuery()}\r\nSet-Cookie: evil=1`,
  `/connect/authorize?${authorizeQuery()}\n`,
  `/connect/authorize?${authorizeQuery()}\r`,
  `/connect/authorize?state=\u0000`,
  `/connect/authorize?state=é`,
  `/connect/authorize?state=\u2028`,
  '/connect/authorize?a b',
];

describe('login page return_to', () => {
  test('safeReturnTo accepts visible-ASCII authorization requests only', () => {
    const good = `/connect/authorize?${authorizeQuery()}`;
    assert.equal(safeReturnTo(good), good);
    for (const bad of [...BAD_RETURN_TO, 'https://evil.example/', '//evil.example', '/login', 42, null]) {
      assert.equal(safeReturnTo(bad), undefined, JSON.stringify(bad));
    }
  });

  for (const [i, bad] of BAD_RETURN_TO.entries()) {
    test(`successful sign-in with a bad return_to (#${i}) goes to the login page, not a 500`, async () => {
      const jar = new CookieJar();
      const csrf = await loginForm(jar);
      const res = await postForm(
        t.base,
        '/login',
        { _csrf: csrf, username: 'alice', password: 'alice-password-1', return_to: bad },
        { cookie: jar.header() },
      );
      assert.equal(res.status, 302);
      assert.equal(res.headers.get('location'), '/login');
      assert.ok(res.headers.getSetCookie().some((c) => c.startsWith('seed_auth_session=')));
      assert.equal(
        res.headers.getSetCookie().some((c) => c.startsWith('evil=')),
        false,
      );
    });
  }

  test('a failed sign-in with a bad return_to goes back to /login?err=1 without it', async () => {
    const jar = new CookieJar();
    const csrf = await loginForm(jar);
    const res = await postForm(
      t.base,
      '/login',
      { _csrf: csrf, username: 'alice', password: 'wrong', return_to: BAD_RETURN_TO[0]! },
      { cookie: jar.header() },
    );
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/login?err=1');
  });

  test('GET /login drops a bad return_to from the form', async () => {
    for (const bad of BAD_RETURN_TO) {
      const res = await fetch(`${t.base}/login?${new URLSearchParams({ return_to: bad })}`);
      assert.equal(res.status, 200);
      assert.doesNotMatch(await res.text(), /name="return_to"/);
    }
  });
});

describe('authorization endpoint redirects', () => {
  test('a state with CR/LF and non-ASCII is carried percent-encoded to the client', async () => {
    const jar = new CookieJar();
    const csrf = await loginForm(jar);
    await postForm(
      t.base,
      '/login',
      { _csrf: csrf, username: 'alice', password: 'alice-password-1' },
      { cookie: jar.header() },
    ).then((res) => jar.take(res));
    const state = 'a\r\nSet-Cookie: x=1 é';
    const ok = await authorize(t.base, jar, Object.fromEntries(authorizeQuery({ state })));
    assert.equal(ok.status, 302);
    assertHeaderSafe(ok.headers.get('location'));
    assert.equal(new URL(ok.headers.get('location')!).searchParams.get('state'), state);
    const failed = await authorize(
      t.base,
      jar,
      Object.fromEntries(authorizeQuery({ state, response_type: 'token' })),
    );
    assert.equal(failed.status, 302);
    assertHeaderSafe(failed.headers.get('location'));
    const location = new URL(failed.headers.get('location')!);
    assert.equal(location.searchParams.get('error'), 'unsupported_response_type');
    assert.equal(location.searchParams.get('state'), state);
  });

  test('without a session the request (with CR/LF in it) is sent to the login page and survives', async () => {
    const query = authorizeQuery({ state: 'x\r\ny', login_hint: 'ä\n' });
    const res = await fetch(`${t.base}/connect/authorize?${query}`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    const location = res.headers.get('location');
    assertHeaderSafe(location);
    const returnTo = new URL(location!, t.base).searchParams.get('return_to');
    assert.equal(safeReturnTo(returnTo), returnTo, 'the login page accepts it back');
    assert.equal(new URLSearchParams(returnTo!.split('?')[1]).get('state'), 'x\r\ny');
  });
});

describe('administration API Location', () => {
  test('is built from the normalized, URL-encoded key', async () => {
    const login = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'admin',
      password: ADMIN_PASSWORD,
    });
    const { access_token: token } = (await login.json()) as { access_token: string };
    const post = (path: string, body: unknown) =>
      t.server.app.inject({
        method: 'POST',
        url: `/auth-admin/api${path}`,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
    const permission = await post('/permissions', { code: '  Shop.Orders.Read ' });
    assert.equal(permission.statusCode, 201);
    assert.equal(permission.headers.location, '/auth-admin/api/permissions/shop.orders.read');
    const user = await post('/users', { userName: 'bob\r\nSet-Cookie: x=1' });
    assert.equal(user.statusCode, 400, 'control characters in a user name are refused');
    const client = await post('/clients', { clientId: 'a b', clientType: 'public' });
    assert.equal(client.statusCode, 400);
    const created = await post('/clients', { clientId: 'Ok.client~1', clientType: 'public' });
    assert.equal(created.statusCode, 201);
    assertHeaderSafe(String(created.headers.location));
  });
});

describe('logout and consent redirects', () => {
  const state = 'a\r\nSet-Cookie: x=1 é';

  test('the end-session redirect carries a CR/LF state percent-encoded', async () => {
    await t.server.store.updateClient('demo-spa', { postLogoutRedirectUris: ['http://127.0.0.1:8089/bye'] });
    const res = await fetch(
      `${t.base}/connect/endsession?${new URLSearchParams({
        client_id: 'demo-spa',
        post_logout_redirect_uri: 'http://127.0.0.1:8089/bye',
        state,
      })}`,
      { redirect: 'manual' },
    );
    assert.equal(res.status, 302);
    assertHeaderSafe(res.headers.get('location'));
    assert.equal(new URL(res.headers.get('location')!).searchParams.get('state'), state);
    const bad = await fetch(
      `${t.base}/connect/endsession?${new URLSearchParams({
        client_id: 'demo-spa',
        post_logout_redirect_uri: 'http://127.0.0.1:8089/bye\r\nX: 1',
      })}`,
      { redirect: 'manual' },
    );
    assert.equal(bad.status, 400, 'an unregistered (CR/LF) redirect URI is refused, not a 500');
  });

  test('consent: "Deny" redirects with the state percent-encoded; a CR/LF return_to is a 400', async () => {
    await t.createClient({
      clientId: 'third-party',
      clientType: 'public',
      redirectUris: [SPA_REDIRECT],
      allowedGrantTypes: ['authorization_code'],
      allowedScopes: ['openid'],
      requireConsent: true,
    });
    const jar = new CookieJar();
    const csrf = await loginForm(jar);
    jar.take(
      await postForm(
        t.base,
        '/login',
        { _csrf: csrf, username: 'alice', password: 'alice-password-1' },
        { cookie: jar.header() },
      ),
    );
    const toConsent = await authorize(
      t.base,
      jar,
      Object.fromEntries(authorizeQuery({ client_id: 'third-party', scope: 'openid', state })),
    );
    assert.equal(toConsent.status, 302);
    const location = toConsent.headers.get('location');
    assertHeaderSafe(location);
    const consentUrl = new URL(location!, t.base);
    assert.equal(consentUrl.pathname, '/consent');
    const page = await fetch(consentUrl, { headers: { cookie: jar.header() } });
    jar.take(page);
    const html = await page.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
    const returnTo = consentUrl.searchParams.get('return_to')!;
    const deny = await postForm(
      t.base,
      '/consent',
      { _csrf: token, return_to: returnTo, decision: 'deny' },
      { cookie: jar.header() },
    );
    assert.equal(deny.status, 302);
    assertHeaderSafe(deny.headers.get('location'));
    const answer = new URL(deny.headers.get('location')!);
    assert.equal(answer.searchParams.get('error'), 'access_denied');
    assert.equal(answer.searchParams.get('state'), state);
    const crlf = await postForm(
      t.base,
      '/consent',
      { _csrf: token, return_to: `${returnTo}\r\nX: 1`, decision: 'allow' },
      { cookie: jar.header() },
    );
    assert.equal(crlf.status, 400);
  });
});
