/**
 * Administration API routes of two-factor sign-in (`{BasePath}/api`):
 * - `GET /users/{id}/factors`: the user's TOTP enrolment, recovery codes left and passkey count (no
 *   secrets), and whether a requirement applies to the user;
 * - `GET /users/{id}/passkeys`, `DELETE /users/{id}/passkeys/{credentialId}` (audited `factor.remove`);
 * - `DELETE /users/{id}/factors/totp`: removes the TOTP factor and the recovery codes (a user who lost the
 *   authenticator enrols again at the next sign-in when a requirement applies), audited `factor.remove`;
 * - `PUT`/`DELETE /users/{id}/mfa-required`, `/roles/{id}/mfa-required`, `/clients/{clientId}/mfa-required`:
 *   requires (or stops requiring) a second factor for the user, every user holding the role, or every
 *   sign-in to the client; audited `mfa.require` / `mfa.unrequire`; needs the area's manage permission;
 * - `GET /mfa-requirements`: every requirement.
 */
import type { FastifyInstance } from 'fastify';
import type { MfaTargetKind } from '../store/factors.ts';
import { AdminHttpError } from './http.ts';
import { errors, iso, noContent, readRule, routeOptions } from './route-docs.ts';
import type { RouteKit } from './route-kit.ts';
import { nullableTimestamp, record, type Schema, timestamp } from './schema-parts.ts';
import * as s from './schemas.ts';
import { registerUserItemRoutes } from './user-items.ts';

/** A user's second factors as the API shows them. */
export const factorsSchema: Schema = record({
  totpEnrolledAt: { ...nullableTimestamp, description: 'TOTP enrolment time, or null.' },
  totpLastUsedAt: { ...nullableTimestamp, description: 'Last TOTP sign-in, or null.' },
  recoveryCodesLeft: { type: 'integer', description: 'Unused recovery codes.' },
  passkeys: { type: 'integer', description: 'Registered passkeys (`GET /users/{id}/passkeys`).' },
  mfaRequired: {
    type: 'boolean',
    description: 'A requirement names the user or one of its roles (client requirements apply per sign-in).',
  },
});

/** A passkey as the API shows it (public data; the private key never leaves the authenticator). */
export const passkeySchema: Schema = record({
  id: { type: 'string', description: 'Credential id (base64url).' },
  name: { type: 'string' },
  deviceType: { type: 'string', enum: ['singleDevice', 'multiDevice'] },
  backedUp: { type: 'boolean', description: 'A synced passkey (amr `swk`); else device-bound (`hwk`).' },
  transports: { type: 'array', items: { type: 'string' } },
  createdAt: timestamp,
  lastUsedAt: { ...nullableTimestamp },
});

const passkeyParams: Schema = {
  type: 'object',
  required: ['id', 'credentialId'],
  properties: {
    id: { type: 'string', minLength: 1, maxLength: 128 },
    credentialId: { type: 'string', minLength: 1, maxLength: 1024 },
  },
};

/** One requirement as the API shows it. */
export const requirementSchema: Schema = record({
  targetKind: { type: 'string', enum: ['user', 'role', 'client'] },
  targetId: { type: 'string', description: 'User id, role id or client id.' },
  createdAt: timestamp,
});

/** Registers the routes on the API's encapsulated context. */
export function registerMfaRoutes(app: FastifyInstance, kit: RouteKit): void {
  const { store, P, auditFor, users, roles, clients } = kit;

  app.get<{ Params: { id: string } }>(
    '/users/:id/factors',
    routeOptions(
      'users',
      P.Read,
      {
        summary: "A user's second factors (no secrets)",
        description: readRule(P.Users),
        params: s.idParams,
        response: { 200: { description: 'The factors', ...factorsSchema }, ...errors(404) },
      },
      [P.Users],
    ),
    async (request) => {
      const user = await users.find(request.params.id);
      const summary = await store.factors.summary(user.id);
      return {
        totpEnrolledAt: summary.totpEnrolledAt === null ? null : iso(summary.totpEnrolledAt),
        totpLastUsedAt: summary.totpLastUsedAt === null ? null : iso(summary.totpLastUsedAt),
        recoveryCodesLeft: summary.recoveryCodesLeft,
        passkeys: (await store.factors.passkeys.list(user.id)).length,
        mfaRequired: await store.factors.isMfaRequired(user.id, null),
      };
    },
  );

  registerUserItemRoutes(app, {
    findUser: (id) => users.find(id),
    path: 'passkeys',
    list: {
      summary: "A user's passkeys (public data only)",
      answer: 'The passkeys, oldest first',
      item: passkeySchema,
      async read(userId) {
        const items = (await store.factors.passkeys.list(userId)).map((p) => ({
          id: p.id,
          name: p.name,
          deviceType: p.deviceType,
          backedUp: p.backedUp,
          transports: [...p.transports],
          createdAt: iso(p.createdAt),
          lastUsedAt: p.lastUsedAt === null ? null : iso(p.lastUsedAt),
        }));
        return { items, total: items.length, limit: items.length };
      },
    },
    remove: {
      summary: "Remove one of a user's passkeys",
      param: 'credentialId',
      params: passkeyParams,
      async apply(request, user, id) {
        if (!(await store.factors.passkeys.remove(user.id, id))) return false;
        const { audit } = auditFor(request, 'factor.remove', users.target(user), ['passkeys'], {
          factor: 'passkey',
          credentialId: id,
        });
        if (audit) await store.appendAudit(audit);
        return true;
      },
      notFound: (userId, id) => `passkey '${id}' of user '${userId}' not found`,
    },
  });

  app.delete<{ Params: { id: string } }>(
    '/users/:id/factors/totp',
    routeOptions('users', P.Users, {
      summary: "Remove a user's TOTP factor and recovery codes",
      params: s.idParams,
      body: s.emptyBody,
      response: { ...noContent, ...errors(404) },
    }),
    async (request, reply) => {
      const user = await users.find(request.params.id);
      if (!(await store.factors.removeTotp(user.id)))
        throw new AdminHttpError('not_found', `user '${user.id}' has no TOTP factor`);
      const { audit } = auditFor(request, 'factor.remove', users.target(user), ['factors'], {
        factor: 'totp',
      });
      if (audit) await store.appendAudit(audit);
      return reply.code(204).send();
    },
  );

  const areas = [
    { kind: 'user', tag: 'users', permission: P.Users, params: s.idParams, param: 'id', resource: users },
    { kind: 'role', tag: 'roles', permission: P.Roles, params: s.idParams, param: 'id', resource: roles },
    {
      kind: 'client',
      tag: 'clients',
      permission: P.Clients,
      params: s.clientIdParams,
      param: 'clientId',
      resource: clients,
    },
  ] as const;
  for (const area of areas) {
    for (const method of ['PUT', 'DELETE'] as const) {
      const action = method === 'PUT' ? 'mfa.require' : 'mfa.unrequire';
      app.route<{ Params: Record<string, string> }>({
        method,
        url: `/${area.tag}/:${area.param}/mfa-required`,
        ...routeOptions(area.tag, area.permission, {
          summary:
            method === 'PUT'
              ? `Require a second factor for this ${area.kind} (idempotent)`
              : `Stop requiring a second factor for this ${area.kind}`,
          params: area.params,
          body: s.emptyBody,
          response: { ...noContent, ...errors(404) },
        }),
        handler: async (request, reply) => {
          const resource = area.resource as {
            find(raw: string): Promise<unknown>;
            key(record: unknown): string;
            target(record: unknown): ReturnType<typeof users.target>;
          };
          const found = await resource.find(request.params[area.param] as string);
          const id = resource.key(found);
          const kind: MfaTargetKind = area.kind;
          if (method === 'PUT') await store.factors.requireMfa(kind, id, kit.now());
          else if (!(await store.factors.unrequireMfa(kind, id)))
            throw new AdminHttpError('not_found', `no second-factor requirement for ${area.kind} '${id}'`);
          const { audit } = auditFor(request, action, resource.target(found), ['mfaRequired'], {
            mfaRequired: method === 'PUT',
          });
          if (audit) await store.appendAudit(audit);
          return reply.code(204).send();
        },
      });
    }
  }

  app.get(
    '/mfa-requirements',
    routeOptions(
      'users',
      P.Read,
      {
        summary: 'Every second-factor requirement (per user, role or client)',
        description: readRule(P.Users),
        response: { 200: { description: 'The requirements', ...s.pageOf(requirementSchema) } },
      },
      [P.Users],
    ),
    async () => {
      const items = (await store.factors.listMfaRequirements()).map((r) => ({
        targetKind: r.targetKind,
        targetId: r.targetId,
        createdAt: iso(r.createdAt),
      }));
      return { items, total: items.length, offset: 0, limit: items.length };
    },
  );
}
