/**
 * The `phone` and `address` scopes (OIDC Core §5.1, §5.1.1, §5.4): users' telephone numbers and postal
 * addresses through the administration API (OpenAPI schema, validation naming the field), in the ID token and
 * UserInfo seen by `openid-client` after a sign-in in Chromium (UserInfo only under the client's
 * `claimsInIdToken: false`), and edited by the user on the account page. The stores' side runs on SQLite and
 * PostgreSQL in `store-contract.ts`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import * as client from 'openid-client';
import type { BrowserContext } from 'playwright-core';
import { type AdminFixture, adminFixture } from './admin-fixture.ts';
import { drive, type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

const CREDENTIALS: [string, string] = ['olivia', 'olivia-password-1'];
const ADDRESS = {
  formatted: 'Hauptstraße 5\n10115 Berlin\nGermany',
  streetAddress: 'Hauptstraße 5',
  locality: 'Berlin',
  postalCode: '10115',
  country: 'DE',
};
const ADDRESS_CLAIM = {
  formatted: 'Hauptstraße 5\n10115 Berlin\nGermany',
  street_address: 'Hauptstraße 5',
  locality: 'Berlin',
  postal_code: '10115',
  country: 'DE',
};

describe('administration API', () => {
  let f: AdminFixture;
  let token = '';
  before(async () => {
    f = await adminFixture();
    token = (await f.caller('boss', ['auth.admin.users'])).token;
  });
  after(() => f.close());

  test('a user gets a telephone number and an address; clearing and partial updates work', async () => {
    const created = await f.call(token, 'POST', 'users', {
      userName: 'pat',
      phoneNumber: '+4930123456;ext=12',
      phoneNumberVerified: true,
      address: { ...ADDRESS, region: '  ' },
    });
    assert.equal(created.statusCode, 201, created.body);
    const user = created.json();
    assert.equal(user.phoneNumber, '+4930123456;ext=12');
    assert.equal(user.phoneNumberVerified, true);
    assert.deepEqual(user.address, ADDRESS, 'a blank member is dropped');
    const patched = await f.call(token, 'PATCH', `users/${user.id}`, { displayName: 'Pat' });
    assert.deepEqual([patched.json().phoneNumber, patched.json().address], [user.phoneNumber, ADDRESS]);
    const cleared = await f.call(token, 'PATCH', `users/${user.id}`, { phoneNumber: null, address: null });
    assert.equal(cleared.statusCode, 200);
    assert.deepEqual([cleared.json().phoneNumber, cleared.json().address], [null, null]);
    assert.equal((await f.store.getUser(user.id))?.address, null);
  });

  test('bad numbers and addresses get 400 naming the field; nothing is written', async () => {
    const user = await f.store.createUser({ userName: 'quinn', phoneNumber: '+14155550100' });
    for (const [body, field] of [
      [{ phoneNumber: '030 123456' }, 'phoneNumber'],
      [{ phoneNumber: '+0123' }, 'phoneNumber'],
      [{ address: { locality: 'Paris\u0007' } }, 'address.locality'],
      [{ address: { locality: 'x'.repeat(257) } }, 'locality'],
      [{ address: { planet: 'Mars' } }, 'planet'],
      [{ address: 'Berlin' }, 'address'],
    ] as const) {
      const res = await f.call(token, 'PATCH', `users/${user.id}`, body);
      assert.equal(res.statusCode, 400, `${JSON.stringify(body)}: ${res.body}`);
      assert.ok(res.body.includes(field), `${JSON.stringify(body)} names ${field}: ${res.body}`);
    }
    const after = await f.store.getUser(user.id);
    assert.deepEqual([after?.phoneNumber, after?.address], ['+14155550100', null]);
  });

  test('the OpenAPI document describes the fields', async () => {
    const doc = JSON.parse((await f.call(undefined, 'GET', 'openapi.json')).body);
    const usersPath = Object.keys(doc.paths).find((path) => path.endsWith('/users'));
    const text = JSON.stringify(doc.paths[usersPath!].post);
    for (const name of ['phoneNumber', 'phoneNumberVerified', 'address', 'streetAddress', 'postalCode'])
      assert.ok(text.includes(`"${name}"`), name);
  });
});

describe('openid-client and the account page', () => {
  let s: OidcSetup;
  let config: client.Configuration;
  let context: BrowserContext;
  let oliviaId = '';
  before(async () => {
    s = await startOidcSetup();
    await s.t.server.store.updateClient('demo-spa', {
      allowedScopes: ['openid', 'profile', 'phone', 'address', 'offline_access'],
    });
    oliviaId = (await s.t.server.store.findUserByName('olivia'))!.id;
    await s.t.server.store.updateUser(oliviaId, {
      phoneNumber: '+4930123456',
      phoneNumberVerified: true,
      address: ADDRESS,
    });
    config = await client.discovery(new URL(s.t.base), 'demo-spa', undefined, client.None(), {
      execute: [client.allowInsecureRequests],
    });
    context = await s.browser.newContext();
  });
  after(async () => {
    await context?.close();
    await s?.close();
  });

  async function signIn(scope: string) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: s.redirectUri,
      scope,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
    });
    const result = await drive(s, context, url, { credentials: CREDENTIALS });
    return client.authorizationCodeGrant(config, result.final, {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
  }

  test('discovery lists the scopes and claims', () => {
    const metadata = config.serverMetadata();
    for (const scope of ['phone', 'address']) assert.ok(metadata.scopes_supported?.includes(scope), scope);
    for (const claim of ['phone_number', 'phone_number_verified', 'address'])
      assert.ok(metadata.claims_supported?.includes(claim), claim);
  });

  test('the ID token and UserInfo carry phone_number and address for the granted scopes only', async () => {
    const tokens = await signIn('openid phone address');
    const id = tokens.claims()!;
    assert.equal(id.phone_number, '+4930123456');
    assert.equal(id.phone_number_verified, true);
    assert.deepEqual(id.address, ADDRESS_CLAIM);
    assert.equal(id.name, undefined, 'profile was not asked for');
    const info = await client.fetchUserInfo(config, tokens.access_token, id.sub);
    assert.deepEqual(info, {
      sub: id.sub,
      phone_number: '+4930123456',
      phone_number_verified: true,
      address: ADDRESS_CLAIM,
    });
    // Only `phone`: no address anywhere.
    const phoneOnly = await signIn('openid phone');
    assert.equal(phoneOnly.claims()!.address, undefined);
    assert.equal((await client.fetchUserInfo(config, phoneOnly.access_token, id.sub)).address, undefined);
    // Refreshed ID tokens carry them again.
    const refreshedTokens = await signIn('openid address offline_access');
    const refreshed = await client.refreshTokenGrant(config, refreshedTokens.refresh_token!);
    assert.deepEqual(refreshed.claims()!.address, ADDRESS_CLAIM);
  });

  test('claimsInIdToken: false keeps them in UserInfo only', async () => {
    await s.t.server.store.setClientMetadata('demo-spa', { claimsInIdToken: false });
    try {
      const tokens = await signIn('openid phone address');
      const id = tokens.claims()!;
      assert.equal(id.phone_number, undefined);
      assert.equal(id.address, undefined);
      const info = await client.fetchUserInfo(config, tokens.access_token, id.sub);
      assert.equal(info.phone_number, '+4930123456');
      assert.deepEqual(info.address, ADDRESS_CLAIM);
    } finally {
      await s.t.server.store.setClientMetadata('demo-spa', {});
    }
  });

  test('the account page shows and saves them; a changed number is unverified; bad input changes nothing', async () => {
    const page = await context.newPage();
    try {
      await page.goto(`${s.t.base}/login/account`);
      assert.equal(await page.inputValue('#phone_number'), '+4930123456');
      assert.equal(await page.textContent('#phone-state'), 'verified');
      assert.equal(await page.inputValue('#locality'), 'Berlin');
      await page.fill('#phone_number', '+33142685300');
      await page.fill('#street_address', 'Rue de Rivoli 1\nBâtiment B');
      await page.fill('#locality', 'Paris');
      await page.fill('#postal_code', '75001');
      await page.fill('#country', 'FR');
      await Promise.all([page.waitForURL(/contact=1/), page.click('#save-contact')]);
      assert.match((await page.textContent('#notice')) ?? '', /contact details have been saved/);
      assert.equal(await page.textContent('#phone-state'), 'not verified');
      const saved = await s.t.server.store.getUser(oliviaId);
      assert.equal(saved?.phoneNumber, '+33142685300');
      assert.equal(saved?.phoneNumberVerified, false);
      assert.deepEqual(saved?.address, {
        streetAddress: 'Rue de Rivoli 1\nBâtiment B',
        locality: 'Paris',
        postalCode: '75001',
        country: 'FR',
      });

      await page.fill('#phone_number', 'call me');
      await Promise.all([page.waitForURL(/err=1/), page.click('#save-contact')]);
      assert.equal((await s.t.server.store.getUser(oliviaId))?.phoneNumber, '+33142685300');
      const events = await s.t.server.store.listAudit({ category: 'Login', limit: 50 });
      assert.ok(events.items.some((e) => e.subjectId === oliviaId && e.details?.event === 'contact_changed'));
    } finally {
      await page.close();
    }
  });
});
