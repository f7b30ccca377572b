/**
 * Shared fixture of the OpenID Connect relying-party tests: the auth server over an in-memory store, an RP
 * web server on an ephemeral loopback port (its `/callback` and `/logged-out` pages, and a `/backchannel`
 * endpoint recording the logout tokens it receives), and headless Chromium driving the real login and
 * consent pages.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext } from 'playwright-core';
import { launchChromium } from './browser.ts';
import { startTestServer, type TestServer } from './oauth-fixtures.ts';

/** What the RP server received on `/backchannel` (form `logout_token`, OIDC Back-Channel Logout 1.0 §2.5). */
export interface BackchannelCall {
  readonly contentType: string | undefined;
  readonly logoutToken: string | null;
}

/** A running OIDC test setup. */
export interface OidcSetup {
  readonly t: TestServer;
  readonly browser: Browser;
  /** Base URL of the RP server, e.g. `http://127.0.0.1:41234`. */
  readonly rp: string;
  readonly redirectUri: string;
  readonly postLogoutUri: string;
  readonly backchannelUri: string;
  readonly backchannel: BackchannelCall[];
  close(): Promise<void>;
}

/**
 * Starts the auth server (with `options`), the RP server and Chromium; registers `demo-spa` with the RP's
 * redirect and post-logout URIs, and a user `olivia` (password `olivia-password-1`) with a profile and roles.
 */
export async function startOidcSetup(
  options: Parameters<typeof startTestServer>[0] = {},
): Promise<OidcSetup> {
  const t = await startTestServer(options);
  const backchannel: BackchannelCall[] = [];
  const rpServer: Server = createServer((req, res) => {
    if (req.method === 'POST' && req.url === '/backchannel') {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        backchannel.push({
          contentType: req.headers['content-type'],
          logoutToken: new URLSearchParams(body).get('logout_token'),
        });
        res.writeHead(200, { 'cache-control': 'no-store' }).end();
      });
      return;
    }
    res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>rp ${req.url}</title>`);
  });
  await new Promise<void>((resolve) => rpServer.listen(0, '127.0.0.1', resolve));
  const rp = `http://127.0.0.1:${(rpServer.address() as AddressInfo).port}`;
  const redirectUri = `${rp}/callback`;
  const postLogoutUri = `${rp}/logged-out`;
  const backchannelUri = `${rp}/backchannel`;
  await t.server.store.updateClient('demo-spa', {
    redirectUris: [redirectUri],
    postLogoutRedirectUris: [postLogoutUri],
    backchannelLogoutUri: backchannelUri,
  });
  await t.server.store.createRole({ name: 'reader', permissions: ['shop.orders.read'] });
  await t.server.store.createRole({
    name: 'clerk',
    parentRoles: ['reader'],
    permissions: ['shop.orders.write'],
    deniedPermissions: ['shop.orders.delete'],
  });
  const olivia = await t.createUser('olivia', 'olivia-password-1', { roles: ['clerk'] });
  await t.server.store.updateUser(olivia.id, {
    displayName: 'Olivia Doe',
    givenName: 'Olivia',
    familyName: 'Doe',
    email: 'olivia@example.org',
    emailVerified: true,
  });
  const browser = await launchChromium();
  return {
    t,
    browser,
    rp,
    redirectUri,
    postLogoutUri,
    backchannelUri,
    backchannel,
    async close() {
      await browser.close();
      await t.close();
      rpServer.close();
    },
  };
}

/** What {@link drive} saw. */
export interface DriveResult {
  /** The URL the browser ended on (on the RP server). */
  readonly final: URL;
  /** Paths of the auth server's pages shown on the way (`/login`, `/consent`). */
  readonly pages: string[];
  /** The user name pre-filled on the login page, when it was shown. */
  readonly prefilled: string | undefined;
  /** The scopes listed on the consent page, when it was shown. */
  readonly consentScopes: string[];
}

/**
 * Opens `url` in `context` and answers the auth server's pages until the browser reaches the RP server:
 * the login page with `credentials` (throws if it appears without them), the consent page with `consent`
 * (default `allow`).
 */
export async function drive(
  setup: OidcSetup,
  context: BrowserContext,
  url: URL | string,
  options: { credentials?: [string, string]; consent?: 'allow' | 'deny' } = {},
): Promise<DriveResult> {
  const page = await context.newPage();
  const pages: string[] = [];
  let prefilled: string | undefined;
  let consentScopes: string[] = [];
  try {
    await page.goto(String(url));
    for (let step = 0; step < 6; step++) {
      const current = new URL(page.url());
      if (current.origin === setup.rp) return { final: current, pages, prefilled, consentScopes };
      pages.push(current.pathname);
      const next = () =>
        page.waitForURL((u) => u.href !== current.href || u.origin === setup.rp, { waitUntil: 'load' });
      if (current.pathname === '/login') {
        if (!options.credentials) throw new Error(`login page shown at ${current.href}`);
        prefilled = await page.inputValue('input[name=username]');
        await page.fill('input[name=username]', options.credentials[0]);
        await page.fill('input[name=password]', options.credentials[1]);
        await Promise.all([next(), page.click('button[type=submit]')]);
      } else if (current.pathname === '/consent') {
        consentScopes = await page.locator('ul.scopes code').allTextContents();
        await Promise.all([next(), page.click(`button[value=${options.consent ?? 'allow'}]`)]);
      } else {
        throw new Error(`unexpected page ${current.href}: ${(await page.content()).slice(0, 300)}`);
      }
    }
    throw new Error('too many steps');
  } finally {
    await page.close();
  }
}
