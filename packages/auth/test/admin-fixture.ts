/**
 * Test fixture of the administration API tests: an in-memory store, the core's AuthorizationService with a
 * JWT verifier over a test key, the `adminApi` plugin on a bare Fastify app, and helpers to create callers
 * holding given permission codes and to mint their access tokens.
 */
import Fastify, { type FastifyInstance, type LightMyRequestResponse } from 'fastify';
import { generateKeyPair, SignJWT } from 'jose';
import { type AdminApiOptions, adminApi, adminServerOptions, normalizeBasePath } from '../src/admin/index.ts';
import { AuthorizationService } from '../src/authorization.ts';
import { PasswordHasher } from '../src/passwords.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { UserRecord } from '../src/store/types.ts';
import { JwtTokenVerifier, SECURITY_STAMP_CLAIM } from '../src/token-verifier.ts';

/** Cheap scrypt parameters for tests (the production default is N = 2^17). */
export const TEST_HASH_PARAMS = { ln: 10, r: 8, p: 1 } as const;

export interface AdminFixture {
  app: FastifyInstance;
  store: SqliteAuthStore;
  hasher: PasswordHasher;
  base: string;
  /** An access token for a user (stamp from the current record unless given). */
  token(
    user: UserRecord,
    options?: { stamp?: string; expiresInSec?: number; clientId?: string },
  ): Promise<string>;
  /** A client-credentials access token (sub = client id). */
  clientToken(clientId: string): Promise<string>;
  /** Creates a user holding `permissions` directly (and optionally `denied`) and returns it with its token. */
  caller(
    name: string,
    permissions: string[],
    denied?: string[],
  ): Promise<{ user: UserRecord; token: string }>;
  /** Sends a request with a bearer token; `body` objects are sent as JSON, strings as given. */
  call(
    token: string | undefined,
    method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE',
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export async function adminFixture(
  options: { basePath?: string; onDenied?: AdminApiOptions['onDenied'] } = {},
): Promise<AdminFixture> {
  const store = new SqliteAuthStore({ path: ':memory:' });
  const hasher = new PasswordHasher({ params: TEST_HASH_PARAMS });
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const issuer = 'https://auth.test';
  const authorization = new AuthorizationService({
    store,
    tokenVerifier: new JwtTokenVerifier({ key: publicKey, issuer, algorithms: ['ES256'] }),
  });
  const app = Fastify({ logger: false, ...adminServerOptions(options.basePath) });
  await app.register(adminApi, {
    store,
    authorization,
    passwordHasher: hasher,
    basePath: options.basePath,
    onDenied: options.onDenied,
  });
  await app.ready();
  const base = `${normalizeBasePath(options.basePath)}/api`;

  const sign = (claims: Record<string, unknown>, sub: string, expiresInSec = 300) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt' })
      .setIssuer(issuer)
      .setSubject(sub)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + expiresInSec)
      .sign(privateKey);

  const fixture: AdminFixture = {
    app,
    store,
    hasher,
    base,
    token: (user, opts = {}) =>
      sign(
        { [SECURITY_STAMP_CLAIM]: opts.stamp ?? user.securityStamp, client_id: opts.clientId ?? 'demo-spa' },
        user.id,
        opts.expiresInSec,
      ),
    clientToken: (clientId) => sign({ client_id: clientId }, clientId),
    async caller(name, permissions, denied = []) {
      const user = await store.createUser({
        userName: name,
        directPermissions: permissions,
        deniedPermissions: denied,
      });
      return { user, token: await fixture.token(user) };
    },
    call(token, method, path, body, headers = {}) {
      const all: Record<string, string> = { ...headers };
      if (token !== undefined) all.authorization = `Bearer ${token}`;
      let payload: string | undefined;
      if (typeof body === 'string') payload = body;
      else if (body !== undefined) {
        payload = JSON.stringify(body);
        all['content-type'] ??= 'application/json';
      }
      return app.inject({
        method,
        url: path.startsWith('/') ? path : `${base}/${path}`,
        headers: all,
        payload,
      });
    },
    async close() {
      await app.close();
      await store.close();
    },
  };
  return fixture;
}

/** Everything that an admin change could touch, for "nothing changed" assertions. */
export async function snapshot(store: SqliteAuthStore): Promise<string> {
  const all = { limit: 1000 };
  const [users, roles, permissions, clients, audit] = await Promise.all([
    store.listUsers(all),
    store.listRoles(all),
    store.listPermissions(all),
    store.listClients(all),
    store.listAudit(all),
  ]);
  return JSON.stringify({ users, roles, permissions, clients, audit });
}
