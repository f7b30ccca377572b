/**
 * Users, the lockout counter, roles (with their inheritance graph) and the permission catalog of the
 * SQLite store (spec 001 "User", "Lockout", "Role", "Permission").
 */
import { randomUUID } from 'node:crypto';
import { ConstraintError, NotFoundError, ValidationError } from '../../errors.ts';
import { normalizePermissionCode } from '../../permissions.ts';
import {
  checkRoleUpdate,
  newRoleValues,
  newStamp,
  newUserValues,
  rolePatchValues,
  userPatchValues,
} from '../inputs.ts';
import { INSERT_ROLE, INSERT_USER, roleValues, SQLITE_VALUES, userValues } from '../inserts.ts';
import { num, toRole, toUser } from '../rows.ts';
import type {
  AccessAttempt,
  ChangeOptions,
  ListQuery,
  NewPermission,
  NewRole,
  NewUser,
  Page,
  PermissionRecord,
  RolePatch,
  RoleRecord,
  UserPatch,
  UserRecord,
  UserSubject,
} from '../types.ts';
import {
  BEGIN_ACCESS_ATTEMPT,
  BUMP_ROLE_HOLDERS,
  DELETE_ROLE_PARENTS,
  INSERT_ROLE_PARENT,
  LOCK_USER,
  passwordChange,
  permissionKey,
  roleCycleError,
  roleInheritsSql,
  roleUpdateValues,
  SUCCEED_ACCESS_ATTEMPT,
  UNLOCK_USER,
  UPDATE_PASSWORD,
  UPDATE_PERMISSION,
  UPDATE_ROLE,
  UPDATE_USER,
  userUpdateValues,
} from '../updates.ts';
import * as v from '../validation.ts';
import { SqliteCore } from './core.ts';

/** Roles with their parent role names (`parent_roles`, a JSON array); alias `r`. */
export const ROLE_SELECT = `SELECT r.*, (SELECT json_group_array(p.name) FROM role_parents rp JOIN roles p ON p.id = rp.parent_id
  WHERE rp.role_id = r.id) AS parent_roles FROM roles r`;

/**
 * Ids of the roles a user holds and, transitively, their parents (`UNION` stops at roles already seen, so
 * the query ends even on a cyclic graph). One parameter: the user id.
 */
const USER_ROLE_CLOSURE = `WITH RECURSIVE held(id) AS (
  SELECT role_id FROM user_roles WHERE user_id = ?
  UNION SELECT rp.parent_id FROM role_parents rp JOIN held ON rp.role_id = held.id)`;

export const USER_SELECT = `SELECT u.*, (SELECT json_group_array(r.name) FROM user_roles ur JOIN roles r ON r.id = ur.role_id
  WHERE ur.user_id = u.id) AS roles FROM users u`;

/** Users, lockout, roles and permissions on {@link SqliteCore}. */
export abstract class SqliteUsers extends SqliteCore {
  // ── users ──

  /** The ids of the roles named `names`. @throws ValidationError (`<field>[i]`: `unknown_role`). */
  protected roleIds(names: readonly string[], field: string): string[] {
    return names.map((name, i) => {
      const row = this.sqlGet('SELECT id FROM roles WHERE name_key = ?', v.nameKey(name));
      if (!row)
        throw new ValidationError(
          `${field}[${i}]`,
          'unknown_role',
          `${field}[${i}]: role '${name}' does not exist`,
        );
      return String(row.id);
    });
  }

  #setUserRoles(userId: string, roleIds: readonly string[]): void {
    this.sqlRun('DELETE FROM user_roles WHERE user_id = ?', userId);
    for (const roleId of roleIds)
      this.sqlRun('INSERT INTO user_roles (user_id, role_id) VALUES (?, ?)', userId, roleId);
  }

  /** The user with that id, or undefined. */
  protected userRecord(id: string): UserRecord | undefined {
    return this.sqlGetAs(toUser, `${USER_SELECT} WHERE u.id = ?`, id);
  }

  /** The user with that id. @throws NotFoundError. */
  protected requireUser(id: string): UserRecord {
    const user = this.userRecord(id);
    if (!user) throw new NotFoundError('user', id);
    return user;
  }

  async createUser(input: NewUser, options?: ChangeOptions): Promise<UserRecord> {
    const values = newUserValues(input);
    const id = randomUUID();
    const now = this.clock();
    return this.change('user', { field: 'userName', value: values.userName }, options, () => {
      const roleIds = this.roleIds(values.roles, 'roles');
      this.sqlRun(INSERT_USER, ...userValues(id, values, newStamp(), now, SQLITE_VALUES));
      this.#setUserRoles(id, roleIds);
      return this.requireUser(id);
    });
  }

  async getUser(id: string): Promise<UserRecord | undefined> {
    return this.userRecord(String(id));
  }

  async findUserByName(userName: string): Promise<UserRecord | undefined> {
    if (typeof userName !== 'string') return undefined;
    return this.sqlGetAs(toUser, `${USER_SELECT} WHERE u.user_name_key = ?`, v.nameKey(userName.trim()));
  }

  async listUsers(query?: ListQuery): Promise<Page<UserRecord>> {
    const key = 'u.user_name_key';
    return this.page(query, { table: 'users u', select: USER_SELECT, search: key, order: key }, toUser);
  }

  async updateUser(id: string, patch: UserPatch, options?: ChangeOptions): Promise<UserRecord> {
    const values = userPatchValues(patch);
    return this.change('user', { field: 'userName', value: values.userName ?? '' }, options, () => {
      const current = this.requireUser(id);
      const roleIds = values.roles === undefined ? undefined : this.roleIds(values.roles, 'roles');
      this.sqlRun(UPDATE_USER, ...userUpdateValues(current, values, this.clock(), SQLITE_VALUES));
      if (roleIds) this.#setUserRoles(id, roleIds);
      return this.requireUser(id);
    });
  }

  async setPasswordHash(
    id: string,
    passwordHash: string,
    options?: ChangeOptions & { rotateStamp?: boolean },
  ): Promise<UserRecord> {
    const { rotate } = passwordChange(passwordHash, options);
    return this.change('user', { field: 'id', value: id }, options, () => {
      this.requireUser(id);
      this.sqlRun(UPDATE_PASSWORD, passwordHash, SQLITE_VALUES.bool(rotate), newStamp(), this.clock(), id);
      return this.requireUser(id);
    });
  }

  async lockUser(id: string, until: number, options?: ChangeOptions): Promise<UserRecord> {
    if (!Number.isFinite(until))
      throw new ValidationError('lockoutEnd', 'timestamp', 'lockoutEnd: ms epoch number');
    return this.change('user', { field: 'id', value: id }, options, () => {
      this.requireUser(id);
      this.sqlRun(LOCK_USER, Math.trunc(until), newStamp(), this.clock(), id);
      return this.requireUser(id);
    });
  }

  async unlockUser(id: string, options?: ChangeOptions): Promise<UserRecord> {
    return this.change('user', { field: 'id', value: id }, options, () => {
      this.requireUser(id);
      this.sqlRun(UNLOCK_USER, this.clock(), id);
      return this.requireUser(id);
    });
  }

  async deleteUser(id: string, options?: ChangeOptions): Promise<void> {
    this.change('user', { field: 'id', value: id }, options, () => {
      if (this.sqlRun('DELETE FROM users WHERE id = ?', id) === 0) throw new NotFoundError('user', id);
    });
  }

  async getUserSubject(id: string): Promise<UserSubject | undefined> {
    const user = this.userRecord(String(id));
    if (!user) return undefined;
    const roles = this.sqlAll(
      `${USER_ROLE_CLOSURE} ${ROLE_SELECT} WHERE r.id IN (SELECT id FROM held) ORDER BY r.name_key`,
      user.id,
    ).map(toRole);
    return { user, roles };
  }

  // ── lockout ──

  async beginAccessAttempt(userId: string, now: number, maxFailures: number): Promise<AccessAttempt> {
    const row = this.sqlGet(BEGIN_ACCESS_ATTEMPT, userId, now, maxFailures);
    if (row) return { allowed: true, attempt: Number(row.access_failed_count), lockoutEnd: null };
    const current = this.sqlGet('SELECT lockout_end FROM users WHERE id = ?', userId);
    return { allowed: false, attempt: 0, lockoutEnd: current ? num(current.lockout_end) : null };
  }

  async failAccessAttempt(
    userId: string,
    attempt: number,
    now: number,
    maxFailures: number,
    lockoutMs: number,
  ): Promise<boolean> {
    if (attempt < maxFailures) return false;
    return this.sqlRun(LOCK_USER, now + lockoutMs, newStamp(), now, userId) > 0;
  }

  async succeedAccessAttempt(userId: string): Promise<void> {
    this.sqlRun(SUCCEED_ACCESS_ATTEMPT, userId);
  }

  // ── roles ──

  /** The role with that id, or undefined. */
  protected roleRecord(id: string): RoleRecord | undefined {
    return this.sqlGetAs(toRole, `${ROLE_SELECT} WHERE r.id = ?`, id);
  }

  /**
   * Replaces the parents of `roleId` with the roles named `names`.
   * @throws ValidationError `parentRoles[i]`: `unknown_role`, or `cycle` when the parent is the role itself
   * or already inherits from it (directly or through other roles).
   */
  #setRoleParents(roleId: string, names: readonly string[]): void {
    const parentIds = this.roleIds(names, 'parentRoles');
    parentIds.forEach((parentId, i) => {
      if (this.sqlGet(roleInheritsSql('?'), parentId, roleId)) throw roleCycleError(names, i);
    });
    this.sqlRun(DELETE_ROLE_PARENTS, roleId);
    for (const parentId of parentIds) this.sqlRun(INSERT_ROLE_PARENT, roleId, parentId);
  }

  async createRole(input: NewRole, options?: ChangeOptions): Promise<RoleRecord> {
    const values = newRoleValues(input);
    const { name, parents } = values;
    const id = randomUUID();
    const now = this.clock();
    return this.change('role', { field: 'name', value: name }, options, () => {
      this.sqlRun(INSERT_ROLE, ...roleValues(id, values, now, SQLITE_VALUES));
      if (parents.length > 0) this.#setRoleParents(id, parents);
      return this.roleRecord(id)!;
    });
  }

  async getRole(id: string): Promise<RoleRecord | undefined> {
    return this.roleRecord(String(id));
  }

  async findRoleByName(name: string): Promise<RoleRecord | undefined> {
    if (typeof name !== 'string') return undefined;
    return this.sqlGetAs(toRole, `${ROLE_SELECT} WHERE r.name_key = ?`, v.nameKey(name.trim()));
  }

  async listRoles(query?: ListQuery): Promise<Page<RoleRecord>> {
    const sql = { table: 'roles r', select: ROLE_SELECT, search: 'r.name_key', order: 'r.name_key' };
    return this.page(query, sql, toRole);
  }

  async updateRole(id: string, patch: RolePatch, options?: ChangeOptions): Promise<RoleRecord> {
    const values = rolePatchValues(patch);
    return this.change('role', { field: 'name', value: values.name ?? '' }, options, () => {
      const current = this.roleRecord(id);
      if (!current) throw new NotFoundError('role', id);
      const sameParents = checkRoleUpdate(current, values);
      this.sqlRun(UPDATE_ROLE, ...roleUpdateValues(current, values, this.clock(), SQLITE_VALUES));
      if (!sameParents && values.parents !== undefined) this.#setRoleParents(id, values.parents);
      return this.roleRecord(id)!;
    });
  }

  async deleteRole(id: string, options?: ChangeOptions): Promise<void> {
    this.change('role', { field: 'id', value: id }, options, () => {
      const current = this.roleRecord(id);
      if (!current) throw new NotFoundError('role', id);
      if (current.isSystem) {
        throw new ConstraintError(
          'system_role',
          `role '${current.name}' is a built-in system role and cannot be deleted`,
        );
      }
      // Holders lose the role: bump their version so cached matchers are rebuilt.
      this.sqlRun(BUMP_ROLE_HOLDERS, id);
      this.sqlRun('DELETE FROM roles WHERE id = ? AND is_system = 0', id);
    });
  }

  // ── permission catalog ──

  async createPermission(input: NewPermission, options?: ChangeOptions): Promise<PermissionRecord> {
    const code = normalizePermissionCode(input?.code, 'code', { allowWildcards: false });
    const description = v.optionalText(input.description, 'description');
    return this.change('permission', { field: 'code', value: code }, options, () => {
      this.sqlRun(
        'INSERT INTO permissions (code, description, created_at) VALUES (?, ?, ?)',
        code,
        description,
        this.clock(),
      );
      return this.#permission(code)!;
    });
  }

  #permission(code: string): PermissionRecord | undefined {
    const row = this.sqlGet('SELECT * FROM permissions WHERE code = ?', code);
    return row
      ? { code: String(row.code), description: String(row.description), createdAt: Number(row.created_at) }
      : undefined;
  }

  async getPermission(code: string): Promise<PermissionRecord | undefined> {
    return typeof code === 'string' ? this.#permission(code.trim().toLowerCase()) : undefined;
  }

  async listPermissions(query?: ListQuery): Promise<Page<PermissionRecord>> {
    const sql = {
      table: 'permissions',
      select: 'SELECT code FROM permissions',
      search: 'code',
      order: 'code',
    };
    return this.page(query, sql, (row) => this.#permission(String(row.code))!);
  }

  async updatePermission(
    code: string,
    patch: { description?: string },
    options?: ChangeOptions,
  ): Promise<PermissionRecord> {
    const key = permissionKey(code);
    const description = v.optionalText(patch.description, 'description');
    return this.change('permission', { field: 'code', value: key }, options, () => {
      if (this.sqlRun(UPDATE_PERMISSION, description, key) === 0) {
        throw new NotFoundError('permission', key);
      }
      return this.#permission(key)!;
    });
  }

  async deletePermission(code: string, options?: ChangeOptions): Promise<void> {
    const key = permissionKey(code);
    this.change('permission', { field: 'code', value: key }, options, () => {
      if (this.sqlRun('DELETE FROM permissions WHERE code = ?', key) === 0)
        throw new NotFoundError('permission', key);
    });
  }
}
