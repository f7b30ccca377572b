/**
 * Administration API: the audit log (`GET /audit`, filtered and paged), spec 001 "Administration REST API".
 */
import type { FastifyInstance } from 'fastify';
import { AdminHttpError } from './http.ts';
import { errors, routeOptions } from './route-docs.ts';
import type { RouteKit } from './route-kit.ts';
import * as s from './schemas.ts';
import { auditView } from './views.ts';

/** Registers the routes on the API's encapsulated context. */
export function registerAuditRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { store, P, paging } = kit;
  // ── audit ──

  type AuditQ = {
    category?: string;
    outcome?: string;
    subject?: string;
    clientId?: string;
    from?: string;
    to?: string;
    offset?: number;
    limit?: number;
  };

  app.get<{ Querystring: AuditQ }>(
    '/audit',
    routeOptions('audit', P.Audit, {
      summary: 'Audit events, newest first, filtered and paged',
      description:
        'Filters combine with AND: `category` and `outcome` exact, `subject` the subject id (user id or client id), `from` inclusive and `to` exclusive RFC 3339 times.',
      querystring: s.auditQuery,
      response: {
        200: { description: 'A page of audit events, newest first', ...s.pageOf(s.auditEventSchema) },
        ...errors(),
      },
    }),
    async (request) => {
      const q = request.query;
      const { offset, limit } = paging(q);
      const from = q.from === undefined ? undefined : Date.parse(q.from);
      const to = q.to === undefined ? undefined : Date.parse(q.to);
      if (from !== undefined && to !== undefined && from > to) {
        throw new AdminHttpError('validation', 'querystring.from: must not be after querystring.to');
      }
      const page = await store.listAudit({
        category: q.category,
        outcome: q.outcome,
        subjectId: q.subject,
        clientId: q.clientId,
        from,
        to,
        offset,
        limit,
      });
      return { items: page.items.map(auditView), total: page.total, offset, limit };
    },
  );
}
