/**
 * The AuthorizationReason enumeration of spec 001 ("Resources and their fields › AuthorizationReason").
 * Values 0–3 grant, values 10 and above deny. Exposed as a frozen const object plus a type of the same
 * name (no TS `enum`: the code runs with type stripping).
 */
export const AuthorizationReason = Object.freeze({
  /** 0 — an allow rule matched. */
  Granted: 0,
  /** 1 — an attribute-based policy evaluated true. */
  GrantedByPolicy: 1,
  /** 2 — the endpoint requires no permission. */
  NotProtected: 2,
  /** 3 — guest (unauthenticated) access is allowed on the endpoint. */
  GuestAllowed: 3,
  /** 10 — no rule matched (neither allow nor deny). */
  NoMatchingGrant: 10,
  /** 11 — a deny rule matched (deny wins over allow). */
  DeniedByRule: 11,
  /** 12 — unauthenticated and the endpoint forbids guests. */
  GuestNotAllowed: 12,
  /** 13 — subject disabled or locked out, including a security-stamp mismatch. */
  SubjectDisabled: 13,
  /** 14 — the policy evaluated false. */
  PolicyNotSatisfied: 14,
  /** 15 — the referenced policy does not exist. */
  PolicyNotFound: 15,
  /** 16 — the permission code declared by the endpoint is invalid. */
  InvalidPermissionCode: 16,
  /** 17 — the credential (bearer token) is invalid or expired. */
  InvalidCredential: 17,
} as const);

/** Numeric value of one {@link AuthorizationReason} (0–3 grant, 10–17 deny). */
export type AuthorizationReason = (typeof AuthorizationReason)[keyof typeof AuthorizationReason];

/** Name of one {@link AuthorizationReason}, e.g. `'DeniedByRule'` (used as `error_description`). */
export type AuthorizationReasonName = keyof typeof AuthorizationReason;

const NAMES: Record<number, AuthorizationReasonName> = Object.fromEntries(
  Object.entries(AuthorizationReason).map(([name, value]) => [value, name as AuthorizationReasonName]),
);

/**
 * The enumeration name of a reason value, e.g. `reasonName(11) === 'DeniedByRule'`.
 * @throws RangeError when the value is not one of the spec's reason values.
 */
export function reasonName(reason: AuthorizationReason): AuthorizationReasonName {
  const name = NAMES[reason];
  if (name === undefined) throw new RangeError(`unknown AuthorizationReason value ${String(reason)}`);
  return name;
}

/** True for the granting reasons (values 0–3), false for the denying ones (10 and above). */
export function isGrantingReason(reason: AuthorizationReason): boolean {
  return reason < 10;
}

/**
 * An authorization decision (spec 001: "Every authorization decision carries an IsGranted flag and a
 * Reason"). `isGranted` is always `reason < 10`.
 */
export interface AuthorizationDecision {
  readonly isGranted: boolean;
  readonly reason: AuthorizationReason;
}

const DECISIONS = new Map<number, AuthorizationDecision>(
  Object.values(AuthorizationReason).map((reason) => [
    reason,
    Object.freeze({ isGranted: isGrantingReason(reason), reason }),
  ]),
);

/**
 * The (shared, frozen) decision object for a reason; `isGranted` follows from the value.
 * @throws RangeError when the value is not one of the spec's reason values.
 */
export function decision(reason: AuthorizationReason): AuthorizationDecision {
  const found = DECISIONS.get(reason);
  if (!found) throw new RangeError(`unknown AuthorizationReason value ${String(reason)}`);
  return found;
}
