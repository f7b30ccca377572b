/**
 * What the administration API's route files share (`users-routes.ts`, `roles-routes.ts`,
 * `clients-routes.ts`, `audit-routes.ts`): the caller and its permissions, the audit event of a change, the
 * separation-of-duties guards, paging, and the list/get/update/delete routes every collection has.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import type { ClientSecrets } from '../oauth/client-secrets.ts';
import type { PasswordHasher } from '../passwords.ts';
import { normalizePermissionCode } from '../permissions.ts';
import type {
  AuthStore,
  ChangeOptions,
  ClientPatch,
  ClientRecord,
  NewAuditEvent,
  Page,
  PermissionRecord,
  RolePatch,
  RoleRecord,
  UserPatch,
  UserRecord,
} from '../store/types.ts';
import { type AdminCaller, AdminPermission } from './access.ts';
import {
  type AdminTarget,
  auditValues,
  type GrantRule,
  type Grants,
  normalizeGrants,
  sameSet,
  setKeys,
} from './grants.ts';
import { AdminHttpError, SeparationOfDutiesError } from './http.ts';
import { errors, noContent, type RouteDoc, readRule, routeOptions, type Schema } from './route-docs.ts';
import * as s from './schemas.ts';
import { clientView, permissionView, roleView, userView } from './views.ts';

/** Options of {@link registerAdminRoutes} (`api.ts`). */
export interface AdminRoutesOptions {
  readonly store: AuthStore;
  /** Hashes new user passwords (and checks their length rules). */
  readonly passwordHasher: PasswordHasher;
  /** Hashes new client secrets into the form the token endpoint verifies. */
  readonly hashClientSecret: (secret: string) => Promise<string>;
  /** Seals the secrets of `client_secret_jwt` clients (and opens them to re-hash when a client leaves it). */
  readonly clientSecrets: ClientSecrets;
  /** Clock, ms since epoch (lockout state). */
  readonly now: () => number;
}

/** Query of a list route. */
export type ListQ = { offset?: number; limit?: number; search?: string };

/**
 * One collection of the API (users, roles, permissions, clients): what its list, get, update and delete
 * routes share. `R` is the store record, `U` the store patch of an update.
 */
export interface Resource<R, U> {
  /** OpenAPI tag and path segment, e.g. `users`. */
  readonly tag: 'users' | 'roles' | 'permissions' | 'clients';
  /** The path parameter of one item (`id`, `code`, `clientId`) and its schema. */
  readonly param: string;
  readonly params: Schema;
  /** The permission of the resource's area (changes). */
  readonly permission: string;
  /** The item schema (OpenAPI). */
  readonly schema: Schema;
  /** The item found by its path parameter (after normalizing it); 404 when there is none. */
  find(raw: string): Promise<R>;
  /** The store key of an item (for store calls and `Location`). */
  key(record: R): string;
  /** The audit target of an item. */
  target(record: R): AdminTarget;
  /** The API view of an item at time `at` (ms since epoch). */
  view(record: R, at: number): unknown;
  list(query: ListQ & { offset: number; limit: number }): Promise<Page<R>>;
  update(key: string, patch: U, options: ChangeOptions): Promise<R>;
  remove(key: string, options: ChangeOptions): Promise<void>;
}

/** The route kit of one API instance; see {@link createRouteKit}. */
export type RouteKit = ReturnType<typeof createRouteKit>;

/**
 * Builds the shared helpers over `app` (which carries the `/api` prefix and the permission middleware).
 */
export function createRouteKit(app: FastifyInstance, options: AdminRoutesOptions) {
  const { store, passwordHasher, hashClientSecret, clientSecrets, now } = options;
  const access = {
    /** Whether the (authenticated) caller also holds `permission` (deny rules win). */
    holds: (request: FastifyRequest, permission: string) => request.auth.check(permission).isGranted,
    /** The authenticated caller, from the permission middleware's outcome. */
    caller(request: FastifyRequest): AdminCaller {
      const subject = request.auth?.subject;
      if (!subject) throw new Error('administration API: route reached without an authenticated subject');
      return {
        subjectId: subject.id,
        subjectName: subject.kind === 'user' ? subject.name : null,
        clientId: subject.clientId,
      };
    },
  };
  const P = AdminPermission;

  /**
   * The audit event of a change, written by the store in the change's transaction: the caller, the action,
   * the target, the changed field names and (for creates and updates) their new values, without secrets.
   */
  function auditFor(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    changed: string[],
    values?: object,
  ): ChangeOptions {
    const caller = access.caller(request);
    const event: NewAuditEvent = {
      category: 'Admin',
      outcome: 'Success',
      subjectId: caller.subjectId,
      subjectName: caller.subjectName,
      clientId: caller.clientId,
      remoteAddress: clientAddress(request),
      details: { action, target: { ...target }, changed, ...(values ? { values: auditValues(values) } : {}) },
    };
    return { audit: event };
  }

  async function refuse(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    field: string,
    permission: string,
  ) {
    const caller = access.caller(request);
    await store.appendAudit({
      category: 'Admin',
      outcome: 'Denied',
      subjectId: caller.subjectId,
      subjectName: caller.subjectName,
      clientId: caller.clientId,
      remoteAddress: clientAddress(request),
      failureCode: 'separation_of_duties',
      details: { action, target: { ...target }, field, permission },
    });
    throw new SeparationOfDutiesError(field, permission);
  }

  /**
   * Separation of duties for a create: normalizes the granting fields of `body` (400 for a bad one), and a
   * non-empty value of a granting field grants something and needs the rule's permission (403 otherwise).
   * Checked in the rules' order. @returns the normalized grants (absent fields undefined).
   */
  async function guardCreate(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    rules: readonly GrantRule[],
    body: Record<string, unknown>,
  ): Promise<Grants> {
    const grants = normalizeGrants(rules, body);
    for (const rule of rules) {
      const value = grants[rule.field];
      if (value === undefined || value.length === 0) continue;
      if (!access.holds(request, rule.permission)) {
        await refuse(request, action, target, rule.field, rule.permission);
      }
    }
    return grants;
  }

  /**
   * Separation of duties for an update: a value that differs from the current one changes something and
   * needs the rule's permission (403 otherwise). An unchanged value is dropped from the patch when the
   * caller lacks the permission, so that a concurrent change by someone else is never overwritten by it.
   * Adds the granting fields that stay to `patch`, in the rules' order.
   */
  async function guardUpdate(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    rules: readonly GrantRule[],
    grants: Grants,
    current: object,
    patch: Record<string, unknown>,
  ) {
    for (const { field, permission, key } of rules) {
      const value = grants[field];
      if (value === undefined) continue;
      if (!access.holds(request, permission)) {
        if (sameSet(value, (current as Record<string, string[]>)[field] ?? [], key)) continue;
        await refuse(request, action, target, field, permission);
      }
      patch[field] = value;
    }
  }

  const paging = (query: { offset?: number; limit?: number }) => ({
    offset: query.offset ?? 0,
    limit: query.limit ?? s.DEFAULT_PAGE,
  });

  /** 201 with `Location` of the new item of `resource`. */
  function created<R, U>(reply: FastifyReply, resource: Resource<R, U>, record: R, body: unknown) {
    const location = `${app.prefix}/${resource.tag}/${encodeURIComponent(resource.key(record))}`;
    return reply.code(201).header('location', location).send(body);
  }

  /** `GET /{tag}`: a page of items. */
  function listRoute<R, U>(resource: Resource<R, U>, summary: string, description: string) {
    app.get<{ Querystring: ListQ }>(
      `/${resource.tag}`,
      routeOptions(
        resource.tag,
        P.Read,
        {
          summary,
          description: readRule(resource.permission),
          querystring: s.listQuery,
          response: { 200: { description, ...s.pageOf(resource.schema) }, ...errors() },
        },
        [resource.permission],
      ),
      async (request) => {
        const { offset, limit } = paging(request.query);
        const page = await resource.list({ offset, limit, search: request.query.search });
        const at = now();
        return { items: page.items.map((item) => resource.view(item, at)), total: page.total, offset, limit };
      },
    );
  }

  /** `GET /{tag}/:param`: one item. */
  function getRoute<R, U>(resource: Resource<R, U>, summary: string, description: string) {
    app.get<{ Params: Record<string, string> }>(
      `/${resource.tag}/:${resource.param}`,
      routeOptions(
        resource.tag,
        P.Read,
        {
          summary,
          description: readRule(resource.permission),
          params: resource.params,
          response: { 200: { description, ...resource.schema }, ...errors(404) },
        },
        [resource.permission],
      ),
      async (request) => resource.view(await resource.find(request.params[resource.param] as string), now()),
    );
  }

  /**
   * `PATCH /{tag}/:param`: granting fields normalized (400) before the item is looked up (404), then the
   * separation-of-duties rules, then one store change with its audit event (`{type}.update`).
   */
  function updateRoute<R, U, B extends Record<string, unknown>>(
    resource: Resource<R, U>,
    doc: RouteDoc,
    rules: readonly GrantRule[],
    basePatch: (body: B) => Record<string, unknown>,
  ) {
    app.patch<{ Params: Record<string, string>; Body: B }>(
      `/${resource.tag}/:${resource.param}`,
      routeOptions(resource.tag, resource.permission, { ...doc, params: resource.params }),
      async (request) => {
        const body = request.body as B;
        const grants = normalizeGrants(rules, body);
        const current = await resource.find(request.params[resource.param] as string);
        const target = resource.target(current);
        const action = `${target.type}.update`;
        const patch = basePatch(body);
        await guardUpdate(request, action, target, rules, grants, current as object, patch);
        const audit = auditFor(request, action, target, setKeys(patch), patch);
        return resource.view(await resource.update(resource.key(current), patch as U, audit), now());
      },
    );
  }

  /** `DELETE /{tag}/:param`, audited as `{type}.delete`. */
  function deleteRoute<R, U>(resource: Resource<R, U>, summary: string) {
    app.delete<{ Params: Record<string, string> }>(
      `/${resource.tag}/:${resource.param}`,
      routeOptions(resource.tag, resource.permission, {
        summary,
        params: resource.params,
        body: s.emptyBody,
        response: { ...noContent, ...errors(404) },
      }),
      async (request, reply) => {
        const current = await resource.find(request.params[resource.param] as string);
        const target = resource.target(current);
        await resource.remove(resource.key(current), auditFor(request, `${target.type}.delete`, target, []));
        return reply.code(204).send();
      },
    );
  }

  /** A lookup that answers 404 `{type} '{key}' not found` when the store has no such item. */
  const finder =
    <R>(
      type: AdminTarget['type'],
      get: (key: string) => Promise<R | undefined | null>,
      normalize = (raw: string) => raw,
    ) =>
    async (raw: string): Promise<R> => {
      const key = normalize(raw);
      const record = await get(key);
      if (!record) throw new AdminHttpError('not_found', `${type} '${key}' not found`);
      return record;
    };

  const users: Resource<UserRecord, UserPatch> = {
    tag: 'users',
    param: 'id',
    params: s.idParams,
    permission: P.Users,
    schema: s.userSchema,
    find: finder('user', (id) => store.getUser(id)),
    key: (user) => user.id,
    target: (user) => ({ type: 'user', id: user.id, name: user.userName }),
    view: userView,
    list: (query) => store.listUsers(query),
    update: (id, patch, audit) => store.updateUser(id, patch, audit),
    remove: (id, audit) => store.deleteUser(id, audit),
  };
  const roles: Resource<RoleRecord, RolePatch> = {
    tag: 'roles',
    param: 'id',
    params: s.idParams,
    permission: P.Roles,
    schema: s.roleSchema,
    find: finder('role', (id) => store.getRole(id)),
    key: (role) => role.id,
    target: (role) => ({ type: 'role', id: role.id, name: role.name }),
    view: (role) => roleView(role),
    list: (query) => store.listRoles(query),
    update: (id, patch, audit) => store.updateRole(id, patch, audit),
    remove: (id, audit) => store.deleteRole(id, audit),
  };
  const codeOf = (raw: string) => normalizePermissionCode(raw, 'code', { allowWildcards: false });
  const permissions: Resource<PermissionRecord, { description: string }> = {
    tag: 'permissions',
    param: 'code',
    params: s.codeParams,
    permission: P.Permissions,
    schema: s.permissionSchema,
    find: finder('permission', (code) => store.getPermission(code), codeOf),
    key: (permission) => permission.code,
    target: (permission) => ({ type: 'permission', id: permission.code }),
    view: (permission) => permissionView(permission),
    list: (query) => store.listPermissions(query),
    update: (code, patch, audit) => store.updatePermission(code, patch, audit),
    remove: (code, audit) => store.deletePermission(code, audit),
  };
  const clients: Resource<ClientRecord, ClientPatch> = {
    tag: 'clients',
    param: 'clientId',
    params: s.clientIdParams,
    permission: P.Clients,
    schema: s.clientSchema,
    find: finder('client', (clientId) => store.getClient(clientId)),
    key: (client) => client.clientId,
    target: (client) => ({ type: 'client', id: client.clientId }),
    view: (client) => clientView(client),
    list: (query) => store.listClients(query),
    update: (clientId, patch, audit) => store.updateClient(clientId, patch, audit),
    remove: (clientId, audit) => store.deleteClient(clientId, audit),
  };

  return {
    store,
    passwordHasher,
    hashClientSecret,
    clientSecrets,
    now,
    access,
    P,
    auditFor,
    refuse,
    guardCreate,
    guardUpdate,
    paging,
    created,
    listRoute,
    getRoute,
    updateRoute,
    deleteRoute,
    finder,
    users,
    roles,
    codeOf,
    permissions,
    clients,
  };
}
