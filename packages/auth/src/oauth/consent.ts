/**
 * Consent for third-party clients (OIDC Core §3.1.2.4): a client marked `requireConsent` gets a code only
 * for scopes the user has consented to; otherwise the authorization endpoint sends the user to the consent
 * page `GET /consent`, which lists the requested scopes. `POST /consent` records the decision (remembered per
 * user and client, {@link AuthStore.grantConsent}) and continues the authorization request, or answers the
 * client `access_denied` (RFC 6749 §4.1.2.1). `prompt=consent` asks again even when consent was given.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { AuditCategory, AuditOutcome, type ClientRecord, type UserRecord } from '../store/types.ts';
import { consentForm } from './consent-page.ts';
import type { OAuthContext } from './context.ts';
import { AUTHORIZE_PATH, LOGIN_PATH, withQuery } from './paths.ts';
import { scopeTokens } from './scope.ts';
import { readSession } from './session.ts';

/** Path of the consent page. */
export const CONSENT_PATH = '/consent';

/** What the user is told each scope means (unknown scopes are shown by name). */
export const SCOPE_DESCRIPTIONS: Readonly<Record<string, string>> = Object.freeze({
  openid: 'Sign you in (your user id)',
  profile: 'Your name and user name',
  email: 'Your e-mail address',
  phone: 'Your telephone number',
  address: 'Your postal address',
  roles: 'Your roles and permissions',
  offline_access: 'Stay signed in (refresh tokens)',
  api: 'Call the API on your behalf',
});

/**
 * Whether the request may go on: `granted` when the client needs no consent (and `prompt` does not ask for
 * it) or the user's remembered consent covers every requested scope; `required` otherwise.
 */
export async function consentStep(
  ctx: OAuthContext,
  client: ClientRecord,
  user: UserRecord,
  scope: string,
  prompt: readonly string[],
): Promise<'granted' | 'required'> {
  if (prompt.includes('consent')) return 'required';
  if (!client.requireConsent) return 'granted';
  const consent = await ctx.store.getConsent(user.id, client.clientId);
  const given = new Set(consent?.scopes ?? []);
  return scopeTokens(scope).every((s) => given.has(s)) ? 'granted' : 'required';
}

/** The authorization request URL with `consent` removed from `prompt` (what the consent page answers). */
export function withoutConsentPrompt(requestUrl: string): string {
  const q = requestUrl.indexOf('?');
  const params = new URLSearchParams(q === -1 ? '' : requestUrl.slice(q + 1));
  const prompt = (params.get('prompt') ?? '').split(' ').filter((p) => p !== '' && p !== 'consent');
  if (prompt.length > 0) params.set('prompt', prompt.join(' '));
  else params.delete('prompt');
  return `${AUTHORIZE_PATH}?${params}`;
}

/** The client, redirect URI, state and scopes of a pending authorization request, or undefined. */
async function pendingRequest(ctx: OAuthContext, returnTo: string) {
  const params = new URLSearchParams(returnTo.slice(returnTo.indexOf('?') + 1));
  const client = await ctx.store.getClient(params.get('client_id') ?? '');
  if (!client?.isEnabled) return undefined;
  const redirectUri =
    params.get('redirect_uri') ?? (client.redirectUris.length === 1 ? client.redirectUris[0] : undefined);
  if (redirectUri === undefined || !client.redirectUris.includes(redirectUri)) return undefined;
  const requested = params.get('scope');
  // Only scopes the client may request: the authorization endpoint refuses the others anyway.
  const scopes = (requested === null ? [...client.allowedScopes] : scopeTokens(requested)).filter((s) =>
    client.allowedScopes.includes(s),
  );
  return { client, redirectUri, state: params.get('state') ?? undefined, scopes };
}

/**
 * Registers `GET /consent` and `POST /consent` on the login page's encapsulated context (which provides the
 * form parser and CSRF protection).
 * @param safeReturnTo the login page's `return_to` check (only authorization requests of this server).
 * @param page sends an HTML page with the login page's security headers.
 */
export function registerConsentPage(
  scope: FastifyInstance,
  ctx: OAuthContext,
  safeReturnTo: (value: unknown) => string | undefined,
  formField: (body: unknown, name: string) => string | undefined,
  page: (reply: FastifyReply, html: string) => FastifyReply,
): void {
  const toLogin = (reply: FastifyReply, returnTo: string) =>
    reply
      .header('cache-control', 'no-store')
      .redirect(`${LOGIN_PATH}?${new URLSearchParams({ return_to: returnTo })}`, 302);
  const invalid = (reply: FastifyReply) =>
    reply
      .code(400)
      .header('cache-control', 'no-store')
      .type('text/plain; charset=utf-8')
      .send('invalid_request: no pending authorization request\n');

  scope.get(CONSENT_PATH, async (req, reply) => {
    const returnTo = safeReturnTo((req.query as Record<string, unknown>).return_to);
    const pending = returnTo === undefined ? undefined : await pendingRequest(ctx, returnTo);
    if (returnTo === undefined || !pending) return invalid(reply);
    const active = await readSession(req, ctx);
    if (!active) return toLogin(reply, returnTo);
    return page(
      reply,
      consentForm({
        csrfToken: reply.generateCsrf(),
        returnTo,
        clientName: pending.client.displayName || pending.client.clientId,
        userName: active.user.userName,
        scopes: pending.scopes.map((s) => ({ scope: s, description: SCOPE_DESCRIPTIONS[s] ?? s })),
      }),
    );
  });

  scope.post(CONSENT_PATH, { preHandler: scope.csrfProtection }, async (req, reply) => {
    const returnTo = safeReturnTo(formField(req.body, 'return_to'));
    const pending = returnTo === undefined ? undefined : await pendingRequest(ctx, returnTo);
    if (returnTo === undefined || !pending) return invalid(reply);
    const active = await readSession(req, ctx);
    if (!active) return toLogin(reply, returnTo);
    const decision = formField(req.body, 'decision');
    const audit = {
      category: AuditCategory.Authorization,
      subjectId: active.user.id,
      subjectName: active.user.userName,
      clientId: pending.client.clientId,
      remoteAddress: clientAddress(req),
    };
    if (decision !== 'allow') {
      await ctx.store.appendAudit({
        ...audit,
        outcome: AuditOutcome.Denied,
        failureCode: 'consent_denied',
        details: { action: 'consent.deny', scopes: pending.scopes },
      });
      return reply.header('cache-control', 'no-store').redirect(
        withQuery(pending.redirectUri, {
          error: 'access_denied',
          error_description: 'the user did not consent',
          state: pending.state,
          iss: ctx.config.issuer,
        }),
        302,
      );
    }
    await ctx.store.grantConsent(active.user.id, pending.client.clientId, pending.scopes, {
      audit: {
        ...audit,
        outcome: AuditOutcome.Success,
        details: { action: 'consent.grant', scopes: pending.scopes },
      },
    });
    return reply.header('cache-control', 'no-store').redirect(returnTo, 302);
  });
}
