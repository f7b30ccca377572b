/**
 * Child process of `oauth-bench.ts`: starts ONE token server on a loopback ephemeral port and prints one
 * JSON line `{ url, tokenPath, clientId, clientSecret, refreshTokens, dpop }` on stdout, then serves until
 * killed. `node oauth-servers.ts seed|oidc-provider <alg> <refreshTokenCount> [file|memory]`.
 *
 * Both servers also get the public client `bench-spa` with DPoP (RFC 9449) on, and `refreshTokenCount`
 * refresh tokens of that client bound to one DPoP key (`dpop.privateJwk`, ES256, generated here and handed
 * to the load generator, which signs a fresh proof for each request).
 *
 * - `seed`: this package's server (`buildAuthServer`) over a SQLite file in a temporary directory (WAL),
 *   the confidential client `bench-service` (client_credentials + password + refresh_token). The refresh
 *   tokens are obtained through real password grants.
 * - `oidc-provider`: node-oidc-provider with an unbounded in-memory adapter (`MapAdapter`), the same client and grants,
 *   refresh-token rotation on every use (`rotateRefreshToken: true`), and JWT access tokens (resource
 *   indicators with `accessTokenFormat: 'jwt'`) signed with the same algorithm. Its refresh tokens are made
 *   through its model API (it has no password grant), each with its own grant.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';
import type { SigningAlg } from '../src/oauth/keys.ts';
import { buildAuthServer } from '../src/server.ts';

const [kind, alg = 'ES256', countArg = '32', seedDb = 'file'] = process.argv.slice(2);
const count = Number(countArg);
const CLIENT_ID = 'bench-service';
const CLIENT_SECRET = 'bench-service-secret-0123456789';
const USER = 'bench-user';
const PASSWORD = 'bench-user-password-1';
const PUBLIC_CLIENT_ID = 'bench-spa';
/**
 * `BENCH_OPENID` (default on; `0` turns it off): the confidential client's refresh tokens carry the `openid`
 * scope on both servers, so every refresh also signs a new ID token (OpenID Connect Core §12.2).
 */
const OPENID = process.env.BENCH_OPENID !== '0';
/** Scope of the confidential client's refresh tokens. */
const REFRESH_SCOPE = OPENID ? 'openid api offline_access' : 'api offline_access';

/** The DPoP key of the public client's refresh tokens (private JWK for the load generator) and its thumbprint. */
const dpopKeys = await generateKeyPair('ES256', { extractable: true });
const dpopPublicJwk = await exportJWK(dpopKeys.publicKey);
const dpop = {
  clientId: PUBLIC_CLIENT_ID,
  privateJwk: await exportJWK(dpopKeys.privateKey),
  jkt: await calculateJwkThumbprint(dpopPublicJwk),
  refreshTokens: [] as string[],
};

/** A DPoP proof (RFC 9449 §4.2) for a POST to `htu`. */
function proof(htu: string): Promise<string> {
  return new SignJWT({ htm: 'POST', htu, jti: crypto.randomUUID(), iat: Math.floor(Date.now() / 1000) })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: dpopPublicJwk as JWK })
    .sign(dpopKeys.privateKey);
}

async function startSeed(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'auth-bench-'));
  const server = await buildAuthServer({
    databasePath: seedDb === 'memory' ? ':memory:' : join(dir, 'auth.sqlite'),
    signingAlg: alg as SigningAlg,
    // Cheaper scrypt only so that setting up the users and secret is quick; not on the measured paths
    // (a client secret is verified once, then matched by digest).
    hashParams: { ln: 12, r: 8, p: 1 },
    bootstrap: { adminPassword: 'bench-admin-password-1', demoClientSecret: 'unused-demo-secret-1' },
  });
  const { store, hasher } = server;
  await store.createClient({
    clientId: CLIENT_ID,
    clientType: 'confidential',
    secretHash: await hasher.hash(CLIENT_SECRET),
    allowedGrantTypes: ['client_credentials', 'password', 'refresh_token'],
    allowedScopes: ['openid', 'api', 'offline_access'],
  });
  await store.createClient({
    clientId: PUBLIC_CLIENT_ID,
    clientType: 'public',
    allowedGrantTypes: ['password', 'refresh_token'],
    allowedScopes: ['api', 'offline_access'],
  });
  await store.createUser({ userName: USER, passwordHash: await hasher.hash(PASSWORD) });
  const url = await server.listen(0, '127.0.0.1');
  const basic = `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}`;
  const refreshTokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${url}/connect/token`, {
      method: 'POST',
      headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'password',
        username: USER,
        password: PASSWORD,
        scope: REFRESH_SCOPE,
      }),
    });
    const body = (await res.json()) as { refresh_token?: string };
    if (!body.refresh_token) throw new Error(`seed: password grant failed (${res.status})`);
    refreshTokens.push(body.refresh_token);
  }
  // DPoP-bound refresh tokens of the public client (RFC 9449 §5), through real password grants with proofs.
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${url}/connect/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        dpop: await proof(`${url}/connect/token`),
      },
      body: new URLSearchParams({
        grant_type: 'password',
        client_id: PUBLIC_CLIENT_ID,
        username: USER,
        password: PASSWORD,
        scope: 'api offline_access',
      }),
    });
    const body = (await res.json()) as { refresh_token?: string; token_type?: string };
    if (!body.refresh_token || body.token_type !== 'DPoP')
      throw new Error(`seed: DPoP password grant failed (${res.status})`);
    dpop.refreshTokens.push(body.refresh_token);
  }
  const stop = async () => {
    await server.app.close();
    rmSync(dir, { recursive: true, force: true });
    process.exit(0);
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  console.log(
    JSON.stringify({
      url,
      tokenPath: '/connect/token',
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      refreshTokens,
      dpop,
    }),
  );
}

/**
 * An unbounded in-memory adapter for oidc-provider: its built-in development adapter is an LRU of 1 000
 * entries, which drops grants and refresh tokens in the middle of a benchmark (the refresh grant then
 * answers `invalid_grant`). Entries never expire here (a run lasts minutes).
 */
class MapAdapter {
  static readonly stores = new Map<string, Map<string, Record<string, unknown>>>();
  static readonly grants = new Map<string, { model: string; id: string }[]>();
  readonly #model: string;
  readonly #store: Map<string, Record<string, unknown>>;

  constructor(model: string) {
    this.#model = model;
    const store = MapAdapter.stores.get(model) ?? new Map<string, Record<string, unknown>>();
    MapAdapter.stores.set(model, store);
    this.#store = store;
  }
  async upsert(id: string, payload: Record<string, unknown>): Promise<void> {
    this.#store.set(id, payload);
    const grantId = payload.grantId;
    if (typeof grantId === 'string') {
      const members = MapAdapter.grants.get(grantId) ?? [];
      members.push({ model: this.#model, id });
      MapAdapter.grants.set(grantId, members);
    }
  }
  async find(id: string): Promise<Record<string, unknown> | undefined> {
    return this.#store.get(id);
  }
  async findByUserCode(): Promise<undefined> {
    return undefined;
  }
  async findByUid(): Promise<undefined> {
    return undefined;
  }
  async consume(id: string): Promise<void> {
    const payload = this.#store.get(id);
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }
  async destroy(id: string): Promise<void> {
    this.#store.delete(id);
  }
  async revokeByGrantId(grantId: string): Promise<void> {
    for (const { model, id } of MapAdapter.grants.get(grantId) ?? [])
      MapAdapter.stores.get(model)?.delete(id);
    MapAdapter.grants.delete(grantId);
  }
}

async function startOidcProvider(): Promise<void> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), alg, use: 'sig', kid: 'bench' };
  const { createServer } = await import('node:http');
  const httpServer = createServer();
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const address = httpServer.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const provider = new Provider(url, {
    clients: [
      {
        client_id: CLIENT_ID,
        client_secret: CLIENT_SECRET,
        grant_types: ['client_credentials', 'refresh_token', 'authorization_code'],
        redirect_uris: ['http://127.0.0.1/cb'],
        response_types: ['code'],
        scope: 'openid offline_access api',
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: alg as 'ES256',
      },
      {
        client_id: PUBLIC_CLIENT_ID,
        grant_types: ['refresh_token', 'authorization_code'],
        redirect_uris: ['http://127.0.0.1/cb'],
        response_types: ['code'],
        scope: 'openid offline_access api',
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: alg as 'ES256',
      },
    ],
    jwks: { keys: [jwk as never] },
    adapter: MapAdapter as never,
    scopes: ['openid', 'offline_access', 'api'],
    rotateRefreshToken: true,
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      dPoP: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => 'urn:seed',
        useGrantedResource: async () => true,
        getResourceServerInfo: async () => ({
          scope: 'api',
          audience: 'seed',
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: alg as 'ES256' } },
        }),
      },
    },
    ttl: { AccessToken: 600, ClientCredentials: 600, RefreshToken: 14 * 24 * 3600 },
  });
  // Silence the development-adapter warnings; keep errors visible.
  provider.on('server_error', (_ctx, err) => console.error('oidc-provider server_error', err));
  httpServer.on('request', provider.callback());

  const client = await provider.Client.find(CLIENT_ID);
  if (!client) throw new Error('oidc-provider: client missing');
  const refreshTokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const grant = new provider.Grant({ accountId: USER, clientId: CLIENT_ID });
    grant.addOIDCScope(OPENID ? 'openid offline_access' : 'offline_access');
    grant.addResourceScope('urn:seed', 'api');
    const grantId = await grant.save();
    const rt = new provider.RefreshToken({
      client,
      accountId: USER,
      grantId,
      gty: 'authorization_code',
      scope: OPENID ? 'openid offline_access api' : 'offline_access api',
      resource: 'urn:seed',
      authTime: Math.floor(Date.now() / 1000),
    });
    refreshTokens.push(await rt.save());
  }
  const publicClient = await provider.Client.find(PUBLIC_CLIENT_ID);
  if (!publicClient) throw new Error('oidc-provider: public client missing');
  for (let i = 0; i < count; i++) {
    const grant = new provider.Grant({ accountId: USER, clientId: PUBLIC_CLIENT_ID });
    grant.addOIDCScope('offline_access');
    grant.addResourceScope('urn:seed', 'api');
    const grantId = await grant.save();
    const rt = new provider.RefreshToken({
      client: publicClient,
      accountId: USER,
      grantId,
      gty: 'authorization_code',
      scope: 'offline_access api',
      resource: 'urn:seed',
      authTime: Math.floor(Date.now() / 1000),
      jkt: dpop.jkt,
    });
    dpop.refreshTokens.push(await rt.save());
  }
  const stop = () => httpServer.close(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  console.log(
    JSON.stringify({
      url,
      tokenPath: '/token',
      clientId: CLIENT_ID,
      clientSecret: CLIENT_SECRET,
      refreshTokens,
      dpop,
    }),
  );
}

if (kind === 'seed') await startSeed();
else if (kind === 'oidc-provider') await startOidcProvider();
else {
  console.error('usage: oauth-servers.ts seed|oidc-provider <alg> <refreshTokenCount>');
  process.exit(2);
}
