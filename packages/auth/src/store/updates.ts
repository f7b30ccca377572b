/**
 * Update statements and decisions shared by the SQLite and PostgreSQL stores, the way `./inserts.ts`
 * shares the inserts: both stores bind `?` placeholders (the PostgreSQL store numbers them), so each
 * keeps only its locking, transactions and value binding.
 */
import { ValidationError } from '../errors.ts';
import type { DeviceCodeRecord } from './types.ts';

/** Seconds a `slow_down` answer adds to a device code's polling interval (RFC 8628 §3.5). */
export const DEVICE_SLOW_DOWN_SECONDS = 5;

/** Records a device-code poll: parameters `[lastPolledAt ms, added interval seconds, device code hash]`. */
export const UPDATE_DEVICE_POLL =
  'UPDATE device_codes SET last_polled_at = ?, interval_s = interval_s + ? WHERE device_code_hash = ?';

/**
 * The decision for one poll of a device code at `now` (ms since the epoch; RFC 8628 §3.4-3.5): a
 * pending code polled again sooner than its interval answers `slow_down` and its interval grows by
 * {@link DEVICE_SLOW_DOWN_SECONDS}. Pure; `params` are those of {@link UPDATE_DEVICE_POLL}.
 */
export function devicePoll(
  record: DeviceCodeRecord,
  now: number,
): { slowDown: boolean; params: [number, number, string] } {
  const slowDown =
    record.status === 'pending' &&
    record.lastPolledAt !== null &&
    now - record.lastPolledAt < record.intervalSeconds * 1000;
  return { slowDown, params: [now, slowDown ? DEVICE_SLOW_DOWN_SECONDS : 0, record.deviceCodeHash] };
}

/**
 * Finds whether role `$2` is role `$1` or one of its ancestors (parameters `[parent id, role id]`);
 * one row `{ hit: 1 }` if so. `seed` is the first placeholder as the dialect needs it typed
 * (`'?'` for SQLite, `'?::text'` for PostgreSQL).
 */
export function roleInheritsSql(seed: '?' | '?::text'): string {
  return `WITH RECURSIVE up(id) AS (SELECT ${seed} UNION SELECT rp.parent_id FROM role_parents rp JOIN up ON rp.role_id = up.id)
    SELECT 1 AS hit FROM up WHERE id = ?`;
}

/** Removes every parent of a role: parameter `[role id]`. */
export const DELETE_ROLE_PARENTS = 'DELETE FROM role_parents WHERE role_id = ?';

/** Adds one parent to a role: parameters `[role id, parent id]`. */
export const INSERT_ROLE_PARENT = 'INSERT INTO role_parents (role_id, parent_id) VALUES (?, ?)';

/**
 * The error for `parentRoles[i]` naming a role that is the role being changed or inherits from it
 * (spec 001 "Roles": the role graph is acyclic). Code `cycle`, field `parentRoles[i]`.
 */
export function roleCycleError(names: readonly string[], i: number): ValidationError {
  return new ValidationError(
    `parentRoles[${i}]`,
    'cycle',
    `parentRoles[${i}]: role '${names[i]}' is this role or inherits from it (cycles are not allowed)`,
  );
}
