/**
 * Credential validation (spec 001 "Credential validation", "Account flags and lockout settings", "States and
 * transitions"). Failure codes: `invalid_credentials` (unknown user or wrong password — an equivalent-cost
 * dummy hash check runs for unknown users), `account_disabled`, `locked_out`. `MaxAccessFailedCount`
 * consecutive failures lock the account for `LockoutDuration`. Every validation writes an audit event.
 *
 * Concurrency: an attempt is counted in the store atomically *before* the password is checked
 * ({@link AuthStore.beginAccessAttempt}), so however many attempts run at once, at most
 * `MaxAccessFailedCount` password guesses are checked before the lockout.
 */
import { randomBytes } from 'node:crypto';
import { AuditLog } from './audit.ts';
import type { PasswordHasher } from './passwords.ts';
import { AuditCategory, AuditOutcome, type AuthStore, type UserRecord } from './store/types.ts';

/** The spec's `CredentialValidationResult.Error` values. */
export const CredentialValidationError = Object.freeze({
  InvalidCredentials: 'invalid_credentials',
  AccountDisabled: 'account_disabled',
  LockedOut: 'locked_out',
} as const);
/** One of `invalid_credentials`, `account_disabled`, `locked_out`. */
export type CredentialValidationError =
  (typeof CredentialValidationError)[keyof typeof CredentialValidationError];

/** Result of {@link CredentialValidator.validate}: the user on success, else the failure code. */
export type CredentialValidationResult =
  | { readonly ok: true; readonly user: UserRecord }
  | { readonly ok: false; readonly error: CredentialValidationError };

/** What {@link CredentialValidatorOptions.onValidated} hears of one validation (no user name, no secret). */
export interface CredentialValidationEvent {
  /** `success`, or the failure code. */
  readonly result: 'success' | CredentialValidationError;
  /** True when this failure locked the account (the `MaxAccessFailedCount`-th consecutive failure). */
  readonly lockedOut: boolean;
}

/** Who asks, for the audit event. */
export interface CredentialContext {
  /** Audit category (default `Login`: the login page and the password grant both record credential checks as `Login`). */
  readonly category?: string;
  readonly clientId?: string | null;
  readonly remoteAddress?: string | null;
}

/** Default `MaxAccessFailedCount` (spec 001 "Limits"). */
export const DEFAULT_MAX_ACCESS_FAILED_COUNT = 5;
/** Default `LockoutDuration`: 5 minutes, in ms (spec 001 "Limits"). */
export const DEFAULT_LOCKOUT_DURATION_MS = 5 * 60 * 1000;

/** Options of {@link CredentialValidator}. */
export interface CredentialValidatorOptions {
  store: AuthStore;
  hasher: PasswordHasher;
  /** `MaxAccessFailedCount`: consecutive failures before lockout (default 5, minimum 1). */
  maxAccessFailedCount?: number;
  /** `LockoutDuration` in ms (default 300 000 = 5 minutes). */
  lockoutDurationMs?: number;
  /** Clock, ms epoch (default `Date.now`). */
  now?: () => number;
  /** Rehash a password made with outdated parameters on successful login (default true). */
  rehash?: boolean;
  /** Called once per validation, after its audit event is written (metrics). Must not throw. */
  onValidated?: (event: CredentialValidationEvent) => void;
}

/** Validates user name + password against the store (spec 001 "Credential validation"). */
export class CredentialValidator {
  readonly maxAccessFailedCount: number;
  readonly lockoutDurationMs: number;
  readonly #store: AuthStore;
  readonly #hasher: PasswordHasher;
  readonly #now: () => number;
  readonly #audit: AuditLog;
  readonly #rehash: boolean;
  readonly #onValidated: ((event: CredentialValidationEvent) => void) | undefined;
  #dummy: Promise<string> | undefined;

  /** @throws RangeError when `maxAccessFailedCount` < 1 or `lockoutDurationMs` < 0. */
  constructor(options: CredentialValidatorOptions) {
    this.#store = options.store;
    this.#hasher = options.hasher;
    this.#now = options.now ?? Date.now;
    this.#audit = new AuditLog(options.store, this.#now);
    this.#rehash = options.rehash ?? true;
    this.#onValidated = options.onValidated;
    this.maxAccessFailedCount = options.maxAccessFailedCount ?? DEFAULT_MAX_ACCESS_FAILED_COUNT;
    this.lockoutDurationMs = options.lockoutDurationMs ?? DEFAULT_LOCKOUT_DURATION_MS;
    if (!Number.isInteger(this.maxAccessFailedCount) || this.maxAccessFailedCount < 1) {
      throw new RangeError('maxAccessFailedCount must be an integer >= 1');
    }
    if (!Number.isFinite(this.lockoutDurationMs) || this.lockoutDurationMs < 0) {
      throw new RangeError('lockoutDurationMs must be a number >= 0 (ms)');
    }
  }

  /** The dummy hash (random password, current parameters) checked for unknown users; made once, lazily. */
  dummyHash(): Promise<string> {
    this.#dummy ??= this.#hasher.hash(randomBytes(24).toString('base64url'));
    return this.#dummy;
  }

  /**
   * Validates credentials and writes one audit event (`Category` from the context, default `Login`;
   * `Outcome` `Success` or `Denied` with the failure code). The failure code must not be shown to the end user
   * (the password grant maps all three to `invalid_grant`, the login page answers `err=1`).
   * Never throws for bad input (non-string user name or password → `invalid_credentials`).
   */
  async validate(
    userName: unknown,
    password: unknown,
    context: CredentialContext = {},
  ): Promise<CredentialValidationResult> {
    const name = typeof userName === 'string' ? userName : '';
    const secret = typeof password === 'string' ? password : '';
    const user = name ? await this.#store.findUserByName(name) : undefined;
    const base = {
      category: context.category ?? AuditCategory.Login,
      subjectName: name.slice(0, 256) || null,
      clientId: context.clientId ?? null,
      remoteAddress: context.remoteAddress ?? null,
    };
    const deny = async (
      error: CredentialValidationError,
      subjectId: string | null,
      details?: Record<string, unknown>,
    ) => {
      await this.#audit.write({
        ...base,
        outcome: AuditOutcome.Denied,
        subjectId,
        failureCode: error,
        details,
      });
      this.#onValidated?.({ result: error, lockedOut: details?.lockedOut === true });
      return { ok: false, error } as const;
    };

    if (!user || user.passwordHash === null) {
      await this.#hasher.verify(secret, await this.dummyHash());
      return deny(CredentialValidationError.InvalidCredentials, null);
    }
    if (!user.isEnabled) {
      await this.#hasher.verify(secret, user.passwordHash);
      return deny(CredentialValidationError.AccountDisabled, user.id);
    }
    const attempt = await this.#store.beginAccessAttempt(user.id, this.#now(), this.maxAccessFailedCount);
    if (!attempt.allowed) {
      await this.#hasher.verify(secret, await this.dummyHash());
      return deny(CredentialValidationError.LockedOut, user.id, { lockoutEnd: attempt.lockoutEnd });
    }
    if (!(await this.#hasher.verify(secret, user.passwordHash))) {
      const now = this.#now();
      const locked = await this.#store.failAccessAttempt(
        user.id,
        attempt.attempt,
        now,
        this.maxAccessFailedCount,
        this.lockoutDurationMs,
      );
      return deny(CredentialValidationError.InvalidCredentials, user.id, {
        failedCount: attempt.attempt,
        ...(locked ? { lockedOut: true, lockoutEnd: now + this.lockoutDurationMs } : {}),
      });
    }
    await this.#store.succeedAccessAttempt(user.id);
    if (this.#rehash && this.#hasher.needsRehash(user.passwordHash)) {
      // A password that no longer meets the length rules keeps its old hash rather than failing the login.
      const upgraded = await this.#hasher.hash(secret).catch(() => undefined);
      if (upgraded) await this.#store.setPasswordHash(user.id, upgraded, { rotateStamp: false });
    }
    const current = (await this.#store.getUser(user.id)) ?? user;
    await this.#audit.write({ ...base, outcome: AuditOutcome.Success, subjectId: user.id });
    this.#onValidated?.({ result: 'success', lockedOut: false });
    return { ok: true, user: current };
  }
}
