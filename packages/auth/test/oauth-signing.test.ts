/**
 * JWT signing of the token endpoint (RFC 9068 access tokens, OIDC ID tokens): the server signs with
 * Node's `crypto.sign` over keys imported once; every supported algorithm must produce tokens that an
 * independent verifier (`jose`'s `jwtVerify` over the published JWKS) accepts, and a tampered token must
 * be refused.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, sign, verify } from 'node:crypto';
import { describe, test } from 'node:test';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { resolveOAuthConfig } from '../src/oauth/config.ts';
import { p1363ToDer } from '../src/oauth/jws-sign.ts';
import { derToP1363, KeyManager, SUPPORTED_SIGNING_ALGS } from '../src/oauth/keys.ts';
import { TokenIssuer } from '../src/oauth/tokens.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';

const ISSUER = 'http://127.0.0.1:4100';

async function setup(alg: (typeof SUPPORTED_SIGNING_ALGS)[number]) {
  const store = new SqliteAuthStore();
  const keys = new KeyManager(store, { alg });
  await keys.init();
  const config = resolveOAuthConfig({ issuer: ISSUER });
  return { store, keys, config, tokens: new TokenIssuer(config, keys) };
}

describe('JWT signing with each supported algorithm', () => {
  for (const alg of SUPPORTED_SIGNING_ALGS) {
    test(`${alg}: access and ID tokens verify with jose against the JWKS; tampering is detected`, async () => {
      const { store, keys, config, tokens } = await setup(alg);
      try {
        const access = await tokens.accessToken({
          subject: { kind: 'user', id: 'u-1', userName: 'alice', securityStamp: 'stamp-1' },
          clientId: 'demo-service',
          scope: 'api offline_access',
          authTime: 1_700_000_000,
        });
        const jwks = createLocalJWKSet(keys.jwks());
        const { payload, protectedHeader } = await jwtVerify(access, jwks, {
          issuer: ISSUER,
          audience: config.audience,
          typ: 'at+jwt',
          algorithms: [alg],
        });
        assert.equal(protectedHeader.kid, keys.active().kid);
        assert.equal(payload.sub, 'u-1');
        assert.equal(payload.client_id, 'demo-service');
        assert.equal(payload.scope, 'api offline_access');
        assert.equal(payload.preferred_username, 'alice');
        assert.equal(payload.sst, 'stamp-1');
        assert.equal(payload.auth_time, 1_700_000_000);
        assert.equal(typeof payload.jti, 'string');
        assert.equal((payload.exp ?? 0) - (payload.iat ?? 0), config.accessTokenTtlSeconds);

        const id = await tokens.idToken({
          userId: 'u-1',
          userName: 'alice',
          clientId: 'demo-spa',
          nonce: 'n-1',
        });
        const verifiedId = await jwtVerify(id, jwks, { issuer: ISSUER, audience: 'demo-spa', typ: 'JWT' });
        assert.equal(verifiedId.payload.nonce, 'n-1');

        // Another token's payload under this token's header and signature must not verify.
        const other = await tokens.accessToken({
          subject: { kind: 'client', id: 'intruder' },
          clientId: 'intruder',
          scope: 'api',
        });
        const [header, , signature] = access.split('.');
        const forged = `${header}.${other.split('.')[1]}.${signature}`;
        await assert.rejects(jwtVerify(forged, jwks, { issuer: ISSUER, audience: config.audience }), {
          code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
        });
      } finally {
        await store.close();
      }
    });
  }

  test('after an immediate rotation the new key signs and both keys stay in the JWKS', async () => {
    const { store, keys, config, tokens } = await setup('ES256');
    try {
      const before = await tokens.accessToken({
        subject: { kind: 'client', id: 'c' },
        clientId: 'c',
        scope: '',
      });
      await keys.rotate({ immediate: true });
      const after = await tokens.accessToken({
        subject: { kind: 'client', id: 'c' },
        clientId: 'c',
        scope: '',
      });
      assert.notEqual(decodeProtectedHeader(before).kid, decodeProtectedHeader(after).kid);
      assert.equal(decodeProtectedHeader(after).kid, keys.active().kid);
      const jwks = createLocalJWKSet(keys.jwks());
      for (const token of [before, after]) {
        await jwtVerify(token, jwks, { issuer: ISSUER, audience: config.audience, typ: 'at+jwt' });
      }
    } finally {
      await store.close();
    }
  });
});

describe('ECDSA signature encoding (DER to R‖S, RFC 7518 §3.4)', () => {
  test('integers with a sign byte and short integers are normalised to 32 bytes each', () => {
    const r = Buffer.concat([Buffer.from([0x00, 0x80]), Buffer.alloc(31, 0x11)]); // 33 bytes, leading 0x00
    const s = Buffer.alloc(31, 0x22); // 31 bytes: left-padded with one zero byte
    const der = Buffer.concat([
      Buffer.from([0x30, 2 + r.length + 2 + s.length, 0x02, r.length]),
      r,
      Buffer.from([0x02, s.length]),
      s,
    ]);
    const out = derToP1363(der, 32);
    assert.equal(out.length, 64);
    assert.deepEqual(out.subarray(0, 32), r.subarray(1));
    assert.deepEqual(out.subarray(32), Buffer.concat([Buffer.from([0]), s]));
    assert.throws(
      () => derToP1363(Buffer.from([0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01]), 32),
      /bad DER/,
    );
  });

  test('500 real P-256 signatures convert to signatures Node verifies as ieee-p1363', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    for (let i = 0; i < 500; i++) {
      const data = Buffer.from(`message ${i}`);
      const signature = derToP1363(sign('sha256', data, privateKey), 32);
      assert.ok(
        verify('sha256', data, { key: publicKey, dsaEncoding: 'ieee-p1363' }, signature),
        `signature ${i}`,
      );
    }
  });

  test('R‖S to DER: 500 real P-256 signatures round-trip and verify as DER; zero and high-bit integers', () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    for (let i = 0; i < 500; i++) {
      const data = Buffer.from(`message ${i}`);
      const der = sign('sha256', data, privateKey);
      const p1363 = derToP1363(der, 32);
      assert.deepEqual(p1363ToDer(p1363), der, `signature ${i}`);
      assert.ok(verify('sha256', data, publicKey, p1363ToDer(p1363)), `signature ${i} verifies`);
    }
    // r with its high bit set gets a zero byte; s with leading zero bytes loses them (one byte left of 0).
    const r = Buffer.alloc(32, 0x80);
    const s = Buffer.concat([Buffer.alloc(31, 0), Buffer.from([0x05])]);
    assert.deepEqual(
      p1363ToDer(Buffer.concat([r, s])),
      Buffer.concat([Buffer.from([0x30, 2 + 33 + 2 + 1, 0x02, 33, 0x00]), r, Buffer.from([0x02, 1, 0x05])]),
    );
  });
});
