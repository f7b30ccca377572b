/**
 * Self-service through a real SMTP server started here (Debian's `python3-aiosmtpd`, installed by the
 * package's `test:setup`): a password-reset request mails a single-use link; the reset ends the user's
 * refresh tokens and sessions; an unknown account gets the same answer and no mail; used and expired links
 * get one failure page with the reason in the audit log; e-mail verification by link; the account page
 * changes the password and ends sessions.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { hashToken } from '../src/oauth/tokens.ts';
import type { UserRecord } from '../src/store/types.ts';
import {
  CookieJar,
  postForm,
  serviceToken,
  startTestServer,
  submitLogin,
  type TestServer,
} from './oauth-fixtures.ts';
import { linkIn, SmtpSink } from './smtp-sink.ts';

async function csrfOf(
  t: TestServer,
  jar: CookieJar,
  path: string,
): Promise<{ csrf: string; status: number; html: string }> {
  const res = await fetch(`${t.base}${path}`, { headers: { cookie: jar.header() }, redirect: 'manual' });
  jar.take(res);
  const html = await res.text();
  return { csrf: /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '', status: res.status, html };
}

async function submit(
  t: TestServer,
  jar: CookieJar,
  path: string,
  form: string,
  fields: Record<string, string>,
) {
  const { csrf } = await csrfOf(t, jar, form);
  const res = await postForm(t.base, path, { _csrf: csrf, ...fields }, { cookie: jar.header() });
  jar.take(res);
  return res;
}

let smtp: SmtpSink;
let t: TestServer;
let sam: UserRecord;
before(async () => {
  smtp = await SmtpSink.start();
  t = await startTestServer({
    oauth: { selfService: { smtpUrl: `smtp://127.0.0.1:${smtp.port}`, from: 'auth@example.org' } },
  });
  sam = await t.createUser('sam', 'sam-password-1');
  await t.server.store.updateUser(sam.id, { email: 'sam@example.org' });
});
after(async () => {
  await t?.close();
  smtp?.stop();
});

describe('password reset by e-mail', () => {
  let link: URL;
  let mails = 0;

  test('a request for an unknown account and one for sam get the same page; only sam gets a mail', async () => {
    const jar = new CookieJar();
    const unknown = await submit(t, jar, '/login/forgot', '/login/forgot', { account: 'nobody' });
    const known = await submit(t, jar, '/login/forgot', '/login/forgot', { account: 'SAM@example.org' });
    assert.equal(unknown.status, 200);
    assert.equal(known.status, 200);
    const a = (await unknown.text()).replace(/name="_csrf" value="[^"]+"/, '');
    const b = (await known.text()).replace(/name="_csrf" value="[^"]+"/, '');
    assert.equal(a, b);
    const message = await smtp.message(mails++);
    assert.match(message, /To: sam@example.org/);
    assert.match(message, /From: auth@example.org/);
    link = linkIn(message, '/login/reset');
    assert.equal(smtp.messages().length, 1);
    const audit = await t.server.store.listAudit({ category: 'Login', limit: 2 });
    assert.deepEqual(
      audit.items.map((e) => [e.details?.event, e.failureCode]),
      [
        ['reset_requested', null],
        ['reset_requested', 'unknown_account'],
      ],
    );
  });

  test('the reset sets the password, ends the refresh tokens and sessions, and the link works once', async () => {
    const grant = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'sam',
      password: 'sam-password-1',
      scope: 'offline_access',
    });
    const { refresh_token } = (await grant.json()) as { refresh_token: string };
    const session = new CookieJar();
    await submitLogin(t.base, session, 'sam', 'sam-password-1');
    assert.ok(session.cookies.has('seed_auth_session'));

    const jar = new CookieJar();
    const path = `${link.pathname}${link.search}`;
    const form = await csrfOf(t, jar, path);
    assert.equal(form.status, 200);
    const mismatch = await postForm(
      t.base,
      '/login/reset',
      {
        _csrf: form.csrf,
        token: link.searchParams.get('token')!,
        password: 'new-password-1',
        password2: 'other',
      },
      { cookie: jar.header() },
    );
    assert.equal(mismatch.status, 302);
    assert.match(mismatch.headers.get('location')!, /err=1/);
    const res = await postForm(
      t.base,
      '/login/reset',
      {
        _csrf: form.csrf,
        token: link.searchParams.get('token')!,
        password: 'new-password-1',
        password2: 'new-password-1',
      },
      { cookie: jar.header() },
    );
    assert.equal(res.status, 200);
    assert.match(await res.text(), /Your password has been changed/);

    const refresh = await serviceToken(t.base, { grant_type: 'refresh_token', refresh_token });
    assert.equal(refresh.status, 400);
    assert.equal(((await refresh.json()) as { error: string }).error, 'invalid_grant');
    const old = await fetch(`${t.base}/login/account`, {
      headers: { cookie: session.header() },
      redirect: 'manual',
    });
    assert.equal(old.status, 302, 'the session of before the reset is over');
    const oldPassword = await submitLogin(t.base, new CookieJar(), 'sam', 'sam-password-1');
    assert.match(oldPassword.headers.get('location')!, /err=1/);
    const newPassword = await submitLogin(t.base, new CookieJar(), 'sam', 'new-password-1');
    assert.doesNotMatch(newPassword.headers.get('location')!, /err=1/);

    const again = await postForm(
      t.base,
      '/login/reset',
      {
        _csrf: form.csrf,
        token: link.searchParams.get('token')!,
        password: 'third-password-1',
        password2: 'third-password-1',
      },
      { cookie: jar.header() },
    );
    assert.equal(again.status, 400);
    assert.match(await again.text(), /This link is not valid or has expired/);
    const event = (await t.server.store.listAudit({ category: 'Login', limit: 1 })).items[0]!;
    assert.deepEqual([event.details?.event, event.failureCode], ['password_reset', 'link_used']);
    assert.equal((await fetch(`${t.base}${path}`)).status, 400);
  });

  test('an expired link and an unknown one fail alike; the audit log tells them apart', async () => {
    const jar = new CookieJar();
    await submit(t, jar, '/login/forgot', '/login/forgot', { account: 'sam' });
    const expired = linkIn(await smtp.message(mails++), '/login/reset');
    const form = await csrfOf(t, jar, `${expired.pathname}${expired.search}`);
    t.clock.now += 31 * 60_000;
    const fields = { _csrf: form.csrf, password: 'late-password-1', password2: 'late-password-1' };
    const late = await postForm(
      t.base,
      '/login/reset',
      { ...fields, token: expired.searchParams.get('token')! },
      { cookie: jar.header() },
    );
    const made = await postForm(
      t.base,
      '/login/reset',
      { ...fields, token: 'x'.repeat(43) },
      { cookie: jar.header() },
    );
    assert.equal(late.status, 400);
    assert.equal(made.status, 400);
    assert.equal(await late.text(), await made.text());
    const audit = await t.server.store.listAudit({ category: 'Login', limit: 2 });
    assert.deepEqual(
      audit.items.map((e) => e.failureCode),
      ['link_unknown', 'link_expired'],
    );
  });
});

describe('e-mail verification and the account page', () => {
  test('a verification link verifies the address once', async () => {
    const jar = new CookieJar();
    await submitLogin(t.base, jar, 'sam', 'new-password-1');
    const page = await csrfOf(t, jar, '/login/account');
    assert.match(page.html, /id="email-state">not verified/);
    const before = smtp.messages().length;
    const res = await postForm(
      t.base,
      '/login/account/verify-email',
      { _csrf: page.csrf },
      { cookie: jar.header() },
    );
    assert.equal(res.headers.get('location'), '/login/account?sent=1');
    const link = linkIn(await smtp.message(before), '/login/verify-email');
    const verify = await fetch(`${t.base}${link.pathname}${link.search}`);
    assert.equal(verify.status, 200);
    assert.equal((await t.server.store.getUser(sam.id))?.emailVerified, true);
    assert.equal((await fetch(`${t.base}${link.pathname}${link.search}`)).status, 400);
    assert.match((await csrfOf(t, jar, '/login/account')).html, /id="email-state">verified/);
  });

  test('the account page lists sessions, ends another one, and changes the password', async () => {
    const other = new CookieJar();
    await submitLogin(t.base, other, 'sam', 'new-password-1');
    const jar = new CookieJar();
    await submitLogin(t.base, jar, 'sam', 'new-password-1');
    let page = await csrfOf(t, jar, '/login/account');
    const sids = [...page.html.matchAll(/class="session" data-sid="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(sids.length >= 2);
    const otherSid = (await t.server.store.getLoginSession(
      hashToken(other.cookies.get('seed_auth_session')!),
    ))!.sid!;
    assert.ok(sids.includes(otherSid));
    const end = await postForm(
      t.base,
      '/login/account/sessions/end',
      { _csrf: page.csrf, sid: otherSid },
      { cookie: jar.header() },
    );
    assert.equal(end.headers.get('location'), '/login/account');
    assert.equal(
      (await fetch(`${t.base}/login/account`, { headers: { cookie: other.header() }, redirect: 'manual' }))
        .status,
      302,
    );
    page = await csrfOf(t, jar, '/login/account');
    const wrong = await postForm(
      t.base,
      '/login/account/password',
      {
        _csrf: page.csrf,
        current: 'not-it',
        password: 'changed-password-1',
        password2: 'changed-password-1',
      },
      { cookie: jar.header() },
    );
    assert.equal(wrong.headers.get('location'), '/login/account?err=1');
    const changed = await postForm(
      t.base,
      '/login/account/password',
      {
        _csrf: page.csrf,
        current: 'new-password-1',
        password: 'changed-password-1',
        password2: 'changed-password-1',
      },
      { cookie: jar.header() },
    );
    jar.take(changed);
    assert.equal(changed.headers.get('location'), '/login/account?changed=1');
    assert.equal((await csrfOf(t, jar, '/login/account')).status, 200, 'this browser stays signed in');
    const old = await submitLogin(t.base, new CookieJar(), 'sam', 'new-password-1');
    assert.match(old.headers.get('location')!, /err=1/);
  });
});

describe('self-registration', () => {
  test('is off by default', async () => {
    const res = await fetch(`${t.base}/login/register`, { redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.doesNotMatch(await (await fetch(`${t.base}/login`)).text(), /Create an account/);
  });

  test('when on: an account with no roles, signed in, with a verification link; bad input named, taken names refused', async () => {
    const open = await startTestServer({
      oauth: { selfService: { smtpUrl: `smtp://127.0.0.1:${smtp.port}`, registration: true } },
    });
    try {
      assert.match(await (await fetch(`${open.base}/login`)).text(), /href="\/login\/register"/);
      const jar = new CookieJar();
      const fields = {
        username: 'newbie',
        email: 'newbie@example.org',
        password: 'newbie-pass-1',
        password2: 'newbie-pass-1',
      };
      const bad = await submit(open, jar, '/login/register', '/login/register', {
        ...fields,
        email: 'not-an-address',
      });
      assert.equal(bad.headers.get('location'), '/login/register?err=2');
      const before = smtp.messages().length;
      const made = await submit(open, jar, '/login/register', '/login/register', fields);
      assert.equal(made.headers.get('location'), '/login/account?sent=1');
      const user = await open.server.store.findUserByName('newbie');
      assert.ok(user);
      assert.equal(user.email, 'newbie@example.org');
      assert.equal(user.emailVerified, false);
      assert.deepEqual((await open.server.store.getUserSubject(user.id))?.roles ?? [], []);
      assert.equal((await csrfOf(open, jar, '/login/account')).status, 200, 'signed in');
      const link = linkIn(await smtp.message(before), '/login/verify-email');
      assert.equal((await fetch(`${open.base}${link.pathname}${link.search}`)).status, 200);
      assert.equal((await open.server.store.getUser(user.id))?.emailVerified, true);
      const taken = await submit(open, new CookieJar(), '/login/register', '/login/register', fields);
      assert.equal(taken.headers.get('location'), '/login/register?err=4');
    } finally {
      await open.close();
    }
  });
});
