/**
 * Spec 001 "Login page": a real HTML form, CSRF-protected, no external assets; failure answers 302 back
 * with `err=1` and the real reason goes only to the audit log (Category `Login`, Outcome `Denied`);
 * success sets an HttpOnly, SameSite session cookie.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  authorize,
  CookieJar,
  pkcePair,
  postForm,
  SPA_REDIRECT,
  startTestServer,
  submitLogin,
  type TestServer,
} from './oauth-fixtures.ts';

let t: TestServer;
before(async () => {
  t = await startTestServer({ maxAccessFailedCount: 3 });
  await t.createUser('alice', 'alice-password-1');
  const disabled = await t.createUser('dora', 'dora-password-1');
  await t.server.store.updateUser(disabled.id, { isEnabled: false });
  await t.createUser('lola', 'lola-password-1');
});
after(() => t.close());

const returnTo = `/connect/authorize?${new URLSearchParams({
  response_type: 'code',
  client_id: 'demo-spa',
  redirect_uri: SPA_REDIRECT,
  code_challenge: pkcePair().challenge,
  code_challenge_method: 'S256',
  state: 's1',
})}`;

async function lastLoginAudit(subjectName: string) {
  const page = await t.server.store.listAudit({ category: 'Login', limit: 200 });
  return page.items.find((e) => e.subjectName === subjectName);
}

describe('the form', () => {
  test('is a self-contained HTML form with a CSRF field and a restrictive CSP', async () => {
    const res = await fetch(`${t.base}/login?${new URLSearchParams({ return_to: returnTo })}`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
    const html = await res.text();
    assert.match(html, /<form method="post" action="\/login"/);
    assert.match(html, /<input type="hidden" name="_csrf" value="[^"]{16,}">/);
    assert.match(html, /name="username"/);
    assert.match(html, /<input type="password"[^>]*name="password"/);
    assert.ok(html.includes(`value="${returnTo.replace(/&/g, '&#38;')}"`), 'return_to is kept, HTML-escaped');
    assert.doesNotMatch(html, /<(script|link|img)\b|https?:\/\//, 'no scripts or external assets');
  });

  test('a POST without the CSRF token is refused', async () => {
    const res = await postForm(t.base, '/login', { username: 'alice', password: 'alice-password-1' });
    assert.equal(res.status, 403);
    assert.equal(
      res.headers.getSetCookie().some((c) => c.startsWith('seed_auth_session=')),
      false,
    );
  });

  test('a CSRF token from another browser (cookie) is refused', async () => {
    const mine = new CookieJar();
    mine.take(await fetch(`${t.base}/login`));
    const theirs = await fetch(`${t.base}/login`);
    const token = /name="_csrf" value="([^"]+)"/.exec(await theirs.text())?.[1] ?? '';
    const res = await postForm(
      t.base,
      '/login',
      { _csrf: token, username: 'alice', password: 'alice-password-1' },
      { cookie: mine.header() },
    );
    assert.equal(res.status, 403);
  });

  test('the return target is restricted to this server’s authorization endpoint', async () => {
    const jar = new CookieJar();
    const res = await submitLogin(t.base, jar, 'alice', 'alice-password-1', 'https://evil.example/phish');
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/login');
  });
});

describe('failures: 302 back with err=1, real reason only in the audit log', () => {
  for (const [user, password, reason] of [
    ['nobody', 'whatever-123', 'invalid_credentials'],
    ['alice', 'wrong-password', 'invalid_credentials'],
    ['dora', 'dora-password-1', 'account_disabled'],
  ] as const) {
    test(`${reason} (${user})`, async () => {
      const jar = new CookieJar();
      const res = await submitLogin(t.base, jar, user, password, returnTo);
      assert.equal(res.status, 302);
      const location = new URL(res.headers.get('location') ?? '', t.base);
      assert.equal(location.pathname, '/login');
      assert.equal(location.searchParams.get('err'), '1');
      assert.equal(location.searchParams.get('return_to'), returnTo, 'the authorization request is kept');
      assert.equal(jar.cookies.has('seed_auth_session'), false);
      const page = await (await fetch(location, { headers: { cookie: jar.header() } })).text();
      assert.match(page, /Invalid user name or password\./);
      assert.doesNotMatch(page, /disabled|locked|invalid_credentials/i, 'the reason is not shown');
      const event = await lastLoginAudit(user);
      assert.equal(event?.outcome, 'Denied');
      assert.equal(event?.failureCode, reason);
    });
  }

  test('locked_out after MaxAccessFailedCount failures; the page answers the same', async () => {
    for (let i = 0; i < 3; i++) await submitLogin(t.base, new CookieJar(), 'lola', 'bad-password');
    const jar = new CookieJar();
    const res = await submitLogin(t.base, jar, 'lola', 'lola-password-1');
    assert.equal(new URL(res.headers.get('location') ?? '', t.base).searchParams.get('err'), '1');
    const event = await lastLoginAudit('lola');
    assert.equal(event?.failureCode, 'locked_out');
  });

  test('empty fields', async () => {
    const res = await submitLogin(t.base, new CookieJar(), '', '');
    assert.equal(new URL(res.headers.get('location') ?? '', t.base).searchParams.get('err'), '1');
  });
});

describe('success', () => {
  test('sets an HttpOnly, SameSite session cookie and continues the authorization request', async () => {
    const jar = new CookieJar();
    const res = await submitLogin(t.base, jar, 'alice', 'alice-password-1', returnTo);
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), returnTo);
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('seed_auth_session='));
    assert.ok(cookie);
    assert.match(cookie, /; HttpOnly/i);
    assert.match(cookie, /; SameSite=Lax/i);
    assert.match(cookie, /; Path=\//);
    const event = await lastLoginAudit('alice');
    assert.equal(event?.outcome, 'Success');
  });

  test('signing in again replaces the session; the earlier cookie value stops working (no fixation)', async () => {
    const jar = new CookieJar();
    await submitLogin(t.base, jar, 'alice', 'alice-password-1');
    const planted = jar.cookies.get('seed_auth_session') ?? '';
    await submitLogin(t.base, jar, 'alice', 'alice-password-1');
    assert.notEqual(jar.cookies.get('seed_auth_session'), planted);
    const stale = new CookieJar();
    stale.cookies.set('seed_auth_session', planted);
    const res = await authorize(
      t.base,
      stale,
      Object.fromEntries(new URLSearchParams(returnTo.split('?')[1])),
    );
    assert.equal(new URL(res.headers.get('location') ?? '', t.base).pathname, '/login');
  });

  test('sign-out ends the session', async () => {
    const jar = new CookieJar();
    await submitLogin(t.base, jar, 'alice', 'alice-password-1');
    const page = await fetch(`${t.base}/login`, { headers: { cookie: jar.header() } });
    jar.take(page);
    const html = await page.text();
    assert.match(html, /signed in as <strong>alice<\/strong>/);
    const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
    const session = jar.cookies.get('seed_auth_session');
    const out = await postForm(t.base, '/logout', { _csrf: csrf }, { cookie: jar.header() });
    assert.equal(out.status, 302);
    // The old cookie value no longer authorizes.
    const stale = new CookieJar();
    stale.cookies.set('seed_auth_session', session ?? '');
    const res = await authorize(
      t.base,
      stale,
      Object.fromEntries(new URLSearchParams(returnTo.split('?')[1])),
    );
    assert.equal(new URL(res.headers.get('location') ?? '', t.base).pathname, '/login');
  });
});
