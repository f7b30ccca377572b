/** Shared fixtures of the auth core tests: an in-memory store, a manual clock, ES256 keys and a token signer. */
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { AuthorizationService, type AuthorizationServiceOptions } from '../src/authorization.ts';
import { PasswordHasher } from '../src/passwords.ts';
import { PolicyRegistry } from '../src/policies.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { ClientRecord, UserRecord } from '../src/store/types.ts';
import { JwtTokenVerifier, SECURITY_STAMP_CLAIM } from '../src/token-verifier.ts';

/** A settable clock, ms epoch. */
export class ManualClock {
  time = Date.UTC(2026, 0, 1);
  readonly now = (): number => this.time;
  advance(ms: number): void {
    this.time += ms;
  }
}

/** Cheap scrypt parameters for tests (the defaults are OWASP's, 128 MiB per hash). */
export const testHasher = (): PasswordHasher => new PasswordHasher({ params: { ln: 10, r: 8, p: 1 } });

export const ISSUER = 'https://auth.test';
export const AUDIENCE = 'api://business';

/** Everything a middleware test needs. */
export async function fixture(options: Partial<AuthorizationServiceOptions> = {}) {
  const clock = new ManualClock();
  const store = new SqliteAuthStore({ now: clock.now });
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const other = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  const tokenVerifier = new JwtTokenVerifier({
    key: { keys: [jwk] },
    issuer: ISSUER,
    audience: AUDIENCE,
    now: clock.now,
  });
  const policies = new PolicyRegistry();
  const service = new AuthorizationService({ store, tokenVerifier, policies, now: clock.now, ...options });

  const sign = (
    claims: Record<string, unknown>,
    sub: string,
    opts: { ttlSec?: number; otherKey?: boolean } = {},
  ) => {
    const iat = Math.floor(clock.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setSubject(sub)
      .setIssuedAt(iat)
      .setExpirationTime(iat + (opts.ttlSec ?? 300))
      .sign(opts.otherKey ? other.privateKey : privateKey);
  };
  const userToken = (user: UserRecord, opts?: { ttlSec?: number; otherKey?: boolean }) =>
    sign({ [SECURITY_STAMP_CLAIM]: user.securityStamp, client_id: 'web', scope: 'openid' }, user.id, opts);
  const clientToken = (client: ClientRecord) =>
    sign({ client_id: client.clientId, scope: 'api' }, client.clientId);

  return { clock, store, service, policies, sign, userToken, clientToken, tokenVerifier };
}
