/**
 * Administration API routes of the OpenID Connect additions (`{BasePath}/api`): a user's consents to
 * third-party clients (`GET /users/{id}/consents`, `DELETE /users/{id}/consents/{clientId}`, audited
 * `consent.revoke`) and `GET /me` (the caller and its administration abilities, for an admin UI).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuthorizationReason } from '../reasons.ts';
import { AdminPermission as P } from './access.ts';
import { bearer, denial, iso } from './route-docs.ts';
import * as s from './schemas.ts';
import { registerUserItemRoutes, type UserRoutesContext } from './user-items.ts';

/** What the routes need of `registerAdminRoutes`. */
export interface OidcAdminRoutesContext extends UserRoutesContext {
  /** Clock, ms since epoch. */
  readonly now: () => number;
  /** Whether the caller holds a permission code (deny rules win). */
  holds(request: FastifyRequest, permission: string): boolean;
}

/** Registers the consent routes and `GET /me` on the API's encapsulated context. */
export function registerOidcAdminRoutes(app: FastifyInstance, ctx: OidcAdminRoutesContext): void {
  // ── consents ──

  registerUserItemRoutes(app, {
    findUser: ctx.findUser,
    path: 'consents',
    list: {
      summary: "A user's remembered consents to third-party clients",
      answer: 'The consents, newest first',
      item: s.consentSchema,
      async read(userId) {
        const page = await ctx.store.listConsents({ userId, limit: 1000 });
        const items = page.items.map((c) => ({
          clientId: c.clientId,
          scopes: c.scopes,
          createdAt: iso(c.createdAt),
          updatedAt: iso(c.updatedAt),
        }));
        return { items, total: page.total, limit: 1000 };
      },
    },
    remove: {
      summary: "Revoke a user's consent to a client (the consent page asks again next time)",
      param: 'clientId',
      params: s.userClientParams,
      async apply(request, user, clientId) {
        if (!(await ctx.store.getConsent(user.id, clientId))) return false;
        const audit = ctx.auditFor(request, 'consent.revoke', ctx.target(user), ['consents'], { clientId });
        await ctx.store.revokeConsent(user.id, clientId, audit);
        return true;
      },
      notFound: (userId, clientId) => `consent of user '${userId}' to client '${clientId}' not found`,
    },
  });

  // ── me ──

  app.get(
    '/me',
    {
      config: { auth: { authenticated: true } },
      schema: {
        tags: ['me'],
        summary: 'The caller and its administration abilities',
        description:
          'Any authenticated subject (no permission needed; guests 401). `abilities` tells, per administration permission code, whether the caller holds it; `can` applies the read rule (read or manage) per resource.',
        security: bearer,
        response: { 200: { description: 'The caller', ...s.meSchema }, 401: denial, 403: denial },
      },
    },
    async (request) => {
      const subject = request.auth.subject;
      if (!subject) throw new Error('administration API: /me reached without an authenticated subject');
      const abilities: Record<string, boolean> = {};
      for (const code of Object.values(P)) {
        if (!code.includes('*')) abilities[code] = ctx.holds(request, code);
      }
      const read = abilities[P.Read] === true;
      const readDenied = request.auth.check(P.Read).reason === AuthorizationReason.DeniedByRule;
      const readable = (manage: string) => read || (!readDenied && abilities[manage] === true);
      return {
        subject: {
          kind: subject.kind,
          id: subject.id,
          name: subject.name,
          roles: subject.roles,
          clientId: subject.clientId,
        },
        abilities,
        can: {
          readUsers: readable(P.Users),
          manageUsers: abilities[P.Users] === true,
          readRoles: readable(P.Roles),
          manageRoles: abilities[P.Roles] === true,
          readPermissions: readable(P.Permissions),
          managePermissions: abilities[P.Permissions] === true,
          readClients: readable(P.Clients),
          manageClients: abilities[P.Clients] === true,
          readAudit: abilities[P.Audit] === true,
        },
      };
    },
  );
}
