/**
 * Identity brokering against a real second OpenID provider (node-oidc-provider, started here) through
 * headless Chromium: the login page's "Sign in with Corp" button, the upstream login and consent pages,
 * the callback, and the authorization request continuing to the client. A first sign-in provisions a
 * local user from the verified e-mail (profile, configured roles) or links the local user with the same
 * verified address; later sign-ins find the link; the admin API lists and removes links. An unverified
 * e-mail is linked only after the user signs in with a local password on the link form. Refusals — the
 * user cancelling at the provider, a wrong `iss`, a bad signature, a callback
 * without the pending request — start no session and show a page, never a 500, with the reason audited.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import type { Browser, Page } from 'playwright-core';
import { resolveUpstreamProviders } from '../src/broker/config.ts';
import { upstreamRedirectUri } from '../src/broker/routes.ts';
import { startHostileUpstream, startUpstream, type Upstream } from './broker-fixtures.ts';
import { launchChromium } from './browser.ts';
import {
  ADMIN_PASSWORD,
  CookieJar,
  pkcePair,
  postForm,
  serviceToken,
  startTestServer,
  type TestServer,
} from './oauth-fixtures.ts';

let t: TestServer;
let corp: Upstream;
let wrongIss: Upstream;
let badSig: Upstream;
let browser: Browser;
let admin: string;
/** The client's callback: a page served here (registered as a redirect URI of `demo-spa`). */
let clientCallback: string;
let clientSite: Server;

before(async () => {
  corp = await startUpstream({
    olga: {
      email: 'olga@corp.example',
      email_verified: true,
      name: 'Olga Berg',
      given_name: 'Olga',
      family_name: 'Berg',
      preferred_username: 'olga.berg',
    },
    lena: { email: 'Lena@Corp.example', email_verified: true, name: 'Lena Upstream' },
    uma: { email: 'uma@corp.example', email_verified: false, name: 'Uma Unverified' },
  });
  wrongIss = await startHostileUpstream('wrong-iss');
  badSig = await startHostileUpstream('bad-signature');
  const hostile = (id: string, upstream: Upstream) => ({
    id,
    name: id,
    issuer: upstream.issuer,
    clientId: 'seed',
    clientSecret: 'seed-secret',
  });
  t = await startTestServer({
    upstreamProviders: [
      {
        id: 'corp',
        name: 'Corp',
        issuer: corp.issuer,
        clientId: 'seed',
        clientSecret: 'seed-secret',
        roles: ['staff'],
      },
      hostile('wrong-iss', wrongIss),
      hostile('bad-sig', badSig),
    ],
  });
  corp.start(upstreamRedirectUri(t.base, 'corp'));
  wrongIss.start(upstreamRedirectUri(t.base, 'wrong-iss'));
  badSig.start(upstreamRedirectUri(t.base, 'bad-sig'));
  clientSite = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<title>client</title>'),
  );
  await new Promise<void>((resolve) => clientSite.listen(0, '127.0.0.1', resolve));
  clientCallback = `http://127.0.0.1:${(clientSite.address() as AddressInfo).port}/callback`;
  await t.server.store.updateClient('demo-spa', { redirectUris: [clientCallback] });
  await t.server.store.createRole({ name: 'staff', permissions: ['corp.read'] });
  const lena = await t.createUser('lena', 'lena-password-1');
  await t.server.store.updateUser(lena.id, { email: 'lena@corp.example', emailVerified: true });
  const token = await serviceToken(t.base, {
    grant_type: 'password',
    username: 'admin',
    password: ADMIN_PASSWORD,
  });
  admin = ((await token.json()) as { access_token: string }).access_token;
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await t?.close();
  await Promise.all([corp?.close(), wrongIss?.close(), badSig?.close()]);
  clientSite?.close();
});

function adminCall(method: string, path: string) {
  return fetch(`${t.base}/auth-admin/api${path}`, { method, headers: { authorization: `Bearer ${admin}` } });
}

/**
 * Runs an authorization request of `demo-spa` in a fresh browser context, signing in with Corp as
 * `account`; `consent` `cancel` aborts at the provider; each of `linkWith` (user name, password) is
 * submitted in turn on the account-link form. @returns the page the browser ended on (the client's
 * callback, answered here, or a page of the auth server), the code, if any, and the link form's texts.
 */
async function brokeredSignIn(
  account: string,
  consent: 'continue' | 'cancel' = 'continue',
  linkWith: [string, string][] = [],
): Promise<{
  url: URL;
  status: number | undefined;
  text: string;
  code: string | null;
  verifier: string;
  linkTexts: string[];
}> {
  const context = await browser.newContext();
  const page: Page = await context.newPage();
  try {
    const { verifier, challenge } = pkcePair();
    const authorize = `${t.base}/connect/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: 'demo-spa',
      redirect_uri: clientCallback,
      scope: 'openid profile email roles',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state: 'st',
    })}`;
    await page.goto(authorize);
    assert.equal(new URL(page.url()).pathname, '/login');
    await Promise.all([
      page.waitForURL((u) => u.origin === corp.issuer),
      page.click('a.button:has-text("Sign in with Corp")'),
    ]);
    await page.fill('input[name=login]', account);
    await page.fill('input[name=password]', 'anything');
    await Promise.all([
      page.waitForURL((u) => u.pathname.includes('/interaction/')),
      page.click('button[type=submit]'),
    ]);
    const done = page.waitForURL((u) => u.origin !== corp.issuer, { waitUntil: 'load' });
    if (consent === 'cancel') await page.click('a:has-text("Cancel")');
    else await page.click('button[type=submit]');
    await done;
    const linkTexts: string[] = [];
    for (const [userName, password] of linkWith) {
      linkTexts.push((await page.textContent('body')) ?? '');
      await page.fill('input[name=username]', userName);
      await page.fill('input[name=password]', password);
      await Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('#link')]);
    }
    const url = new URL(page.url());
    const text = (await page.textContent('body')) ?? '';
    const status = await page.evaluate(() => {
      const entry = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming | undefined;
      return entry?.responseStatus;
    });
    return { url, status, text, code: url.searchParams.get('code'), verifier, linkTexts };
  } finally {
    await context.close();
  }
}

async function exchange(code: string, verifier: string): Promise<Record<string, unknown>> {
  const res = await postForm(t.base, '/connect/token', {
    grant_type: 'authorization_code',
    client_id: 'demo-spa',
    code,
    code_verifier: verifier,
    redirect_uri: clientCallback,
  });
  assert.equal(res.status, 200);
  return decodeJwt(((await res.json()) as { id_token: string }).id_token);
}

describe('brokered sign-in with node-oidc-provider in Chromium', () => {
  test('the first sign-in provisions a local user from the verified e-mail with the configured roles', async () => {
    const result = await brokeredSignIn('olga');
    assert.equal(`${result.url.origin}${result.url.pathname}`, clientCallback, result.text);
    const id = await exchange(result.code!, result.verifier);
    const user = await t.server.store.findUserByName('olga.berg');
    assert.ok(user, 'a local user named after preferred_username');
    assert.equal(id.sub, user.id);
    assert.equal(id.name, 'Olga Berg');
    assert.equal(id.email, 'olga@corp.example');
    assert.deepEqual(id.roles, ['staff']);
    assert.equal(user.emailVerified, true);
    assert.equal(user.passwordHash, null);
    const links = await t.server.store.links.listLinks(user.id);
    assert.deepEqual(
      links.map((l) => [l.providerId, l.subject]),
      [['corp', 'olga']],
    );
  });

  test('a later sign-in finds the link (no second user); the admin API lists and removes it', async () => {
    const before = (await t.server.store.listUsers({ limit: 1000 })).total;
    const result = await brokeredSignIn('olga');
    const id = await exchange(result.code!, result.verifier);
    const user = await t.server.store.findUserByName('olga.berg');
    assert.equal(id.sub, user!.id);
    assert.equal((await t.server.store.listUsers({ limit: 1000 })).total, before);

    const listed = await adminCall('GET', `/users/${user!.id}/links`);
    assert.equal(listed.status, 200);
    const page = (await listed.json()) as { items: { providerId: string; subject: string; email: string }[] };
    assert.deepEqual(
      page.items.map((l) => [l.providerId, l.subject, l.email]),
      [['corp', 'olga', 'olga@corp.example']],
    );
    assert.equal((await adminCall('DELETE', `/users/${user!.id}/links/corp`)).status, 204);
    assert.equal((await adminCall('DELETE', `/users/${user!.id}/links/corp`)).status, 404);
    assert.deepEqual(
      ((await (await adminCall('GET', `/users/${user!.id}/links`)).json()) as { items: [] }).items,
      [],
    );
    const audit = await t.server.store.listAudit({ category: 'Admin', limit: 10 });
    assert.ok(audit.items.some((e) => (e.details as { action?: string }).action === 'link.remove'));
    // Without the link, the verified e-mail links the same user again.
    const again = await brokeredSignIn('olga');
    assert.equal((await exchange(again.code!, again.verifier)).sub, user!.id);
  });

  test('a local user with the same verified e-mail (any case) is linked, not duplicated', async () => {
    const result = await brokeredSignIn('lena');
    const id = await exchange(result.code!, result.verifier);
    const lena = await t.server.store.findUserByName('lena');
    assert.equal(id.sub, lena!.id);
    assert.equal((await t.server.store.links.findLink('corp', 'lena'))?.userId, lena!.id);
  });

  test('a linked user with a local second factor is sent to the second-factor step, not signed in', async () => {
    const user = await t.server.store.findUserByName('olga.berg');
    await t.server.store.factors.setTotp(user!.id, 'sealed-seed-of-the-test', 1, t.clock.now);
    try {
      const before = (await t.server.store.listAudit({ limit: 1 })).total;
      const result = await brokeredSignIn('olga');
      // The browser stays on this server (the callback answered with the second-factor step: here the
      // server has no MFA key, so the step says it is unavailable); the client got no code.
      assert.equal(`${result.url.origin}${result.url.pathname}`, `${t.base}/login/upstream/corp/callback`);
      assert.match(result.text, /second factor/i);
      const latest = await t.server.store.listAudit({ limit: 100 });
      const events = latest.items.slice(0, latest.total - before);
      const actions = events.map((e) => (e.details as { action?: string } | null)?.action ?? e.failureCode);
      assert.ok(actions.includes('second_factor_unavailable'), actions.join());
      assert.ok(!actions.includes('upstream.login'), 'no session started');
    } finally {
      await t.server.store.factors.removeTotp(user!.id);
    }
  });

  test('cancelling at the provider: a page, no session, no code, audited', async () => {
    const result = await brokeredSignIn('olga', 'cancel');
    assert.equal(result.url.pathname, '/login/upstream/corp/callback');
    assert.equal(result.status, 400);
    assert.match(result.text, /Signing in with Corp did not work: the provider refused the sign-in/);
    assert.equal(result.code, null);
    const audit = await t.server.store.listAudit({ category: 'Login', outcome: 'Denied', limit: 20 });
    assert.ok(audit.items.some((e) => e.failureCode === 'upstream_error'));
  });

  test('an unverified upstream e-mail is not linked on its own: the user is asked for a local password', async () => {
    const result = await brokeredSignIn('uma');
    assert.equal(result.status, 200);
    assert.match(result.text, /Corp did not confirm uma@corp\.example as a verified address/);
    assert.equal(result.url.pathname, '/login/upstream/corp/callback', 'the client got no code');
    assert.equal(await t.server.store.links.findLink('corp', 'uma'), undefined);
    assert.deepEqual(await t.server.store.links.findUsersByEmail('uma@corp.example'), []);
    const audit = await t.server.store.listAudit({ category: 'Login', outcome: 'Denied', limit: 20 });
    assert.ok(audit.items.some((e) => e.failureCode === 'upstream_email_unverified'));
  });

  test('the local password links it: a wrong one shows the form again, the right one links and the authorization continues; later sign-ins use the link', async () => {
    const umberto = await t.createUser('umberto', 'umberto-password-1');
    const result = await brokeredSignIn('uma', 'continue', [
      ['umberto', 'wrong-password'],
      ['umberto', 'umberto-password-1'],
    ]);
    assert.match(result.linkTexts[1]!, /The user name or password is not correct/);
    assert.equal(`${result.url.origin}${result.url.pathname}`, clientCallback, result.text);
    const id = await exchange(result.code!, result.verifier);
    assert.equal(id.sub, umberto.id);
    assert.deepEqual(id.amr, ['pwd'], 'the local password was used');
    assert.equal((await t.server.store.links.findLink('corp', 'uma'))?.userId, umberto.id);
    const audit = await t.server.store.listAudit({ category: 'Login', limit: 50 });
    const linked = audit.items.find((e) => (e.details as { action?: string }).action === 'upstream.link');
    assert.deepEqual(
      [linked?.subjectId, (linked?.details as { method?: string } | undefined)?.method],
      [umberto.id, 'password'],
    );
    assert.ok(
      audit.items.some((e) => e.subjectName === 'umberto' && e.failureCode === 'invalid_credentials'),
    );
    // The next brokered sign-in finds the link: no form.
    const again = await brokeredSignIn('uma');
    assert.equal(`${again.url.origin}${again.url.pathname}`, clientCallback, again.text);
    assert.equal((await exchange(again.code!, again.verifier)).sub, umberto.id);
  });

  test('the link form without a pending link signed by this server: 400 page, nothing linked', async () => {
    const page = await fetch(`${t.base}/login/upstream/link`);
    assert.equal(page.status, 400);
    assert.match(await page.text(), /expired or was started elsewhere/);
    const forged = await fetch(`${t.base}/login/upstream/link`, {
      headers: { cookie: 'seed_auth_upstream_link=eyJhbGciOiJub25lIn0.eyJwIjoiY29ycCIsInN1YiI6InUifQ.' },
    });
    assert.equal(forged.status, 400);
  });
});

describe('hostile upstream answers over HTTP', () => {
  /** Follows the brokered flow with plain HTTP: start, the provider's authorize, our callback. */
  async function run(providerId: string, tamper?: (callback: URL) => void) {
    const jar = new CookieJar();
    const start = await fetch(`${t.base}/login/upstream/${providerId}`, { redirect: 'manual' });
    jar.take(start);
    assert.equal(start.status, 302);
    const upstream = await fetch(start.headers.get('location')!, { redirect: 'manual' });
    const callback = new URL(upstream.headers.get('location')!);
    tamper?.(callback);
    const res = await fetch(callback, { headers: { cookie: jar.header() }, redirect: 'manual' });
    return { res, text: await res.text(), cookies: res.headers.getSetCookie() };
  }

  for (const [providerId, reason] of [
    ['wrong-iss', /iss/i],
    ['bad-sig', /signature/i],
  ] as const) {
    test(`${providerId}: 502 page, no session, the reason audited`, async () => {
      const { res, text, cookies } = await run(providerId);
      assert.equal(res.status, 502);
      assert.match(text, /its answer could not be verified/);
      assert.ok(
        !cookies.some((c) => c.startsWith('seed_auth_session=') && !c.startsWith('seed_auth_session=;')),
      );
      assert.equal(await t.server.store.links.findLink(providerId, 'mallory'), undefined);
      const audit = await t.server.store.listAudit({ category: 'Login', outcome: 'Denied', limit: 50 });
      const event = audit.items.find(
        (e) =>
          e.failureCode === 'upstream_invalid' &&
          (e.details as { provider?: string }).provider === providerId,
      );
      assert.ok(event, 'audited');
      assert.match(String((event.details as { reason?: string }).reason), reason);
    });
  }

  test('a callback whose state does not match the pending request, or without it: 400 page', async () => {
    const { res, text } = await run('bad-sig', (callback) => callback.searchParams.set('state', 'forged'));
    assert.equal(res.status, 400);
    assert.match(text, /expired or was started elsewhere/);
    const bare = await fetch(`${t.base}/login/upstream/corp/callback?code=x&state=y`);
    assert.equal(bare.status, 400);
    const unknown = await fetch(`${t.base}/login/upstream/nope/callback?code=x&state=y`);
    assert.equal(unknown.status, 404);
  });

  test('the login page shows one button per provider, carrying return_to', async () => {
    const returnTo = '/connect/authorize?client_id=demo-spa';
    const html = await (
      await fetch(`${t.base}/login?${new URLSearchParams({ return_to: returnTo })}`)
    ).text();
    for (const id of ['corp', 'wrong-iss', 'bad-sig'])
      assert.ok(
        html.includes(`href="/login/upstream/${id}?return_to=%2Fconnect%2Fauthorize%3Fclient_id%3Ddemo-spa"`),
        id,
      );
    assert.match(html, /Sign in with Corp/);
  });
});

describe('provider settings', () => {
  test("the id 'link' is reserved for the account-link page", () => {
    const provider = { name: 'L', issuer: 'https://l.example', clientId: 'c', clientSecret: 's' };
    assert.throws(
      () => resolveUpstreamProviders([{ id: 'link', ...provider }]),
      /upstreamProviders\[0\]\.id: 'link' is reserved/,
    );
    assert.equal(resolveUpstreamProviders([{ id: 'links', ...provider }])[0]!.id, 'links');
  });
});
