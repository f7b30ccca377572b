/**
 * Helpers of the DPoP tests: key pairs, hand-made proofs (for the negative rows a client library would
 * never produce) and a resource server protected by the permission middleware of an auth server.
 */
import { createHash, randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { authPlugin } from '../src/middleware/fastify.ts';
import type { AuthServer } from '../src/server.ts';

/** An ES256 key pair with its public JWK. */
export interface ProofKey {
  readonly privateKey: CryptoKey;
  readonly publicKey: CryptoKey;
  readonly jwk: JWK;
}

/** A fresh ES256 (or `alg`) key pair for DPoP proofs. */
export async function proofKey(alg = 'ES256'): Promise<ProofKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { privateKey, publicKey, jwk: await exportJWK(publicKey) };
}

/** Claims and header overrides of {@link makeProof}. */
export interface ProofInput {
  htm?: string;
  htu: string;
  /** Seconds since epoch; default now. */
  iat?: number;
  jti?: string | null;
  ath?: string;
  nonce?: string;
  typ?: string;
  /** Replace the `jwk` header (e.g. with a private JWK). */
  jwk?: JWK;
}

/** Signs a DPoP proof with `key` (RFC 9449 §4.2), letting tests break any part of it. */
export async function makeProof(key: ProofKey, input: ProofInput): Promise<string> {
  const claims: Record<string, unknown> = {
    htm: input.htm ?? 'POST',
    htu: input.htu,
    iat: input.iat ?? Math.floor(Date.now() / 1000),
  };
  if (input.jti !== null) claims.jti = input.jti ?? randomUUID();
  if (input.ath !== undefined) claims.ath = input.ath;
  if (input.nonce !== undefined) claims.nonce = input.nonce;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', typ: input.typ ?? 'dpop+jwt', jwk: input.jwk ?? key.jwk })
    .sign(key.privateKey);
}

/** `ath` of an access token. */
export function ath(accessToken: string): string {
  return createHash('sha256').update(accessToken).digest('base64url');
}

/**
 * A resource server on an ephemeral port: `GET /orders` requires `shop.orders.read`, checked by the
 * Fastify permission middleware over `server.authorization`. @returns the app and its base URL.
 */
export async function resourceServer(server: AuthServer): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  await app.register(authPlugin, { service: server.authorization });
  app.get('/orders', { config: { auth: { permission: 'shop.orders.read' } } }, async (request) => ({
    subject: request.auth.subject?.id,
  }));
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: `${base}/orders` };
}

/**
 * Makes a test server's clock follow real time (the fixture's clock stands still), so that proofs made by
 * client libraries with the real time stay inside the `iat` window however long the tests run. Setting
 * `clock.now` still moves the server's time by the difference.
 */
export function liveClock(clock: { now: number }): void {
  let offset = 0;
  Object.defineProperty(clock, 'now', {
    get: () => Date.now() + offset,
    set: (value: number) => {
      offset = value - Date.now();
    },
  });
}
