/**
 * Sign-in with an upstream OpenID provider (identity brokering), as an OpenID Connect relying party with
 * `openid-client` (authorization code flow with PKCE S256, `state` and `nonce`, OIDC Core §3.1):
 *
 * - `GET /login/upstream/{id}?return_to=…` stores `state`, `nonce`, the PKCE verifier and where to return
 *   in a short-lived `HttpOnly` cookie (10 minutes, path `/login/upstream`) and redirects to the provider;
 * - `GET /login/upstream/{id}/callback` (the redirect URI to register at the provider) checks the answer:
 *   `state`, then the code grant and the ID token — issuer (RFC 9207 `iss` too), audience, `nonce`, expiry
 *   and its signature against the provider's JWKS (`enableNonRepudiationChecks`), then UserInfo's claims
 *   about the same subject (OIDC Core §5.3.2) for providers that release them there. The upstream `sub` then
 *   finds its linked local user; on a first sign-in the verified e-mail address links the local user that
 *   has the same verified address, or a new local user is provisioned (profile from the claim mapping,
 *   the provider's roles, no password). When the e-mail is not verified (upstream, or on the local account
 *   with that address) nothing is linked on its own: the user is asked to sign in with a local account's
 *   password, which links it (`link-account.ts`). A user with a local second factor (or required to use one) goes
 *   on to the login page's second-factor step; otherwise a login session starts (no `amr`: RFC 8176 has
 *   no value for a federated sign-in) and the user continues `return_to`.
 *
 * Every failure — an error from the provider, a wrong `iss`, a bad signature, an ambiguous e-mail, a
 * disabled account, an unreachable provider — starts no session and shows a page saying what
 * happened in general terms (400, 403 or 502; never a 500), with the precise reason in the audit log
 * (Category `Login`, Outcome `Denied`, failure code `upstream_*`, `details.provider`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import * as client from 'openid-client';
import { clientAddress } from '../client-address.ts';
import type { OAuthContext } from '../oauth/context.ts';
import { userActive } from '../oauth/context.ts';
import { escapeHtml, layout } from '../oauth/page.ts';
import { startSession } from '../oauth/session.ts';
import { AuditCategory, AuditOutcome, type UserRecord } from '../store/types.ts';
import type { UpstreamProvider } from './config.ts';
import { askToLink, type BrokerPageKit, registerLinkAccount } from './link-account.ts';
import { auditUpstreamSuccess, LinkNeeded, localUser, UpstreamFailure } from './local-user.ts';

/** Path prefix of the brokering routes. */
export const UPSTREAM_PATH = '/login/upstream';
/** Cookie holding the pending upstream request. */
export const UPSTREAM_COOKIE = 'seed_auth_upstream';
/** Lifetime of a pending upstream request, seconds. */
const PENDING_TTL_SECONDS = 600;
/** Timeout of each request to an upstream provider, seconds. */
const UPSTREAM_TIMEOUT_SECONDS = 10;

/** The callback URL to register at a provider. */
export function upstreamRedirectUri(issuer: string, providerId: string): string {
  return `${issuer}${UPSTREAM_PATH}/${providerId}/callback`;
}

/** What the pending-request cookie holds. */
interface Pending {
  readonly p: string;
  readonly s: string;
  readonly n: string;
  readonly v: string;
  readonly r: string | null;
}

/** Options of {@link registerUpstreamLogin}: the login page's kit and the configured providers. */
export interface UpstreamLoginOptions extends BrokerPageKit {
  readonly providers: readonly UpstreamProvider[];
}

/** Discovery results per provider (a failed discovery is retried on the next sign-in). */
class Configurations {
  readonly #cache = new Map<string, Promise<client.Configuration>>();

  get(provider: UpstreamProvider): Promise<client.Configuration> {
    let found = this.#cache.get(provider.id);
    if (!found) {
      found = client
        .discovery(
          new URL(provider.issuer),
          provider.clientId,
          undefined,
          provider.clientSecret === undefined
            ? client.None()
            : client.ClientSecretBasic(provider.clientSecret),
          {
            timeout: UPSTREAM_TIMEOUT_SECONDS,
            execute: [
              ...(provider.loopbackHttp ? [client.allowInsecureRequests] : []),
              client.enableNonRepudiationChecks,
            ],
          },
        )
        .catch((error: unknown) => {
          this.#cache.delete(provider.id);
          throw error;
        });
      this.#cache.set(provider.id, found);
    }
    return found;
  }
}

function failurePage(reply: FastifyReply, provider: UpstreamProvider | undefined, failure: UpstreamFailure) {
  const name = provider ? escapeHtml(provider.name) : 'the other provider';
  return reply
    .code(failure.status)
    .header('cache-control', 'no-store')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    )
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .type('text/html; charset=utf-8')
    .send(
      layout(
        'Sign-in failed',
        `<h1>Sign-in failed</h1>
<p class="error" role="alert">Signing in with ${name} did not work: ${escapeHtml(failure.message)}</p>
<p>You are not signed in. <a href="/login">Back to sign-in</a></p>`,
      ),
    );
}

/** The error and its causes (library errors name the failed check in a cause), for the audit log. */
function describeError(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    if (!(e instanceof Error)) {
      parts.push(String(e));
      break;
    }
    const claim = (e as { cause?: unknown }).cause;
    const detail =
      claim && typeof claim === 'object' && !(claim instanceof Error)
        ? ` ${JSON.stringify(claim).slice(0, 200)}`
        : '';
    parts.push(`${e.name}: ${e.message}${detail}`);
    e = claim instanceof Error ? claim : undefined;
  }
  return parts.join(' <- ');
}

function readPending(req: FastifyRequest): Pending | undefined {
  const raw = req.cookies[UPSTREAM_COOKIE];
  if (!raw || raw.length > 2048) return undefined;
  try {
    const value = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Pending;
    return typeof value.p === 'string' &&
      typeof value.s === 'string' &&
      typeof value.n === 'string' &&
      typeof value.v === 'string'
      ? value
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Registers the brokering routes on the login page's encapsulated context (cookies parsed there). Does
 * nothing without providers.
 */
export function registerUpstreamLogin(
  app: FastifyInstance,
  ctx: OAuthContext,
  options: UpstreamLoginOptions,
): void {
  const providers = new Map(options.providers.map((p) => [p.id, p]));
  if (providers.size === 0) return;
  const configurations = new Configurations();
  const secure = () => ctx.config.issuer.startsWith('https:');

  const audit = (req: FastifyRequest, provider: string | undefined, failure: UpstreamFailure) =>
    ctx.store.appendAudit({
      category: AuditCategory.Login,
      outcome: AuditOutcome.Denied,
      failureCode: failure.code,
      remoteAddress: clientAddress(req),
      details: {
        provider: provider ?? null,
        ...(failure.detail ? { reason: failure.detail.slice(0, 512) } : {}),
      },
    });

  registerLinkAccount(
    app,
    ctx,
    { ...options, providers },
    async (req, reply, provider, status, code, message) => {
      const failure = new UpstreamFailure(status, code, message);
      await audit(req, provider?.id, failure);
      return failurePage(reply, provider, failure);
    },
  );

  app.get<{ Params: { id: string }; Querystring: Record<string, unknown> }>(
    `${UPSTREAM_PATH}/:id`,
    async (req, reply) => {
      const provider = providers.get(req.params.id);
      if (!provider) {
        const failure = new UpstreamFailure(
          404,
          'upstream_unknown_provider',
          'this provider is not configured.',
        );
        return failurePage(reply, undefined, failure);
      }
      let configuration: client.Configuration;
      try {
        configuration = await configurations.get(provider);
      } catch (error) {
        const failure = new UpstreamFailure(
          502,
          'upstream_unavailable',
          'the provider could not be reached or described itself wrongly. Try again later.',
          (error as Error).message,
        );
        await audit(req, provider.id, failure);
        return failurePage(reply, provider, failure);
      }
      const pending: Pending = {
        p: provider.id,
        s: client.randomState(),
        n: client.randomNonce(),
        v: client.randomPKCECodeVerifier(),
        r: options.safeReturnTo(req.query.return_to) ?? null,
      };
      const url = client.buildAuthorizationUrl(configuration, {
        redirect_uri: upstreamRedirectUri(ctx.config.issuer, provider.id),
        scope: provider.scopes.join(' '),
        code_challenge: await client.calculatePKCECodeChallenge(pending.v),
        code_challenge_method: 'S256',
        state: pending.s,
        nonce: pending.n,
      });
      reply.setCookie(UPSTREAM_COOKIE, Buffer.from(JSON.stringify(pending)).toString('base64url'), {
        httpOnly: true,
        sameSite: 'lax',
        secure: secure(),
        path: UPSTREAM_PATH,
        maxAge: PENDING_TTL_SECONDS,
      });
      return reply.header('cache-control', 'no-store').redirect(url.href, 302);
    },
  );

  app.get<{ Params: { id: string } }>(`${UPSTREAM_PATH}/:id/callback`, async (req, reply) => {
    const provider = providers.get(req.params.id);
    reply.clearCookie(UPSTREAM_COOKIE, { path: UPSTREAM_PATH });
    try {
      if (!provider)
        throw new UpstreamFailure(404, 'upstream_unknown_provider', 'this provider is not configured.');
      const pending = readPending(req);
      const current = new URL(`${ctx.config.issuer}${req.url}`);
      const upstreamError = current.searchParams.get('error');
      if (upstreamError !== null)
        throw new UpstreamFailure(
          400,
          'upstream_error',
          'the provider refused the sign-in.',
          `${upstreamError.slice(0, 64)}: ${(current.searchParams.get('error_description') ?? '').slice(0, 256)}`,
        );
      if (!pending || pending.p !== provider.id || current.searchParams.get('state') !== pending.s)
        throw new UpstreamFailure(
          400,
          'upstream_state',
          'the sign-in expired or was started elsewhere. Start again.',
        );
      let claims: Record<string, unknown>;
      try {
        const configuration = await configurations.get(provider);
        const tokens = await client.authorizationCodeGrant(configuration, current, {
          pkceCodeVerifier: pending.v,
          expectedState: pending.s,
          expectedNonce: pending.n,
          idTokenExpected: true,
        });
        const idClaims = tokens.claims();
        if (!idClaims) throw new Error('no ID token');
        // Providers that release scope claims from UserInfo only (OIDC Core §5.4) are asked there; the
        // answer must be about the ID token's subject (§5.3.2), and the ID token's claims win.
        const userinfo = configuration.serverMetadata().userinfo_endpoint
          ? await client.fetchUserInfo(configuration, tokens.access_token, idClaims.sub)
          : {};
        claims = { ...userinfo, ...idClaims };
      } catch (error) {
        throw new UpstreamFailure(
          502,
          'upstream_invalid',
          'its answer could not be verified.',
          describeError(error),
        );
      }
      let user: UserRecord;
      try {
        user = await localUser(ctx, provider, claims, clientAddress(req));
      } catch (error) {
        if (!(error instanceof LinkNeeded)) throw error;
        await audit(
          req,
          provider.id,
          new UpstreamFailure(403, error.code, '', 'asked for the local password to link the account'),
        );
        return askToLink(reply, ctx, provider, {
          providerId: provider.id,
          subject: error.subject,
          email: error.email,
          returnTo: pending.r,
        });
      }
      if (!userActive(user, ctx.now()))
        throw new UpstreamFailure(
          403,
          'upstream_account_disabled',
          'the account here is disabled or locked.',
        );
      const returnTo = options.safeReturnTo(pending.r);
      // The step answers itself (a Fastify reply is thenable, so its return value is not relied on).
      await options.secondFactor?.(req, reply, user, returnTo);
      if (reply.sent) return reply;
      // No RFC 8176 `amr` value names a federated sign-in: the session records none (the ID token then
      // carries no `amr`).
      await startSession(req, reply, ctx, user.id, []);
      await auditUpstreamSuccess(ctx, user, clientAddress(req), {
        action: 'upstream.login',
        provider: provider.id,
      });
      return reply.header('cache-control', 'no-store').redirect(returnTo ?? '/login', 302);
    } catch (error) {
      if (!(error instanceof UpstreamFailure)) throw error;
      await audit(req, provider?.id, error);
      return failurePage(reply, provider, error);
    }
  });
}

/** The login page's buttons: one link per provider, carrying `return_to`. */
export function upstreamButtons(
  providers: readonly UpstreamProvider[],
  returnTo: string | undefined,
): string {
  if (providers.length === 0) return '';
  const query = returnTo ? `?${new URLSearchParams({ return_to: returnTo })}` : '';
  return `<div class="upstream">${providers
    .map(
      (p) =>
        `<a class="button secondary" href="${UPSTREAM_PATH}/${p.id}${escapeHtml(query)}">Sign in with ${escapeHtml(p.name)}</a>`,
    )
    .join('\n')}</div>`;
}
