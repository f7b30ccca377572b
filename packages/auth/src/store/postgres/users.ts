/**
 * Users, the lockout counter and the user subject of the PostgreSQL store (spec 001 "User", "Lockout").
 *
 * Lockout counting is one atomic `UPDATE … RETURNING` per attempt: PostgreSQL re-checks the `WHERE` clause
 * of a row updated concurrently (READ COMMITTED), so concurrent attempts from any number of instances never
 * count more than `maxFailures`. Read-modify-write changes lock the user row (`SELECT … FOR UPDATE`).
 */
import { randomUUID } from 'node:crypto';
import { NotFoundError, ValidationError } from '../../errors.ts';
import { newStamp, newUserValues, userPatchValues } from '../inputs.ts';
import { INSERT_USER, POSTGRES_VALUES, userValues } from '../inserts.ts';
import { num, toRole, toUser } from '../rows.ts';
import type {
  AccessAttempt,
  ChangeOptions,
  ListQuery,
  NewUser,
  Page,
  UserPatch,
  UserRecord,
  UserSubject,
} from '../types.ts';
import {
  BEGIN_ACCESS_ATTEMPT,
  LOCK_USER,
  passwordChange,
  SUCCEED_ACCESS_ATTEMPT,
  UNLOCK_USER,
  UPDATE_PASSWORD,
  UPDATE_USER,
  userUpdateValues,
} from '../updates.ts';
import * as v from '../validation.ts';
import { all, change, get, getAs, type PgContext, page, type Q, run } from './db.ts';

/** Users with the names of the roles they hold (`roles`, an array); alias `u`. */
export const USER_SELECT = `SELECT u.*, ARRAY(SELECT r.name FROM user_roles ur JOIN roles r ON r.id = ur.role_id
  WHERE ur.user_id = u.id) AS roles FROM users u`;

/** Roles with the names of their parents (`parent_roles`, an array); alias `r`. */
export const ROLE_SELECT = `SELECT r.*, ARRAY(SELECT p.name FROM role_parents rp JOIN roles p ON p.id = rp.parent_id
  WHERE rp.role_id = r.id) AS parent_roles FROM roles r`;

/** The ids of the roles named `names`. @throws ValidationError (`<field>[i]`: `unknown_role`). */
export async function roleIds(q: Q, names: readonly string[], field: string): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, name] of names.entries()) {
    const row = await get(q, 'SELECT id FROM roles WHERE name_key = ?', v.nameKey(name));
    if (!row) {
      throw new ValidationError(
        `${field}[${i}]`,
        'unknown_role',
        `${field}[${i}]: role '${name}' does not exist`,
      );
    }
    ids.push(String(row.id));
  }
  return ids;
}

async function setUserRoles(q: Q, userId: string, ids: readonly string[]): Promise<void> {
  await run(q, 'DELETE FROM user_roles WHERE user_id = ?', userId);
  for (const roleId of ids)
    await run(q, 'INSERT INTO user_roles (user_id, role_id) VALUES (?, ?)', userId, roleId);
}

/** The user with that id, or undefined. */
export function user(q: Q, id: string): Promise<UserRecord | undefined> {
  return getAs(toUser, q, `${USER_SELECT} WHERE u.id = ?`, id);
}

/** The user with that id, its row locked until the transaction ends. @throws NotFoundError. */
async function lockedUser(q: Q, id: string): Promise<UserRecord> {
  await get(q, 'SELECT 1 FROM users WHERE id = ? FOR UPDATE', id);
  const found = await user(q, id);
  if (!found) throw new NotFoundError('user', id);
  return found;
}

/** See `AuthStore.createUser`. */
export async function createUser(
  ctx: PgContext,
  input: NewUser,
  options?: ChangeOptions,
): Promise<UserRecord> {
  const values = newUserValues(input);
  const id = randomUUID();
  const now = ctx.now();
  return change(ctx, 'user', { field: 'userName', value: values.userName }, options, async (q) => {
    const ids = await roleIds(q, values.roles, 'roles');
    await run(q, INSERT_USER, ...userValues(id, values, newStamp(), now, POSTGRES_VALUES));
    await setUserRoles(q, id, ids);
    return (await user(q, id))!;
  });
}

/** See `AuthStore.findUserByName`. */
export async function findUserByName(q: Q, userName: string): Promise<UserRecord | undefined> {
  if (typeof userName !== 'string') return undefined;
  return getAs(toUser, q, `${USER_SELECT} WHERE u.user_name_key = ?`, v.nameKey(userName.trim()));
}

/** See `AuthStore.listUsers`. */
export function listUsers(q: Q, query?: ListQuery): Promise<Page<UserRecord>> {
  const key = 'u.user_name_key';
  return page(q, query, { table: 'users u', select: USER_SELECT, search: key, order: key }, toUser);
}

/** See `AuthStore.updateUser`. */
export async function updateUser(
  ctx: PgContext,
  id: string,
  patch: UserPatch,
  options?: ChangeOptions,
): Promise<UserRecord> {
  const values = userPatchValues(patch);
  return change(ctx, 'user', { field: 'userName', value: values.userName ?? '' }, options, async (q) => {
    const current = await lockedUser(q, id);
    const ids = values.roles === undefined ? undefined : await roleIds(q, values.roles, 'roles');
    await run(q, UPDATE_USER, ...userUpdateValues(current, values, ctx.now(), POSTGRES_VALUES));
    if (ids) await setUserRoles(q, id, ids);
    return (await user(q, id))!;
  });
}

/** See `AuthStore.setPasswordHash`. */
export async function setPasswordHash(
  ctx: PgContext,
  id: string,
  passwordHash: string,
  options?: ChangeOptions & { rotateStamp?: boolean },
): Promise<UserRecord> {
  const { rotate } = passwordChange(passwordHash, options);
  return change(ctx, 'user', { field: 'id', value: id }, options, async (q) => {
    const changed = await run(q, UPDATE_PASSWORD, passwordHash, rotate, newStamp(), ctx.now(), id);
    if (changed === 0) throw new NotFoundError('user', id);
    return (await user(q, id))!;
  });
}

/** See `AuthStore.lockUser`. */
export async function lockUser(
  ctx: PgContext,
  id: string,
  until: number,
  options?: ChangeOptions,
): Promise<UserRecord> {
  if (!Number.isFinite(until))
    throw new ValidationError('lockoutEnd', 'timestamp', 'lockoutEnd: ms epoch number');
  return change(ctx, 'user', { field: 'id', value: id }, options, async (q) => {
    const changed = await run(q, LOCK_USER, Math.trunc(until), newStamp(), ctx.now(), id);
    if (changed === 0) throw new NotFoundError('user', id);
    return (await user(q, id))!;
  });
}

/** See `AuthStore.unlockUser`. */
export async function unlockUser(ctx: PgContext, id: string, options?: ChangeOptions): Promise<UserRecord> {
  return change(ctx, 'user', { field: 'id', value: id }, options, async (q) => {
    const changed = await run(q, UNLOCK_USER, ctx.now(), id);
    if (changed === 0) throw new NotFoundError('user', id);
    return (await user(q, id))!;
  });
}

/** See `AuthStore.deleteUser`. */
export async function deleteUser(ctx: PgContext, id: string, options?: ChangeOptions): Promise<void> {
  await change(ctx, 'user', { field: 'id', value: id }, options, async (q) => {
    if ((await run(q, 'DELETE FROM users WHERE id = ?', id)) === 0) throw new NotFoundError('user', id);
  });
}

/** See `AuthStore.getUserSubject`: the user and the closure of its roles, in one transaction. */
export async function getUserSubject(ctx: PgContext, id: string): Promise<UserSubject | undefined> {
  const [found, roles] = await Promise.all([
    user(ctx.sql, String(id)),
    all(
      ctx.sql,
      `WITH RECURSIVE held(id) AS (
        SELECT role_id FROM user_roles WHERE user_id = ?
        UNION SELECT rp.parent_id FROM role_parents rp JOIN held ON rp.role_id = held.id)
        ${ROLE_SELECT} WHERE r.id IN (SELECT id FROM held) ORDER BY r.name_key`,
      String(id),
    ),
  ]);
  if (!found) return undefined;
  return { user: found, roles: roles.map(toRole) };
}

/** See `AuthStore.beginAccessAttempt`: one atomic `UPDATE … RETURNING`. */
export async function beginAccessAttempt(
  q: Q,
  userId: string,
  now: number,
  maxFailures: number,
): Promise<AccessAttempt> {
  const row = await get(q, BEGIN_ACCESS_ATTEMPT, userId, now, maxFailures);
  if (row) return { allowed: true, attempt: Number(row.access_failed_count), lockoutEnd: null };
  const current = await get(q, 'SELECT lockout_end FROM users WHERE id = ?', userId);
  return { allowed: false, attempt: 0, lockoutEnd: current ? num(current.lockout_end) : null };
}

/** See `AuthStore.failAccessAttempt`. */
export async function failAccessAttempt(
  q: Q,
  userId: string,
  attempt: number,
  now: number,
  maxFailures: number,
  lockoutMs: number,
): Promise<boolean> {
  if (attempt < maxFailures) return false;
  const changed = await run(q, LOCK_USER, now + lockoutMs, newStamp(), now, userId);
  return changed > 0;
}

/** See `AuthStore.succeedAccessAttempt`. */
export async function succeedAccessAttempt(q: Q, userId: string): Promise<void> {
  await run(q, SUCCEED_ACCESS_ATTEMPT, userId);
}
