/**
 * Relying parties nobody here wrote, against the real server: a single-page app built on `oidc-client-ts`
 * in headless Chromium on another origin (sign-in with code + PKCE, UserInfo, silent renew with the
 * refresh token, RP-initiated logout — every call cross-origin, so CORS and the preflights are exercised
 * by the browser itself), a page on an unregistered origin that the browser refuses the answers to, and
 * Auth.js (`@auth/core` with its generic OIDC provider) whose session carries the user's name and e-mail
 * from the ID token.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Auth, type AuthConfig } from '@auth/core';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './browser.ts';
import { liveClock } from './oauth-dpop-helpers.ts';
import { postForm, startTestServer, type TestServer } from './oauth-fixtures.ts';

const require = createRequire(import.meta.url);
/** The browser build of oidc-client-ts (an IIFE defining the global `oidc`). */
const OIDC_CLIENT_JS = readFileSync(
  join(dirname(require.resolve('oidc-client-ts/package.json')), 'dist/browser/oidc-client-ts.min.js'),
);

interface Site {
  readonly server: Server;
  readonly origin: string;
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Site> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A static single-page app: every path serves the same page, which loads oidc-client-ts from its origin. */
function spaSite(authority: () => string): Promise<Site> {
  let origin = '';
  const site = listen((req, res) => {
    if (req.url === '/oidc-client-ts.js') {
      res.writeHead(200, { 'content-type': 'text/javascript' }).end(OIDC_CLIENT_JS);
      return;
    }
    const settings = {
      authority: authority(),
      client_id: 'demo-spa',
      redirect_uri: `${origin}/callback`,
      post_logout_redirect_uri: `${origin}/logged-out`,
      response_type: 'code',
      scope: 'openid profile email roles offline_access',
      loadUserInfo: true,
      automaticSilentRenew: false,
    };
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>spa</title>
<script src="/oidc-client-ts.js"></script>
<script>
  window.mgr = new oidc.UserManager({
    ...${JSON.stringify(settings)},
    userStore: new oidc.WebStorageStateStore({ store: window.localStorage }),
  });
</script>`);
  });
  return site.then((s) => {
    origin = s.origin;
    return s;
  });
}

function close(site: Site | undefined): Promise<void> {
  return new Promise((resolve) => (site ? site.server.close(() => resolve()) : resolve()));
}

let t: TestServer;
let browser: Browser;
let spa: Site;
let stranger: Site;
let oliviaId: string;

before(async () => {
  t = await startTestServer();
  liveClock(t.clock);
  spa = await spaSite(() => t.base);
  stranger = await listen((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<title>x</title>'),
  );
  await t.server.store.updateClient('demo-spa', {
    redirectUris: [`${spa.origin}/callback`],
    postLogoutRedirectUris: [`${spa.origin}/logged-out`],
  });
  const olivia = await t.createUser('olivia', 'olivia-password-1');
  oliviaId = olivia.id;
  await t.server.store.updateUser(olivia.id, {
    displayName: 'Olivia Doe',
    email: 'olivia@example.org',
    emailVerified: true,
  });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await close(spa);
  await close(stranger);
  await t?.close();
});

async function signInOnLoginPage(page: Page, until: (url: URL) => boolean): Promise<void> {
  await page.waitForURL((u) => u.pathname === '/login');
  await page.fill('input[name=username]', 'olivia');
  await page.fill('input[name=password]', 'olivia-password-1');
  await Promise.all([page.waitForURL(until, { waitUntil: 'load' }), page.click('button[type=submit]')]);
}

describe('oidc-client-ts single-page app on another origin', () => {
  test('signs in, loads UserInfo, renews silently with the refresh token, and signs out', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const crossOrigin: string[] = [];
    page.on('request', (request) => {
      const url = new URL(request.url());
      if (url.origin === t.base && request.resourceType() === 'fetch')
        crossOrigin.push(`${request.method()} ${url.pathname}`);
    });
    try {
      await page.goto(`${spa.origin}/`);
      await page.evaluate(() => {
        void (window as unknown as { mgr: { signinRedirect(): Promise<void> } }).mgr.signinRedirect();
      });
      await signInOnLoginPage(page, (u) => u.origin === spa.origin && u.pathname === '/callback');
      const user = await page.evaluate(async () => {
        const u = await (
          window as unknown as {
            mgr: {
              signinRedirectCallback(): Promise<{
                profile: Record<string, unknown>;
                access_token: string;
                refresh_token?: string;
                id_token?: string;
              }>;
            };
          }
        ).mgr.signinRedirectCallback();
        return { profile: u.profile, access: u.access_token, refresh: u.refresh_token, id: u.id_token };
      });
      assert.equal(user.profile.sub, oliviaId);
      assert.equal(user.profile.name, 'Olivia Doe');
      assert.equal(user.profile.email, 'olivia@example.org');
      assert.ok(user.refresh, 'a refresh token was issued');
      // The browser itself made these cross-origin calls (and their preflights) and let the page read them.
      for (const call of [
        'GET /.well-known/openid-configuration',
        'POST /connect/token',
        'GET /connect/userinfo',
      ])
        assert.ok(crossOrigin.includes(call), `${call} in ${crossOrigin.join(', ')}`);

      const renewed = await page.evaluate(async () => {
        const u = await (
          window as unknown as {
            mgr: { signinSilent(): Promise<{ access_token: string; refresh_token?: string } | null> };
          }
        ).mgr.signinSilent();
        return { access: u?.access_token, refresh: u?.refresh_token };
      });
      assert.ok(renewed.access && renewed.access !== user.access, 'a new access token');
      assert.ok(renewed.refresh && renewed.refresh !== user.refresh, 'the refresh token rotated');
      // The renewal used the refresh grant: the first refresh token is now spent.
      const spent = await postForm(t.base, '/connect/token', {
        grant_type: 'refresh_token',
        client_id: 'demo-spa',
        refresh_token: user.refresh!,
      });
      assert.equal(spent.status, 400);

      await page.evaluate(() => {
        void (window as unknown as { mgr: { signoutRedirect(): Promise<void> } }).mgr.signoutRedirect();
      });
      await page.waitForURL((u) => u.origin === spa.origin && u.pathname === '/logged-out');
      // Logging out ended the session and its refresh tokens on the server.
      const afterLogout = await postForm(t.base, '/connect/token', {
        grant_type: 'refresh_token',
        client_id: 'demo-spa',
        refresh_token: renewed.refresh!,
      });
      assert.equal(afterLogout.status, 400);
    } finally {
      await context.close();
    }
  });

  test('a page on an unregistered origin cannot read discovery or call the token endpoint', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      await page.goto(`${stranger.origin}/`);
      const results = await page.evaluate(async (base) => {
        const attempt = async (input: string, init?: RequestInit) => {
          try {
            return `status ${(await fetch(input, init)).status}`;
          } catch (error) {
            return `blocked ${(error as Error).name}`;
          }
        };
        return [
          await attempt(`${base}/.well-known/openid-configuration`),
          await attempt(`${base}/connect/token`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: 'grant_type=refresh_token&client_id=demo-spa&refresh_token=x',
          }),
        ];
      }, t.base);
      assert.deepEqual(results, ['blocked TypeError', 'blocked TypeError']);
    } finally {
      await context.close();
    }
  });
});

describe('Auth.js (@auth/core) with the generic OIDC provider', () => {
  let app: Site | undefined;
  after(() => close(app));

  test('the session carries the name and e-mail from the ID token', async () => {
    let origin = '';
    const config = (): AuthConfig => ({
      basePath: '/auth',
      secret: 'auth-js-test-secret-with-32-characters!',
      trustHost: true,
      providers: [
        {
          id: 'seed',
          name: 'Seed',
          type: 'oidc',
          issuer: t.base,
          clientId: 'authjs',
          clientSecret: 'authjs-secret-1',
          authorization: { params: { scope: 'openid profile email' } },
          checks: ['pkce', 'state', 'nonce'],
        },
      ],
    });
    app = await listen((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(req.headers))
          if (typeof value === 'string') headers.set(name, value);
        const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
        if (!req.url?.startsWith('/auth')) {
          res.writeHead(200, { 'content-type': 'text/html' }).end('<title>home</title>');
          return;
        }
        Auth(new Request(`${origin}${req.url}`, { method: req.method, headers, body }), config())
          .then(async (response) => {
            const out: Record<string, string | string[]> = {};
            response.headers.forEach((value, name) => {
              if (name !== 'set-cookie') out[name] = value;
            });
            const cookies = response.headers.getSetCookie();
            if (cookies.length > 0) out['set-cookie'] = cookies;
            res.writeHead(response.status, out).end(Buffer.from(await response.arrayBuffer()));
          })
          .catch((error: unknown) => res.writeHead(500).end(String(error)));
      });
    });
    origin = app.origin;
    await t.createClient({
      clientId: 'authjs',
      clientType: 'confidential',
      secret: 'authjs-secret-1',
      redirectUris: [`${origin}/auth/callback/seed`],
      allowedGrantTypes: ['authorization_code', 'refresh_token'],
      allowedScopes: ['openid', 'profile', 'email'],
    });

    const context = await browser.newContext();
    const page = await context.newPage();
    try {
      await page.goto(`${origin}/auth/signin`);
      await Promise.all([page.waitForURL((u) => u.origin === t.base), page.click('button[type=submit]')]);
      await signInOnLoginPage(page, (u) => u.origin === origin && !u.pathname.startsWith('/auth/callback'));
      const response = await page.goto(`${origin}/auth/session`);
      const session = (await response!.json()) as { user?: { name?: string; email?: string } };
      assert.equal(session.user?.name, 'Olivia Doe');
      assert.equal(session.user?.email, 'olivia@example.org');
    } finally {
      await context.close();
    }
  });
});
