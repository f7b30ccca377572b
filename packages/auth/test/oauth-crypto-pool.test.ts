/**
 * The crypto worker of the token endpoint (`crypto-pool.ts`): JWS signatures and DPoP proof checks made in
 * batches on a worker thread must be exactly what the event-loop path produces — signatures that Node's
 * verifier accepts, proofs accepted or refused with the same reasons — and when the worker goes away
 * every job, including those in flight, still completes on the event loop's side.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, verify } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { CryptoPool } from '../src/oauth/crypto-pool.ts';
import { ProofJwsRejected } from '../src/oauth/dpop-jws.ts';

const POLICY = { algorithms: ['ES256', 'EdDSA'], maxAgeSeconds: 300, clockSkewSeconds: 5 };

function verifies(
  input: string,
  signature: string,
  publicKey: ReturnType<typeof generateKeyPairSync>['publicKey'],
) {
  return verify(
    'sha256',
    Buffer.from(input),
    { key: publicKey, dsaEncoding: 'ieee-p1363' },
    Buffer.from(signature, 'base64url'),
  );
}

async function dpopProof(iat = Math.floor(Date.now() / 1000)) {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = await exportJWK(publicKey);
  const proof = await new SignJWT({
    htm: 'POST',
    htu: 'https://as.example/token',
    jti: crypto.randomUUID(),
    iat,
  })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
    .sign(privateKey);
  return { proof, jkt: await calculateJwkThumbprint(jwk) };
}

describe('crypto worker', () => {
  const pool = new CryptoPool();
  after(() => pool.close());

  test('signs 200 concurrent ES256 inputs in batches; each signature verifies, a tampered input does not', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const signer = pool.register('ES256', privateKey);
    assert.equal(await pool.ready(), true, 'the worker starts');
    const inputs = Array.from(
      { length: 200 },
      (_, i) => `eyJhbGciOiJFUzI1NiJ9.${Buffer.from(`{"n":${i}}`).toString('base64url')}`,
    );
    const signatures = await Promise.all(inputs.map((input) => signer.sign(input)));
    for (const [i, input] of inputs.entries())
      assert.ok(verifies(input, signatures[i]!, publicKey), `signature ${i}`);
    assert.equal(verifies(`${inputs[0]}x`, signatures[0]!, publicKey), false);
    assert.equal(new Set(signatures).size, 200, 'ECDSA signatures are randomized, never repeated');
  });

  test('checks DPoP proofs in the worker: the thumbprint of a good proof; the reason for a forged or stale one', async () => {
    assert.equal(await pool.ready(), true);
    const good = await dpopProof();
    const checked = await pool.checkDpopProof(good.proof, { ...POLICY, nowMs: Date.now() });
    assert.equal(checked.jkt, good.jkt);
    assert.equal(checked.payload.htm, 'POST');

    const other = await dpopProof();
    const [header, payload] = good.proof.split('.');
    const forged = `${header}.${payload}.${other.proof.split('.')[2]}`;
    await assert.rejects(pool.checkDpopProof(forged, { ...POLICY, nowMs: Date.now() }), (error: Error) => {
      assert.ok(error instanceof ProofJwsRejected);
      assert.match(error.message, /signature does not verify/);
      return true;
    });
    const stale = await dpopProof(Math.floor(Date.now() / 1000) - 3600);
    await assert.rejects(
      pool.checkDpopProof(stale.proof, { ...POLICY, nowMs: Date.now() }),
      /'iat' is too old/,
    );
    await assert.rejects(
      pool.checkDpopProof(good.proof, { ...POLICY, algorithms: ['EdDSA'], nowMs: Date.now() }),
      /signing algorithm not allowed/,
    );
  });

  test('jobs in flight when the worker stops complete on the event loop, and later jobs too', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    const local = new CryptoPool();
    const signer = local.register('EdDSA', privateKey);
    assert.equal(await local.ready(), true);
    const inFlight = Array.from({ length: 50 }, (_, i) => `a.${i}`).map((input) => ({
      input,
      signature: signer.sign(input),
    }));
    await new Promise(setImmediate); // the batch is posted to the worker
    await local.close();
    assert.equal(await local.ready(), false, 'the stopped worker is not used again');
    for (const { input, signature } of inFlight)
      assert.ok(verify(null, Buffer.from(input), publicKey, Buffer.from(await signature, 'base64url')));
    const later = await signer.sign('b.later');
    assert.ok(verify(null, Buffer.from('b.later'), publicKey, Buffer.from(later, 'base64url')));
    const proof = await dpopProof();
    assert.equal((await local.checkDpopProof(proof.proof, { ...POLICY, nowMs: Date.now() })).jkt, proof.jkt);
  });
});
