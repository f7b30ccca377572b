/**
 * Passkeys on the login pages (WebAuthn Level 3 with `@simplewebauthn/server` and the bundled
 * `@simplewebauthn/browser`, served from this server so the pages work offline):
 *
 * - `POST /login/passkey/options` (`ceremony` `authenticate` — a passkey alone, discoverable credentials and
 *   conditional UI; `second-factor` — after a password or for step-up, the user's passkeys; `register` — a
 *   signed-in user adds one): the options JSON; the challenge goes into the ceremony cookie.
 * - `POST /login/passkey/verify` (`ceremony`, `response` JSON, `return_to`, `name`): verifies and answers
 *   `{ redirect }`; sign-in starts the session with `amr` `hwk` (a device-bound key) or `swk` (a synced,
 *   backed-up passkey) plus `mfa` (user verification is required for a passkey alone; after a password the
 *   passkey is the second factor: `pwd`, `hwk`/`swk`, `mfa`).
 * - `GET /login/passkeys`: the signed-in user's passkeys (list, rename, remove; add with the button).
 *
 * Every failure answers 400 `{ "error": "passkey_failed" }`; the audit log has the reason (Category `Login`,
 * Outcome `Denied`, failure codes `passkey_challenge_missing`, `passkey_challenge_replayed`,
 * `passkey_unknown_credential`, `passkey_wrong_user`, `passkey_counter_regression`,
 * `passkey_verification_failed` with `details.reason`, …). Requests are CSRF-protected form posts; the
 * ceremony cookie is `SameSite=Strict` and single use.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { AuthenticationResponseJSON, RegistrationResponseJSON } from '@simplewebauthn/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { amrWithSecondFactor } from '../mfa/assurance.ts';
import { clearPending } from '../mfa/pending.ts';
import { type OAuthContext, userActive } from '../oauth/context.ts';
import { NOT_FORM } from '../oauth/form.ts';
import { LOGIN_PATH } from '../oauth/paths.ts';
import { readSession, secureCookies, startSession } from '../oauth/session.ts';
import { MAX_PASSKEY_NAME, MAX_PASSKEYS_PER_USER, type PasskeyRecord } from '../store/passkeys.ts';
import { AuditCategory, AuditOutcome, type UserRecord } from '../store/types.ts';
import {
  authenticationOptions,
  registrationOptions,
  verifyAssertion,
  verifyRegistration,
} from '../webauthn/ceremony.ts';
import { clearCeremony, setCeremony, takeCeremony } from '../webauthn/challenge.ts';
import { relyingParty } from '../webauthn/relying-party.ts';
import { passkeysPage } from './page-passkeys.ts';
import { type LoginPageKit, returnToParam, subjectOf } from './second-factor.ts';

/** Path of the passkey management page. */
export const PASSKEYS_PATH = '/login/passkeys';
/** Longest `response` field accepted, characters (a passkey response is a few KiB). */
const MAX_RESPONSE = 12 * 1024;

const CEREMONIES = new Set(['authenticate', 'second-factor', 'register']);

let assets: { library: string; ours: string } | undefined;
/** The two scripts, read once: `@simplewebauthn/browser`'s UMD bundle and `./web/passkey.js`. */
function scripts(): { library: string; ours: string } {
  if (!assets) {
    const entry = createRequire(import.meta.url).resolve('@simplewebauthn/browser');
    const bundle = join(dirname(entry), '..', 'dist', 'bundle', 'index.umd.min.js');
    assets = {
      library: readFileSync(bundle, 'utf8'),
      ours: readFileSync(new URL('./web/passkey.js', import.meta.url), 'utf8'),
    };
  }
  return assets;
}

function parseJson<T>(raw: string | undefined): T | undefined {
  if (raw === undefined || raw.length > MAX_RESPONSE) return undefined;
  try {
    const value = JSON.parse(raw) as unknown;
    return value !== null && typeof value === 'object' && typeof (value as { id?: unknown }).id === 'string'
      ? (value as T)
      : undefined;
  } catch {
    return undefined;
  }
}

/** Registers the passkey routes on the login page's scope (form parser and CSRF set up). */
export function registerPasskeyPages(scope: FastifyInstance, ctx: OAuthContext, kit: LoginPageKit): void {
  const { safeReturnTo, formField, page } = kit;
  const secure = () => secureCookies(ctx);
  const json = (reply: FastifyReply, status: number, body: unknown) =>
    reply.code(status).header('cache-control', 'no-store').send(body);

  const audit = (
    req: FastifyRequest,
    user: Pick<UserRecord, 'id' | 'userName'> | undefined,
    event: 'factor_enrolled' | 'factor_used' | 'factor_failed' | 'factor_removed' | 'factor_renamed',
    failureCode: string | null,
    details: Record<string, unknown> = {},
  ) =>
    ctx.store.appendAudit({
      category: AuditCategory.Login,
      outcome: failureCode === null ? AuditOutcome.Success : AuditOutcome.Denied,
      subjectId: user?.id ?? null,
      subjectName: user?.userName ?? null,
      failureCode,
      remoteAddress: clientAddress(req),
      details: { event, factor: 'passkey', ...details },
    });

  const failed = async (
    req: FastifyRequest,
    reply: FastifyReply,
    user: Pick<UserRecord, 'id' | 'userName'> | undefined,
    code: string,
    details: Record<string, unknown> = {},
  ) => {
    await audit(req, user, 'factor_failed', code, details);
    return json(reply, 400, { error: 'passkey_failed' });
  };

  for (const [name, script] of [
    ['webauthn.js', () => scripts().library],
    ['passkey.js', () => scripts().ours],
  ] as const) {
    scope.get(`/login/assets/${name}`, async (_req, reply) =>
      reply
        .type('text/javascript; charset=utf-8')
        .header('cache-control', 'public, max-age=3600')
        .header('x-content-type-options', 'nosniff')
        .send(script()),
    );
  }

  scope.post('/login/passkey/options', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const mfa = ctx.config.mfa;
    const ceremony = formField(req.body, 'ceremony') ?? '';
    if (!mfa || req.body === NOT_FORM || !CEREMONIES.has(ceremony))
      return json(reply, 400, { error: 'passkey_failed' });
    const rp = relyingParty(ctx);
    /** Keeps the ceremony's challenge in its cookie and answers the options the browser's API takes. */
    const begin = async (
      kind: 'authenticate' | 'register',
      options: { challenge: string },
      userId: string | undefined,
    ) => {
      await setCeremony(
        reply,
        mfa,
        { ceremony: kind, challenge: options.challenge, userId },
        ctx.now(),
        secure(),
      );
      return json(reply, 200, options);
    };
    if (ceremony === 'authenticate') {
      const options = await authenticationOptions(rp, undefined);
      return begin('authenticate', options, undefined);
    }
    if (ceremony === 'second-factor') {
      const subject = await subjectOf(req, ctx, mfa);
      const passkeys = subject ? await ctx.store.factors.passkeys.list(subject.user.id) : [];
      if (!subject || passkeys.length === 0) return json(reply, 400, { error: 'passkey_failed' });
      const options = await authenticationOptions(rp, passkeys);
      return begin('authenticate', options, subject.user.id);
    }
    const active = await readSession(req, ctx);
    if (!active) return json(reply, 400, { error: 'passkey_failed' });
    const existing = await ctx.store.factors.passkeys.list(active.user.id);
    if (existing.length >= MAX_PASSKEYS_PER_USER) return json(reply, 400, { error: 'passkey_failed' });
    const options = await registrationOptions(rp, active.user, existing);
    return begin('register', options, active.user.id);
  });

  scope.post('/login/passkey/verify', { preHandler: scope.csrfProtection }, async (req, reply) => {
    const mfa = ctx.config.mfa;
    const ceremony = formField(req.body, 'ceremony') ?? '';
    if (!mfa || req.body === NOT_FORM || !CEREMONIES.has(ceremony))
      return json(reply, 400, { error: 'passkey_failed' });
    const rp = relyingParty(ctx);
    const returnTo = safeReturnTo(formField(req.body, 'return_to'));
    const now = ctx.now();
    const pending = await takeCeremony(req, ctx, mfa, ceremony === 'register' ? 'register' : 'authenticate');
    clearCeremony(reply, secure());
    if (typeof pending === 'string') return failed(req, reply, undefined, pending);

    if (ceremony === 'register') {
      const active = await readSession(req, ctx);
      if (!active || active.user.id !== pending.userId)
        return failed(req, reply, active?.user, 'passkey_wrong_user');
      const response = parseJson<RegistrationResponseJSON>(formField(req.body, 'response'));
      if (!response) return failed(req, reply, active.user, 'passkey_malformed');
      let verified: Awaited<ReturnType<typeof verifyRegistration>>;
      try {
        verified = await verifyRegistration(rp, response, pending.challenge);
      } catch (error) {
        return failed(req, reply, active.user, 'passkey_verification_failed', {
          reason: String((error as Error).message).slice(0, 200),
        });
      }
      if (await ctx.store.factors.passkeys.get(verified.id))
        return failed(req, reply, active.user, 'passkey_already_registered');
      const name = (formField(req.body, 'name') ?? '').trim().slice(0, MAX_PASSKEY_NAME) || 'Passkey';
      await ctx.store.factors.passkeys.add({ ...verified, userId: active.user.id, name, createdAt: now });
      await audit(req, active.user, 'factor_enrolled', null, { credentialId: verified.id.slice(0, 64) });
      return json(reply, 200, { redirect: PASSKEYS_PATH });
    }

    const response = parseJson<AuthenticationResponseJSON>(formField(req.body, 'response'));
    if (!response) return failed(req, reply, undefined, 'passkey_malformed');
    const passkey = await ctx.store.factors.passkeys.get(response.id);
    if (!passkey) return failed(req, reply, undefined, 'passkey_unknown_credential');
    const user = await ctx.store.getUser(passkey.userId);
    if (!user || !userActive(user, now)) return failed(req, reply, user, 'account_disabled');
    const secondFactor = pending.userId !== undefined;
    if (secondFactor && pending.userId !== passkey.userId)
      return failed(req, reply, user, 'passkey_wrong_user');
    let verified: Awaited<ReturnType<typeof verifyAssertion>>;
    try {
      verified = await verifyAssertion(rp, response, pending.challenge, passkey, !secondFactor);
    } catch (error) {
      const reason = String((error as Error).message).slice(0, 200);
      return failed(
        req,
        reply,
        user,
        /counter/i.test(reason) ? 'passkey_counter_regression' : 'passkey_verification_failed',
        { reason },
      );
    }
    if (!(await ctx.store.factors.passkeys.recordUse(passkey.id, passkey.counter, verified.newCounter, now)))
      return failed(req, reply, user, 'passkey_counter_regression', { reason: 'concurrent use' });
    const method = verified.backedUp ? 'swk' : 'hwk';
    let amr: string[];
    if (secondFactor) {
      const subject = await subjectOf(req, ctx, mfa);
      if (!subject || subject.user.id !== user.id) return failed(req, reply, user, 'passkey_wrong_user');
      amr = amrWithSecondFactor(subject.amr, method);
    } else {
      amr = [method, 'mfa'];
    }
    await audit(req, user, 'factor_used', null, {
      passwordless: !secondFactor,
      clientId: returnToParam(returnTo, 'client_id') ?? null,
    });
    clearPending(reply, secure());
    await startSession(req, reply, ctx, user.id, amr);
    return json(reply, 200, { redirect: returnTo ?? LOGIN_PATH });
  });

  const ownPasskey = async (req: FastifyRequest) => {
    const active = await readSession(req, ctx);
    const id = formField(req.body, 'id');
    if (!active || id === undefined) return undefined;
    const passkeys = await ctx.store.factors.passkeys.list(active.user.id);
    const passkey = passkeys.find((p: PasskeyRecord) => p.id === id);
    return passkey ? { user: active.user, passkey } : undefined;
  };
  const back = (reply: FastifyReply, err = false) =>
    reply.header('cache-control', 'no-store').redirect(err ? `${PASSKEYS_PATH}?err=1` : PASSKEYS_PATH, 302);

  scope.get(PASSKEYS_PATH, async (req, reply) => {
    const active = await readSession(req, ctx);
    if (!active) return reply.header('cache-control', 'no-store').redirect(`${LOGIN_PATH}`, 302);
    const passkeys = await ctx.store.factors.passkeys.list(active.user.id);
    return page(
      reply,
      passkeysPage({
        csrfToken: reply.generateCsrf(),
        userName: active.user.userName,
        passkeys,
        enabled: ctx.config.mfa !== null,
        failed: (req.query as Record<string, unknown>).err === '1',
      }),
    );
  });

  scope.post(`${PASSKEYS_PATH}/rename`, { preHandler: scope.csrfProtection }, async (req, reply) => {
    const found = await ownPasskey(req);
    const name = (formField(req.body, 'name') ?? '').trim();
    if (!found || name.length < 1 || name.length > MAX_PASSKEY_NAME) return back(reply, true);
    await ctx.store.factors.passkeys.rename(found.user.id, found.passkey.id, name);
    await audit(req, found.user, 'factor_renamed', null, { credentialId: found.passkey.id.slice(0, 64) });
    return back(reply);
  });

  scope.post(`${PASSKEYS_PATH}/remove`, { preHandler: scope.csrfProtection }, async (req, reply) => {
    const found = await ownPasskey(req);
    if (!found) return back(reply, true);
    await ctx.store.factors.passkeys.remove(found.user.id, found.passkey.id);
    await audit(req, found.user, 'factor_removed', null, { credentialId: found.passkey.id.slice(0, 64) });
    return back(reply);
  });
}
