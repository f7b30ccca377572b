/**
 * Users, the lockout counter and the user subject (spec 001 "User", "Lockout"), for both databases.
 *
 * Lockout counting is one atomic `UPDATE … RETURNING` per attempt: concurrent attempts (from any number
 * of instances on PostgreSQL, which re-checks the `WHERE` clause of a row updated concurrently) never
 * count more than `maxFailures`. Read-modify-write changes lock the user row (`SELECT … FOR UPDATE` on
 * PostgreSQL; SQLite's `BEGIN IMMEDIATE` holds the write lock for the whole change).
 */
import { randomUUID } from 'node:crypto';
import { NotFoundError, ValidationError } from '../../errors.ts';
import { newStamp, newUserValues, userPatchValues } from '../inputs.ts';
import { INSERT_USER, userValues } from '../inserts.ts';
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
import { change, getAs, page, type SqlDriver, type StoreContext } from './driver.ts';

/**
 * Ids of the roles a user holds and, transitively, their parents (`UNION` stops at roles already seen, so
 * the query ends even on a cyclic graph). One parameter: the user id.
 */
const USER_ROLE_CLOSURE = `WITH RECURSIVE held(id) AS (
  SELECT role_id FROM user_roles WHERE user_id = ?
  UNION SELECT rp.parent_id FROM role_parents rp JOIN held ON rp.role_id = held.id)`;

/** The ids of the roles named `names`. @throws ValidationError (`<field>[i]`: `unknown_role`). */
export async function roleIds(db: SqlDriver, names: readonly string[], field: string): Promise<string[]> {
  const ids: string[] = [];
  for (const [i, name] of names.entries()) {
    const row = await db.get('SELECT id FROM roles WHERE name_key = ?', v.nameKey(name));
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

async function setUserRoles(db: SqlDriver, userId: string, ids: readonly string[]): Promise<void> {
  await db.run('DELETE FROM user_roles WHERE user_id = ?', userId);
  for (const roleId of ids)
    await db.run('INSERT INTO user_roles (user_id, role_id) VALUES (?, ?)', userId, roleId);
}

/** The user with that id, or undefined. */
export function user(db: SqlDriver, id: string): Promise<UserRecord | undefined> {
  return getAs(toUser, db, `${db.dialect.userSelect} WHERE u.id = ?`, String(id));
}

/** The user with that id, its row locked until the transaction ends. @throws NotFoundError. */
async function lockedUser(db: SqlDriver, id: string): Promise<UserRecord> {
  if (db.dialect.forUpdate) await db.get(`SELECT 1 FROM users WHERE id = ?${db.dialect.forUpdate}`, id);
  const found = await user(db, id);
  if (!found) throw new NotFoundError('user', id);
  return found;
}

/** See `AuthStore.createUser`. */
export async function createUser(
  ctx: StoreContext,
  input: NewUser,
  options?: ChangeOptions,
): Promise<UserRecord> {
  const values = newUserValues(input);
  const id = randomUUID();
  const now = ctx.now();
  return change(ctx, 'user', { field: 'userName', value: values.userName }, options, async (db) => {
    const ids = await roleIds(db, values.roles, 'roles');
    await db.run(INSERT_USER, ...userValues(id, values, newStamp(), now, db.dialect.values));
    await setUserRoles(db, id, ids);
    return (await user(db, id))!;
  });
}

/** See `AuthStore.findUserByName`. */
export async function findUserByName(db: SqlDriver, userName: string): Promise<UserRecord | undefined> {
  if (typeof userName !== 'string') return undefined;
  return getAs(toUser, db, `${db.dialect.userSelect} WHERE u.user_name_key = ?`, v.nameKey(userName.trim()));
}

/** See `AuthStore.listUsers`. */
export function listUsers(db: SqlDriver, query?: ListQuery): Promise<Page<UserRecord>> {
  const key = 'u.user_name_key';
  return page(
    db,
    query,
    { table: 'users u', select: db.dialect.userSelect, search: key, order: key },
    toUser,
  );
}

/** See `AuthStore.updateUser`. */
export async function updateUser(
  ctx: StoreContext,
  id: string,
  patch: UserPatch,
  options?: ChangeOptions,
): Promise<UserRecord> {
  const values = userPatchValues(patch);
  return change(ctx, 'user', { field: 'userName', value: values.userName ?? '' }, options, async (db) => {
    const current = await lockedUser(db, id);
    const ids = values.roles === undefined ? undefined : await roleIds(db, values.roles, 'roles');
    await db.run(UPDATE_USER, ...userUpdateValues(current, values, ctx.now(), db.dialect.values));
    if (ids) await setUserRoles(db, id, ids);
    return (await user(db, id))!;
  });
}

/**
 * Runs one `UPDATE … WHERE id = ?` of user `id` in a change and answers the user as it is then.
 * @throws NotFoundError when no user has that id.
 */
function updateOneUser(
  ctx: StoreContext,
  id: string,
  options: ChangeOptions | undefined,
  update: (db: SqlDriver) => Promise<number>,
): Promise<UserRecord> {
  return change(ctx, 'user', { field: 'id', value: id }, options, async (db) => {
    if ((await update(db)) === 0) throw new NotFoundError('user', id);
    return (await user(db, id))!;
  });
}

/** See `AuthStore.setPasswordHash`. */
export function setPasswordHash(
  ctx: StoreContext,
  id: string,
  passwordHash: string,
  options?: ChangeOptions & { rotateStamp?: boolean },
): Promise<UserRecord> {
  const { rotate } = passwordChange(passwordHash, options);
  return updateOneUser(ctx, id, options, (db) =>
    db.run(UPDATE_PASSWORD, passwordHash, db.dialect.values.bool(rotate), newStamp(), ctx.now(), id),
  );
}

/** See `AuthStore.lockUser`. @throws ValidationError `lockoutEnd` when `until` is not a finite number. */
export async function lockUser(
  ctx: StoreContext,
  id: string,
  until: number,
  options?: ChangeOptions,
): Promise<UserRecord> {
  if (!Number.isFinite(until))
    throw new ValidationError('lockoutEnd', 'timestamp', 'lockoutEnd: ms epoch number');
  return updateOneUser(ctx, id, options, (db) =>
    db.run(LOCK_USER, Math.trunc(until), newStamp(), ctx.now(), id),
  );
}

/** See `AuthStore.unlockUser`. */
export function unlockUser(ctx: StoreContext, id: string, options?: ChangeOptions): Promise<UserRecord> {
  return updateOneUser(ctx, id, options, (db) => db.run(UNLOCK_USER, ctx.now(), id));
}

/** See `AuthStore.deleteUser`. */
export async function deleteUser(ctx: StoreContext, id: string, options?: ChangeOptions): Promise<void> {
  await change(ctx, 'user', { field: 'id', value: id }, options, async (db) => {
    if ((await db.run('DELETE FROM users WHERE id = ?', id)) === 0) throw new NotFoundError('user', id);
  });
}

/** See `AuthStore.getUserSubject`: the user and the closure of its roles. */
export async function getUserSubject(db: SqlDriver, id: string): Promise<UserSubject | undefined> {
  const [found, roles] = await Promise.all([
    user(db, String(id)),
    db.all(
      `${USER_ROLE_CLOSURE} ${db.dialect.roleSelect} WHERE r.id IN (SELECT id FROM held) ORDER BY r.name_key`,
      String(id),
    ),
  ]);
  if (!found) return undefined;
  return { user: found, roles: roles.map(toRole) };
}

/** See `AuthStore.beginAccessAttempt`: one atomic `UPDATE … RETURNING`. */
export async function beginAccessAttempt(
  db: SqlDriver,
  userId: string,
  now: number,
  maxFailures: number,
): Promise<AccessAttempt> {
  const row = await db.get(BEGIN_ACCESS_ATTEMPT, userId, now, maxFailures);
  if (row) return { allowed: true, attempt: Number(row.access_failed_count), lockoutEnd: null };
  const current = await db.get('SELECT lockout_end FROM users WHERE id = ?', userId);
  return { allowed: false, attempt: 0, lockoutEnd: current ? num(current.lockout_end) : null };
}

/** See `AuthStore.failAccessAttempt`. */
export async function failAccessAttempt(
  db: SqlDriver,
  userId: string,
  attempt: number,
  now: number,
  maxFailures: number,
  lockoutMs: number,
): Promise<boolean> {
  if (attempt < maxFailures) return false;
  return (await db.run(LOCK_USER, now + lockoutMs, newStamp(), now, userId)) > 0;
}

/** See `AuthStore.succeedAccessAttempt`. */
export async function succeedAccessAttempt(db: SqlDriver, userId: string): Promise<void> {
  await db.run(SUCCEED_ACCESS_ATTEMPT, userId);
}
