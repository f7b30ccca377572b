/**
 * DPoP authorization code binding (RFC 9449 §10): `dpop_jkt` on the authorization request, or a DPoP proof on
 * the pushed authorization request (§10.1), binds the code to one key. The token request must then carry a
 * proof of that key: without one, or with another key, it is `invalid_grant` and the code is NOT used up
 * (someone holding a stolen code but not the key cannot spend it); with the key it gets DPoP-bound tokens.
 * Driven by openid-client 6 (`dpop_jkt` from its DPoP handle) and by hand-made proofs.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { calculateJwkThumbprint, decodeJwt } from 'jose';
import * as client from 'openid-client';
import { liveClock, makeProof, type ProofKey, proofKey } from './oauth-dpop-helpers.ts';
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

const insecure = { execute: [client.allowInsecureRequests] };

let t: TestServer;

before(async () => {
  t = await startTestServer();
  liveClock(t.clock);
  await t.createUser('bob', 'bob-password-1');
});
after(() => t?.close());

/** Signs bob in and sends `params` (plus PKCE) to the authorization endpoint; @returns the redirect. */
async function authorizeWith(params: Record<string, string>): Promise<{ location: URL; verifier: string }> {
  const jar = new CookieJar();
  await submitLogin(t.base, jar, 'bob', 'bob-password-1');
  const { verifier, challenge } = pkcePair();
  const res = await authorize(t.base, jar, {
    response_type: 'code',
    client_id: 'demo-spa',
    redirect_uri: SPA_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st-jkt',
    ...params,
  });
  assert.equal(res.status, 302);
  return { location: new URL(res.headers.get('location')!), verifier };
}

/** A code grant of `demo-spa`, with a proof of `key` unless it is undefined. */
async function redeem(code: string, verifier: string, key: ProofKey | undefined) {
  const headers: Record<string, string> = key
    ? { dpop: await makeProof(key, { htu: `${t.base}/connect/token` }) }
    : {};
  const res = await postForm(
    t.base,
    '/connect/token',
    {
      grant_type: 'authorization_code',
      client_id: 'demo-spa',
      code,
      redirect_uri: SPA_REDIRECT,
      code_verifier: verifier,
    },
    headers,
  );
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

describe('dpop_jkt on the authorization request', () => {
  test('openid-client 6: the code is bound to its DPoP handle key and redeemed with it', async () => {
    const config = await client.discovery(new URL(t.base), 'demo-spa', undefined, client.None(), insecure);
    const keyPair = await client.randomDPoPKeyPair('ES256');
    const dpop = client.getDPoPHandle(config, keyPair);
    const jkt = await dpop.calculateThumbprint();
    const { location, verifier } = await authorizeWith({ dpop_jkt: jkt });
    const tokens = await client.authorizationCodeGrant(
      config,
      location,
      { pkceCodeVerifier: verifier, expectedState: 'st-jkt' },
      undefined,
      { DPoP: dpop },
    );
    assert.equal(tokens.token_type, 'dpop');
    assert.equal((decodeJwt(tokens.access_token).cnf as { jkt: string }).jkt, jkt);
  });

  test('without a proof, or with another key: invalid_grant, and the code stays usable for its key', async () => {
    const key = await proofKey();
    const jkt = await calculateJwkThumbprint(key.jwk);
    const { location, verifier } = await authorizeWith({ dpop_jkt: jkt });
    const code = location.searchParams.get('code')!;

    const none = await redeem(code, verifier, undefined);
    assert.equal(none.status, 400);
    assert.equal(none.body.error, 'invalid_grant');
    assert.match(none.body.error_description!, /bound to a DPoP key/);

    const other = await redeem(code, verifier, await proofKey());
    assert.equal(other.status, 400);
    assert.equal(other.body.error, 'invalid_grant');
    assert.match(other.body.error_description!, /dpop_jkt/);

    const ok = await redeem(code, verifier, key);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.token_type, 'DPoP');
    assert.equal((decodeJwt(ok.body.access_token!).cnf as { jkt: string }).jkt, jkt);
    // Used up now.
    assert.equal((await redeem(code, verifier, key)).body.error, 'invalid_grant');
  });

  test('the binding cannot be stripped or swapped: the code no longer matches its record', async () => {
    const key = await proofKey();
    const attacker = await proofKey();
    const { location, verifier } = await authorizeWith({ dpop_jkt: await calculateJwkThumbprint(key.jwk) });
    const code = location.searchParams.get('code')!;
    const random = code.slice(0, code.indexOf('.'));
    assert.equal((await redeem(random, verifier, attacker)).body.error, 'invalid_grant');
    const swapped = `${random}.${await calculateJwkThumbprint(attacker.jwk)}`;
    assert.equal((await redeem(swapped, verifier, attacker)).body.error, 'invalid_grant');
    assert.equal((await redeem(code, verifier, key)).status, 200, 'the genuine code still works');
  });

  test('a malformed dpop_jkt is invalid_request at the authorization endpoint (redirected with state)', async () => {
    const { location } = await authorizeWith({ dpop_jkt: 'not-a-thumbprint' });
    assert.equal(location.searchParams.get('error'), 'invalid_request');
    assert.match(location.searchParams.get('error_description')!, /dpop_jkt/);
    assert.equal(location.searchParams.get('state'), 'st-jkt');
  });
});

describe('DPoP proof on the pushed authorization request (RFC 9449 §10.1)', () => {
  async function push(key: ProofKey | undefined, extra: Record<string, string> = {}) {
    const { verifier, challenge } = pkcePair();
    const headers: Record<string, string> = key
      ? { dpop: await makeProof(key, { htu: `${t.base}/connect/par` }) }
      : {};
    const res = await postForm(
      t.base,
      '/connect/par',
      {
        client_id: 'demo-spa',
        response_type: 'code',
        redirect_uri: SPA_REDIRECT,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        state: 'st-jkt',
        ...extra,
      },
      headers,
    );
    return { status: res.status, body: (await res.json()) as Record<string, string>, verifier };
  }

  test('the proof key binds the code; only that key redeems it', async () => {
    const key = await proofKey();
    const pushed = await push(key);
    assert.equal(pushed.status, 201, JSON.stringify(pushed.body));
    const { location } = await authorizeWith({ request_uri: pushed.body.request_uri! });
    const code = location.searchParams.get('code')!;
    assert.equal((await redeem(code, pushed.verifier, await proofKey())).body.error, 'invalid_grant');
    const ok = await redeem(code, pushed.verifier, key);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(
      (decodeJwt(ok.body.access_token!).cnf as { jkt: string }).jkt,
      await calculateJwkThumbprint(key.jwk),
    );
  });

  test('a dpop_jkt that differs from the proof key is invalid_dpop_proof; without a proof PAR works as before', async () => {
    const key = await proofKey();
    const mismatch = await push(key, { dpop_jkt: await calculateJwkThumbprint((await proofKey()).jwk) });
    assert.equal(mismatch.status, 400);
    assert.equal(mismatch.body.error, 'invalid_dpop_proof');
    const plain = await push(undefined);
    assert.equal(plain.status, 201);
    const { location } = await authorizeWith({ request_uri: plain.body.request_uri! });
    assert.equal((await redeem(location.searchParams.get('code')!, plain.verifier, undefined)).status, 200);
  });
});
