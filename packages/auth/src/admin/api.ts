/**
 * Routes of the administration REST API under `{BasePath}/api` (spec 001 "Administration REST API",
 * issue 6): users, roles, permissions, clients and the audit log.
 *
 * Every route is protected by the permission middleware (reads need `auth.admin.read`, the audit log
 * `auth.admin.audit`, changes the permission of their area) and the separation-of-duties rules of spec 001
 * "Authentication" answer 403. Every change is one store transaction that also writes its audit event
 * (category `Admin`, outcome `Success`, the caller as subject, `details.action`/`target`/`changed`).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError } from '../errors.ts';
import type { PasswordHasher } from '../passwords.ts';
import { normalizePermissionCode, normalizePermissionCodes } from '../permissions.ts';
import type {
  AuditEvent,
  AuthStore,
  ChangeOptions,
  ClientMetadata,
  ClientPatch,
  ClientRecord,
  NewAuditEvent,
  Page,
  PermissionRecord,
  RolePatch,
  RoleRecord,
  UserPatch,
  UserProfileInput,
  UserRecord,
} from '../store/types.ts';
import { nameKey, roleNameList } from '../store/validation.ts';
import { type AdminCaller, AdminPermission } from './access.ts';
import { AdminHttpError, SeparationOfDutiesError } from './http.ts';
import { registerOidcAdminRoutes } from './oidc-routes.ts';
import { errors, iso, noContent, type RouteDoc, readRule, routeOptions, type Schema } from './route-docs.ts';
import * as s from './schemas.ts';

/** Options of {@link registerAdminRoutes}. */
export interface AdminRoutesOptions {
  readonly store: AuthStore;
  /** Hashes new user passwords (and checks their length rules). */
  readonly passwordHasher: PasswordHasher;
  /** Hashes new client secrets into the form the token endpoint verifies. */
  readonly hashClientSecret: (secret: string) => Promise<string>;
  /** Clock, ms since epoch (lockout state). */
  readonly now: () => number;
}

/** The API view of a user (no password hash, no security stamp). */
export function userView(user: UserRecord, now: number) {
  return {
    id: user.id,
    userName: user.userName,
    isEnabled: user.isEnabled,
    isLockedOut: user.lockoutEnd !== null && user.lockoutEnd > now,
    lockoutEnd: user.lockoutEnd === null ? null : iso(user.lockoutEnd),
    accessFailedCount: user.accessFailedCount,
    hasPassword: user.passwordHash !== null,
    roles: user.roles,
    directPermissions: user.directPermissions,
    deniedPermissions: user.deniedPermissions,
    displayName: user.displayName,
    givenName: user.givenName,
    familyName: user.familyName,
    email: user.email,
    emailVerified: user.emailVerified,
    createdAt: iso(user.createdAt),
    updatedAt: iso(user.updatedAt),
  };
}

/** The API view of a role. */
export function roleView(role: RoleRecord) {
  return {
    id: role.id,
    name: role.name,
    description: role.description,
    permissions: role.permissions,
    deniedPermissions: role.deniedPermissions,
    parentRoles: role.parentRoles,
    isSystem: role.isSystem,
    createdAt: iso(role.createdAt),
    updatedAt: iso(role.updatedAt),
  };
}

/** The API view of a permission catalog entry. */
export function permissionView(permission: PermissionRecord) {
  return { code: permission.code, description: permission.description, createdAt: iso(permission.createdAt) };
}

/** The API view of a client (no secret hash). */
export function clientView(client: ClientRecord) {
  return {
    clientId: client.clientId,
    displayName: client.displayName,
    clientType: client.clientType,
    hasSecret: client.secretHash !== null,
    isEnabled: client.isEnabled,
    redirectUris: client.redirectUris,
    allowedGrantTypes: client.allowedGrantTypes,
    allowedScopes: client.allowedScopes,
    permissions: client.permissions,
    postLogoutRedirectUris: client.postLogoutRedirectUris,
    backchannelLogoutUri: client.backchannelLogoutUri,
    requireConsent: client.requireConsent,
    metadata: client.metadata,
    createdAt: iso(client.createdAt),
    updatedAt: iso(client.updatedAt),
  };
}

/** The API view of an audit event. */
export function auditView(event: AuditEvent) {
  return {
    id: event.id,
    time: iso(event.time),
    category: event.category,
    outcome: event.outcome,
    subjectId: event.subjectId,
    subjectName: event.subjectName,
    clientId: event.clientId,
    failureCode: event.failureCode,
    remoteAddress: event.remoteAddress,
    details: event.details,
  };
}

const SECRET_FIELDS = new Set(['password', 'passwordHash', 'clientSecret', 'secretHash']);
/** Largest `details.values` kept in an audit event, in characters of JSON; larger ones keep field names only. */
export const MAX_AUDIT_VALUES_LENGTH = 8192;

/** New values of a change for its audit event: secrets and absent fields left out, size bounded. */
function auditValues(values: object): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values)) {
    if (value !== undefined && !SECRET_FIELDS.has(key)) out[key] = value;
  }
  return JSON.stringify(out).length <= MAX_AUDIT_VALUES_LENGTH
    ? out
    : { truncated: true, fields: Object.keys(out) };
}

/** What an administration change is about (recorded in its audit event's `details.target`). */
export interface AdminTarget {
  readonly type: 'user' | 'role' | 'permission' | 'client';
  readonly id?: string;
  readonly name?: string;
}

const sameSet = (a: readonly string[], b: readonly string[], key: (x: string) => string = (x) => x) => {
  const left = new Set(a.map(key));
  const right = new Set(b.map(key));
  return left.size === right.size && [...left].every((x) => right.has(x));
};

/**
 * A field that grants something (roles or permission codes) and so needs a second permission to set or
 * change (spec 001 "Authentication", separation-of-duties rules 1–3).
 */
interface GrantRule {
  readonly field: string;
  /** The permission needed, besides the route's own, to grant through `field`. */
  readonly permission: string;
  /** Normalizes a present value (400 on a name or code that cannot be normalized). */
  readonly normalize: (value: string[], field: string) => string[];
  /** Identity of an element when comparing with the current value (default: exact). */
  readonly key?: (x: string) => string;
}

const roleGrant: GrantRule = {
  field: 'roles',
  permission: AdminPermission.Roles,
  normalize: (value, field) => roleNameList(value, field),
  key: nameKey,
};
const permissionGrant = (field: string): GrantRule => ({
  field,
  permission: AdminPermission.Permissions,
  normalize: (value, name) => normalizePermissionCodes(value, name),
});
/** The granting fields of users, roles and clients, in the order they are normalized and checked. */
const USER_GRANTS = [roleGrant, permissionGrant('directPermissions'), permissionGrant('deniedPermissions')];
const ROLE_GRANTS = [permissionGrant('permissions'), permissionGrant('deniedPermissions')];
const CLIENT_GRANTS = [permissionGrant('permissions')];

type Grants = Record<string, string[] | undefined>;

/** The normalized values of `rules`' fields of `body` (absent ones undefined), in the rules' order. */
function normalizeGrants(rules: readonly GrantRule[], body: Record<string, unknown>): Grants {
  const out: Grants = {};
  for (const rule of rules) {
    const value = body[rule.field] as string[] | undefined;
    out[rule.field] = value === undefined ? undefined : rule.normalize(value, rule.field);
  }
  return out;
}

/** Names of the fields of `patch` that are set (not undefined), in order. */
const setKeys = (patch: object) =>
  Object.entries(patch)
    .filter(([, value]) => value !== undefined)
    .map(([key]) => key);

/** The profile fields of a user body (absent ones undefined). */
const profileOf = (body: UserProfileInput): UserProfileInput => ({
  displayName: body.displayName,
  givenName: body.givenName,
  familyName: body.familyName,
  email: body.email,
  emailVerified: body.emailVerified,
});

type ListQ = { offset?: number; limit?: number; search?: string };

/**
 * One collection of the API (users, roles, permissions, clients): what its list, get, update and delete
 * routes share. `R` is the store record, `U` the store patch of an update.
 */
interface Resource<R, U> {
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

/**
 * Registers the API routes on `app` (which must carry the `/api` prefix, the strict validation of
 * `./http.ts` and the core's permission middleware, which reads each route's `config.auth`).
 */
export function registerAdminRoutes(app: FastifyInstance, options: AdminRoutesOptions): void {
  const { store, passwordHasher, hashClientSecret, now } = options;
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
      remoteAddress: request.ip,
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
      remoteAddress: request.ip,
      failureCode: 'separation_of_duties',
      details: { action, target: { ...target }, field, permission },
    });
    throw new SeparationOfDutiesError(field, permission);
  }

  /**
   * Separation of duties for a create: a non-empty value of a granting field grants something and needs the
   * rule's permission (403 otherwise). Checked in the rules' order.
   */
  async function guardCreate(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    rules: readonly GrantRule[],
    grants: Grants,
  ) {
    for (const rule of rules) {
      const value = grants[rule.field];
      if (value === undefined || value.length === 0) continue;
      if (!access.holds(request, rule.permission)) {
        await refuse(request, action, target, rule.field, rule.permission);
      }
    }
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
      if (!record) throw new AdminHttpError(404, `${type} '${key}' not found`);
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

  // ── users ──

  listRoute(users, 'List users (paged, by user name)', 'A page of users');
  getRoute(users, 'Get a user', 'The user');

  type NewUserBody = UserProfileInput & {
    userName: string;
    password?: string;
    isEnabled?: boolean;
    roles?: string[];
    directPermissions?: string[];
    deniedPermissions?: string[];
  };

  app.post<{ Body: NewUserBody }>(
    '/users',
    routeOptions('users', P.Users, {
      summary: 'Create a user',
      description:
        'Needs `auth.admin.users`; non-empty `roles` also `auth.admin.roles`, non-empty `directPermissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties).',
      body: s.createUserBody,
      response: { 201: { description: 'Created: the user', ...s.userSchema }, ...errors(409) },
    }),
    async (request, reply) => {
      const body = request.body;
      const grants = normalizeGrants(USER_GRANTS, { ...body });
      const roles = grants.roles ?? [];
      const target: AdminTarget = { type: 'user', name: body.userName };
      await guardCreate(request, 'user.create', target, USER_GRANTS, grants);
      const passwordHash = body.password === undefined ? null : await passwordHasher.hash(body.password);
      const changed = Object.keys(body).filter((k) => k !== 'password');
      if (body.password !== undefined) changed.push('password');
      const fields = {
        userName: body.userName,
        isEnabled: body.isEnabled,
        roles,
        directPermissions: grants.directPermissions,
        deniedPermissions: grants.deniedPermissions,
        ...profileOf(body),
      };
      const user = await store.createUser(
        { ...fields, passwordHash },
        auditFor(request, 'user.create', target, changed, fields),
      );
      return created(reply, users, user, userView(user, now()));
    },
  );

  updateRoute<UserRecord, UserPatch, Omit<NewUserBody, 'password' | 'userName'> & { userName?: string }>(
    users,
    {
      summary: 'Update a user (omitted fields stay unchanged)',
      description:
        'Needs `auth.admin.users`; changing `roles` also `auth.admin.roles`, changing `directPermissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties). `isEnabled: false` disables the account and refuses its tokens at once.',
      body: s.updateUserBody,
      response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404, 409) },
    },
    USER_GRANTS,
    (body) => ({ userName: body.userName, isEnabled: body.isEnabled, ...profileOf(body) }),
  );

  deleteRoute(users, 'Delete a user');

  app.put<{ Params: { id: string }; Body: { password: string } }>(
    '/users/:id/password',
    routeOptions('users', P.Users, {
      summary: "Set a user's password",
      description:
        'Changes the security stamp: tokens issued before are refused with `SubjectDisabled` (spec 001 "States and transitions").',
      params: s.idParams,
      body: s.setPasswordBody,
      response: { ...noContent, ...errors(404) },
    }),
    async (request, reply) => {
      const current = await users.find(request.params.id);
      const hash = await passwordHasher.hash(request.body.password);
      await store.setPasswordHash(
        current.id,
        hash,
        auditFor(request, 'user.password', users.target(current), ['password']),
      );
      return reply.code(204).send();
    },
  );

  for (const [action, summary] of [
    ['enable', 'Enable a user (IsEnabled = true)'],
    ['disable', 'Disable a user (IsEnabled = false; its tokens are refused at once)'],
    ['unlock', 'End a lockout and reset the failure count'],
  ] as const) {
    app.post<{ Params: { id: string } }>(
      `/users/:id/${action}`,
      routeOptions('users', P.Users, {
        summary,
        params: s.idParams,
        body: s.emptyBody,
        response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404) },
      }),
      async (request) => {
        const current = await users.find(request.params.id);
        const audit = auditFor(
          request,
          `user.${action}`,
          users.target(current),
          action === 'unlock' ? ['lockoutEnd'] : ['isEnabled'],
          action === 'unlock' ? { lockoutEnd: null } : { isEnabled: action === 'enable' },
        );
        const user =
          action === 'unlock'
            ? await store.unlockUser(current.id, audit)
            : await store.updateUser(current.id, { isEnabled: action === 'enable' }, audit);
        return userView(user, now());
      },
    );
  }

  // ── roles ──

  listRoute(roles, 'List roles (paged, by name)', 'A page of roles');
  getRoute(roles, 'Get a role', 'The role');

  type RoleBody = {
    name: string;
    description?: string;
    permissions?: string[];
    deniedPermissions?: string[];
    parentRoles?: string[];
  };

  app.post<{ Body: RoleBody }>(
    '/roles',
    routeOptions('roles', P.Roles, {
      summary: 'Create a role',
      description:
        'Needs `auth.admin.roles`; non-empty `permissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties).',
      body: s.createRoleBody,
      response: { 201: { description: 'Created: the role', ...s.roleSchema }, ...errors(409) },
    }),
    async (request, reply) => {
      const body = request.body;
      const grants = normalizeGrants(ROLE_GRANTS, body);
      const target: AdminTarget = { type: 'role', name: body.name };
      await guardCreate(request, 'role.create', target, ROLE_GRANTS, grants);
      const fields = {
        name: body.name,
        description: body.description,
        permissions: grants.permissions,
        deniedPermissions: grants.deniedPermissions,
        parentRoles: body.parentRoles,
      };
      const role = await store.createRole(
        fields,
        auditFor(request, 'role.create', target, Object.keys(body), fields),
      );
      return created(reply, roles, role, roleView(role));
    },
  );

  updateRoute<RoleRecord, RolePatch, Partial<RoleBody>>(
    roles,
    {
      summary: 'Update a role (omitted fields stay unchanged)',
      description:
        'Needs `auth.admin.roles`; changing `permissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties). Built-in system roles keep their name and rules (400).',
      body: s.updateRoleBody,
      response: { 200: { description: 'The role', ...s.roleSchema }, ...errors(404, 409) },
    },
    ROLE_GRANTS,
    (body) => ({ name: body.name, description: body.description, parentRoles: body.parentRoles }),
  );

  deleteRoute(roles, 'Delete a role (its holders lose it); built-in system roles cannot be deleted (400)');

  // ── permissions ──

  listRoute(permissions, 'List the permission catalog (paged, by code)', 'A page of permissions');
  getRoute(permissions, 'Get a permission by code (case-insensitive)', 'The permission');

  app.post<{ Body: { code: string; description?: string } }>(
    '/permissions',
    routeOptions('permissions', P.Permissions, {
      summary: 'Add a permission code to the catalog',
      description: 'The code is normalized (trimmed, lower case); one that cannot be normalized is a 400.',
      body: s.createPermissionBody,
      response: { 201: { description: 'Created: the permission', ...s.permissionSchema }, ...errors(409) },
    }),
    async (request, reply) => {
      const code = codeOf(request.body.code);
      const fields = { code, description: request.body.description };
      const permission = await store.createPermission(
        fields,
        auditFor(
          request,
          'permission.create',
          { type: 'permission', id: code },
          Object.keys(request.body),
          fields,
        ),
      );
      return created(reply, permissions, permission, permissionView(permission));
    },
  );

  updateRoute<PermissionRecord, { description: string }, { description: string }>(
    permissions,
    {
      summary: "Change a permission's description",
      body: s.updatePermissionBody,
      response: { 200: { description: 'The permission', ...s.permissionSchema }, ...errors(404) },
    },
    [],
    (body) => ({ description: body.description }),
  );

  deleteRoute(permissions, 'Remove a permission code from the catalog');

  // ── clients ──

  const newSecret = () => randomBytes(32).toString('base64url');

  listRoute(clients, 'List clients (paged, by client id)', 'A page of clients');
  getRoute(clients, 'Get a client', 'The client');

  type ClientBody = {
    clientId: string;
    displayName?: string;
    clientType: 'public' | 'confidential';
    clientSecret?: string;
    isEnabled?: boolean;
    redirectUris?: string[];
    allowedGrantTypes?: string[];
    allowedScopes?: string[];
    permissions?: string[];
    postLogoutRedirectUris?: string[];
    backchannelLogoutUri?: string | null;
    requireConsent?: boolean;
  };

  app.post<{ Body: ClientBody }>(
    '/clients',
    routeOptions('clients', P.Clients, {
      summary: 'Register a client',
      description:
        'Needs `auth.admin.clients`; non-empty `permissions` also `auth.admin.permissions` (separation of duties). A confidential client without `clientSecret` gets a generated one, returned once as `clientSecret`.',
      body: s.createClientBody,
      response: {
        201: {
          description: 'Created: the client (with `clientSecret` when one was generated)',
          ...s.clientWithSecretSchema,
        },
        ...errors(409),
      },
    }),
    async (request, reply) => {
      const { clientSecret, ...body } = request.body;
      if (body.clientType === 'public' && clientSecret !== undefined) {
        throw new ValidationError(
          'clientSecret',
          'public_client',
          'clientSecret: a public client has no secret',
        );
      }
      const { permissions: granted } = normalizeGrants(CLIENT_GRANTS, body);
      const target: AdminTarget = { type: 'client', id: body.clientId };
      await guardCreate(request, 'client.create', target, CLIENT_GRANTS, { permissions: granted });
      const secret = body.clientType === 'confidential' ? (clientSecret ?? newSecret()) : undefined;
      const changed = Object.keys(body);
      if (secret !== undefined) changed.push('clientSecret');
      const client = await store.createClient(
        {
          ...body,
          permissions: granted,
          secretHash: secret === undefined ? null : await hashClientSecret(secret),
        },
        auditFor(request, 'client.create', target, changed, { ...body, permissions: granted }),
      );
      const view = clientView(client);
      return created(
        reply,
        clients,
        client,
        clientSecret === undefined && secret !== undefined ? { ...view, clientSecret: secret } : view,
      );
    },
  );

  updateRoute<
    ClientRecord,
    ClientPatch,
    Omit<Partial<ClientBody>, 'clientId' | 'clientType' | 'clientSecret'>
  >(
    clients,
    {
      summary: 'Update a client (omitted fields stay unchanged)',
      description:
        'Needs `auth.admin.clients`; changing `permissions` also `auth.admin.permissions` (separation of duties). Rotate the secret with `POST /clients/{clientId}/secret`.',
      body: s.updateClientBody,
      response: { 200: { description: 'The client', ...s.clientSchema }, ...errors(404) },
    },
    CLIENT_GRANTS,
    ({ permissions: _granted, ...rest }) => ({ ...rest }),
  );

  app.post<{ Params: { clientId: string }; Body: { clientSecret?: string } | undefined }>(
    '/clients/:clientId/secret',
    routeOptions('clients', P.Clients, {
      summary: "Replace a confidential client's secret",
      description:
        'Without a body (or without `clientSecret`) a random secret is generated and returned once as `clientSecret`.',
      params: s.clientIdParams,
      body: s.rotateSecretBody,
      response: {
        200: {
          description: 'The client (with `clientSecret` when one was generated)',
          ...s.clientWithSecretSchema,
        },
        ...errors(404),
      },
    }),
    async (request) => {
      const current = await clients.find(request.params.clientId);
      if (current.clientType !== 'confidential') {
        throw new AdminHttpError(400, `client '${current.clientId}': a public client has no secret`);
      }
      const given = request.body?.clientSecret;
      const secret = given ?? newSecret();
      const client = await store.updateClient(
        current.clientId,
        { secretHash: await hashClientSecret(secret) },
        auditFor(request, 'client.secret', clients.target(current), ['clientSecret']),
      );
      const view = clientView(client);
      return given === undefined ? { ...view, clientSecret: secret } : view;
    },
  );

  app.put<{ Params: { clientId: string }; Body: ClientMetadata }>(
    '/clients/:clientId/metadata',
    routeOptions('clients', P.Clients, {
      summary: "Replace a client's OAuth extension settings",
      description:
        'DPoP required, PAR required, token endpoint authentication method and keys (`private_key_jwt`), resource indicators, token exchange policy. `{}` clears them.',
      params: s.clientIdParams,
      body: s.clientMetadataSchema,
      response: { 200: { description: 'The client', ...s.clientSchema }, ...errors(404) },
    }),
    async (request) => {
      const current = await clients.find(request.params.clientId);
      const client = await store.setClientMetadata(
        current.clientId,
        request.body,
        auditFor(
          request,
          'client.metadata',
          clients.target(current),
          Object.keys(request.body),
          request.body,
        ),
      );
      return clientView(client);
    },
  );

  deleteRoute(clients, 'Delete a client (and its refresh tokens and authorization codes)');

  registerOidcAdminRoutes(app, {
    store,
    now,
    findUser: (id) => users.find(id),
    target: (user) => users.target(user),
    auditFor,
    holds: access.holds,
  });

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
        throw new AdminHttpError(400, 'querystring.from: must not be after querystring.to');
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
