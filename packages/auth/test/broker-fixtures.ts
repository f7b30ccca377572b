/**
 * Upstream OpenID providers for the brokering tests: {@link startUpstream} runs node-oidc-provider (a real,
 * certified OpenID provider, with its development login and consent pages) on an ephemeral loopback port;
 * {@link startHostileUpstream} is a deliberately broken provider for the refusals a real one never
 * produces — an ID token with another issuer, or signed by a key that is not in its JWKS.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

/** An upstream account: its claims (`sub` is the account id). */
export type UpstreamAccount = Record<string, unknown>;

/** A running upstream provider. */
export interface Upstream {
  readonly issuer: string;
  /** Registers our callback as the client's redirect URI (call before the first sign-in). */
  start(redirectUri: string): void;
  close(): Promise<void>;
}

async function listenLater(): Promise<{
  server: Server;
  issuer: string;
  handle(fn: (req: IncomingMessage, res: ServerResponse) => void): void;
}> {
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  const server = createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    issuer: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    handle(fn) {
      handler = fn;
    },
  };
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

/**
 * node-oidc-provider with one confidential client (`seed` / `seed-secret`) and `accounts` (login with the
 * account id and any password on its development login page). Scope claims are released by UserInfo
 * (its default, conformant mode), so the broker must read them there.
 */
export async function startUpstream(accounts: Record<string, UpstreamAccount>): Promise<Upstream> {
  const { server, issuer, handle } = await listenLater();
  return {
    issuer,
    start(redirectUri) {
      const provider = new Provider(issuer, {
        clients: [
          {
            client_id: 'seed',
            client_secret: 'seed-secret',
            redirect_uris: [redirectUri],
            grant_types: ['authorization_code'],
            response_types: ['code'],
            token_endpoint_auth_method: 'client_secret_basic',
          },
        ],
        claims: {
          openid: ['sub'],
          email: ['email', 'email_verified'],
          profile: ['name', 'given_name', 'family_name', 'preferred_username'],
        },
        findAccount: (_ctx, id) =>
          accounts[id] ? { accountId: id, claims: () => ({ sub: id, ...accounts[id] }) } : undefined,
        features: { devInteractions: { enabled: true } },
        cookies: { keys: ['upstream-test-cookie-key'] },
      });
      handle(provider.callback());
    },
    close: () => closeServer(server),
  };
}

/** How {@link startHostileUpstream} breaks its ID tokens. */
export type Hostility = 'wrong-iss' | 'bad-signature';

/**
 * A minimal provider whose discovery, JWKS and authorization endpoint are correct, and whose token
 * endpoint answers with an ID token broken as `mode` says (for `sub` `mallory`, e-mail verified).
 */
export async function startHostileUpstream(mode: Hostility): Promise<Upstream> {
  const { server, issuer, handle } = await listenLater();
  const published = await generateKeyPair('ES256');
  const other = await generateKeyPair('ES256');
  const jwk: JWK = { ...(await exportJWK(published.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  const nonces = new Map<string, string>();
  let redirect = '';
  handle((req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    const json = (body: unknown) =>
      res
        .writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' })
        .end(JSON.stringify(body));
    if (url.pathname === '/.well-known/openid-configuration') {
      json({
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['ES256'],
        code_challenge_methods_supported: ['S256'],
      });
    } else if (url.pathname === '/jwks') {
      json({ keys: [jwk] });
    } else if (url.pathname === '/authorize') {
      const code = `code-${nonces.size + 1}`;
      nonces.set(code, url.searchParams.get('nonce') ?? '');
      const back = new URL(redirect);
      back.searchParams.set('code', code);
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      res.writeHead(302, { location: back.href }).end();
    } else if (url.pathname === '/token' && req.method === 'POST') {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', async () => {
        const code = new URLSearchParams(body).get('code') ?? '';
        const now = Math.floor(Date.now() / 1000);
        const idToken = await new SignJWT({
          email: 'mallory@example.org',
          email_verified: true,
          nonce: nonces.get(code),
        })
          .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
          .setIssuer(mode === 'wrong-iss' ? 'https://someone-else.example' : issuer)
          .setSubject('mallory')
          .setAudience('seed')
          .setIssuedAt(now)
          .setExpirationTime(now + 300)
          .sign(mode === 'bad-signature' ? other.privateKey : published.privateKey);
        json({ access_token: 'at', token_type: 'Bearer', expires_in: 300, id_token: idToken });
      });
    } else {
      res.writeHead(404).end();
    }
  });
  return {
    issuer,
    start(redirectUri) {
      redirect = redirectUri;
    },
    close: () => closeServer(server),
  };
}
