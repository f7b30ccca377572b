/**
 * Roles (with their inheritance graph) and the permission catalog (spec 001 "Role", "Permission"), for
 * both databases. A change of the role graph takes the dialect's role-graph lock (a PostgreSQL advisory
 * transaction lock; SQLite's `BEGIN IMMEDIATE` already serializes writers), so two concurrent updates,
 * on any instances, can never close a cycle between them.
 */
import { randomUUID } from 'node:crypto';
import { ConstraintError, NotFoundError } from '../../errors.ts';
import { normalizePermissionCode } from '../../permissions.ts';
import { checkRoleUpdate, newRoleValues, rolePatchValues } from '../inputs.ts';
import { INSERT_ROLE, roleValues } from '../inserts.ts';
import { type Row, toRole } from '../rows.ts';
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
import { change, getAs, page, type SqlDriver, type StoreContext } from './driver.ts';
import { roleIds } from './users.ts';

/** The role with that id, or undefined. */
export function role(db: SqlDriver, id: string): Promise<RoleRecord | undefined> {
  return getAs(toRole, db, `${db.dialect.roleSelect} WHERE r.id = ?`, String(id));
}

/**
 * Replaces the parents of `roleId` with the roles named `names`.
 * @throws ValidationError `parentRoles[i]`: `unknown_role`, or `cycle` when the parent is the role itself
 * or already inherits from it (directly or through other roles).
 */
async function setRoleParents(db: SqlDriver, roleId: string, names: readonly string[]): Promise<void> {
  if (db.dialect.roleGraphLock) await db.get(db.dialect.roleGraphLock);
  const parentIds = await roleIds(db, names, 'parentRoles');
  const inherits = roleInheritsSql(db.dialect.typed('text'));
  for (const [i, parentId] of parentIds.entries()) {
    if (await db.get(inherits, parentId, roleId)) throw roleCycleError(names, i);
  }
  await db.run(DELETE_ROLE_PARENTS, roleId);
  for (const parentId of parentIds) await db.run(INSERT_ROLE_PARENT, roleId, parentId);
}

/** See `AuthStore.createRole`. */
export async function createRole(
  ctx: StoreContext,
  input: NewRole,
  options?: ChangeOptions,
): Promise<RoleRecord> {
  const values = newRoleValues(input);
  const { name, parents } = values;
  const id = randomUUID();
  const now = ctx.now();
  return change(ctx, 'role', { field: 'name', value: name }, options, async (db) => {
    await db.run(INSERT_ROLE, ...roleValues(id, values, now, db.dialect.values));
    if (parents.length > 0) await setRoleParents(db, id, parents);
    return (await role(db, id))!;
  });
}

/** See `AuthStore.findRoleByName`. */
export async function findRoleByName(db: SqlDriver, name: string): Promise<RoleRecord | undefined> {
  if (typeof name !== 'string') return undefined;
  return getAs(toRole, db, `${db.dialect.roleSelect} WHERE r.name_key = ?`, v.nameKey(name.trim()));
}

/** See `AuthStore.listRoles`. */
export function listRoles(db: SqlDriver, query?: ListQuery): Promise<Page<RoleRecord>> {
  const sql = { table: 'roles r', select: db.dialect.roleSelect, search: 'r.name_key', order: 'r.name_key' };
  return page(db, query, sql, toRole);
}

/** See `AuthStore.updateRole`. */
export async function updateRole(
  ctx: StoreContext,
  id: string,
  patch: RolePatch,
  options?: ChangeOptions,
): Promise<RoleRecord> {
  const values = rolePatchValues(patch);
  return change(ctx, 'role', { field: 'name', value: values.name ?? '' }, options, async (db) => {
    if (db.dialect.forUpdate) await db.get(`SELECT 1 FROM roles WHERE id = ?${db.dialect.forUpdate}`, id);
    const current = await role(db, id);
    if (!current) throw new NotFoundError('role', id);
    const sameParents = checkRoleUpdate(current, values);
    await db.run(UPDATE_ROLE, ...roleUpdateValues(current, values, ctx.now(), db.dialect.values));
    if (!sameParents && values.parents !== undefined) await setRoleParents(db, id, values.parents);
    return (await role(db, id))!;
  });
}

/** See `AuthStore.deleteRole`. @throws ConstraintError `system_role` for a built-in role. */
export async function deleteRole(ctx: StoreContext, id: string, options?: ChangeOptions): Promise<void> {
  await change(ctx, 'role', { field: 'id', value: id }, options, async (db) => {
    const current = await role(db, id);
    if (!current) throw new NotFoundError('role', id);
    if (current.isSystem) {
      throw new ConstraintError(
        'system_role',
        `role '${current.name}' is a built-in system role and cannot be deleted`,
      );
    }
    // Holders lose the role: bump their version so cached matchers are rebuilt.
    await db.run(BUMP_ROLE_HOLDERS, id);
    await db.run('DELETE FROM roles WHERE id = ? AND NOT is_system', id);
  });
}

/** A `permissions` row as a record. */
const toPermission = (row: Row): PermissionRecord => ({
  code: String(row.code),
  description: String(row.description),
  createdAt: Number(row.created_at),
});

function permission(db: SqlDriver, code: string): Promise<PermissionRecord | undefined> {
  return getAs(toPermission, db, 'SELECT * FROM permissions WHERE code = ?', code);
}

/** See `AuthStore.createPermission`. */
export async function createPermission(
  ctx: StoreContext,
  input: NewPermission,
  options?: ChangeOptions,
): Promise<PermissionRecord> {
  const code = normalizePermissionCode(input?.code, 'code', { allowWildcards: false });
  const description = v.optionalText(input.description, 'description');
  return change(ctx, 'permission', { field: 'code', value: code }, options, async (db) => {
    await db.run(
      'INSERT INTO permissions (code, description, created_at) VALUES (?, ?, ?)',
      code,
      description,
      ctx.now(),
    );
    return (await permission(db, code))!;
  });
}

/** See `AuthStore.getPermission`. */
export async function getPermission(db: SqlDriver, code: string): Promise<PermissionRecord | undefined> {
  return typeof code === 'string' ? permission(db, code.trim().toLowerCase()) : undefined;
}

/** See `AuthStore.listPermissions`. */
export function listPermissions(db: SqlDriver, query?: ListQuery): Promise<Page<PermissionRecord>> {
  const sql = { table: 'permissions', select: 'SELECT * FROM permissions', search: 'code', order: 'code' };
  return page(db, query, sql, toPermission);
}

/** See `AuthStore.updatePermission`. */
export async function updatePermission(
  ctx: StoreContext,
  code: string,
  patch: { description?: string },
  options?: ChangeOptions,
): Promise<PermissionRecord> {
  const key = permissionKey(code);
  const description = v.optionalText(patch.description, 'description');
  return change(ctx, 'permission', { field: 'code', value: key }, options, async (db) => {
    if ((await db.run(UPDATE_PERMISSION, description, key)) === 0) throw new NotFoundError('permission', key);
    return (await permission(db, key))!;
  });
}

/** See `AuthStore.deletePermission`. */
export async function deletePermission(
  ctx: StoreContext,
  code: string,
  options?: ChangeOptions,
): Promise<void> {
  const key = permissionKey(code);
  await change(ctx, 'permission', { field: 'code', value: key }, options, async (db) => {
    if ((await db.run('DELETE FROM permissions WHERE code = ?', key)) === 0)
      throw new NotFoundError('permission', key);
  });
}
