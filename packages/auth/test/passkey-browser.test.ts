/**
 * Passkeys (WebAuthn Level 3) in real Chromium with its CDP virtual authenticator (ctap2, internal,
 * resident keys, user verification): registration on the passkey page, passwordless sign-in through an
 * authorization request (the code redeemed at the token endpoint: `amr` `hwk mfa`, `acr` mfa), a passkey as
 * the second factor after a password, rename and remove; assertions altered on the way (another origin,
 * another RP ID hash), a replayed challenge and a counter that went backwards are refused, audited, and
 * leave no session and the stored counter as it was.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import type { BrowserContext, CDPSession, Page } from 'playwright-core';
import { ACR } from '../src/mfa/assurance.ts';
import type { UserRecord } from '../src/store/types.ts';
import { launchChromium } from './browser.ts';
import { pkcePair, startTestServer, type TestServer } from './oauth-fixtures.ts';

const MFA_KEY = 'passkey-test-mfa-key-0123456789abcdefgh';
let t: TestServer;
let base: string;
let browser: Awaited<ReturnType<typeof launchChromium>>;
let context: BrowserContext;
let page: Page;
let cdp: CDPSession;
let pia: UserRecord;
let rp: Server;
let redirectUri: string;

before(async () => {
  t = await startTestServer({ oauth: { mfa: { key: MFA_KEY } } });
  // WebAuthn needs a host name (never an IP address) as RP ID: the pages are opened on localhost.
  base = t.base.replace('127.0.0.1', 'localhost');
  t.server.config.issuer = base;
  pia = await t.createUser('pia', 'pia-password-1');
  // The relying party's callback: a page on another loopback port.
  rp = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<title>rp</title>'),
  );
  await new Promise<void>((resolve) => rp.listen(0, '127.0.0.1', resolve));
  redirectUri = `http://127.0.0.1:${(rp.address() as AddressInfo).port}/callback`;
  await t.server.store.updateClient('demo-spa', { redirectUris: [redirectUri] });
  browser = await launchChromium();
  context = await browser.newContext();
  page = await context.newPage();
  cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: {
      protocol: 'ctap2',
      transport: 'internal',
      hasResidentKey: true,
      hasUserVerification: true,
      isUserVerified: true,
      automaticPresenceSimulation: true,
    },
  });
});
after(async () => {
  await browser?.close();
  await t?.close();
  rp?.close();
});

/**
 * Signs in with the password through the login form, posted by the context's request client (it shares the
 * browser's cookies): the login page itself would answer its own conditional request with the virtual
 * authenticator first. @returns where the form post sends the browser.
 */
async function passwordSignIn(returnTo?: string): Promise<string> {
  const query = returnTo ? `?${new URLSearchParams({ return_to: returnTo })}` : '';
  const form = await page.request.get(`${base}/login${query}`);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1];
  assert.ok(csrf);
  const res = await page.request.post(`${base}/login`, {
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    data: new URLSearchParams({
      _csrf: csrf,
      username: 'pia',
      password: 'pia-password-1',
      ...(returnTo ? { return_to: returnTo } : {}),
    }).toString(),
    maxRedirects: 0,
  });
  assert.equal(res.status(), 302);
  return res.headers().location!;
}

async function signOut(): Promise<void> {
  await context.clearCookies();
}

/** An authorization request of demo-spa; `redeem` exchanges the code the browser ends with. */
function authorizationRequest() {
  const { verifier, challenge } = pkcePair();
  const url = `${base}/connect/authorize?${new URLSearchParams({
    response_type: 'code',
    client_id: 'demo-spa',
    redirect_uri: redirectUri,
    scope: 'openid',
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 's1',
    nonce: 'n1',
  })}`;
  return {
    url,
    async redeem(callback: string) {
      const code = new URL(callback).searchParams.get('code');
      assert.ok(code, `no code in ${callback}`);
      const res = await fetch(`${base}/connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          redirect_uri: redirectUri,
          client_id: 'demo-spa',
          code_verifier: verifier,
        }),
      });
      assert.equal(res.status, 200);
      return (await res.json()) as { id_token: string; access_token: string };
    },
  };
}

async function lastLoginEvent() {
  return (await t.server.store.listAudit({ category: 'Login', limit: 1 })).items[0]!;
}

describe('passkeys with the virtual authenticator', () => {
  test('a signed-in user registers a passkey on the passkey page', async () => {
    await passwordSignIn();
    await page.goto(`${base}/login/passkeys`);
    await page.fill('#passkey-name', 'Laptop');
    await Promise.all([page.waitForNavigation(), page.click('#passkey-add')]);
    assert.equal(new URL(page.url()).pathname, '/login/passkeys');
    assert.deepEqual(await page.locator('li.passkey strong').allTextContents(), ['Laptop']);
    const stored = await t.server.store.factors.passkeys.list(pia.id);
    assert.equal(stored.length, 1);
    assert.equal(stored[0]!.name, 'Laptop');
    assert.equal(stored[0]!.backedUp, false);
    const event = await lastLoginEvent();
    assert.equal(event.details?.event, 'factor_enrolled');
    assert.equal(event.details?.factor, 'passkey');
  });

  test('passwordless sign-in with conditional UI: the passkey alone, through an authorization request; amr hwk mfa', async () => {
    const html = await (await fetch(`${base}/login`)).text();
    assert.match(html, /autocomplete="username webauthn"/);
    await signOut();
    const request = authorizationRequest();
    // The login page starts a conditional request (autofill) at once; the virtual authenticator, which
    // simulates the user's choice, answers it: the page signs in and the request continues.
    await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri)), page.goto(request.url)]);
    const tokens = await request.redeem(page.url());
    const id = decodeJwt(tokens.id_token);
    assert.deepEqual(id.amr, ['hwk', 'mfa']);
    assert.equal(id.acr, ACR.mfa);
    assert.equal(id.sub, pia.id);
    assert.deepEqual(decodeJwt(tokens.access_token).amr, ['hwk', 'mfa']);
    const passkey = (await t.server.store.factors.passkeys.list(pia.id))[0]!;
    assert.ok(passkey.counter > 0, 'the counter moved');
    assert.notEqual(passkey.lastUsedAt, null);
  });

  test('after a password, a user with a passkey is asked for it as the second factor', async () => {
    await signOut();
    const request = authorizationRequest();
    const next = await passwordSignIn(new URL(request.url).pathname + new URL(request.url).search);
    assert.equal(new URL(next, base).pathname, '/login/otp');
    await page.goto(new URL(next, base).href);
    assert.equal(await page.locator('input[name=code]').count(), 0, 'no TOTP field without TOTP');
    await Promise.all([
      page.waitForURL((u) => u.href.startsWith(redirectUri)),
      page.click('#passkey-signin'),
    ]);
    const id = decodeJwt((await request.redeem(page.url())).id_token);
    assert.deepEqual(id.amr, ['pwd', 'hwk', 'mfa']);
    assert.equal(id.acr, ACR.mfa);
  });
});

/**
 * Opens the login page (whose conditional request the virtual authenticator answers) and captures the form
 * the page posts to `/login/passkey/verify`, which is not sent.
 */
async function captureAssertion(): Promise<URLSearchParams> {
  await signOut();
  const captured = new Promise<URLSearchParams>((resolve) => {
    void page.route('**/login/passkey/verify', async (route) => {
      resolve(new URLSearchParams(route.request().postData() ?? ''));
      await route.abort();
    });
  });
  await page.goto(`${base}/login`);
  const form = await captured;
  await page.unroute('**/login/passkey/verify');
  return form;
}

/** The captured response as the test alters it. */
interface CapturedResponse {
  response: { clientDataJSON: string; authenticatorData: string };
}

function edit(form: URLSearchParams, change: (response: CapturedResponse) => void): URLSearchParams {
  const response = JSON.parse(form.get('response')!);
  change(response);
  const out = new URLSearchParams(form);
  out.set('response', JSON.stringify(response));
  return out;
}

async function post(form: URLSearchParams) {
  const res = await page.request.post(`${base}/login/passkey/verify`, {
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    data: form.toString(),
  });
  const cookies = await context.cookies(base);
  return {
    status: res.status(),
    body: await res.json(),
    session: cookies.some((c) => c.name === 'seed_auth_session'),
  };
}

describe('altered and replayed assertions', () => {
  test('another origin in clientDataJSON is refused and audited; no session, counter unchanged', async () => {
    const before = (await t.server.store.factors.passkeys.list(pia.id))[0]!.counter;
    const form = edit(await captureAssertion(), (r) => {
      const client = JSON.parse(Buffer.from(r.response.clientDataJSON, 'base64url').toString());
      client.origin = 'https://evil.example';
      r.response.clientDataJSON = Buffer.from(JSON.stringify(client)).toString('base64url');
    });
    const res = await post(form);
    assert.deepEqual([res.status, res.body, res.session], [400, { error: 'passkey_failed' }, false]);
    const event = await lastLoginEvent();
    assert.equal(event.failureCode, 'passkey_verification_failed');
    assert.match(String(event.details?.reason), /origin/i);
    assert.equal((await t.server.store.factors.passkeys.list(pia.id))[0]!.counter, before);
  });

  test('another RP ID hash in the authenticator data is refused', async () => {
    const form = edit(await captureAssertion(), (r) => {
      const data = Buffer.from(r.response.authenticatorData, 'base64url');
      createHash('sha256').update('evil.example').digest().copy(data, 0);
      r.response.authenticatorData = data.toString('base64url');
    });
    const res = await post(form);
    assert.equal(res.status, 400);
    assert.equal(res.session, false);
    const event = await lastLoginEvent();
    assert.equal(event.failureCode, 'passkey_verification_failed');
    assert.match(String(event.details?.reason), /RP ID/i);
  });

  test('a challenge is used once: the same answer with the same ceremony cookie again is refused', async () => {
    const form = await captureAssertion();
    const ceremony = (await context.cookies(`${base}/login/passkey/verify`)).find(
      (c) => c.name === 'seed_auth_webauthn',
    );
    assert.ok(ceremony);
    const first = await post(form);
    assert.equal(first.status, 200);
    assert.equal(first.session, true);
    await context.clearCookies({ name: 'seed_auth_session' });
    await context.addCookies([ceremony]);
    const again = await post(form);
    assert.deepEqual([again.status, again.session], [400, false]);
    assert.equal((await lastLoginEvent()).failureCode, 'passkey_challenge_replayed');
  });

  test('a counter lower than the stored one (a cloned authenticator) is refused', async () => {
    const passkey = (await t.server.store.factors.passkeys.list(pia.id))[0]!;
    assert.ok(
      await t.server.store.factors.passkeys.recordUse(passkey.id, passkey.counter, 1_000_000, t.clock.now),
    );
    const res = await post(await captureAssertion());
    assert.deepEqual([res.status, res.session], [400, false]);
    assert.equal((await lastLoginEvent()).failureCode, 'passkey_counter_regression');
    assert.equal((await t.server.store.factors.passkeys.list(pia.id))[0]!.counter, 1_000_000);
  });
});

describe('managing passkeys', () => {
  test('rename and remove on the passkey page', async () => {
    // The passkey is the user's second factor now: the password step leads to it.
    assert.equal(await passwordSignIn(), '/login/otp');
    await page.goto(`${base}/login/otp`);
    await t.server.store.factors.passkeys.recordUse(
      (await t.server.store.factors.passkeys.list(pia.id))[0]!.id,
      1_000_000,
      0,
      t.clock.now,
    );
    await Promise.all([page.waitForNavigation(), page.click('#passkey-signin')]);
    await page.goto(`${base}/login/passkeys`);
    await page.fill('li.passkey input[name=name]', 'Work laptop');
    await Promise.all([page.waitForNavigation(), page.click('li.passkey form[action$=rename] button')]);
    assert.deepEqual(await page.locator('li.passkey strong').allTextContents(), ['Work laptop']);
    await Promise.all([page.waitForNavigation(), page.click('li.passkey form[action$=remove] button')]);
    assert.equal(await page.locator('li.passkey').count(), 0);
    assert.deepEqual(await t.server.store.factors.passkeys.list(pia.id), []);
    assert.equal((await lastLoginEvent()).details?.event, 'factor_removed');
  });
});
