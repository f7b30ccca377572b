/**
 * Administration API routes of identity brokering (`{BasePath}/api`): a user's links to upstream OpenID
 * provider accounts (`GET /users/{id}/links`) and their removal (`DELETE /users/{id}/links/{providerId}`,
 * audited `link.remove`); after a removal the next sign-in with that provider links or provisions again.
 */
import type { FastifyInstance } from 'fastify';
import { iso } from './route-docs.ts';
import { record, type Schema, timestamp } from './schema-parts.ts';
import { registerUserItemRoutes, type UserRoutesContext } from './user-items.ts';

/** What the routes need of `registerAdminRoutes`. */
export type LinkAdminRoutesContext = UserRoutesContext;

/** A link as the API shows it. */
export const linkSchema: Schema = record({
  providerId: { type: 'string', description: 'Id of the configured upstream provider.' },
  subject: { type: 'string', description: "The upstream account's `sub`." },
  email: { type: ['string', 'null'], description: 'The upstream e-mail address at the last sign-in.' },
  createdAt: timestamp,
  lastUsedAt: timestamp,
});

const linkParams: Schema = {
  type: 'object',
  required: ['id', 'providerId'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 128 },
    providerId: { type: 'string', minLength: 1, maxLength: 32 },
  },
};

/** Registers the link routes on the API's encapsulated context. */
export function registerLinkAdminRoutes(app: FastifyInstance, ctx: LinkAdminRoutesContext): void {
  registerUserItemRoutes(app, {
    findUser: ctx.findUser,
    path: 'links',
    list: {
      summary: "A user's links to upstream OpenID provider accounts",
      answer: 'The links, by provider id',
      item: linkSchema,
      async read(userId) {
        const links = await ctx.store.links.listLinks(userId);
        const items = links.map((link) => ({
          providerId: link.providerId,
          subject: link.subject,
          email: link.email,
          createdAt: iso(link.createdAt),
          lastUsedAt: iso(link.lastUsedAt),
        }));
        return { items, total: items.length, limit: 1000 };
      },
    },
    remove: {
      summary:
        "Remove a user's link to an upstream provider (the next sign-in there links or provisions again)",
      param: 'providerId',
      params: linkParams,
      async apply(request, user, providerId) {
        if (!(await ctx.store.links.deleteLink(user.id, providerId))) return false;
        const { audit } = ctx.auditFor(request, 'link.remove', ctx.target(user), ['links'], { providerId });
        if (audit) await ctx.store.appendAudit(audit);
        return true;
      },
      notFound: (userId, providerId) => `link of user '${userId}' to provider '${providerId}' not found`,
    },
  });
}
