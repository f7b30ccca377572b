/**
 * The permission codes of the administration API (spec 001 "Authentication": the administration API is
 * protected by the same permission middleware) and the caller recorded in its audit events.
 */

/** The permission codes of the administration API (spec 001 "Authentication"). */
export const AdminPermission = Object.freeze({
  /** Everything below (`auth.admin.**`). */
  All: 'auth.admin.**',
  /** Read users, roles, permissions and clients. */
  Read: 'auth.admin.read',
  /** Manage users (create, update, delete, password, enable/disable, unlock). */
  Users: 'auth.admin.users',
  /** Manage roles; also needed to grant or change a user's `Roles` (separation of duties, rule 1). */
  Roles: 'auth.admin.roles',
  /** Manage the permission catalog; also needed to grant or change `Permissions`/`DirectPermissions`/`DeniedPermissions` (rules 1–3). */
  Permissions: 'auth.admin.permissions',
  /** Manage clients. */
  Clients: 'auth.admin.clients',
  /** Read the audit log. */
  Audit: 'auth.admin.audit',
} as const);
/** One of {@link AdminPermission}. */
export type AdminPermission = (typeof AdminPermission)[keyof typeof AdminPermission];

/** Who made an administration request: recorded in the audit event of every change ("who changed what"). */
export interface AdminCaller {
  /** User id (or client id for a client_credentials token), the token's `sub`. */
  readonly subjectId: string;
  /** User name when the subject is a user, else null. */
  readonly subjectName: string | null;
  /** The OAuth client the token was issued to, when known. */
  readonly clientId: string | null;
}
