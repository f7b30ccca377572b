/**
 * DPoP (RFC 9449) end to end with openid-client 6 and oauth4webapi against the real server: discovery,
 * DPoP-bound access tokens (`token_type: DPoP`, `cnf.jkt`) for client credentials, the authorization code
 * and the refresh grant, refresh tokens of public clients bound to the key, introspection, per-client
 * "DPoP required", server nonces, and the permission middleware accepting only `Authorization: DPoP` with a
 * valid proof.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { calculateJwkThumbprint, decodeJwt, generateKeyPair } from 'jose';
import * as oauth from 'oauth4webapi';
import * as client from 'openid-client';
import { ath, liveClock, makeProof, proofKey, resourceServer } from './oauth-dpop-helpers.ts';
import {
  authorize,
  basic,
  CookieJar,
  DEMO_SECRET,
  pkcePair,
  postForm,
  SPA_REDIRECT,
  startTestServer,
  submitLogin,
  type TestServer,
} from './oauth-fixtures.ts';

const insecure = { execute: [client.allowInsecureRequests] };

/** A test server whose clock follows real time (see {@link liveClock}). */
async function start(options: Parameters<typeof startTestServer>[0] = {}): Promise<TestServer> {
  const server = await startTestServer(options);
  liveClock(server.clock);
  return server;
}

let t: TestServer;
let rs: { app: { close(): Promise<unknown> }; url: string };
let alice: { id: string };

before(async () => {
  t = await start();
  alice = await t.createUser('alice', 'alice-password-1', { directPermissions: ['shop.orders.read'] });
  rs = await resourceServer(t.server);
});
after(async () => {
  await rs?.app.close();
  await t?.close();
});

const service = () =>
  client.discovery(
    new URL(t.base),
    'demo-service',
    undefined,
    client.ClientSecretBasic(DEMO_SECRET),
    insecure,
  );
const spa = () => client.discovery(new URL(t.base), 'demo-spa', undefined, client.None(), insecure);

/** Signs alice in and runs the authorization request of `demo-spa`; @returns the callback URL and verifier. */
async function codeCallback(): Promise<{ callback: URL; verifier: string }> {
  const jar = new CookieJar();
  await submitLogin(t.base, jar, 'alice', 'alice-password-1');
  const { verifier, challenge } = pkcePair();
  const res = await authorize(t.base, jar, {
    response_type: 'code',
    client_id: 'demo-spa',
    redirect_uri: SPA_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    scope: 'offline_access',
    state: 'st-1',
  });
  assert.equal(res.status, 302);
  return { callback: new URL(res.headers.get('location')!), verifier };
}

async function assertOAuthError(promise: Promise<unknown>, error: string): Promise<void> {
  await assert.rejects(promise, (err: { error?: string; cause?: { error?: string } }) => {
    assert.equal(err.error ?? err.cause?.error, error);
    return true;
  });
}

describe('discovery', () => {
  test('advertises dpop_signing_alg_values_supported (asymmetric only)', async () => {
    const config = await service();
    const algs = config.serverMetadata().dpop_signing_alg_values_supported;
    assert.ok(algs);
    assert.ok(algs.includes('ES256') && algs.includes('EdDSA') && algs.includes('RS256'));
    assert.ok(!algs.some((alg) => alg.startsWith('HS') || alg === 'none'));
  });

  test('a server with DPoP off does not advertise it and issues Bearer tokens', async () => {
    const off = await start({ oauth: { dpop: false } });
    try {
      const config = await client.discovery(
        new URL(off.base),
        'demo-service',
        undefined,
        client.ClientSecretBasic(DEMO_SECRET),
        insecure,
      );
      assert.equal(config.serverMetadata().dpop_signing_alg_values_supported, undefined);
    } finally {
      await off.close();
    }
  });
});

describe('openid-client 6', () => {
  test('client credentials: token_type DPoP, cnf.jkt = thumbprint of the key, introspection shows it', async () => {
    const config = await service();
    const keyPair = await client.randomDPoPKeyPair('ES256');
    const dpop = client.getDPoPHandle(config, keyPair);
    const tokens = await client.clientCredentialsGrant(config, { scope: 'api' }, { DPoP: dpop });
    assert.equal(tokens.token_type, 'dpop');
    const jkt = await calculateJwkThumbprint(await crypto.subtle.exportKey('jwk', keyPair.publicKey));
    assert.deepEqual(decodeJwt(tokens.access_token).cnf, { jkt });
    const introspected = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(introspected.active, true);
    assert.equal(introspected.token_type, 'DPoP');
    assert.deepEqual(introspected.cnf, { jkt });
  });

  test('authorization code + refresh: DPoP-bound tokens, the public client refresh token bound to the key', async () => {
    const config = await spa();
    const keyPair = await client.randomDPoPKeyPair('ES256');
    const dpop = client.getDPoPHandle(config, keyPair);
    const { callback, verifier } = await codeCallback();
    const tokens = await client.authorizationCodeGrant(
      config,
      callback,
      { pkceCodeVerifier: verifier, expectedState: 'st-1' },
      undefined,
      { DPoP: dpop },
    );
    assert.equal(tokens.token_type, 'dpop');
    assert.ok(tokens.refresh_token);
    const jkt = await calculateJwkThumbprint(await crypto.subtle.exportKey('jwk', keyPair.publicKey));
    assert.equal((decodeJwt(tokens.access_token).cnf as { jkt: string }).jkt, jkt);

    // The resource server accepts the DPoP-bound token with a proof (openid-client adds ath).
    const ok = await client.fetchProtectedResource(
      config,
      tokens.access_token,
      new URL(rs.url),
      'GET',
      undefined,
      undefined,
      {
        DPoP: dpop,
      },
    );
    assert.equal(ok.status, 200);
    assert.deepEqual(await ok.json(), { subject: alice.id });

    // Refresh with the same key: a new DPoP-bound pair.
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!, undefined, {
      DPoP: dpop,
    });
    assert.equal(refreshed.token_type, 'dpop');
    assert.equal((decodeJwt(refreshed.access_token).cnf as { jkt: string }).jkt, jkt);

    // The successor is still bound: another key is refused, and so is no proof at all.
    const other = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    await assertOAuthError(
      client.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP: other }),
      'invalid_grant',
    );
    await assertOAuthError(client.refreshTokenGrant(config, refreshed.refresh_token!), 'invalid_dpop_proof');
    // Neither refusal used the token up.
    const again = await client.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP: dpop });
    assert.equal(again.token_type, 'dpop');
  });

  test('confidential client: DPoP refresh tokens are not key-bound (client authentication binds them)', async () => {
    const config = await service();
    const dpop = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
    const tokens = await client.genericGrantRequest(
      config,
      'password',
      { username: 'alice', password: 'alice-password-1', scope: 'api' },
      { DPoP: dpop },
    );
    assert.equal(tokens.token_type, 'dpop');
    const plain = await client.refreshTokenGrant(config, tokens.refresh_token!);
    assert.equal(plain.token_type, 'bearer');
    assert.equal(decodeJwt(plain.access_token).cnf, undefined);
  });

  test('"DPoP required" client: a request without proof is invalid_dpop_proof, with a proof it works', async () => {
    await t.server.store.setClientMetadata('demo-service', { dpopBoundAccessTokens: true });
    try {
      const config = await service();
      await assertOAuthError(client.clientCredentialsGrant(config, { scope: 'api' }), 'invalid_dpop_proof');
      const dpop = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
      const tokens = await client.clientCredentialsGrant(config, { scope: 'api' }, { DPoP: dpop });
      assert.equal(tokens.token_type, 'dpop');
    } finally {
      await t.server.store.setClientMetadata('demo-service', {});
    }
  });

  test('server nonces: openid-client retries on use_dpop_nonce, at the token endpoint and the resource server', async () => {
    const nonced = await start({ oauth: { dpop: { requireNonce: true, nonceSecret: 'n'.repeat(32) } } });
    await nonced.createUser('bob', 'bob-password-1', { directPermissions: ['shop.orders.read'] });
    const nrs = await resourceServer(nonced.server);
    try {
      const config = await client.discovery(
        new URL(nonced.base),
        'demo-service',
        undefined,
        client.ClientSecretBasic(DEMO_SECRET),
        insecure,
      );
      const dpop = client.getDPoPHandle(config, await client.randomDPoPKeyPair('ES256'));
      const tokens = await client.genericGrantRequest(
        config,
        'password',
        { username: 'bob', password: 'bob-password-1', scope: 'api' },
        { DPoP: dpop },
      );
      assert.equal(tokens.token_type, 'dpop');
      const res = await client.fetchProtectedResource(
        config,
        tokens.access_token,
        new URL(nrs.url),
        'GET',
        undefined,
        undefined,
        {
          DPoP: dpop,
        },
      );
      assert.equal(res.status, 200);
    } finally {
      await nrs.app.close();
      await nonced.close();
    }
  });
});

describe('oauth4webapi', () => {
  test('client credentials and a protected resource with DPoP; use_dpop_nonce handled by the client', async () => {
    const nonced = await start({ oauth: { dpop: { requireNonce: true } } });
    try {
      const issuer = new URL(nonced.base);
      const as = await oauth.processDiscoveryResponse(
        issuer,
        await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
      );
      const c: oauth.Client = { client_id: 'demo-service' };
      const dpop = oauth.DPoP(c, await oauth.generateKeyPair('ES256'));
      const request = () =>
        oauth.clientCredentialsGrantRequest(
          as,
          c,
          oauth.ClientSecretBasic(DEMO_SECRET),
          { scope: 'api' },
          {
            DPoP: dpop,
            [oauth.allowInsecureRequests]: true,
          },
        );
      let response = await request();
      let nonceErrors = 0;
      let tokens: oauth.TokenEndpointResponse | undefined;
      for (let attempt = 0; attempt < 2 && !tokens; attempt++) {
        try {
          tokens = await oauth.processClientCredentialsResponse(as, c, response);
        } catch (err) {
          if (!oauth.isDPoPNonceError(err)) throw err;
          nonceErrors++;
          response = await request();
        }
      }
      assert.equal(nonceErrors, 1);
      assert.equal(tokens?.token_type, 'dpop');
    } finally {
      await nonced.close();
    }
  });

  test('refresh of a public client with DPoP, then the resource server', async () => {
    const issuer = new URL(t.base);
    const as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }),
    );
    const c: oauth.Client = { client_id: 'demo-spa' };
    const dpop = oauth.DPoP(c, await oauth.generateKeyPair('ES256'));
    const { callback, verifier } = await codeCallback();
    const params = oauth.validateAuthResponse(as, c, callback, 'st-1');
    const opts = { DPoP: dpop, [oauth.allowInsecureRequests]: true } as const;
    const code = await oauth.processAuthorizationCodeResponse(
      as,
      c,
      await oauth.authorizationCodeGrantRequest(as, c, oauth.None(), params, SPA_REDIRECT, verifier, opts),
    );
    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      c,
      await oauth.refreshTokenGrantRequest(as, c, oauth.None(), code.refresh_token!, opts),
    );
    assert.equal(refreshed.token_type, 'dpop');
    const res = await oauth.protectedResourceRequest(
      refreshed.access_token,
      'GET',
      new URL(rs.url),
      undefined,
      undefined,
      opts,
    );
    assert.equal(res.status, 200);
  });
});

describe('the permission middleware with DPoP-bound tokens (RFC 9449 §7)', () => {
  let token: string;
  let key: Awaited<ReturnType<typeof proofKey>>;

  before(async () => {
    key = await proofKey();
    const res = await postForm(
      t.base,
      '/connect/token',
      { grant_type: 'password', username: 'alice', password: 'alice-password-1', scope: 'api' },
      {
        authorization: basic('demo-service', DEMO_SECRET),
        dpop: await makeProof(key, { htu: `${t.base}/connect/token` }),
      },
    );
    assert.equal(res.status, 200);
    const body = (await res.json()) as { access_token: string; token_type: string };
    assert.equal(body.token_type, 'DPoP');
    token = body.access_token;
  });

  const call = (headers: Record<string, string>) => fetch(rs.url, { headers });
  const proofFor = (overrides: Partial<Parameters<typeof makeProof>[1]> = {}) =>
    makeProof(key, { htm: 'GET', htu: rs.url, ath: ath(token), ...overrides });

  test('Authorization: DPoP with a valid proof is granted', async () => {
    const res = await call({ authorization: `DPoP ${token}`, dpop: await proofFor() });
    assert.equal(res.status, 200);
  });

  const refused: [string, () => Promise<Record<string, string>>, string][] = [
    [
      'bound token sent as Bearer',
      async () => ({ authorization: `Bearer ${token}`, dpop: await proofFor() }),
      'Bearer error="invalid_token"',
    ],
    ['no DPoP proof', async () => ({ authorization: `DPoP ${token}` }), 'error="invalid_dpop_proof"'],
    [
      'proof without ath',
      async () => ({
        authorization: `DPoP ${token}`,
        dpop: await makeProof(key, { htm: 'GET', htu: rs.url }),
      }),
      'error="invalid_dpop_proof"',
    ],
    [
      'ath of another token',
      async () => ({ authorization: `DPoP ${token}`, dpop: await proofFor({ ath: ath('other') }) }),
      'error="invalid_dpop_proof"',
    ],
    [
      'htm mismatch',
      async () => ({ authorization: `DPoP ${token}`, dpop: await proofFor({ htm: 'POST' }) }),
      'error="invalid_dpop_proof"',
    ],
    [
      'htu of another resource',
      async () => ({ authorization: `DPoP ${token}`, dpop: await proofFor({ htu: `${rs.url}/x` }) }),
      'error="invalid_dpop_proof"',
    ],
    [
      'proof signed by another key',
      async () => {
        const other = await proofKey();
        return {
          authorization: `DPoP ${token}`,
          dpop: await makeProof(other, { htm: 'GET', htu: rs.url, ath: ath(token) }),
        };
      },
      'error="invalid_dpop_proof"',
    ],
    [
      'an unbound token with the DPoP scheme',
      async () => {
        const res = await postForm(
          t.base,
          '/connect/token',
          { grant_type: 'password', username: 'alice', password: 'alice-password-1' },
          {
            authorization: basic('demo-service', DEMO_SECRET),
          },
        );
        const plain = ((await res.json()) as { access_token: string }).access_token;
        return {
          authorization: `DPoP ${plain}`,
          dpop: await makeProof(key, { htm: 'GET', htu: rs.url, ath: ath(plain) }),
        };
      },
      'DPoP algs=',
    ],
  ];
  for (const [name, headers, challenge] of refused) {
    test(`refused: ${name} → 401 invalid_token, WWW-Authenticate ${challenge}`, async () => {
      const res = await call(await headers());
      assert.equal(res.status, 401);
      assert.ok(
        res.headers.get('www-authenticate')?.includes(challenge),
        res.headers.get('www-authenticate') ?? '',
      );
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_token');
    });
  }

  test('a replayed proof is refused', async () => {
    const proof = await proofFor();
    assert.equal((await call({ authorization: `DPoP ${token}`, dpop: proof })).status, 200);
    const replay = await call({ authorization: `DPoP ${token}`, dpop: proof });
    assert.equal(replay.status, 401);
    assert.match(replay.headers.get('www-authenticate') ?? '', /invalid_dpop_proof.*already used/);
  });
});

describe('token endpoint: every invalid_dpop_proof row (RFC 9449 §4.3)', () => {
  const tokenUrl = () => `${t.base}/connect/token`;
  const request = (dpop: string) =>
    postForm(
      t.base,
      '/connect/token',
      { grant_type: 'client_credentials', scope: 'api' },
      {
        authorization: basic('demo-service', DEMO_SECRET),
        dpop,
      },
    );
  const now = () => Math.floor(Date.now() / 1000);

  const rows: [string, () => Promise<string>][] = [
    ['not a JWS', async () => 'not-a-jwt'],
    [
      'two DPoP headers (joined)',
      async () => {
        const k = await proofKey();
        const p = await makeProof(k, { htu: tokenUrl() });
        return `${p}, ${p}`;
      },
    ],
    ["typ is not 'dpop+jwt'", async () => makeProof(await proofKey(), { htu: tokenUrl(), typ: 'JWT' })],
    [
      'jwk header holds a private key',
      async () => {
        const k = await proofKey();
        const { privateKey } = await generateKeyPair('ES256', { extractable: true });
        const jwk = await crypto.subtle.exportKey('jwk', privateKey);
        return makeProof(k, { htu: tokenUrl(), jwk: jwk as never });
      },
    ],
    [
      'signature by another key than the jwk header',
      async () => {
        const k = await proofKey();
        const other = await proofKey();
        return makeProof({ ...k, jwk: other.jwk }, { htu: tokenUrl() });
      },
    ],
    ['htm mismatch', async () => makeProof(await proofKey(), { htu: tokenUrl(), htm: 'GET' })],
    ['htu mismatch', async () => makeProof(await proofKey(), { htu: `${t.base}/connect/other` })],
    ['iat too old', async () => makeProof(await proofKey(), { htu: tokenUrl(), iat: now() - 600 })],
    ['iat in the future', async () => makeProof(await proofKey(), { htu: tokenUrl(), iat: now() + 600 })],
    ['no jti', async () => makeProof(await proofKey(), { htu: tokenUrl(), jti: null })],
    [
      'HS256 (symmetric) alg',
      async () => {
        const { SignJWT } = await import('jose');
        return new SignJWT({ htm: 'POST', htu: tokenUrl(), iat: now(), jti: 'x' })
          .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'AAAA' } as never })
          .sign(new Uint8Array(32));
      },
    ],
  ];
  for (const [name, proof] of rows) {
    test(`${name} → 400 invalid_dpop_proof`, async () => {
      const res = await request(await proof());
      assert.equal(res.status, 400);
      assert.equal(res.headers.get('cache-control'), 'no-store');
      assert.equal(((await res.json()) as { error: string }).error, 'invalid_dpop_proof');
    });
  }

  test('a replayed proof → 400 invalid_dpop_proof; the first use succeeded', async () => {
    const proof = await makeProof(await proofKey(), { htu: tokenUrl() });
    assert.equal((await request(proof)).status, 200);
    const res = await request(proof);
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error_description: string }).error_description, /already used/);
  });

  test('nonce required: a proof without nonce → use_dpop_nonce + DPoP-Nonce; a stale nonce likewise', async () => {
    const nonced = await start({ oauth: { dpop: { requireNonce: true } } });
    try {
      const k = await proofKey();
      const url = `${nonced.base}/connect/token`;
      const send = async (nonce?: string) =>
        postForm(
          nonced.base,
          '/connect/token',
          { grant_type: 'client_credentials', scope: 'api' },
          {
            authorization: basic('demo-service', DEMO_SECRET),
            dpop: await makeProof(k, { htu: url, nonce, iat: Math.floor(nonced.clock.now / 1000) }),
          },
        );
      const first = await send();
      assert.equal(first.status, 400);
      assert.equal(((await first.json()) as { error: string }).error, 'use_dpop_nonce');
      const nonce = first.headers.get('dpop-nonce');
      assert.ok(nonce);
      const stale = await send(`${nonce}x`);
      assert.equal(((await stale.json()) as { error: string }).error, 'use_dpop_nonce');
      const ok = await send(nonce);
      assert.equal(ok.status, 200);
      assert.ok(ok.headers.get('dpop-nonce'));
      // The nonce's period ends: after two windows (10 min) it is refused.
      nonced.clock.now += 11 * 60_000;
      const expired = await send(nonce);
      assert.equal(((await expired.json()) as { error: string }).error, 'use_dpop_nonce');
    } finally {
      await nonced.close();
    }
  });
});
