/**
 * Routes of the administration REST API under `{BasePath}/api` (spec 001 "Administration REST API"): users, roles, permissions, clients and the audit log, one file per resource
 * (`users-routes.ts`, `roles-routes.ts`, `clients-routes.ts`, `audit-routes.ts`, `oidc-routes.ts`,
 * `links-routes.ts`, `mfa-routes.ts`) over
 * the shared helpers of `route-kit.ts`.
 *
 * Every route is protected by the permission middleware (reads need `auth.admin.read`, the audit log
 * `auth.admin.audit`, changes the permission of their area) and the separation-of-duties rules of spec 001
 * "Authentication" answer 403. Every change is one store transaction that also writes its audit event
 * (category `Admin`, outcome `Success`, the caller as subject, `details.action`/`target`/`changed`).
 */
import type { FastifyInstance } from 'fastify';
import { registerAuditRoutes } from './audit-routes.ts';
import { registerClientRoutes } from './clients-routes.ts';
import { registerLinkAdminRoutes } from './links-routes.ts';
import { registerMfaRoutes } from './mfa-routes.ts';
import { registerOidcAdminRoutes } from './oidc-routes.ts';
import { registerRoleRoutes } from './roles-routes.ts';
import { type AdminRoutesOptions, createRouteKit } from './route-kit.ts';
import { registerUserRoutes } from './users-routes.ts';

export { type AdminTarget, MAX_AUDIT_VALUES_LENGTH } from './grants.ts';
export type { AdminRoutesOptions } from './route-kit.ts';
export { auditView, clientView, permissionView, roleView, userView } from './views.ts';

/**
 * Registers the API routes on `app` (which must carry the `/api` prefix, the strict validation of
 * `./http.ts` and the core's permission middleware, which reads each route's `config.auth`).
 */
export function registerAdminRoutes(app: FastifyInstance, options: AdminRoutesOptions): void {
  const kit = createRouteKit(app, options);
  registerUserRoutes(app, kit);
  registerRoleRoutes(app, kit);
  registerClientRoutes(app, kit);
  const { store, now, users, auditFor, access } = kit;
  registerOidcAdminRoutes(app, {
    store,
    now,
    findUser: (id) => users.find(id),
    target: (user) => users.target(user),
    auditFor,
    holds: access.holds,
  });
  registerLinkAdminRoutes(app, {
    store,
    findUser: (id) => users.find(id),
    target: (user) => users.target(user),
    auditFor,
  });
  registerMfaRoutes(app, kit);
  registerAuditRoutes(app, kit);
}
