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
  ClientPatch,
  ClientRecord,
  NewAuditEvent,
  PermissionRecord,
  RolePatch,
  RoleRecord,
  UserPatch,
  UserRecord,
} from '../store/types.ts';
import { nameKey, roleNameList } from '../store/validation.ts';
import { type AdminCaller, AdminPermission } from './access.ts';
import { AdminHttpError, SeparationOfDutiesError } from './http.ts';
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

const iso = (ms: number) => new Date(ms).toISOString();

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

interface Target {
  readonly type: 'user' | 'role' | 'permission' | 'client';
  readonly id?: string;
  readonly name?: string;
}

const sameSet = (a: readonly string[], b: readonly string[], key: (x: string) => string = (x) => x) => {
  const left = new Set(a.map(key));
  const right = new Set(b.map(key));
  return left.size === right.size && [...left].every((x) => right.has(x));
};

const denial = { description: 'Permission middleware refusal (spec 001 denial body)', ...s.denialSchema };
const errors = (...codes: number[]) => {
  const out: Record<number, unknown> = {
    400: { description: 'Validation failure', ...s.errorSchema },
    401: denial,
    403: { description: 'Missing permission or separation-of-duties rule', ...s.denialSchema },
  };
  for (const code of codes) {
    out[code] = {
      description: code === 404 ? 'Not found' : code === 409 ? 'Uniqueness conflict' : 'Error',
      ...s.errorSchema,
    };
  }
  return out;
};
const noContent = { 204: { description: 'Done', type: 'null' } };

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
  const bearer = [{ bearerAuth: [] }];

  /**
   * The audit event of a change, written by the store in the change's transaction: the caller, the action,
   * the target, the changed field names and (for creates and updates) their new values, without secrets.
   */
  function auditFor(
    request: FastifyRequest,
    action: string,
    target: Target,
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
    target: Target,
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
   * Separation of duties for one field of a create: a non-empty value grants something and needs
   * `permission` (403 otherwise).
   */
  async function guardCreate(
    request: FastifyRequest,
    action: string,
    target: Target,
    field: string,
    value: readonly string[] | undefined,
    permission: string,
  ) {
    if (value === undefined || value.length === 0) return;
    if (!access.holds(request, permission)) await refuse(request, action, target, field, permission);
  }

  /**
   * Separation of duties for one field of an update: a value that differs from the current one changes
   * something and needs `permission` (403 otherwise). An unchanged value is dropped from the patch when the
   * caller lacks the permission, so that a concurrent change by someone else is never overwritten by it.
   * @returns whether the field stays in the patch.
   */
  async function guardUpdate(
    request: FastifyRequest,
    action: string,
    target: Target,
    field: string,
    value: readonly string[] | undefined,
    current: readonly string[],
    permission: string,
    key?: (x: string) => string,
  ): Promise<boolean> {
    if (value === undefined) return false;
    if (access.holds(request, permission)) return true;
    if (sameSet(value, current, key)) return false;
    await refuse(request, action, target, field, permission);
    return false;
  }

  const paging = (query: { offset?: number; limit?: number }) => ({
    offset: query.offset ?? 0,
    limit: query.limit ?? s.DEFAULT_PAGE,
  });

  function created(reply: FastifyReply, location: string, body: unknown) {
    return reply.code(201).header('location', location).send(body);
  }
  const base = () => app.prefix;

  // ── users ──

  type ListQ = { offset?: number; limit?: number; search?: string };

  app.get<{ Querystring: ListQ }>(
    '/users',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['users'],
        summary: 'List users (paged, by user name)',
        security: bearer,
        querystring: s.listQuery,
        response: { 200: { description: 'A page of users', ...s.pageOf(s.userSchema) }, ...errors() },
      },
    },
    async (request) => {
      const { offset, limit } = paging(request.query);
      const page = await store.listUsers({ offset, limit, search: request.query.search });
      const at = now();
      return { items: page.items.map((u) => userView(u, at)), total: page.total, offset, limit };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/users/:id',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['users'],
        summary: 'Get a user',
        security: bearer,
        params: s.idParams,
        response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404) },
      },
    },
    async (request) => userView(await requireUser(request.params.id), now()),
  );

  async function requireUser(id: string): Promise<UserRecord> {
    const user = await store.getUser(id);
    if (!user) throw new AdminHttpError(404, `user '${id}' not found`);
    return user;
  }

  type NewUserBody = {
    userName: string;
    password?: string;
    isEnabled?: boolean;
    roles?: string[];
    directPermissions?: string[];
    deniedPermissions?: string[];
  };

  app.post<{ Body: NewUserBody }>(
    '/users',
    {
      config: { auth: { permission: P.Users } },
      schema: {
        tags: ['users'],
        summary: 'Create a user',
        description:
          'Needs `auth.admin.users`; non-empty `roles` also `auth.admin.roles`, non-empty `directPermissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties).',
        security: bearer,
        body: s.createUserBody,
        response: { 201: { description: 'Created: the user', ...s.userSchema }, ...errors(409) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const roles = roleNameList(body.roles);
      const direct =
        body.directPermissions && normalizePermissionCodes(body.directPermissions, 'directPermissions');
      const denied =
        body.deniedPermissions && normalizePermissionCodes(body.deniedPermissions, 'deniedPermissions');
      const target: Target = { type: 'user', name: body.userName };
      await guardCreate(request, 'user.create', target, 'roles', roles, P.Roles);
      await guardCreate(request, 'user.create', target, 'directPermissions', direct, P.Permissions);
      await guardCreate(request, 'user.create', target, 'deniedPermissions', denied, P.Permissions);
      const passwordHash = body.password === undefined ? null : await passwordHasher.hash(body.password);
      const changed = Object.keys(body).filter((k) => k !== 'password');
      if (body.password !== undefined) changed.push('password');
      const user = await store.createUser(
        {
          userName: body.userName,
          passwordHash,
          isEnabled: body.isEnabled,
          roles,
          directPermissions: direct,
          deniedPermissions: denied,
        },
        auditFor(request, 'user.create', target, changed, {
          userName: body.userName,
          isEnabled: body.isEnabled,
          roles,
          directPermissions: direct,
          deniedPermissions: denied,
        }),
      );
      return created(reply, `${base()}/users/${encodeURIComponent(user.id)}`, userView(user, now()));
    },
  );

  type UserPatchBody = Omit<NewUserBody, 'password' | 'userName'> & { userName?: string };

  app.patch<{ Params: { id: string }; Body: UserPatchBody }>(
    '/users/:id',
    {
      config: { auth: { permission: P.Users } },
      schema: {
        tags: ['users'],
        summary: 'Update a user (omitted fields stay unchanged)',
        description:
          'Needs `auth.admin.users`; changing `roles` also `auth.admin.roles`, changing `directPermissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties). `isEnabled: false` disables the account and refuses its tokens at once.',
        security: bearer,
        params: s.idParams,
        body: s.updateUserBody,
        response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404, 409) },
      },
    },
    async (request) => {
      const body = request.body;
      const roles = body.roles === undefined ? undefined : roleNameList(body.roles);
      const direct =
        body.directPermissions && normalizePermissionCodes(body.directPermissions, 'directPermissions');
      const denied =
        body.deniedPermissions && normalizePermissionCodes(body.deniedPermissions, 'deniedPermissions');
      const current = await requireUser(request.params.id);
      const target: Target = { type: 'user', id: current.id, name: current.userName };
      const patch: UserPatch = { userName: body.userName, isEnabled: body.isEnabled };
      const action = 'user.update';
      if (await guardUpdate(request, action, target, 'roles', roles, current.roles, P.Roles, nameKey)) {
        patch.roles = roles;
      }
      if (
        await guardUpdate(
          request,
          action,
          target,
          'directPermissions',
          direct,
          current.directPermissions,
          P.Permissions,
        )
      ) {
        patch.directPermissions = direct;
      }
      if (
        await guardUpdate(
          request,
          action,
          target,
          'deniedPermissions',
          denied,
          current.deniedPermissions,
          P.Permissions,
        )
      ) {
        patch.deniedPermissions = denied;
      }
      const changed = Object.keys(patch).filter((k) => patch[k as keyof UserPatch] !== undefined);
      const user = await store.updateUser(
        current.id,
        patch,
        auditFor(request, action, target, changed, patch),
      );
      return userView(user, now());
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/users/:id',
    {
      config: { auth: { permission: P.Users } },
      schema: {
        tags: ['users'],
        summary: 'Delete a user',
        security: bearer,
        params: s.idParams,
        body: s.emptyBody,
        response: { ...noContent, ...errors(404) },
      },
    },
    async (request, reply) => {
      const current = await requireUser(request.params.id);
      await store.deleteUser(
        current.id,
        auditFor(request, 'user.delete', { type: 'user', id: current.id, name: current.userName }, []),
      );
      return reply.code(204).send();
    },
  );

  app.put<{ Params: { id: string }; Body: { password: string } }>(
    '/users/:id/password',
    {
      config: { auth: { permission: P.Users } },
      schema: {
        tags: ['users'],
        summary: "Set a user's password",
        description:
          'Changes the security stamp: tokens issued before are refused with `SubjectDisabled` (spec 001 "States and transitions").',
        security: bearer,
        params: s.idParams,
        body: s.setPasswordBody,
        response: { ...noContent, ...errors(404) },
      },
    },
    async (request, reply) => {
      const current = await requireUser(request.params.id);
      const hash = await passwordHasher.hash(request.body.password);
      await store.setPasswordHash(
        current.id,
        hash,
        auditFor(request, 'user.password', { type: 'user', id: current.id, name: current.userName }, [
          'password',
        ]),
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
      {
        config: { auth: { permission: P.Users } },
        schema: {
          tags: ['users'],
          summary,
          security: bearer,
          params: s.idParams,
          body: s.emptyBody,
          response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404) },
        },
      },
      async (request) => {
        const current = await requireUser(request.params.id);
        const target: Target = { type: 'user', id: current.id, name: current.userName };
        const audit = auditFor(
          request,
          `user.${action}`,
          target,
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

  async function requireRole(id: string): Promise<RoleRecord> {
    const role = await store.getRole(id);
    if (!role) throw new AdminHttpError(404, `role '${id}' not found`);
    return role;
  }

  app.get<{ Querystring: ListQ }>(
    '/roles',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['roles'],
        summary: 'List roles (paged, by name)',
        security: bearer,
        querystring: s.listQuery,
        response: { 200: { description: 'A page of roles', ...s.pageOf(s.roleSchema) }, ...errors() },
      },
    },
    async (request) => {
      const { offset, limit } = paging(request.query);
      const page = await store.listRoles({ offset, limit, search: request.query.search });
      return { items: page.items.map(roleView), total: page.total, offset, limit };
    },
  );

  app.get<{ Params: { id: string } }>(
    '/roles/:id',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['roles'],
        summary: 'Get a role',
        security: bearer,
        params: s.idParams,
        response: { 200: { description: 'The role', ...s.roleSchema }, ...errors(404) },
      },
    },
    async (request) => roleView(await requireRole(request.params.id)),
  );

  type RoleBody = {
    name: string;
    description?: string;
    permissions?: string[];
    deniedPermissions?: string[];
  };

  app.post<{ Body: RoleBody }>(
    '/roles',
    {
      config: { auth: { permission: P.Roles } },
      schema: {
        tags: ['roles'],
        summary: 'Create a role',
        description:
          'Needs `auth.admin.roles`; non-empty `permissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties).',
        security: bearer,
        body: s.createRoleBody,
        response: { 201: { description: 'Created: the role', ...s.roleSchema }, ...errors(409) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const permissions = body.permissions && normalizePermissionCodes(body.permissions, 'permissions');
      const denied =
        body.deniedPermissions && normalizePermissionCodes(body.deniedPermissions, 'deniedPermissions');
      const target: Target = { type: 'role', name: body.name };
      await guardCreate(request, 'role.create', target, 'permissions', permissions, P.Permissions);
      await guardCreate(request, 'role.create', target, 'deniedPermissions', denied, P.Permissions);
      const role = await store.createRole(
        { name: body.name, description: body.description, permissions, deniedPermissions: denied },
        auditFor(request, 'role.create', target, Object.keys(body), {
          name: body.name,
          description: body.description,
          permissions,
          deniedPermissions: denied,
        }),
      );
      return created(reply, `${base()}/roles/${encodeURIComponent(role.id)}`, roleView(role));
    },
  );

  app.patch<{ Params: { id: string }; Body: Partial<RoleBody> }>(
    '/roles/:id',
    {
      config: { auth: { permission: P.Roles } },
      schema: {
        tags: ['roles'],
        summary: 'Update a role (omitted fields stay unchanged)',
        description:
          'Needs `auth.admin.roles`; changing `permissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties). Built-in system roles keep their name and rules (400).',
        security: bearer,
        params: s.idParams,
        body: s.updateRoleBody,
        response: { 200: { description: 'The role', ...s.roleSchema }, ...errors(404, 409) },
      },
    },
    async (request) => {
      const body = request.body;
      const permissions = body.permissions && normalizePermissionCodes(body.permissions, 'permissions');
      const denied =
        body.deniedPermissions && normalizePermissionCodes(body.deniedPermissions, 'deniedPermissions');
      const current = await requireRole(request.params.id);
      const target: Target = { type: 'role', id: current.id, name: current.name };
      const patch: RolePatch = { name: body.name, description: body.description };
      const action = 'role.update';
      if (
        await guardUpdate(
          request,
          action,
          target,
          'permissions',
          permissions,
          current.permissions,
          P.Permissions,
        )
      ) {
        patch.permissions = permissions;
      }
      if (
        await guardUpdate(
          request,
          action,
          target,
          'deniedPermissions',
          denied,
          current.deniedPermissions,
          P.Permissions,
        )
      ) {
        patch.deniedPermissions = denied;
      }
      const changed = Object.keys(patch).filter((k) => patch[k as keyof RolePatch] !== undefined);
      return roleView(
        await store.updateRole(current.id, patch, auditFor(request, action, target, changed, patch)),
      );
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/roles/:id',
    {
      config: { auth: { permission: P.Roles } },
      schema: {
        tags: ['roles'],
        summary: 'Delete a role (its holders lose it); built-in system roles cannot be deleted (400)',
        security: bearer,
        params: s.idParams,
        body: s.emptyBody,
        response: { ...noContent, ...errors(404) },
      },
    },
    async (request, reply) => {
      const current = await requireRole(request.params.id);
      await store.deleteRole(
        current.id,
        auditFor(request, 'role.delete', { type: 'role', id: current.id, name: current.name }, []),
      );
      return reply.code(204).send();
    },
  );

  // ── permissions ──

  const codeOf = (raw: string) => normalizePermissionCode(raw, 'code', { allowWildcards: false });

  async function requirePermission(raw: string): Promise<PermissionRecord> {
    const code = codeOf(raw);
    const permission = await store.getPermission(code);
    if (!permission) throw new AdminHttpError(404, `permission '${code}' not found`);
    return permission;
  }

  app.get<{ Querystring: ListQ }>(
    '/permissions',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['permissions'],
        summary: 'List the permission catalog (paged, by code)',
        security: bearer,
        querystring: s.listQuery,
        response: {
          200: { description: 'A page of permissions', ...s.pageOf(s.permissionSchema) },
          ...errors(),
        },
      },
    },
    async (request) => {
      const { offset, limit } = paging(request.query);
      const page = await store.listPermissions({ offset, limit, search: request.query.search });
      return { items: page.items.map(permissionView), total: page.total, offset, limit };
    },
  );

  app.get<{ Params: { code: string } }>(
    '/permissions/:code',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['permissions'],
        summary: 'Get a permission by code (case-insensitive)',
        security: bearer,
        params: s.codeParams,
        response: { 200: { description: 'The permission', ...s.permissionSchema }, ...errors(404) },
      },
    },
    async (request) => permissionView(await requirePermission(request.params.code)),
  );

  app.post<{ Body: { code: string; description?: string } }>(
    '/permissions',
    {
      config: { auth: { permission: P.Permissions } },
      schema: {
        tags: ['permissions'],
        summary: 'Add a permission code to the catalog',
        description: 'The code is normalized (trimmed, lower case); one that cannot be normalized is a 400.',
        security: bearer,
        body: s.createPermissionBody,
        response: { 201: { description: 'Created: the permission', ...s.permissionSchema }, ...errors(409) },
      },
    },
    async (request, reply) => {
      const code = codeOf(request.body.code);
      const permission = await store.createPermission(
        { code, description: request.body.description },
        auditFor(request, 'permission.create', { type: 'permission', id: code }, Object.keys(request.body), {
          code,
          description: request.body.description,
        }),
      );
      return created(
        reply,
        `${base()}/permissions/${encodeURIComponent(permission.code)}`,
        permissionView(permission),
      );
    },
  );

  app.patch<{ Params: { code: string }; Body: { description: string } }>(
    '/permissions/:code',
    {
      config: { auth: { permission: P.Permissions } },
      schema: {
        tags: ['permissions'],
        summary: "Change a permission's description",
        security: bearer,
        params: s.codeParams,
        body: s.updatePermissionBody,
        response: { 200: { description: 'The permission', ...s.permissionSchema }, ...errors(404) },
      },
    },
    async (request) => {
      const current = await requirePermission(request.params.code);
      const permission = await store.updatePermission(
        current.code,
        { description: request.body.description },
        auditFor(request, 'permission.update', { type: 'permission', id: current.code }, ['description'], {
          description: request.body.description,
        }),
      );
      return permissionView(permission);
    },
  );

  app.delete<{ Params: { code: string } }>(
    '/permissions/:code',
    {
      config: { auth: { permission: P.Permissions } },
      schema: {
        tags: ['permissions'],
        summary: 'Remove a permission code from the catalog',
        security: bearer,
        params: s.codeParams,
        body: s.emptyBody,
        response: { ...noContent, ...errors(404) },
      },
    },
    async (request, reply) => {
      const current = await requirePermission(request.params.code);
      await store.deletePermission(
        current.code,
        auditFor(request, 'permission.delete', { type: 'permission', id: current.code }, []),
      );
      return reply.code(204).send();
    },
  );

  // ── clients ──

  async function requireClient(clientId: string): Promise<ClientRecord> {
    const client = await store.getClient(clientId);
    if (!client) throw new AdminHttpError(404, `client '${clientId}' not found`);
    return client;
  }

  const newSecret = () => randomBytes(32).toString('base64url');

  app.get<{ Querystring: ListQ }>(
    '/clients',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['clients'],
        summary: 'List clients (paged, by client id)',
        security: bearer,
        querystring: s.listQuery,
        response: { 200: { description: 'A page of clients', ...s.pageOf(s.clientSchema) }, ...errors() },
      },
    },
    async (request) => {
      const { offset, limit } = paging(request.query);
      const page = await store.listClients({ offset, limit, search: request.query.search });
      return { items: page.items.map(clientView), total: page.total, offset, limit };
    },
  );

  app.get<{ Params: { clientId: string } }>(
    '/clients/:clientId',
    {
      config: { auth: { permission: P.Read } },
      schema: {
        tags: ['clients'],
        summary: 'Get a client',
        security: bearer,
        params: s.clientIdParams,
        response: { 200: { description: 'The client', ...s.clientSchema }, ...errors(404) },
      },
    },
    async (request) => clientView(await requireClient(request.params.clientId)),
  );

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
  };

  app.post<{ Body: ClientBody }>(
    '/clients',
    {
      config: { auth: { permission: P.Clients } },
      schema: {
        tags: ['clients'],
        summary: 'Register a client',
        description:
          'Needs `auth.admin.clients`; non-empty `permissions` also `auth.admin.permissions` (separation of duties). A confidential client without `clientSecret` gets a generated one, returned once as `clientSecret`.',
        security: bearer,
        body: s.createClientBody,
        response: {
          201: {
            description: 'Created: the client (with `clientSecret` when one was generated)',
            ...s.clientWithSecretSchema,
          },
          ...errors(409),
        },
      },
    },
    async (request, reply) => {
      const { clientSecret, ...body } = request.body;
      if (body.clientType === 'public' && clientSecret !== undefined) {
        throw new ValidationError(
          'clientSecret',
          'public_client',
          'clientSecret: a public client has no secret',
        );
      }
      const permissions = body.permissions && normalizePermissionCodes(body.permissions, 'permissions');
      const target: Target = { type: 'client', id: body.clientId };
      await guardCreate(request, 'client.create', target, 'permissions', permissions, P.Permissions);
      const secret = body.clientType === 'confidential' ? (clientSecret ?? newSecret()) : undefined;
      const changed = Object.keys(body);
      if (secret !== undefined) changed.push('clientSecret');
      const client = await store.createClient(
        { ...body, permissions, secretHash: secret === undefined ? null : await hashClientSecret(secret) },
        auditFor(request, 'client.create', target, changed, { ...body, permissions }),
      );
      const view = clientView(client);
      return created(
        reply,
        `${base()}/clients/${encodeURIComponent(client.clientId)}`,
        clientSecret === undefined && secret !== undefined ? { ...view, clientSecret: secret } : view,
      );
    },
  );

  app.patch<{
    Params: { clientId: string };
    Body: Omit<Partial<ClientBody>, 'clientId' | 'clientType' | 'clientSecret'>;
  }>(
    '/clients/:clientId',
    {
      config: { auth: { permission: P.Clients } },
      schema: {
        tags: ['clients'],
        summary: 'Update a client (omitted fields stay unchanged)',
        description:
          'Needs `auth.admin.clients`; changing `permissions` also `auth.admin.permissions` (separation of duties). Rotate the secret with `POST /clients/{clientId}/secret`.',
        security: bearer,
        params: s.clientIdParams,
        body: s.updateClientBody,
        response: { 200: { description: 'The client', ...s.clientSchema }, ...errors(404) },
      },
    },
    async (request) => {
      const body = request.body;
      const permissions = body.permissions && normalizePermissionCodes(body.permissions, 'permissions');
      const current = await requireClient(request.params.clientId);
      const target: Target = { type: 'client', id: current.clientId };
      const { permissions: _ignored, ...rest } = body;
      const patch: ClientPatch = { ...rest };
      if (
        await guardUpdate(
          request,
          'client.update',
          target,
          'permissions',
          permissions,
          current.permissions,
          P.Permissions,
        )
      ) {
        patch.permissions = permissions;
      }
      const changed = Object.keys(patch).filter((k) => patch[k as keyof ClientPatch] !== undefined);
      return clientView(
        await store.updateClient(
          current.clientId,
          patch,
          auditFor(request, 'client.update', target, changed, patch),
        ),
      );
    },
  );

  app.post<{ Params: { clientId: string }; Body: { clientSecret?: string } | undefined }>(
    '/clients/:clientId/secret',
    {
      config: { auth: { permission: P.Clients } },
      schema: {
        tags: ['clients'],
        summary: "Replace a confidential client's secret",
        description:
          'Without a body (or without `clientSecret`) a random secret is generated and returned once as `clientSecret`.',
        security: bearer,
        params: s.clientIdParams,
        body: s.rotateSecretBody,
        response: {
          200: {
            description: 'The client (with `clientSecret` when one was generated)',
            ...s.clientWithSecretSchema,
          },
          ...errors(404),
        },
      },
    },
    async (request) => {
      const current = await requireClient(request.params.clientId);
      if (current.clientType !== 'confidential') {
        throw new AdminHttpError(400, `client '${current.clientId}': a public client has no secret`);
      }
      const given = request.body?.clientSecret;
      const secret = given ?? newSecret();
      const client = await store.updateClient(
        current.clientId,
        { secretHash: await hashClientSecret(secret) },
        auditFor(request, 'client.secret', { type: 'client', id: current.clientId }, ['clientSecret']),
      );
      const view = clientView(client);
      return given === undefined ? { ...view, clientSecret: secret } : view;
    },
  );

  app.delete<{ Params: { clientId: string } }>(
    '/clients/:clientId',
    {
      config: { auth: { permission: P.Clients } },
      schema: {
        tags: ['clients'],
        summary: 'Delete a client (and its refresh tokens and authorization codes)',
        security: bearer,
        params: s.clientIdParams,
        body: s.emptyBody,
        response: { ...noContent, ...errors(404) },
      },
    },
    async (request, reply) => {
      const current = await requireClient(request.params.clientId);
      await store.deleteClient(
        current.clientId,
        auditFor(request, 'client.delete', { type: 'client', id: current.clientId }, []),
      );
      return reply.code(204).send();
    },
  );

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
    {
      config: { auth: { permission: P.Audit } },
      schema: {
        tags: ['audit'],
        summary: 'Audit events, newest first, filtered and paged',
        description:
          'Filters combine with AND: `category` and `outcome` exact, `subject` the subject id (user id or client id), `from` inclusive and `to` exclusive RFC 3339 times.',
        security: bearer,
        querystring: s.auditQuery,
        response: {
          200: { description: 'A page of audit events, newest first', ...s.pageOf(s.auditEventSchema) },
          ...errors(),
        },
      },
    },
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
