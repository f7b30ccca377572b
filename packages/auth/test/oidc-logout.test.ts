/**
 * OpenID Connect RP-Initiated Logout 1.0 and Back-Channel Logout 1.0 with `openid-client` 6 and
 * `oauth4webapi` through the real login page in Chromium: the end-session endpoint ends the login session
 * (the next `prompt=none` is `login_required`), revokes the session's refresh tokens, POSTs a verifiable
 * logout token to the client's back-channel URI, and sends the user to the registered
 * `post_logout_redirect_uri` with `state`; without a matching `id_token_hint` it asks first; bad requests
 * answer 400. The admin page's "Sign out" and the login page's own form end the session too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import type { BrowserContext } from 'playwright-core';
import { drive, type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

const CREDENTIALS: [string, string] = ['olivia', 'olivia-password-1'];
const insecure = { [oauth.allowInsecureRequests]: true } as const;

let s: OidcSetup;
let config: client.Configuration;
before(async () => {
  s = await startOidcSetup();
  config = await client.discovery(new URL(s.t.base), 'demo-spa', undefined, client.None(), {
    execute: [client.allowInsecureRequests],
  });
});
after(() => s?.close());

/** Signs in with openid-client in `context`; returns the tokens. */
async function signIn(context: BrowserContext) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: s.redirectUri,
    scope: 'openid offline_access',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  const result = await drive(s, context, url, { credentials: CREDENTIALS });
  return client.authorizationCodeGrant(config, result.final, {
    pkceCodeVerifier: verifier,
    expectedState: state,
    expectedNonce: nonce,
  });
}

/** Whether `prompt=none` still finds a session in `context` (a code) or not (`login_required`). */
async function silentResult(context: BrowserContext): Promise<string> {
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: s.redirectUri,
    scope: 'openid',
    code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
    code_challenge_method: 'S256',
    prompt: 'none',
    state: 'silent',
  });
  const result = await drive(s, context, url);
  return result.final.searchParams.get('error') ?? (result.final.searchParams.has('code') ? 'code' : 'none');
}

describe('RP-initiated logout with openid-client', () => {
  test('discovery advertises the end-session endpoint and back-channel logout', () => {
    const metadata = config.serverMetadata();
    assert.equal(metadata.end_session_endpoint, `${s.t.base}/connect/endsession`);
    assert.equal(metadata.backchannel_logout_supported, true);
    assert.equal(metadata.backchannel_logout_session_supported, true);
  });

  test('id_token_hint of the session: logged out at once, refresh tokens revoked, back-channel notified', async () => {
    const context = await s.browser.newContext();
    try {
      const tokens = await signIn(context);
      const sid = tokens.claims()?.sid;
      assert.equal(typeof sid, 'string');
      assert.equal(await silentResult(context), 'code', 'signed in');
      s.backchannel.length = 0;
      const url = client.buildEndSessionUrl(config, {
        id_token_hint: tokens.id_token!,
        post_logout_redirect_uri: s.postLogoutUri,
        state: 'bye-1',
      });
      const result = await drive(s, context, url);
      assert.deepEqual(result.pages, [], 'no confirmation page');
      assert.equal(`${result.final.origin}${result.final.pathname}`, s.postLogoutUri);
      assert.equal(result.final.searchParams.get('state'), 'bye-1');
      assert.equal(await silentResult(context), 'login_required', 'the login session ended');
      await assert.rejects(client.refreshTokenGrant(config, tokens.refresh_token!), (err: Error) => {
        assert.ok(err instanceof client.ResponseBodyError);
        assert.equal(err.error, 'invalid_grant');
        return true;
      });

      assert.equal(s.backchannel.length, 1, 'one logout token POSTed');
      const call = s.backchannel[0]!;
      assert.equal(call.contentType, 'application/x-www-form-urlencoded');
      const jwks = createRemoteJWKSet(new URL(`${s.t.base}/.well-known/jwks.json`));
      const { payload, protectedHeader } = await jwtVerify(call.logoutToken!, jwks, {
        issuer: s.t.base,
        audience: 'demo-spa',
        typ: 'logout+jwt',
        currentDate: new Date(s.t.clock.now),
      });
      assert.equal(protectedHeader.typ, 'logout+jwt');
      assert.equal(payload.sid, sid);
      assert.equal(payload.sub, tokens.claims()?.sub);
      assert.deepEqual(payload.events, { 'http://schemas.openid.net/event/backchannel-logout': {} });
      assert.equal(payload.nonce, undefined);
      assert.equal(typeof payload.jti, 'string');
      const audit = await s.t.server.store.listAudit({ category: 'Login', outcome: 'Success', limit: 10 });
      assert.ok(audit.items.some((e) => e.details?.action === 'logout' && e.details.sid === sid));
      assert.ok(
        audit.items.some((e) => e.details?.action === 'backchannel_logout' && e.clientId === 'demo-spa'),
      );
    } finally {
      await context.close();
    }
  });

  test('without id_token_hint the user confirms first; a stale hint also asks', async () => {
    const context = await s.browser.newContext();
    try {
      const first = await signIn(context);
      const page = await context.newPage();
      // A cross-site logout link with only client_id: a confirmation page, the session survives until confirmed.
      const url = client.buildEndSessionUrl(config, {
        client_id: 'demo-spa',
        post_logout_redirect_uri: s.postLogoutUri,
        state: 'bye-2',
      });
      await page.goto(url.href);
      assert.equal(new URL(page.url()).pathname, '/connect/endsession');
      assert.match(await page.content(), /Sign out <strong>olivia<\/strong>/);
      assert.equal(await silentResult(context), 'code', 'not logged out before confirming');
      await Promise.all([page.waitForURL((u) => u.origin === s.rp), page.click('button[type=submit]')]);
      assert.equal(new URL(page.url()).searchParams.get('state'), 'bye-2');
      assert.equal(await silentResult(context), 'login_required');

      // The ID token of the ended session names another sid than the new session: confirmation again.
      await signIn(context);
      await page.goto(client.buildEndSessionUrl(config, { id_token_hint: first.id_token! }).href);
      assert.equal(new URL(page.url()).pathname, '/connect/endsession');
      await Promise.all([page.waitForLoadState(), page.click('button[type=submit]')]);
      assert.match(await page.content(), /You are signed out/);
      assert.equal(await silentResult(context), 'login_required');
    } finally {
      await context.close();
    }
  });

  test('bad requests answer 400 text/plain and never redirect', async () => {
    const tokens = await signIn(await s.browser.newContext());
    const cases: [Record<string, string>, RegExp][] = [
      [{ post_logout_redirect_uri: s.postLogoutUri }, /needs id_token_hint or client_id/],
      [{ client_id: 'demo-spa', post_logout_redirect_uri: 'https://evil.example/' }, /not registered/],
      [{ id_token_hint: 'not.a.jwt' }, /not a valid ID token/],
      [{ id_token_hint: `${tokens.id_token!.slice(0, -4)}AAAA` }, /not a valid ID token/],
      [{ id_token_hint: tokens.id_token!, client_id: 'demo-service' }, /does not match/],
      [{ client_id: 'nope' }, /unknown or disabled client/],
    ];
    for (const [params, message] of cases) {
      const res = await fetch(`${s.t.base}/connect/endsession?${new URLSearchParams(params)}`, {
        redirect: 'manual',
      });
      assert.equal(res.status, 400, JSON.stringify(params));
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
      assert.match(await res.text(), message);
    }
    const repeated = await fetch(`${s.t.base}/connect/endsession?state=a&state=b`, { redirect: 'manual' });
    assert.equal(repeated.status, 400);
    const form = await fetch(`${s.t.base}/connect/endsession`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: 'demo-spa',
        post_logout_redirect_uri: s.postLogoutUri,
        state: 'x',
      }),
      redirect: 'manual',
    });
    assert.equal(form.status, 302, 'POST works too (no session: straight to the redirect URI)');
    assert.equal(form.headers.get('location'), `${s.postLogoutUri}?state=x`);
  });
});

describe('RP-initiated logout with oauth4webapi', () => {
  test('an RP built on oauth4webapi logs out with the discovered end_session_endpoint', async () => {
    const issuer = new URL(s.t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }),
    );
    const spa: oauth.Client = { client_id: 'demo-spa' };
    const context = await s.browser.newContext();
    try {
      const verifier = oauth.generateRandomCodeVerifier();
      const nonce = oauth.generateRandomNonce();
      const url = new URL(as.authorization_endpoint!);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: 'demo-spa',
        redirect_uri: s.redirectUri,
        scope: 'openid offline_access',
        code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        nonce,
      }).toString();
      const result = await drive(s, context, url, { credentials: CREDENTIALS });
      const params = oauth.validateAuthResponse(as, spa, result.final, oauth.expectNoState);
      const tokens = await oauth.processAuthorizationCodeResponse(
        as,
        spa,
        await oauth.authorizationCodeGrantRequest(
          as,
          spa,
          oauth.None(),
          params,
          s.redirectUri,
          verifier,
          insecure,
        ),
        { expectedNonce: nonce, requireIdToken: true },
      );
      s.backchannel.length = 0;
      const logoutUrl = new URL(as.end_session_endpoint!);
      logoutUrl.search = new URLSearchParams({
        id_token_hint: tokens.id_token!,
        post_logout_redirect_uri: s.postLogoutUri,
        state: 'o4w',
      }).toString();
      const out = await drive(s, context, logoutUrl);
      assert.equal(out.final.searchParams.get('state'), 'o4w');
      assert.equal(s.backchannel.length, 1);
      const refresh = await oauth.refreshTokenGrantRequest(
        as,
        spa,
        oauth.None(),
        tokens.refresh_token!,
        insecure,
      );
      await assert.rejects(oauth.processRefreshTokenResponse(as, spa, refresh), (err: Error) => {
        assert.ok(err instanceof oauth.ResponseBodyError);
        assert.equal(err.error, 'invalid_grant');
        return true;
      });
    } finally {
      await context.close();
    }
  });
});

describe('other ways out end the login session too', () => {
  test("the login page's own form: session ended, refresh tokens revoked, back-channel notified", async () => {
    const context = await s.browser.newContext();
    try {
      const tokens = await signIn(context);
      s.backchannel.length = 0;
      const page = await context.newPage();
      await page.goto(`${s.t.base}/login`);
      await Promise.all([page.waitForURL(/\/login$/), page.click('button[type=submit]')]);
      assert.equal(await silentResult(context), 'login_required');
      assert.equal(s.backchannel.length, 1);
      await assert.rejects(client.refreshTokenGrant(config, tokens.refresh_token!));
    } finally {
      await context.close();
    }
  });

  test('the admin page\'s "Sign out" ends the login page session (RP-initiated logout)', async () => {
    const admin = (await s.t.server.store.findUserByName('admin'))!;
    assert.ok(admin);
    const spa = (await s.t.server.store.getClient('demo-spa'))!;
    const adminPage = `${s.t.base}/auth-admin/`;
    await s.t.server.store.updateClient('demo-spa', {
      redirectUris: [...spa.redirectUris, adminPage],
      postLogoutRedirectUris: [...spa.postLogoutRedirectUris, adminPage],
    });
    const context = await s.browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(adminPage);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.fill('input[name=username]', 'admin');
      await page.fill('input[name=password]', 'admin-password-1');
      await Promise.all([
        page.waitForURL((u) => u.href.startsWith(adminPage)),
        page.click('button[type=submit]'),
      ]);
      await page.getByRole('button', { name: 'Sign out' }).waitFor();
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('button', { name: 'Sign in' }).waitFor();
      assert.equal(new URL(page.url()).pathname, '/auth-admin/');
      await page.goto(`${s.t.base}/login`);
      assert.doesNotMatch(await page.content(), /You are signed in/, 'the login page session is gone');
      assert.match(await page.content(), /name="password"/);
    } finally {
      await context.close();
    }
  });
});
