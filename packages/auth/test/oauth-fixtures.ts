/**
 * Shared fixtures of the OAuth and login tests: an auth server on an ephemeral loopback port over an
 * in-memory store, with cheap scrypt parameters, a controllable clock, and plain-HTTP helpers (token
 * requests, login through the real form, authorization requests).
 */
import { createHash, randomBytes } from 'node:crypto';
import { type AuthServer, type AuthServerOptions, buildAuthServer } from '../src/server.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { NewClient, UserRecord } from '../src/store/types.ts';

export const ADMIN_PASSWORD = 'admin-password-1';
export const DEMO_SECRET = 'demo-service-secret-1';
export const SPA_REDIRECT = 'http://127.0.0.1:8089/callback';

/** A running test server. `clock.now` is the server's clock (ms); advance it to expire codes and tokens. */
export interface TestServer {
  readonly server: AuthServer;
  readonly base: string;
  readonly clock: { now: number };
  /** Creates a user with a password (cheap hash). */
  createUser(
    userName: string,
    password: string,
    extra?: { roles?: string[]; directPermissions?: string[] },
  ): Promise<UserRecord>;
  /** Creates a client; `secret` is hashed for confidential clients. */
  createClient(input: Omit<NewClient, 'secretHash'> & { secret?: string }): Promise<void>;
  close(): Promise<void>;
}

/** Starts a server with the demo clients (`demo-spa` redirecting to {@link SPA_REDIRECT}). */
export async function startTestServer(options: AuthServerOptions = {}): Promise<TestServer> {
  const clock = { now: Date.now() };
  const now = () => clock.now;
  const server = await buildAuthServer({
    store: new SqliteAuthStore({ now }),
    hashParams: { ln: 10, r: 8, p: 1 },
    now,
    bootstrap: {
      adminPassword: ADMIN_PASSWORD,
      demoClientSecret: DEMO_SECRET,
      demoSpaRedirectUris: [SPA_REDIRECT],
    },
    ...options,
  });
  const base = await server.listen(0, '127.0.0.1');
  return {
    server,
    base,
    clock,
    async createUser(userName, password, extra = {}) {
      return server.store.createUser({
        userName,
        passwordHash: await server.hasher.hash(password),
        ...extra,
      });
    },
    async createClient(input) {
      const { secret, ...rest } = input;
      await server.store.createClient({
        ...rest,
        secretHash: secret === undefined ? null : await server.hasher.hash(secret),
      });
    },
    close: () => server.app.close(),
  };
}

/** `Authorization: Basic` value for a client id and secret (RFC 6749 §2.3.1 encoding). */
export function basic(clientId: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString('base64')}`;
}

/** POSTs a form to `path` and returns the response. */
export function postForm(
  base: string,
  path: string,
  params: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params).toString(),
    redirect: 'manual',
  });
}

/** A token request authenticated as `demo-service` with HTTP Basic. */
export function serviceToken(base: string, params: Record<string, string>): Promise<Response> {
  return postForm(base, '/connect/token', params, { authorization: basic('demo-service', DEMO_SECRET) });
}

/** A PKCE pair (RFC 7636 §4.1–4.2, S256). */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Minimal cookie jar for `fetch`. */
export class CookieJar {
  readonly cookies = new Map<string, string>();
  /** Stores the `Set-Cookie` headers of a response. */
  take(res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      if (value === '' || /max-age=0/i.test(line) || /expires=Thu, 01 Jan 1970/i.test(line))
        this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }
  /** The `Cookie` header value. */
  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/**
 * Signs in through the real login form with plain HTTP (GET the form, read the CSRF field, POST).
 * @returns the POST response (302) — its `location` is the next step.
 */
export async function submitLogin(
  base: string,
  jar: CookieJar,
  userName: string,
  password: string,
  returnTo?: string,
): Promise<Response> {
  const query = returnTo ? `?${new URLSearchParams({ return_to: returnTo })}` : '';
  const page = await fetch(`${base}/login${query}`, { headers: { cookie: jar.header() } });
  jar.take(page);
  const html = await page.text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1];
  if (!csrf) throw new Error('login page has no _csrf field');
  const fields: Record<string, string> = { _csrf: csrf, username: userName, password };
  if (returnTo) fields.return_to = returnTo;
  const res = await postForm(base, '/login', fields, { cookie: jar.header() });
  jar.take(res);
  return res;
}

/** Runs `/connect/authorize` with the jar's session; returns the 302 response. */
export async function authorize(
  base: string,
  jar: CookieJar,
  params: Record<string, string>,
): Promise<Response> {
  return fetch(`${base}/connect/authorize?${new URLSearchParams(params)}`, {
    headers: { cookie: jar.header() },
    redirect: 'manual',
  });
}

/**
 * Signs `userName` in and obtains an authorization code for `demo-spa` with PKCE S256.
 * @returns the code, the verifier and the redirect URI used.
 */
export async function obtainCode(
  base: string,
  userName: string,
  password: string,
  extra: Record<string, string> = {},
): Promise<{ code: string; verifier: string; redirectUri: string; jar: CookieJar }> {
  const jar = new CookieJar();
  const login = await submitLogin(base, jar, userName, password);
  if (login.status !== 302 || login.headers.get('location')?.includes('err=1'))
    throw new Error('login failed');
  const { verifier, challenge } = pkcePair();
  const res = await authorize(base, jar, {
    response_type: 'code',
    client_id: 'demo-spa',
    redirect_uri: SPA_REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st',
    ...extra,
  });
  const location = new URL(res.headers.get('location') ?? '');
  const code = location.searchParams.get('code');
  if (res.status !== 302 || !code) throw new Error(`no code: ${res.status} ${location}`);
  return { code, verifier, redirectUri: SPA_REDIRECT, jar };
}
