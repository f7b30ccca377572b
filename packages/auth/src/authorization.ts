/**
 * The authorization decision engine of the permission middleware (spec 001 "Business endpoints protected by
 * the permission middleware", "AuthorizationReason", state rule on security stamps). Framework-neutral: the
 * Fastify plugin and the plain Node adapter in `middleware/` call {@link AuthorizationService.authorize} and
 * write {@link Denial} as the answer.
 */
import { AuditLog } from './audit.ts';
import {
  type Denial,
  denialFor,
  dpopDenialHeaders,
  presentationOf,
  presentedToken,
} from './authorization-wire.ts';
import { DpopProofError } from './dpop-proof.ts';
import { InvalidTokenError } from './errors.ts';
import { MatcherCache, type PermissionMatcher, tryNormalizePermissionCode } from './permissions.ts';
import type { AuthSubject, PolicyRegistry, PolicyRequest } from './policies.ts';
import { type AuthorizationDecision, AuthorizationReason, decision, reasonName } from './reasons.ts';
import { AuditCategory, AuditOutcome, type AuthStore } from './store/types.ts';
import type { TokenVerifier } from './token-verifier.ts';

export { type Denial, type DenialBody, denialFor, upgradeQueryToken } from './authorization-wire.ts';

/**
 * What an endpoint requires. No `permission`, no `policy` and no `authenticated` means the endpoint is not
 * protected (`NotProtected`).
 */
export interface EndpointRequirement {
  /** Concrete permission code required, e.g. `auth.admin.users` (wildcards are invalid here → `InvalidPermissionCode`). */
  permission?: string;
  /**
   * Concrete codes that also satisfy `permission` (any one of them), e.g. a resource's manage permission
   * on its read routes. They count only when `permission` itself is not denied by a rule (deny wins): a
   * deny rule on `permission` gives `DeniedByRule`; otherwise an allowed alternative gives `Granted`.
   * The denial body names `permission`. An invalid alternative is `InvalidPermissionCode`.
   */
  alsoGrantedBy?: readonly string[];
  /**
   * Any authenticated, active subject passes (`Granted`) without a permission check, e.g. `GET /me`.
   * Guests get `GuestNotAllowed` (401). Ignored when `permission` or `policy` is set.
   */
  authenticated?: boolean;
  /** Name of an attribute-based policy that must also hold (→ `GrantedByPolicy` / `PolicyNotSatisfied` / `PolicyNotFound`). */
  policy?: string;
  /** Unauthenticated callers are allowed (→ `GuestAllowed`); default false (→ `GuestNotAllowed`, 401). */
  allowGuest?: boolean;
}

/** Result of {@link AuthorizationService.authorize}. */
export interface AuthorizationOutcome {
  readonly decision: AuthorizationDecision;
  /** True when a valid token identified an existing subject (even a disabled one). */
  readonly authenticated: boolean;
  /** The subject, when authenticated and active; null for guests and refused tokens. */
  readonly subject: AuthSubject | null;
  /** The permission code the decision is about (as declared, normalized when valid), or null. */
  readonly permission: string | null;
  /** Present iff the decision denies. */
  readonly denial?: Denial;
  /**
   * Checks another permission for the same caller (deny wins), e.g. for the administration API's
   * separation-of-duties rules. Guests are checked against the guest role, if any.
   */
  check(code: string): AuthorizationDecision;
}

/** Options of {@link AuthorizationService}. */
export interface AuthorizationServiceOptions {
  store: AuthStore;
  tokenVerifier: TokenVerifier;
  /** Named ABAC policies (default: an empty registry). */
  policies?: PolicyRegistry;
  /**
   * Name of a role whose rules apply to unauthenticated callers on endpoints that allow guests: a guest then
   * gets `GuestAllowed` only when the role grants the endpoint's permission, else `NoMatchingGrant` or
   * `DeniedByRule` (401). Default: none (guests pass `allowGuest` endpoints without a permission check).
   */
  guestRole?: string;
  /**
   * Write an `Authorization`/`Denied` audit event for each denial (default false): of an authenticated
   * subject (`subjectId` = the subject) and of a guest (`subjectId` null, failure code `GuestNotAllowed`,
   * `NoMatchingGrant`, …). Invalid tokens (`InvalidCredential`) are audited as guests are.
   */
  auditDenials?: boolean;
  /** Subjects whose compiled matchers are cached (default 10 000). */
  cacheSize?: number;
  /** Clock, ms epoch (default `Date.now`). */
  now?: () => number;
}

/** The request facts `authorize` needs. */
export interface AuthorizationInput {
  /** The `Authorization` header value (or `Bearer <token>` from {@link upgradeQueryToken}), if any. */
  authorization?: string | string[] | undefined;
  /** The endpoint's requirement; undefined means not protected. */
  requirement?: EndpointRequirement;
  request: PolicyRequest;
  /** The resource the policy judges (e.g. a loaded record). */
  resource?: unknown;
  /**
   * Absolute URL of the request (`https://host/path?query`), the `htu` a DPoP proof must name (RFC 9449
   * §7.1). Default: `http://<Host header><request.url>`.
   */
  htu?: string;
}

const NONE: readonly string[] = Object.freeze([]);

interface ResolvedSubject {
  subject: AuthSubject;
  matcher: PermissionMatcher;
}

/**
 * Decides requests: authenticates the bearer token, checks the subject against the store (exists, enabled, not
 * locked out, security stamp unchanged), evaluates the permission with a cached compiled matcher, then the
 * policy.
 */
export class AuthorizationService {
  readonly store: AuthStore;
  readonly tokenVerifier: TokenVerifier;
  readonly policies: PolicyRegistry | undefined;
  readonly #guestRole: string | undefined;
  readonly #cache: MatcherCache;
  readonly #now: () => number;
  readonly #audit: AuditLog | undefined;

  /** @param options store, token verifier, policies, guest role, audit and cache settings, clock. */
  constructor(options: AuthorizationServiceOptions) {
    this.store = options.store;
    this.tokenVerifier = options.tokenVerifier;
    this.policies = options.policies;
    this.#guestRole = options.guestRole;
    this.#cache = new MatcherCache(options.cacheSize);
    this.#now = options.now ?? Date.now;
    this.#audit = options.auditDenials ? new AuditLog(options.store, this.#now) : undefined;
  }

  /** The matcher cache (exposed for diagnostics and explicit invalidation). */
  get matcherCache(): MatcherCache {
    return this.#cache;
  }

  /**
   * Authenticates a bearer token against the store.
   * @returns `guest` (no token), `invalid` (bad/expired token, unknown subject), `disabled` (subject disabled,
   * locked out or security stamp changed) or `active` with the subject and its compiled matcher.
   */
  async authenticate(
    authorization: string | string[] | undefined,
    request?: AuthorizationInput,
  ): Promise<
    | { state: 'guest' }
    | { state: 'invalid'; headers?: Record<string, string> }
    | { state: 'disabled'; subjectId: string }
    | ({ state: 'active' } & ResolvedSubject)
  > {
    const presented = presentedToken(authorization);
    if (presented === undefined) return { state: 'guest' };
    if (presented === null) return { state: 'invalid' };
    const { scheme, token } = presented;
    let verified: Awaited<ReturnType<TokenVerifier['verify']>>;
    try {
      verified = await this.tokenVerifier.verify(
        token,
        request
          ? presentationOf(request.request, request.htu, scheme)
          : { scheme, method: 'GET', url: 'http://localhost/' },
      );
    } catch (error) {
      if (error instanceof InvalidTokenError) {
        return scheme === 'DPoP' || error instanceof DpopProofError
          ? { state: 'invalid', headers: dpopDenialHeaders(error) }
          : { state: 'invalid' };
      }
      throw error;
    }
    if (verified.kind === 'client') {
      const client = await this.store.getClient(verified.subject);
      if (!client) return { state: 'invalid' };
      if (!client.isEnabled) return { state: 'disabled', subjectId: client.clientId };
      const matcher = this.#cache.get(`client:${client.clientId}`, `${client.version}`, () => ({
        allow: client.permissions,
        deny: NONE,
      }));
      return {
        state: 'active',
        matcher,
        subject: {
          kind: 'client',
          id: client.clientId,
          name: client.clientId,
          roles: NONE,
          clientId: verified.clientId,
          scopes: verified.scopes,
          claims: verified.claims,
        },
      };
    }
    const loaded = await this.store.getUserSubject(verified.subject);
    if (!loaded) return { state: 'invalid' };
    const { user, roles } = loaded;
    const lockedOut = user.lockoutEnd !== null && user.lockoutEnd > this.#now();
    if (!user.isEnabled || lockedOut || user.securityStamp !== verified.securityStamp) {
      return { state: 'disabled', subjectId: user.id };
    }
    let version = `${user.version}|${user.securityStamp}`;
    for (const role of roles) version += `|${role.id}:${role.version}`;
    const matcher = this.#cache.get(`user:${user.id}`, version, () => {
      const allow = [...user.directPermissions];
      const deny = [...user.deniedPermissions];
      for (const role of roles) {
        allow.push(...role.permissions);
        deny.push(...role.deniedPermissions);
      }
      return { allow, deny };
    });
    return {
      state: 'active',
      matcher,
      subject: {
        kind: 'user',
        id: user.id,
        name: user.userName,
        roles: user.roles,
        clientId: verified.clientId,
        scopes: verified.scopes,
        claims: verified.claims,
      },
    };
  }

  async #guestMatcher(): Promise<PermissionMatcher | undefined> {
    if (this.#guestRole === undefined) return undefined;
    const role = await this.store.findRoleByName(this.#guestRole);
    if (!role) return undefined;
    return this.#cache.get(`guest:${role.id}`, `${role.version}`, () => ({
      allow: role.permissions,
      deny: role.deniedPermissions,
    }));
  }

  /**
   * Decides one request (spec 001 reason table):
   * - no requirement → `NotProtected`;
   * - bad/expired token → `InvalidCredential` (401 `invalid_token`); disabled, locked or stale stamp →
   *   `SubjectDisabled` (403);
   * - invalid declared code → `InvalidPermissionCode`;
   * - guest: endpoint without `allowGuest` → `GuestNotAllowed`; with it → the guest role's rules (if configured:
   *   `DeniedByRule` / `NoMatchingGrant`), then the policy, else `GuestAllowed` — guest denials are 401;
   * - authenticated: deny rule → `DeniedByRule`; no grant → `NoMatchingGrant` (`GuestAllowed` on guest
   *   endpoints); then the policy → `GrantedByPolicy` / `PolicyNotSatisfied` / `PolicyNotFound`; else `Granted`.
   * @throws only on storage failure (never for client mistakes).
   */
  async authorize(input: AuthorizationInput): Promise<AuthorizationOutcome> {
    const requirement = input.requirement;
    const declared = requirement?.permission;
    if (
      requirement === undefined ||
      (declared === undefined && requirement.policy === undefined && !requirement.authenticated)
    ) {
      return this.#outcome(AuthorizationReason.NotProtected, false, null, null, undefined);
    }
    const auth = await this.authenticate(input.authorization, input);
    if (auth.state === 'invalid') {
      const outcome = this.#outcome(AuthorizationReason.InvalidCredential, false, null, null, undefined);
      // RFC 9449 §7.1: DPoP requests are answered with the DPoP challenge instead of the Bearer one.
      if (auth.headers && outcome.denial) outcome.denial.headers = auth.headers;
      await this.#auditDenial(outcome, null, input);
      return outcome;
    }
    if (auth.state === 'disabled') {
      const outcome = this.#outcome(AuthorizationReason.SubjectDisabled, true, null, null, undefined);
      await this.#auditDenial(outcome, auth.subjectId, input);
      return outcome;
    }
    const code =
      declared === undefined ? undefined : tryNormalizePermissionCode(declared, { allowWildcards: false });
    const permission = declared === undefined ? null : (code ?? String(declared));
    const authenticated = auth.state === 'active';
    const subject = authenticated ? auth.subject : null;
    const matcher = authenticated
      ? auth.matcher
      : requirement.allowGuest
        ? await this.#guestMatcher()
        : undefined;
    const done = async (reason: AuthorizationReason, reported: string | null = permission) => {
      const outcome = this.#outcome(reason, authenticated, subject, reported, matcher);
      if (!outcome.decision.isGranted)
        await this.#auditDenial(outcome, authenticated ? auth.subject.id : null, input);
      return outcome;
    };
    if (declared !== undefined && code === undefined) return done(AuthorizationReason.InvalidPermissionCode);
    const alternatives: string[] = [];
    for (const alternative of code === undefined ? [] : (requirement.alsoGrantedBy ?? [])) {
      const normalized = tryNormalizePermissionCode(alternative, { allowWildcards: false });
      if (normalized === undefined) return done(AuthorizationReason.InvalidPermissionCode);
      alternatives.push(normalized);
    }
    /** The effect of the declared code, with the alternatives counted when it is not denied. */
    const evaluate = (m: PermissionMatcher, c: string) => {
      const effect = m.evaluate(c);
      if (effect !== 'none') return effect;
      return alternatives.some((a) => m.evaluate(a) === 'allow') ? 'allow' : 'none';
    };

    let reason: AuthorizationReason = AuthorizationReason.Granted;
    if (!authenticated) {
      if (!requirement.allowGuest) return done(AuthorizationReason.GuestNotAllowed);
      reason = AuthorizationReason.GuestAllowed;
      if (code !== undefined && matcher) {
        const effect = evaluate(matcher, code);
        if (effect === 'deny') return done(AuthorizationReason.DeniedByRule);
        if (effect === 'none') return done(AuthorizationReason.NoMatchingGrant);
      }
    } else if (code !== undefined) {
      const effect = evaluate(auth.matcher, code);
      if (effect === 'deny') return done(AuthorizationReason.DeniedByRule);
      if (effect === 'none') {
        if (!requirement.allowGuest) return done(AuthorizationReason.NoMatchingGrant);
        reason = AuthorizationReason.GuestAllowed;
      }
    }
    if (requirement.policy !== undefined) {
      const result = this.policies
        ? await this.policies.evaluate(requirement.policy, {
            subject,
            resource: input.resource,
            request: input.request,
          })
        : 'not_found';
      if (result === 'not_found') return done(AuthorizationReason.PolicyNotFound, null);
      if (result === 'not_satisfied') return done(AuthorizationReason.PolicyNotSatisfied, null);
      return done(AuthorizationReason.GrantedByPolicy);
    }
    return done(reason);
  }

  #outcome(
    reason: AuthorizationReason,
    authenticated: boolean,
    subject: AuthSubject | null,
    permission: string | null,
    matcher: PermissionMatcher | undefined,
  ): AuthorizationOutcome {
    const result = decision(reason);
    const check = (code: string): AuthorizationDecision => {
      const normalized = tryNormalizePermissionCode(code, { allowWildcards: false });
      if (normalized === undefined) return decision(AuthorizationReason.InvalidPermissionCode);
      if (!matcher || (authenticated && !subject)) return decision(AuthorizationReason.NoMatchingGrant);
      const effect = matcher.evaluate(normalized);
      return decision(
        effect === 'allow'
          ? AuthorizationReason.Granted
          : effect === 'deny'
            ? AuthorizationReason.DeniedByRule
            : AuthorizationReason.NoMatchingGrant,
      );
    };
    return {
      decision: result,
      authenticated,
      subject,
      permission,
      check,
      ...(result.isGranted ? {} : { denial: denialFor(reason, authenticated, permission) }),
    };
  }

  /** Writes the denial's audit event (when `auditDenials` is on); `subjectId` null for guests. */
  async #auditDenial(
    outcome: AuthorizationOutcome,
    subjectId: string | null,
    input: AuthorizationInput,
  ): Promise<void> {
    if (!this.#audit) return;
    await this.#audit.write({
      category: AuditCategory.Authorization,
      outcome: AuditOutcome.Denied,
      subjectId,
      clientId: outcome.subject?.clientId ?? null,
      failureCode: reasonName(outcome.decision.reason),
      remoteAddress: input.request.remoteAddress ?? null,
      details: {
        method: input.request.method,
        url: input.request.url.slice(0, 512),
        permission: outcome.permission,
      },
    });
  }
}
