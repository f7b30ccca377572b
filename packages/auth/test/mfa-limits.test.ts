/**
 * Two-factor sign-in over plain HTTP: TOTP checks are rate limited per account (429 with `Retry-After`
 * before the code is even checked, the refusal audited once), the password grant refuses a user who has
 * a second factor or needs one (same `invalid_grant` as a wrong password, reason audited) and gives the
 * others `amr` `pwd` and `acr` `urn:seed:acr:pwd`; without an MFA key a user who needs a second factor
 * gets a clear page and no session; a pending sign-in cookie stops working when the password changes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import { ACR } from '../src/mfa/assurance.ts';
import { newTotpSecret, totpCode } from '../src/mfa/totp.ts';
import type { UserRecord } from '../src/store/types.ts';
import {
  CookieJar,
  postForm,
  serviceToken,
  startTestServer,
  submitLogin,
  type TestServer,
} from './oauth-fixtures.ts';

const MFA_KEY = 'limits-test-mfa-key-0123456789abcdefghij';

/** Posts a code to `/login/otp` with the jar's cookies and the page's CSRF field. */
async function postCode(t: TestServer, jar: CookieJar, code: string): Promise<Response> {
  const page = await fetch(`${t.base}/login/otp`, { headers: { cookie: jar.header() }, redirect: 'manual' });
  jar.take(page);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await page.text())?.[1];
  assert.ok(csrf, 'the code page has a _csrf field');
  const res = await postForm(t.base, '/login/otp', { _csrf: csrf, code }, { cookie: jar.header() });
  jar.take(res);
  return res;
}

describe('with an MFA key', () => {
  let t: TestServer;
  let secret: string;
  let mallory: UserRecord;
  before(async () => {
    t = await startTestServer({
      oauth: { mfa: { key: MFA_KEY } },
      rateLimits: { totp: { account: { points: 3, durationSeconds: 900 }, ip: false } },
    });
    mallory = await t.createUser('mallory', 'mallory-password-1');
    secret = newTotpSecret();
    await t.server.store.factors.setTotp(
      mallory.id,
      t.server.config.mfa!.sealer.seal(secret, mallory.id),
      0,
      t.clock.now,
    );
    await t.createUser('nina', 'nina-password-1');
  });
  after(() => t?.close());

  test('TOTP checks past the account limit answer 429 with Retry-After, even for the right code', async () => {
    const jar = new CookieJar();
    const login = await submitLogin(t.base, jar, 'mallory', 'mallory-password-1');
    assert.equal(login.status, 302);
    assert.equal(login.headers.get('location'), '/login/otp');
    assert.equal(jar.cookies.has('seed_auth_session'), false, 'no session before the second factor');
    for (let i = 0; i < 3; i++) {
      const res = await postCode(t, jar, '000000');
      assert.equal(res.status, 302);
      assert.equal(res.headers.get('location'), '/login/otp?err=1');
    }
    const limited = await postCode(t, jar, totpCode(secret, t.clock.now));
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal(jar.cookies.has('seed_auth_session'), false);
    const audit = await t.server.store.listAudit({ category: 'Login', outcome: 'Denied', limit: 10 });
    const codes = audit.items.map((e) => e.failureCode);
    assert.equal(codes.filter((c) => c === 'rate_limited').length, 1);
    assert.ok(codes.filter((c) => c === 'totp_invalid').length >= 1);
    // The step the refused request carried was never claimed: it is still usable once the window ends.
    assert.equal((await t.server.store.factors.getTotp(mallory.id))?.lastStep, 0);
  });

  test('the password grant refuses a user with a second factor like a wrong password; others get amr pwd', async () => {
    const refused = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'mallory',
      password: 'mallory-password-1',
    });
    assert.equal(refused.status, 400);
    const refusedBody = await refused.json();
    const audit = await t.server.store.listAudit({ category: 'Login', limit: 1 });
    assert.equal(audit.items[0]?.failureCode, 'second_factor_required');
    const wrong = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'nina',
      password: 'not-her-password',
    });
    assert.equal(wrong.status, 400);
    assert.deepEqual(refusedBody, await wrong.json());
    assert.equal((refusedBody as { error: string }).error, 'invalid_grant');

    const ok = await serviceToken(t.base, {
      grant_type: 'password',
      username: 'nina',
      password: 'nina-password-1',
      scope: 'openid',
    });
    assert.equal(ok.status, 200);
    const body = (await ok.json()) as { access_token: string; id_token: string };
    for (const token of [body.access_token, body.id_token]) {
      const claims = decodeJwt(token);
      assert.deepEqual(claims.amr, ['pwd']);
      assert.equal(claims.acr, ACR.password);
    }
  });

  test('a password change ends a pending sign-in', async () => {
    const jar = new CookieJar();
    await submitLogin(t.base, jar, 'mallory', 'mallory-password-1');
    assert.ok(jar.cookies.has('seed_auth_mfa'));
    await t.server.store.setPasswordHash(mallory.id, await t.server.hasher.hash('mallory-password-2'));
    const res = await fetch(`${t.base}/login/otp`, { headers: { cookie: jar.header() }, redirect: 'manual' });
    assert.equal(res.status, 302);
    assert.equal(res.headers.get('location'), '/login');
  });
});

describe('without an MFA key', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(() => t?.close());

  test('a user who needs a second factor gets a clear page, no session, and the reason in the audit log', async () => {
    const user = await t.createUser('quinn', 'quinn-password-1');
    await t.server.store.factors.requireMfa('user', user.id, t.clock.now);
    const jar = new CookieJar();
    const res = await submitLogin(t.base, jar, 'quinn', 'quinn-password-1');
    assert.equal(res.status, 200);
    assert.match(await res.text(), /needs a second factor, which this server cannot offer/);
    assert.equal(jar.cookies.has('seed_auth_session'), false);
    const audit = await t.server.store.listAudit({ category: 'Login', limit: 1 });
    assert.equal(audit.items[0]?.failureCode, 'second_factor_unavailable');
    const page = await fetch(`${t.base}/login/otp`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /cannot offer/);
  });
});
