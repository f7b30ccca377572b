/**
 * Consent for third-party clients (`requireConsent`) with `openid-client` 6 and `oauth4webapi` through the
 * real login and consent pages in Chromium: the consent page lists the requested scopes; "Allow" is
 * remembered per user and client (no page next time, `prompt=none` works); `prompt=consent` asks again;
 * "Deny" answers `access_denied`; `prompt=none` without consent answers `consent_required`; the
 * administration API lists and revokes consents (audited), after which the page asks again.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import type { BrowserContext } from 'playwright-core';
import { ADMIN_PASSWORD, serviceToken } from './oauth-fixtures.ts';
import { drive, type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

const CREDENTIALS: [string, string] = ['olivia', 'olivia-password-1'];
const PARTNER = 'partner-app';

let s: OidcSetup;
let config: client.Configuration;
let context: BrowserContext;
let adminToken: string;
let oliviaId: string;
before(async () => {
  s = await startOidcSetup();
  await s.t.createClient({
    clientId: PARTNER,
    displayName: 'Partner App',
    clientType: 'public',
    redirectUris: [s.redirectUri],
    allowedGrantTypes: ['authorization_code'],
    allowedScopes: ['openid', 'profile', 'email'],
    requireConsent: true,
  });
  config = await client.discovery(new URL(s.t.base), PARTNER, undefined, client.None(), {
    execute: [client.allowInsecureRequests],
  });
  context = await s.browser.newContext();
  const login = await serviceToken(s.t.base, {
    grant_type: 'password',
    username: 'admin',
    password: ADMIN_PASSWORD,
  });
  adminToken = ((await login.json()) as { access_token: string }).access_token;
  oliviaId = (await s.t.server.store.findUserByName('olivia'))!.id;
});
after(async () => {
  await context?.close();
  await s?.close();
});

async function request(extra: Record<string, string> = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: s.redirectUri,
    scope: 'openid profile',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    ...extra,
  });
  return { url, checks: { pkceCodeVerifier: verifier, expectedState: state } };
}

const admin = (method: 'GET' | 'DELETE', path: string) =>
  s.t.server.app.inject({
    method,
    url: `/auth-admin/api${path}`,
    headers: { authorization: `Bearer ${adminToken}` },
  });

describe('consent with openid-client', () => {
  test('prompt=none before any consent: consent_required', async () => {
    const fresh = await s.browser.newContext();
    try {
      // a session first, through a first-party client (no consent page there)
      const first = await drive(
        s,
        fresh,
        `${s.t.base}/connect/authorize?${new URLSearchParams({
          response_type: 'code',
          client_id: 'demo-spa',
          redirect_uri: s.redirectUri,
          scope: 'openid',
          code_challenge: await client.calculatePKCECodeChallenge(client.randomPKCECodeVerifier()),
          code_challenge_method: 'S256',
        })}`,
        { credentials: CREDENTIALS },
      );
      assert.deepEqual(first.pages, ['/login'], 'first-party: no consent page');
      const { url, checks } = await request({ prompt: 'none' });
      const result = await drive(s, fresh, url);
      await assert.rejects(client.authorizationCodeGrant(config, result.final, checks), (err: Error) => {
        assert.ok(err instanceof client.AuthorizationResponseError);
        assert.equal(err.error, 'consent_required');
        return true;
      });
    } finally {
      await fresh.close();
    }
  });

  test('"Deny" answers access_denied and remembers nothing', async () => {
    const { url, checks } = await request();
    const result = await drive(s, context, url, { credentials: CREDENTIALS, consent: 'deny' });
    assert.deepEqual(result.pages, ['/login', '/consent']);
    await assert.rejects(client.authorizationCodeGrant(config, result.final, checks), (err: Error) => {
      assert.ok(err instanceof client.AuthorizationResponseError);
      assert.equal(err.error, 'access_denied');
      return true;
    });
    assert.equal(await s.t.server.store.getConsent(oliviaId, PARTNER), undefined);
  });

  test('"Allow" lists the scopes, issues the code and is remembered; prompt=consent asks again', async () => {
    const { url, checks } = await request();
    const result = await drive(s, context, url);
    assert.deepEqual(result.pages, ['/consent']);
    assert.deepEqual(result.consentScopes, ['openid', 'profile']);
    const tokens = await client.authorizationCodeGrant(config, result.final, checks);
    assert.equal(tokens.scope, 'openid profile');

    const silent = await request({ prompt: 'none' });
    const again = await drive(s, context, silent.url);
    assert.deepEqual(again.pages, [], 'remembered: no page');
    await client.authorizationCodeGrant(config, again.final, silent.checks);

    const wider = await request({ scope: 'openid profile email' });
    const widened = await drive(s, context, wider.url);
    assert.deepEqual(widened.pages, ['/consent'], 'a new scope asks again');
    assert.deepEqual(widened.consentScopes, ['openid', 'profile', 'email']);
    await client.authorizationCodeGrant(config, widened.final, wider.checks);

    const forced = await request({ prompt: 'consent' });
    const asked = await drive(s, context, forced.url);
    assert.deepEqual(asked.pages, ['/consent']);
    await client.authorizationCodeGrant(config, asked.final, forced.checks);
    assert.deepEqual((await s.t.server.store.getConsent(oliviaId, PARTNER))?.scopes, [
      'email',
      'openid',
      'profile',
    ]);
  });

  test('the administration API lists and revokes the consent; the page asks again', async () => {
    const listed = await admin('GET', `/users/${oliviaId}/consents`);
    assert.equal(listed.statusCode, 200);
    const body = JSON.parse(listed.body) as {
      items: { clientId: string; scopes: string[] }[];
      total: number;
    };
    assert.deepEqual(
      body.items.map((c) => [c.clientId, c.scopes]),
      [[PARTNER, ['email', 'openid', 'profile']]],
    );
    assert.equal((await admin('DELETE', `/users/${oliviaId}/consents/${PARTNER}`)).statusCode, 204);
    assert.equal((await admin('DELETE', `/users/${oliviaId}/consents/${PARTNER}`)).statusCode, 404);
    const audit = await s.t.server.store.listAudit({ category: 'Admin', limit: 5 });
    assert.equal(audit.items[0]?.details?.action, 'consent.revoke');
    const granted = await s.t.server.store.listAudit({ category: 'Authorization', limit: 50 });
    assert.ok(granted.items.some((e) => e.details?.action === 'consent.grant' && e.clientId === PARTNER));
    assert.ok(
      granted.items.some((e) => e.details?.action === 'consent.deny' && e.failureCode === 'consent_denied'),
    );

    const { url, checks } = await request();
    const result = await drive(s, context, url);
    assert.deepEqual(result.pages, ['/consent']);
    await client.authorizationCodeGrant(config, result.final, checks);
  });
});

describe('consent with oauth4webapi', () => {
  test('an oauth4webapi RP gets its code after the consent page', async () => {
    await admin('DELETE', `/users/${oliviaId}/consents/${PARTNER}`);
    const issuer = new URL(s.t.base);
    const insecure = { [oauth.allowInsecureRequests]: true } as const;
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }),
    );
    const partner: oauth.Client = { client_id: PARTNER };
    const verifier = oauth.generateRandomCodeVerifier();
    const nonce = oauth.generateRandomNonce();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: PARTNER,
      redirect_uri: s.redirectUri,
      scope: 'openid email',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      nonce,
    }).toString();
    const result = await drive(s, context, url);
    assert.deepEqual(result.pages, ['/consent']);
    assert.deepEqual(result.consentScopes, ['openid', 'email']);
    const params = oauth.validateAuthResponse(as, partner, result.final, oauth.expectNoState);
    const tokens = await oauth.processAuthorizationCodeResponse(
      as,
      partner,
      await oauth.authorizationCodeGrantRequest(
        as,
        partner,
        oauth.None(),
        params,
        s.redirectUri,
        verifier,
        insecure,
      ),
      { expectedNonce: nonce, requireIdToken: true },
    );
    const claims = oauth.getValidatedIdTokenClaims(tokens)!;
    assert.equal(claims.aud, PARTNER);
    const info = await oauth.processUserInfoResponse(
      as,
      partner,
      claims.sub,
      await oauth.userInfoRequest(as, partner, tokens.access_token, insecure),
    );
    assert.equal(info.email, 'olivia@example.org');
  });
});
