/**
 * The server driven by clients nobody here wrote: `oauth4webapi` runs discovery, the authorization-code +
 * PKCE flow (the login page filled in by headless Debian Chromium through `playwright-core`), refresh
 * rotation and reuse detection, client credentials, revocation (RFC 7009) and introspection (RFC 7662),
 * and validates the access tokens as RFC 9068 JWTs.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import * as oauth from 'oauth4webapi';
import type { Browser } from 'playwright-core';
import { launchChromium } from './browser.ts';
import { DEMO_SECRET, startTestServer, type TestServer } from './oauth-fixtures.ts';

const insecure = { [oauth.allowInsecureRequests]: true } as const;

let t: TestServer;
let as: oauth.AuthorizationServer;
let browser: Browser;
/** The SPA's redirect URI: a real page on an ephemeral loopback port. */
let SPA_REDIRECT: string;
let callbackServer: Server;
const spa: oauth.Client = { client_id: 'demo-spa' };
const service: oauth.Client = { client_id: 'demo-service' };

before(async () => {
  t = await startTestServer();
  await t.createUser('alice', 'alice-password-1');
  callbackServer = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>callback</title>'),
  );
  await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
  const address = callbackServer.address();
  SPA_REDIRECT = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/callback`;
  await t.server.store.updateClient('demo-spa', { redirectUris: [SPA_REDIRECT] });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await t?.close();
  callbackServer?.close();
});

/** Opens `url` in a fresh browser context, signs in on the login page, returns the callback URL reached. */
async function signInThroughBrowser(
  url: URL,
  userName: string,
  password: string,
): Promise<{ callback: URL; loginUrl: URL }> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    await page.goto(url.href);
    const loginUrl = new URL(page.url());
    await page.fill('input[name=username]', userName);
    await page.fill('input[name=password]', password);
    await Promise.all([
      page.waitForURL((u) => u.href.startsWith(SPA_REDIRECT) || u.searchParams.get('err') === '1'),
      page.click('button[type=submit]'),
    ]);
    return { callback: new URL(page.url()), loginUrl };
  } finally {
    await context.close();
  }
}

describe('discovery', () => {
  test('RFC 8414 and OpenID discovery documents are accepted by oauth4webapi', async () => {
    const issuer = new URL(t.base);
    as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
    );
    const oidc = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oidc', ...insecure }),
    );
    assert.equal(as.issuer, t.base);
    assert.equal(oidc.token_endpoint, `${t.base}/connect/token`);
    assert.deepEqual(as.code_challenge_methods_supported, ['S256']);
    const jwks = (await (await fetch(as.jwks_uri!)).json()) as { keys: Record<string, unknown>[] };
    assert.equal(jwks.keys.length, 1);
    assert.equal(jwks.keys[0]!.d, undefined, 'no private key material in the JWKS');
  });
});

describe('authorization code + PKCE through the login page in Chromium', () => {
  let refreshToken: string;

  test('sign-in, code exchange, ID token and RFC 9068 access token', async () => {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: spa.client_id,
      redirect_uri: SPA_REDIRECT,
      scope: 'openid profile offline_access',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    }).toString();

    const { callback, loginUrl } = await signInThroughBrowser(url, 'alice', 'alice-password-1');
    assert.equal(loginUrl.pathname, '/login', 'an unauthenticated user is sent to the login page');
    const params = oauth.validateAuthResponse(as, spa, callback, state);
    const response = await oauth.authorizationCodeGrantRequest(
      as,
      spa,
      oauth.None(),
      params,
      SPA_REDIRECT,
      verifier,
      insecure,
    );
    const tokens = await oauth.processAuthorizationCodeResponse(as, spa, response, {
      expectedNonce: nonce,
      requireIdToken: true,
    });
    assert.equal(tokens.token_type, 'bearer');
    assert.ok(tokens.refresh_token);
    refreshToken = tokens.refresh_token;
    const idClaims = oauth.getValidatedIdTokenClaims(tokens)!;
    assert.equal(idClaims.preferred_username, 'alice');

    const claims = await oauth.validateJwtAccessToken(
      as,
      new Request('http://127.0.0.1/resource', {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      }),
      'seed',
      insecure,
    );
    assert.equal(claims.client_id, 'demo-spa');
    assert.equal(claims.sub, idClaims.sub);
    assert.equal(claims.scope, 'openid profile offline_access');
  });

  test('a wrong password in the browser lands on /login?err=1', async () => {
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: spa.client_id,
      redirect_uri: SPA_REDIRECT,
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()),
      code_challenge_method: 'S256',
    }).toString();
    const { callback } = await signInThroughBrowser(url, 'alice', 'not-her-password');
    assert.equal(callback.pathname, '/login');
    assert.equal(callback.searchParams.get('err'), '1');
  });

  test('refresh rotates the token; replaying the old one revokes the family (RFC 9700 §4.14.2)', async () => {
    const first = await oauth.processRefreshTokenResponse(
      as,
      spa,
      await oauth.refreshTokenGrantRequest(as, spa, oauth.None(), refreshToken, insecure),
    );
    assert.ok(
      first.refresh_token && first.refresh_token !== refreshToken,
      'a new refresh token on every use',
    );
    await assert.rejects(
      async () =>
        oauth.processRefreshTokenResponse(
          as,
          spa,
          await oauth.refreshTokenGrantRequest(as, spa, oauth.None(), refreshToken, insecure),
        ),
      (err: unknown) => err instanceof oauth.ResponseBodyError && err.error === 'invalid_grant',
    );
    await assert.rejects(
      async () =>
        oauth.processRefreshTokenResponse(
          as,
          spa,
          await oauth.refreshTokenGrantRequest(as, spa, oauth.None(), first.refresh_token!, insecure),
        ),
      (err: unknown) => err instanceof oauth.ResponseBodyError && err.error === 'invalid_grant',
      'the successor was revoked with its family',
    );
    const audit = await t.server.store.listAudit({ category: 'Token', outcome: 'Denied' });
    assert.ok(audit.items.some((e) => e.failureCode === 'refresh_token_reuse' && e.clientId === 'demo-spa'));
  });
});

describe('client credentials, introspection and revocation', () => {
  const serviceAuth = () => oauth.ClientSecretBasic(DEMO_SECRET);

  test('client credentials grant; the token introspects as active', async () => {
    const res = await oauth.clientCredentialsGrantRequest(
      as,
      service,
      serviceAuth(),
      { scope: 'api' },
      insecure,
    );
    const tokens = await oauth.processClientCredentialsResponse(as, service, res);
    assert.equal(tokens.scope, 'api');
    assert.equal(tokens.refresh_token, undefined);
    const info = await oauth.processIntrospectionResponse(
      as,
      service,
      await oauth.introspectionRequest(as, service, serviceAuth(), tokens.access_token, insecure),
    );
    assert.equal(info.active, true);
    assert.equal(info.client_id, 'demo-service');
    assert.equal(info.sub, 'demo-service');
    const bogus = await oauth.processIntrospectionResponse(
      as,
      service,
      await oauth.introspectionRequest(as, service, serviceAuth(), `${tokens.access_token}x`, insecure),
    );
    assert.equal(bogus.active, false);
  });

  test('revoking a refresh token ends it (introspection inactive, refresh refused)', async () => {
    const form = new URLSearchParams({
      grant_type: 'password',
      username: 'alice',
      password: 'alice-password-1',
      scope: 'api',
    });
    const res = await oauth.genericTokenEndpointRequest(
      as,
      service,
      serviceAuth(),
      'password',
      form,
      insecure,
    );
    const tokens = await oauth.processGenericTokenEndpointResponse(as, service, res);
    const refresh = tokens.refresh_token!;
    const before = await oauth.processIntrospectionResponse(
      as,
      service,
      await oauth.introspectionRequest(as, service, serviceAuth(), refresh, insecure),
    );
    assert.equal(before.active, true);
    assert.equal(before.username, 'alice');

    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, service, serviceAuth(), refresh, insecure),
    );
    const afterwards = await oauth.processIntrospectionResponse(
      as,
      service,
      await oauth.introspectionRequest(as, service, serviceAuth(), refresh, insecure),
    );
    assert.equal(afterwards.active, false);
    await assert.rejects(
      async () =>
        oauth.processRefreshTokenResponse(
          as,
          service,
          await oauth.refreshTokenGrantRequest(as, service, serviceAuth(), refresh, insecure),
        ),
      (err: unknown) => err instanceof oauth.ResponseBodyError && err.error === 'invalid_grant',
    );
  });

  test('introspection needs an authenticated client', async () => {
    await assert.rejects(
      async () =>
        oauth.processIntrospectionResponse(
          as,
          spa,
          await oauth.introspectionRequest(as, spa, oauth.None(), 'x', insecure),
        ),
      (err: unknown) =>
        err instanceof oauth.WWWAuthenticateChallengeError &&
        err.status === 401 &&
        err.cause.some((c) => c.scheme === 'basic'),
    );
  });
});
