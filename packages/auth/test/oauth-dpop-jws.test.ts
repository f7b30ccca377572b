/**
 * The JWS part of DPoP proof checks (`dpop-jws.ts`, RFC 9449 §4.3): ES256 signatures go through
 * `node:crypto` `verify()`, other algorithms through `jose`; both share the claim checks. Each test signs
 * real proofs with `jose` and asserts what a client would see: accepted with the key's thumbprint, or
 * refused with the failed check named.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import { ProofJwsChecker, ProofJwsRejected } from '../src/oauth/dpop-jws.ts';

const ALGS = ['ES256', 'ES384', 'EdDSA'];
const now = () => Math.floor(Date.now() / 1000);
const policy = () => ({ algorithms: ALGS, nowMs: Date.now(), maxAgeSeconds: 300, clockSkewSeconds: 5 });

async function proofKey(alg: string) {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(publicKey);
  return { alg, privateKey, jwk, jkt: await calculateJwkThumbprint(jwk) };
}

type Key = Awaited<ReturnType<typeof proofKey>>;

function sign(key: Key, claims: JWTPayload = {}, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT({
    htm: 'POST',
    htu: 'https://as.example/token',
    jti: crypto.randomUUID(),
    iat: now(),
    ...claims,
  })
    .setProtectedHeader({ alg: key.alg, typ: 'dpop+jwt', jwk: key.jwk, ...header })
    .sign(key.privateKey);
}

/** Replaces one character of the payload part, keeping it base64url. */
function tamper(proof: string): string {
  const [h, p, s] = proof.split('.') as [string, string, string];
  const i = Math.floor(p.length / 2);
  return `${h}.${p.slice(0, i)}${p[i] === 'A' ? 'B' : 'A'}${p.slice(i + 1)}.${s}`;
}

async function refusal(checker: ProofJwsChecker, proof: string): Promise<string> {
  try {
    await checker.check(proof, policy());
  } catch (error) {
    assert.ok(error instanceof ProofJwsRejected, String(error));
    return error.message;
  }
  assert.fail('the proof was accepted');
}

describe('DPoP proof JWS checks', () => {
  test('ES256 (node:crypto), ES384 and EdDSA (jose) proofs verify and give the key thumbprint; tampering is refused', async () => {
    const checker = new ProofJwsChecker();
    for (const alg of ALGS) {
      const key = await proofKey(alg);
      for (let i = 0; i < 3; i++) {
        const checked = await checker.check(await sign(key), policy());
        assert.equal(checked.jkt, key.jkt, alg);
        assert.equal(checked.payload.htm, 'POST');
      }
      assert.match(await refusal(checker, tamper(await sign(key))), /signature does not verify/, alg);
    }
  });

  test('an ES256 signature of another key or of the wrong length is refused', async () => {
    const checker = new ProofJwsChecker();
    const key = await proofKey('ES256');
    const other = await proofKey('ES256');
    const foreign = await sign({ ...other, jwk: key.jwk });
    assert.match(await refusal(checker, foreign), /signature does not verify/);
    const [h, p, s] = (await sign(key)).split('.') as [string, string, string];
    const short = Buffer.from(s, 'base64url').subarray(0, 63).toString('base64url');
    assert.match(await refusal(checker, `${h}.${p}.${short}`), /signature does not verify/);
  });

  test('claims: missing, iat too old, in the future or not a number, exp passed, nbf ahead, crit header', async () => {
    const checker = new ProofJwsChecker();
    const key = await proofKey('ES256');
    const cases: [JWTPayload, Record<string, unknown>, RegExp][] = [
      [{ htu: undefined }, {}, /claim 'htu' missing/],
      [{ iat: now() - 600 }, {}, /'iat' is too old/],
      [{ iat: now() + 600 }, {}, /'iat' in the future/],
      [{ iat: 'yesterday' as unknown as number }, {}, /claim 'iat' invalid/],
      [{ exp: now() - 60 }, {}, /claim 'exp' invalid or passed/],
      [{ nbf: now() + 600 }, {}, /claim 'nbf' invalid or not yet reached/],
      [{}, { crit: ['b64'], b64: true }, /'crit'/],
    ];
    for (const [claims, header, expected] of cases) {
      const message = await refusal(checker, await sign(key, claims, header));
      assert.match(message, expected, JSON.stringify({ claims, header }));
    }
    // Within the window (iat 4 s ahead with 5 s of skew, exp ahead, nbf passed): accepted.
    const ok = await sign(key, { iat: now() + 4, exp: now() + 60, nbf: now() - 60 });
    assert.equal((await checker.check(ok, policy())).jkt, key.jkt);
  });
});
