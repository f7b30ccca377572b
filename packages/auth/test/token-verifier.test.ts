/** JwtTokenVerifier: signature, expiry, issuer/audience, algorithm allow-list and subject classification. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { InvalidTokenError } from '../src/errors.ts';
import { JwtTokenVerifier } from '../src/token-verifier.ts';
import { ManualClock } from './helpers.ts';

async function setup() {
  const clock = new ManualClock();
  const { publicKey, privateKey } = await generateKeyPair('EdDSA');
  const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'ed', alg: 'EdDSA' }] };
  const verifier = new JwtTokenVerifier({
    key: jwks,
    issuer: 'https://iss',
    audience: 'aud',
    typ: 'at+jwt',
    now: clock.now,
  });
  const iat = Math.floor(clock.now() / 1000);
  const token = (
    claims: Record<string, unknown>,
    o: { iss?: string; aud?: string; exp?: number; typ?: string } = {},
  ) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'EdDSA', kid: 'ed', typ: o.typ ?? 'at+jwt' })
      .setIssuer(o.iss ?? 'https://iss')
      .setAudience(o.aud ?? 'aud')
      .setIssuedAt(iat)
      .setExpirationTime(o.exp ?? iat + 60)
      .sign(privateKey);
  return { clock, verifier, token };
}

const invalid = (error: unknown) => error instanceof InvalidTokenError;

describe('JwtTokenVerifier', () => {
  test('user tokens carry sub + sst; client-credentials tokens have sub = client_id and no sst', async () => {
    const { verifier, token } = await setup();
    const user = await verifier.verify(
      await token({ sub: 'u1', sst: 'stamp', client_id: 'web', scope: 'openid api' }),
    );
    assert.equal(user.kind, 'user');
    assert.equal(user.subject, 'u1');
    assert.equal(user.securityStamp, 'stamp');
    assert.deepEqual(user.scopes, ['openid', 'api']);
    const client = await verifier.verify(await token({ sub: 'svc', client_id: 'svc' }));
    assert.equal(client.kind, 'client');
    assert.equal(client.securityStamp, null);
    await assert.rejects(
      verifier.verify(await token({ sub: 'u1', client_id: 'web' })),
      invalid,
      'user token without stamp',
    );
    await assert.rejects(verifier.verify(await token({ client_id: 'web', sst: 's' })), invalid, 'no sub');
  });

  test('expiry (with the injected clock), issuer, audience, typ and algorithm are enforced', async () => {
    const { clock, verifier, token } = await setup();
    const ok = await token({ sub: 'u', sst: 's' });
    await verifier.verify(ok);
    clock.advance(61_000);
    await assert.rejects(
      verifier.verify(ok),
      (e: unknown) => invalid(e) && (e as Error).message === 'token expired',
    );
    const fresh = await setup();
    await assert.rejects(
      fresh.verifier.verify(await fresh.token({ sub: 'u', sst: 's' }, { iss: 'https://evil' })),
      invalid,
    );
    await assert.rejects(
      fresh.verifier.verify(await fresh.token({ sub: 'u', sst: 's' }, { aud: 'other' })),
      invalid,
    );
    await assert.rejects(
      fresh.verifier.verify(await fresh.token({ sub: 'u', sst: 's' }, { typ: 'JWT' })),
      invalid,
    );
    const hs = await new SignJWT({ sub: 'u', sst: 's' })
      .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt' })
      .setIssuer('https://iss')
      .setAudience('aud')
      .setExpirationTime('1h')
      .sign(new Uint8Array(32));
    await assert.rejects(
      fresh.verifier.verify(hs),
      invalid,
      'symmetric algorithms are not accepted by default',
    );
    await assert.rejects(fresh.verifier.verify('not-a-jwt'), invalid);
    await assert.rejects(fresh.verifier.verify('x'.repeat(20_000)), invalid);
  });
});
