/**
 * The local user an upstream sign-in lands on (identity brokering, spec 001): the account already linked
 * to the upstream `sub`, else the local account with the same verified e-mail address (linked now), else a
 * new local user provisioned from the provider's claim mapping. Refusals are {@link UpstreamFailure}s (an
 * HTTP status, the page's sentence and an audit failure code); a first sign-in that needs the local
 * password to link is a {@link LinkNeeded}.
 */
import { randomBytes } from 'node:crypto';
import type { OAuthContext } from '../oauth/context.ts';
import { AuditCategory, AuditOutcome, type UserRecord } from '../store/types.ts';
import type { UpstreamProvider } from './config.ts';

/** A refused upstream sign-in: status, the page's sentence and the audit failure code. */
export class UpstreamFailure extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string | undefined;
  constructor(status: number, code: string, message: string, detail?: string) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/**
 * A first sign-in that is not linked automatically (an unverified e-mail upstream or here): the user is
 * asked for the local password instead (`link-account.ts`). `code` is the audit failure code.
 */
export class LinkNeeded extends Error {
  readonly code: string;
  readonly subject: string;
  readonly email: string | null;
  constructor(code: string, subject: string, email: string | null) {
    super(code);
    this.code = code;
    this.subject = subject;
    this.email = email;
  }
}
/** A claim as a trimmed string of 1 to `max` characters without control characters, or undefined. */
function claimString(claims: Record<string, unknown>, name: string, max = 256): string | undefined {
  const value = claims[name];
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed.length > 0 && trimmed.length <= max && !/[\p{Cc}]/u.test(trimmed) ? trimmed : undefined;
}

/** A free local user name from the preferred one: itself, then `-2`, `-3`, … (at most 20 tries). */
async function freeUserName(ctx: OAuthContext, preferred: string): Promise<string> {
  const base = preferred.slice(0, 240);
  for (let i = 1; i <= 20; i++) {
    const candidate = i === 1 ? base : `${base}-${i}`;
    if (!(await ctx.store.findUserByName(candidate))) return candidate;
  }
  return `${base}-${randomBytes(6).toString('hex')}`;
}

/** The local user for verified upstream claims: linked, linked now by e-mail, or provisioned. */
export async function localUser(
  ctx: OAuthContext,
  provider: UpstreamProvider,
  claims: Record<string, unknown>,
  remoteAddress: string,
): Promise<UserRecord> {
  const subject = claimString(claims, 'sub', 255);
  if (subject === undefined) throw new UpstreamFailure(502, 'upstream_invalid', 'its answer had no subject.');
  const email = claimString(claims, provider.claims.email, 254) ?? null;
  const now = ctx.now();
  const link = await ctx.store.links.findLink(provider.id, subject);
  if (link) {
    const user = await ctx.store.getUser(link.userId);
    if (!user)
      throw new UpstreamFailure(403, 'upstream_unknown_user', 'the linked account no longer exists.');
    await ctx.store.links.touchLink(provider.id, subject, email, now);
    return user;
  }
  if (email === null || claims.email_verified !== true)
    throw new LinkNeeded('upstream_email_unverified', subject, email);
  const matches = await ctx.store.links.findUsersByEmail(email);
  let user: UserRecord | undefined;
  if (matches.length > 1)
    throw new UpstreamFailure(
      403,
      'upstream_email_ambiguous',
      'more than one account has this e-mail address.',
    );
  if (matches.length === 1) {
    if (!matches[0]!.emailVerified) throw new LinkNeeded('upstream_email_unverified_locally', subject, email);
    user = await ctx.store.getUser(matches[0]!.id);
  } else {
    if (!provider.provision)
      throw new UpstreamFailure(
        403,
        'upstream_no_account',
        'there is no account here for this e-mail address.',
      );
    const preferred = claimString(claims, provider.claims.userName) ?? email;
    user = await ctx.store.createUser(
      {
        userName: await freeUserName(ctx, preferred),
        roles: provider.roles,
        displayName: claimString(claims, provider.claims.displayName) ?? null,
        givenName: claimString(claims, provider.claims.givenName) ?? null,
        familyName: claimString(claims, provider.claims.familyName) ?? null,
        email,
        emailVerified: true,
      },
      {
        audit: {
          category: AuditCategory.Login,
          outcome: AuditOutcome.Success,
          failureCode: null,
          remoteAddress,
          details: { action: 'upstream.provision', provider: provider.id },
        },
      },
    );
  }
  if (!user)
    throw new UpstreamFailure(403, 'upstream_unknown_user', 'the matching account no longer exists.');
  const created = await ctx.store.links.createLink({
    providerId: provider.id,
    subject,
    userId: user.id,
    email,
    createdAt: now,
  });
  if (!created) {
    // A concurrent first sign-in linked it, or this user already has another account of the provider.
    const again = await ctx.store.links.findLink(provider.id, subject);
    if (again?.userId !== user.id)
      throw new UpstreamFailure(
        403,
        'upstream_link_conflict',
        'this account is already linked to another account of the provider.',
      );
  } else {
    await auditUpstreamSuccess(ctx, user, remoteAddress, { action: 'upstream.link', provider: provider.id });
  }
  return user;
}

/**
 * Writes the `Login`/`Success` audit event of a brokered sign-in or link for `user`.
 * @param details `action` (`upstream.login`, `upstream.link`), `provider` and, for a link by password, `method`.
 */
export async function auditUpstreamSuccess(
  ctx: OAuthContext,
  user: UserRecord,
  remoteAddress: string,
  details: Readonly<Record<string, string>>,
): Promise<void> {
  await ctx.store.appendAudit({
    category: AuditCategory.Login,
    outcome: AuditOutcome.Success,
    subjectId: user.id,
    subjectName: user.userName,
    failureCode: null,
    remoteAddress,
    details,
  });
}
