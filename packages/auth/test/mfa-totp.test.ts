/**
 * Two-factor sign-in with TOTP (RFC 6238) through the real login pages in headless Chromium, with
 * `openid-client` as the relying party: enrolment required by an administrator (per role), QR code and key,
 * recovery codes shown once; sign-in with a code, a replayed code refused, a wrong code refused with the
 * same page, a recovery code used once; step-up with `acr_values`; `amr`/`acr` in the ID token and the
 * access token; the audit events of each factor event; seeds and recovery codes never stored in clear.
 * The authenticator app is played by `otpauth` over the key shown on the enrolment page.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import type { BrowserContext, Page } from 'playwright-core';
import { ACR } from '../src/mfa/assurance.ts';
import { totpCode } from '../src/mfa/totp.ts';
import type { AuditEvent } from '../src/store/types.ts';
import { type OidcSetup, startOidcSetup } from './oidc-rp-fixtures.ts';

const MFA_KEY = 'test-mfa-key-0123456789-abcdefghijklmnop';
const OLIVIA: [string, string] = ['olivia', 'olivia-password-1'];
const PAUL: [string, string] = ['paul', 'paul-password-1'];
const SCOPE = 'openid profile';

let s: OidcSetup;
let config: client.Configuration;
before(async () => {
  s = await startOidcSetup({ oauth: { mfa: { key: MFA_KEY } } });
  await s.t.createUser(...PAUL);
  config = await client.discovery(new URL(s.t.base), 'demo-spa', undefined, client.None(), {
    execute: [client.allowInsecureRequests],
  });
});
after(() => s?.close());

/** What the browser did on the auth server's pages. */
interface Walk {
  /** Auth-server page paths shown, in order (with `?err=1` when the page showed the failure). */
  readonly pages: string[];
  /** The final page, when the walk stopped on the auth server. */
  readonly page: Page;
  /** The RP callback URL, when reached. */
  readonly callback: URL | undefined;
}

/**
 * Answers the auth server's pages until the RP callback or a page without an answer: `/login` with
 * `password`, `/login/otp` with the next of `codes`, `/login/otp/enrol` by reading the key and answering
 * `enrolCode(secret)`, the recovery-code page by recording the codes and continuing, `/consent` with allow.
 */
async function walk(
  context: BrowserContext,
  url: URL | string,
  answers: {
    password?: [string, string];
    codes?: string[];
    enrol?: (secret: string, svg: string) => string;
    recovery?: (codes: string[]) => void;
  },
): Promise<Walk> {
  const page = await context.newPage();
  const pages: string[] = [];
  const codes = [...(answers.codes ?? [])];
  await page.goto(String(url));
  for (let step = 0; step < 10; step++) {
    const current = new URL(page.url());
    if (current.origin === s.rp) {
      await page.close();
      return { pages, page, callback: current };
    }
    pages.push(current.pathname + (current.searchParams.get('err') === '1' ? '?err=1' : ''));
    // A failed code answers with the same URL again: wait for the navigation, not for another URL.
    const submit = () =>
      Promise.all([page.waitForNavigation({ waitUntil: 'load' }), page.click('button[type=submit]')]);
    if (current.pathname === '/login' && answers.password) {
      await page.fill('input[name=username]', answers.password[0]);
      await page.fill('input[name=password]', answers.password[1]);
      await submit();
    } else if (current.pathname === '/login/otp' && codes.length > 0) {
      await page.fill('input[name=code]', codes.shift()!);
      await submit();
    } else if (current.pathname === '/login/otp/enrol' && answers.enrol) {
      const secret = (await page.textContent('#totp-secret'))!.replace(/\s+/g, '');
      const svg = await page.innerHTML('div.qr');
      await page.fill('input[name=code]', answers.enrol(secret, svg));
      await submit();
      if ((await page.locator('#recovery-codes').count()) > 0) {
        pages.push('recovery-codes');
        answers.recovery?.(await page.locator('#recovery-codes code').allTextContents());
        await Promise.all([
          page.waitForURL((u) => u.origin === s.rp || u.pathname !== '/login/otp/enrol', {
            waitUntil: 'load',
          }),
          page.click('#continue'),
        ]);
      }
    } else if (current.pathname === '/consent') {
      await Promise.all([
        page.waitForURL((u) => u.href !== current.href, { waitUntil: 'load' }),
        page.click('button[value=allow]'),
      ]);
    } else {
      return { pages, page, callback: undefined };
    }
  }
  throw new Error(`too many steps: ${pages.join(' → ')}`);
}

/** An authorization request of openid-client and the redemption of its callback. */
async function request(extra: Record<string, string> = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: s.redirectUri,
    scope: SCOPE,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
    ...extra,
  });
  return {
    url,
    redeem: (callback: URL) =>
      client.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: verifier,
        expectedState: state,
        expectedNonce: nonce,
      }),
  };
}

async function auditOf(userName: string, since: number): Promise<AuditEvent[]> {
  const page = await s.t.server.store.listAudit({ category: 'Login', from: since, limit: 100 });
  return page.items.filter((e) => e.subjectName === userName).reverse();
}

const events = (list: AuditEvent[]) =>
  list
    .filter((e) => e.details && 'event' in e.details)
    .map((e) => `${e.outcome}:${String(e.details!.event)}:${e.failureCode ?? ''}`);

describe('TOTP required for a role', () => {
  let context: BrowserContext;
  let secret = '';
  /** Server time (ms) of the enrolment: the time step of this instant is claimed by the enrolment's code. */
  let enrolledAt = 0;
  let recoveryCodes: string[] = [];
  let oliviaId = '';
  before(async () => {
    context = await s.browser.newContext();
    const clerk = await s.t.server.store.findRoleByName('clerk');
    await s.t.server.store.factors.requireMfa('role', clerk!.id, s.t.clock.now);
    oliviaId = (await s.t.server.store.findUserByName('olivia'))!.id;
  });
  after(() => context.close());

  test('the password leads to enrolment (QR code and key); the first code turns TOTP on and signs in with two factors', async () => {
    s.t.clock.now += 1;
    const since = s.t.clock.now;
    const { url, redeem } = await request();
    let qr = '';
    const result = await walk(context, url, {
      password: OLIVIA,
      enrol: (key, svg) => {
        secret = key;
        qr = svg;
        enrolledAt = s.t.clock.now;
        return totpCode(key, enrolledAt);
      },
      recovery: (codes) => {
        recoveryCodes = codes;
      },
    });
    assert.deepEqual(result.pages.slice(0, 3), ['/login', '/login/otp/enrol', 'recovery-codes']);
    assert.ok(result.callback, `ended on ${result.pages.join(' → ')}`);
    assert.match(secret, /^[A-Z2-7]{32}$/);
    assert.match(qr, /^<svg[^>]*>.*<path/s);
    assert.equal(recoveryCodes.length, 10);
    assert.equal(new Set(recoveryCodes).size, 10);

    const tokens = await redeem(result.callback);
    const id = tokens.claims()!;
    assert.deepEqual([...(id.amr as string[])].sort(), ['mfa', 'otp', 'pwd']);
    assert.equal(id.acr, ACR.mfa);
    const access = decodeJwt(tokens.access_token);
    assert.deepEqual([...(access.amr as string[])].sort(), ['mfa', 'otp', 'pwd']);
    assert.equal(access.acr, ACR.mfa);
    assert.deepEqual(events(await auditOf('olivia', since)), ['Success:factor_enrolled:']);

    // A refresh later describes the same sign-in (OIDC Core §12.2): auth_time, amr and acr are kept.
    s.t.clock.now += 5_000;
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    const refreshedId = refreshed.claims()!;
    assert.notEqual(refreshed.refresh_token, tokens.refresh_token);
    assert.ok(refreshedId.iat > id.iat, 'a new ID token');
    assert.equal(refreshedId.auth_time, id.auth_time);
    assert.deepEqual([...(refreshedId.amr as string[])].sort(), ['mfa', 'otp', 'pwd']);
    assert.equal(refreshedId.acr, ACR.mfa);
    const refreshedAccess = decodeJwt(refreshed.access_token);
    assert.equal(refreshedAccess.auth_time, id.auth_time);
    assert.deepEqual([...(refreshedAccess.amr as string[])].sort(), ['mfa', 'otp', 'pwd']);
    assert.equal(refreshedAccess.acr, ACR.mfa);
    // …and so does the refresh of the refreshed token.
    const again = await client.refreshTokenGrant(config, refreshed.refresh_token!);
    assert.deepEqual([...(again.claims()!.amr as string[])].sort(), ['mfa', 'otp', 'pwd']);
  });

  test('the seed is sealed at rest and the recovery codes are stored as hashes', async () => {
    const factor = await s.t.server.store.factors.getTotp(oliviaId);
    assert.ok(factor);
    assert.match(factor.sealedSecret, /^v1\./);
    assert.ok(!factor.sealedSecret.includes(secret));
    assert.equal(s.t.server.config.mfa!.sealer.open(factor.sealedSecret, oliviaId), secret);
    assert.throws(() => s.t.server.config.mfa!.sealer.open(factor.sealedSecret, 'another-user'), {
      code: 'sealed_value_invalid',
    });
    const summary = await s.t.server.store.factors.summary(oliviaId);
    assert.equal(summary.recoveryCodesLeft, 10);
    for (const code of recoveryCodes) {
      const plain = code.replace('-', '');
      assert.equal(await s.t.server.store.factors.useRecoveryCode(oliviaId, plain, s.t.clock.now), false);
    }
  });

  test('sign-in asks for the code: the code of the enrolment step is a replay, a wrong code fails alike, the next step passes', async () => {
    s.t.clock.now += 1;
    const since = s.t.clock.now;
    // The sign-in happens in the step right after the enrolment's, whatever the phase of the clock within
    // its 30 s step: the server still matches the enrolment's code (one step of drift) and refuses it as
    // claimed, and the code of the sign-in's own step is fresh.
    const replayed = totpCode(secret, enrolledAt);
    const wrong = replayed === '000000' ? '111111' : '000000';
    assert.ok(enrolledAt + 30_000 > s.t.clock.now, 'the earlier tests moved the clock by less than a step');
    s.t.clock.now = enrolledAt + 30_000;
    const fresh = totpCode(secret, s.t.clock.now);
    const { url, redeem } = await request();
    const c2 = await s.browser.newContext();
    try {
      const result = await walk(c2, url, { password: OLIVIA, codes: [replayed, wrong, fresh] });
      assert.deepEqual(result.pages, ['/login', '/login/otp', '/login/otp?err=1', '/login/otp?err=1']);
      assert.ok(result.callback);
      const id = (await redeem(result.callback)).claims()!;
      assert.equal(id.acr, ACR.mfa);
      assert.deepEqual(events(await auditOf('olivia', since)), [
        'Denied:factor_failed:totp_replayed',
        'Denied:factor_failed:totp_invalid',
        'Success:factor_used:',
      ]);
    } finally {
      await c2.close();
    }
  });

  test('the failure page does not say why; the password alone starts no session', async () => {
    const c3 = await s.browser.newContext();
    try {
      const sessionsBefore = (await s.t.server.store.factors.account.listSessions(oliviaId, s.t.clock.now))
        .length;
      const { url } = await request();
      const result = await walk(c3, url, { password: OLIVIA, codes: ['123456'] });
      assert.equal(result.callback, undefined);
      assert.equal(
        (await s.t.server.store.factors.account.listSessions(oliviaId, s.t.clock.now)).length,
        sessionsBefore,
        'no login session before the second factor',
      );
      const text = await result.page.textContent('main');
      assert.match(text!, /That code is not valid/);
      assert.doesNotMatch(text!, /replay|expired|invalid_|recovery_code/i);
    } finally {
      await c3.close();
    }
  });

  test('a recovery code signs in once; the same code again fails', async () => {
    s.t.clock.now += 1;
    const since = s.t.clock.now;
    const code = recoveryCodes[3]!;
    const c4 = await s.browser.newContext();
    try {
      const first = await request();
      const ok = await walk(c4, first.url, { password: OLIVIA, codes: [code.toUpperCase()] });
      assert.ok(ok.callback, ok.pages.join(' → '));
      const id = (await first.redeem(ok.callback)).claims()!;
      assert.equal(id.acr, ACR.mfa);
      const c5 = await s.browser.newContext();
      try {
        const again = await request();
        const refused = await walk(c5, again.url, { password: OLIVIA, codes: [code] });
        assert.equal(refused.callback, undefined);
        assert.deepEqual(refused.pages, ['/login', '/login/otp', '/login/otp?err=1']);
      } finally {
        await c5.close();
      }
      assert.deepEqual(events(await auditOf('olivia', since)), [
        'Success:recovery_code_used:',
        'Denied:factor_failed:recovery_code_invalid',
      ]);
      assert.equal((await s.t.server.store.factors.summary(oliviaId)).recoveryCodesLeft, 9);
    } finally {
      await c4.close();
    }
  });

  test('max_age=0 asks for the password and the code again', async () => {
    s.t.clock.now += 30_000;
    const code = totpCode(secret, s.t.clock.now);
    const { url, redeem } = await request({ max_age: '0' });
    const result = await walk(context, url, { password: OLIVIA, codes: [code] });
    assert.deepEqual(result.pages, ['/login', '/login/otp']);
    assert.ok(result.callback);
    const id = (await redeem(result.callback)).claims()!;
    assert.equal(id.acr, ACR.mfa);
    assert.equal(id.auth_time, Math.floor(s.t.clock.now / 1000));
  });
});

describe('step-up with acr_values', () => {
  test('a password session gets acr pwd; acr_values mfa sends the signed-in user to enrolment, then the token says mfa', async () => {
    const context = await s.browser.newContext();
    try {
      const plain = await request();
      const first = await walk(context, plain.url, { password: PAUL });
      assert.deepEqual(first.pages, ['/login']);
      const id1 = (await plain.redeem(first.callback!)).claims()!;
      assert.deepEqual(id1.amr, ['pwd']);
      assert.equal(id1.acr, ACR.password);

      const silent = await request({ acr_values: ACR.mfa, prompt: 'none' });
      const none = await walk(context, silent.url, {});
      assert.equal(none.callback?.searchParams.get('error'), 'interaction_required');

      const stepUp = await request({ acr_values: `${ACR.mfa} ${ACR.password}` });
      const result = await walk(context, stepUp.url, {
        enrol: (key) => totpCode(key, s.t.clock.now),
      });
      assert.deepEqual(result.pages, ['/login/otp/enrol', 'recovery-codes']);
      const id2 = (await stepUp.redeem(result.callback!)).claims()!;
      assert.deepEqual([...(id2.amr as string[])].sort(), ['mfa', 'otp', 'pwd']);
      assert.equal(id2.acr, ACR.mfa);

      // The upgraded session satisfies the same request without any page.
      const again = await request({ acr_values: ACR.mfa });
      const direct = await walk(context, again.url, {});
      assert.deepEqual(direct.pages, []);
      assert.equal((await again.redeem(direct.callback!)).claims()!.acr, ACR.mfa);
    } finally {
      await context.close();
    }
  });

  test('discovery advertises the acr values and the acr claim', () => {
    const metadata = config.serverMetadata();
    assert.deepEqual(metadata.acr_values_supported, [ACR.password, ACR.mfa]);
    assert.ok(metadata.claims_supported?.includes('acr'));
  });
});
