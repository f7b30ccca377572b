/**
 * Administration API: roles (`/roles`, with `parentRoles`) and the permission catalog (`/permissions`), spec 001 "Administration REST API".
 */
import type { FastifyInstance } from 'fastify';
import type { PermissionRecord, RolePatch, RoleRecord } from '../store/types.ts';
import { type AdminTarget, ROLE_GRANTS } from './grants.ts';
import { errors, routeOptions } from './route-docs.ts';
import type { RouteKit } from './route-kit.ts';
import * as s from './schemas.ts';
import { permissionView, roleView } from './views.ts';

/** Registers the routes on the API's encapsulated context. */
export function registerRoleRoutes(app: FastifyInstance, kit: RouteKit): void {
  const {
    store,
    P,
    auditFor,
    guardCreate,
    created,
    listRoute,
    getRoute,
    updateRoute,
    deleteRoute,
    roles,
    codeOf,
    permissions,
  } = kit;
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
      const target: AdminTarget = { type: 'role', name: body.name };
      const grants = await guardCreate(request, 'role.create', target, ROLE_GRANTS, body);
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
}
