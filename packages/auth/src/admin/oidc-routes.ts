/**
 * Administration API routes of the OpenID Connect additions (`{BasePath}/api`): a user's consents to
 * third-party clients (`GET /users/{id}/consents`, `DELETE /users/{id}/consents/{clientId}`, audited
 * `consent.revoke`) and `GET /me` (the caller and its administration abilities, for an admin UI).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AuthorizationReason } from '../reasons.ts';
import type { AuthStore, ChangeOptions, UserRecord } from '../store/types.ts';
import { AdminPermission as P } from './access.ts';
import type { AdminTarget } from './grants.ts';
import { AdminHttpError } from './http.ts';
import { bearer, denial, errors, iso, noContent, readRule, routeOptions } from './route-docs.ts';
import * as s from './schemas.ts';

/** What the routes need of `registerAdminRoutes`. */
export interface OidcAdminRoutesContext {
  readonly store: AuthStore;
  /** Clock, ms since epoch. */
  readonly now: () => number;
  /** The user with that id. @throws AdminHttpError `not_found` (404). */
  findUser(id: string): Promise<UserRecord>;
  /** The audit target of a user. */
  target(user: UserRecord): AdminTarget;
  /** The audit event of a change by the request's caller (written in the change's transaction). */
  auditFor(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    changed: string[],
    values?: object,
  ): ChangeOptions;
  /** Whether the caller holds a permission code (deny rules win). */
  holds(request: FastifyRequest, permission: string): boolean;
}

/** Registers the consent routes and `GET /me` on the API's encapsulated context. */
export function registerOidcAdminRoutes(app: FastifyInstance, ctx: OidcAdminRoutesContext): void {
  // ── consents ──

  app.get<{ Params: { id: string } }>(
    '/users/:id/consents',
    routeOptions(
      'users',
      P.Read,
      {
        summary: "A user's remembered consents to third-party clients",
        description: readRule(P.Users),
        params: s.idParams,
        response: {
          200: { description: 'The consents, newest first', ...s.pageOf(s.consentSchema) },
          ...errors(404),
        },
      },
      [P.Users],
    ),
    async (request) => {
      const user = await ctx.findUser(request.params.id);
      const page = await ctx.store.listConsents({ userId: user.id, limit: 1000 });
      const items = page.items.map((c) => ({
        clientId: c.clientId,
        scopes: c.scopes,
        createdAt: iso(c.createdAt),
        updatedAt: iso(c.updatedAt),
      }));
      return { items, total: page.total, offset: 0, limit: 1000 };
    },
  );

  app.delete<{ Params: { id: string; clientId: string } }>(
    '/users/:id/consents/:clientId',
    routeOptions('users', P.Users, {
      summary: "Revoke a user's consent to a client (the consent page asks again next time)",
      params: s.userClientParams,
      body: s.emptyBody,
      response: { ...noContent, ...errors(404) },
    }),
    async (request, reply) => {
      const user = await ctx.findUser(request.params.id);
      const clientId = request.params.clientId;
      if (!(await ctx.store.getConsent(user.id, clientId)))
        throw new AdminHttpError(
          'not_found',
          `consent of user '${user.id}' to client '${clientId}' not found`,
        );
      await ctx.store.revokeConsent(
        user.id,
        clientId,
        ctx.auditFor(request, 'consent.revoke', ctx.target(user), ['consents'], { clientId }),
      );
      return reply.code(204).send();
    },
  );

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
