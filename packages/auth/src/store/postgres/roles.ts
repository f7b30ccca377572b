/**
 * Roles (with their inheritance graph) and the permission catalog of the PostgreSQL store (spec 001
 * "Role", "Permission"). Changes of the role graph take one advisory transaction lock, so two concurrent
 * updates on different instances can never close a cycle between them.
 */
import { randomUUID } from 'node:crypto';
import { ConstraintError, NotFoundError } from '../../errors.ts';
import { normalizePermissionCode } from '../../permissions.ts';
import { checkRoleUpdate, newRoleValues, rolePatchValues } from '../inputs.ts';
import { INSERT_ROLE, POSTGRES_VALUES, roleValues } from '../inserts.ts';
import { toRole } from '../rows.ts';
import type {
  ChangeOptions,
  ListQuery,
  NewPermission,
  NewRole,
  Page,
  PermissionRecord,
  RolePatch,
  RoleRecord,
} from '../types.ts';
import {
  BUMP_ROLE_HOLDERS,
  DELETE_ROLE_PARENTS,
  INSERT_ROLE_PARENT,
  permissionKey,
  roleCycleError,
  roleInheritsSql,
  roleUpdateValues,
  UPDATE_PERMISSION,
  UPDATE_ROLE,
} from '../updates.ts';
import * as v from '../validation.ts';
import { change, get, getAs, type PgContext, page, type Q, run } from './db.ts';
import { ROLE_SELECT, roleIds } from './users.ts';

/** Advisory lock key serializing changes of the role inheritance graph. */
const ROLE_GRAPH_LOCK_KEY = 4_100_022;

/** The role with that id, or undefined. */
export function role(q: Q, id: string): Promise<RoleRecord | undefined> {
  return getAs(toRole, q, `${ROLE_SELECT} WHERE r.id = ?`, id);
}

/**
 * Replaces the parents of `roleId` with the roles named `names`.
 * @throws ValidationError `parentRoles[i]`: `unknown_role`, or `cycle` when the parent is the role itself
 * or already inherits from it (directly or through other roles).
 */
async function setRoleParents(q: Q, roleId: string, names: readonly string[]): Promise<void> {
  await get(q, 'SELECT pg_advisory_xact_lock(?)', ROLE_GRAPH_LOCK_KEY);
  const parentIds = await roleIds(q, names, 'parentRoles');
  for (const [i, parentId] of parentIds.entries()) {
    if (await get(q, roleInheritsSql('?::text'), parentId, roleId)) throw roleCycleError(names, i);
  }
  await run(q, DELETE_ROLE_PARENTS, roleId);
  for (const parentId of parentIds) await run(q, INSERT_ROLE_PARENT, roleId, parentId);
}

/** See `AuthStore.createRole`. */
export async function createRole(
  ctx: PgContext,
  input: NewRole,
  options?: ChangeOptions,
): Promise<RoleRecord> {
  const values = newRoleValues(input);
  const { name, parents } = values;
  const id = randomUUID();
  const now = ctx.now();
  return change(ctx, 'role', { field: 'name', value: name }, options, async (q) => {
    await run(q, INSERT_ROLE, ...roleValues(id, values, now, POSTGRES_VALUES));
    if (parents.length > 0) await setRoleParents(q, id, parents);
    return (await role(q, id))!;
  });
}

/** See `AuthStore.findRoleByName`. */
export async function findRoleByName(q: Q, name: string): Promise<RoleRecord | undefined> {
  if (typeof name !== 'string') return undefined;
  return getAs(toRole, q, `${ROLE_SELECT} WHERE r.name_key = ?`, v.nameKey(name.trim()));
}

/** See `AuthStore.listRoles`. */
export function listRoles(q: Q, query?: ListQuery): Promise<Page<RoleRecord>> {
  const sql = { table: 'roles r', select: ROLE_SELECT, search: 'r.name_key', order: 'r.name_key' };
  return page(q, query, sql, toRole);
}

/** See `AuthStore.updateRole`. */
export async function updateRole(
  ctx: PgContext,
  id: string,
  patch: RolePatch,
  options?: ChangeOptions,
): Promise<RoleRecord> {
  const values = rolePatchValues(patch);
  return change(ctx, 'role', { field: 'name', value: values.name ?? '' }, options, async (q) => {
    await get(q, 'SELECT 1 FROM roles WHERE id = ? FOR UPDATE', id);
    const current = await role(q, id);
    if (!current) throw new NotFoundError('role', id);
    const sameParents = checkRoleUpdate(current, values);
    await run(q, UPDATE_ROLE, ...roleUpdateValues(current, values, ctx.now(), POSTGRES_VALUES));
    if (!sameParents && values.parents !== undefined) await setRoleParents(q, id, values.parents);
    return (await role(q, id))!;
  });
}

/** See `AuthStore.deleteRole`. */
export async function deleteRole(ctx: PgContext, id: string, options?: ChangeOptions): Promise<void> {
  await change(ctx, 'role', { field: 'id', value: id }, options, async (q) => {
    const current = await role(q, id);
    if (!current) throw new NotFoundError('role', id);
    if (current.isSystem) {
      throw new ConstraintError(
        'system_role',
        `role '${current.name}' is a built-in system role and cannot be deleted`,
      );
    }
    // Holders lose the role: bump their version so cached matchers are rebuilt.
    await run(q, BUMP_ROLE_HOLDERS, id);
    await run(q, 'DELETE FROM roles WHERE id = ? AND NOT is_system', id);
  });
}

async function permission(q: Q, code: string): Promise<PermissionRecord | undefined> {
  const row = await get(q, 'SELECT * FROM permissions WHERE code = ?', code);
  return row
    ? { code: String(row.code), description: String(row.description), createdAt: Number(row.created_at) }
    : undefined;
}

/** See `AuthStore.createPermission`. */
export async function createPermission(
  ctx: PgContext,
  input: NewPermission,
  options?: ChangeOptions,
): Promise<PermissionRecord> {
  const code = normalizePermissionCode(input?.code, 'code', { allowWildcards: false });
  const description = v.optionalText(input.description, 'description');
  return change(ctx, 'permission', { field: 'code', value: code }, options, async (q) => {
    await run(
      q,
      'INSERT INTO permissions (code, description, created_at) VALUES (?, ?, ?)',
      code,
      description,
      ctx.now(),
    );
    return (await permission(q, code))!;
  });
}

/** See `AuthStore.getPermission`. */
export async function getPermission(q: Q, code: string): Promise<PermissionRecord | undefined> {
  return typeof code === 'string' ? permission(q, code.trim().toLowerCase()) : undefined;
}

/** See `AuthStore.listPermissions`. */
export function listPermissions(q: Q, query?: ListQuery): Promise<Page<PermissionRecord>> {
  const sql = { table: 'permissions', select: 'SELECT * FROM permissions', search: 'code', order: 'code' };
  return page(q, query, sql, (row) => ({
    code: String(row.code),
    description: String(row.description),
    createdAt: Number(row.created_at),
  }));
}

/** See `AuthStore.updatePermission`. */
export async function updatePermission(
  ctx: PgContext,
  code: string,
  patch: { description?: string },
  options?: ChangeOptions,
): Promise<PermissionRecord> {
  const key = permissionKey(code);
  const description = v.optionalText(patch.description, 'description');
  return change(ctx, 'permission', { field: 'code', value: key }, options, async (q) => {
    if ((await run(q, UPDATE_PERMISSION, description, key)) === 0) {
      throw new NotFoundError('permission', key);
    }
    return (await permission(q, key))!;
  });
}

/** See `AuthStore.deletePermission`. */
export async function deletePermission(ctx: PgContext, code: string, options?: ChangeOptions): Promise<void> {
  const key = permissionKey(code);
  await change(ctx, 'permission', { field: 'code', value: key }, options, async (q) => {
    if ((await run(q, 'DELETE FROM permissions WHERE code = ?', key)) === 0)
      throw new NotFoundError('permission', key);
  });
}
