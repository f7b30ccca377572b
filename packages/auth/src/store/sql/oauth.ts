/**
 * Audit log and the OAuth extension state, for both databases: device authorizations (RFC 8628), pushed
 * authorization requests (RFC 9126), the one-time-key replay cache shared by every connection and
 * instance (DPoP `jti`, RFC 9449 §11.1; client assertion `jti`, RFC 7523 §3), and expiry purging.
 */
import { auditWhere, paging } from '../inputs.ts';
import {
  deviceCodeValues,
  INSERT_DEVICE_CODE,
  INSERT_PUSHED_REQUEST,
  pushedRequestValues,
} from '../inserts.ts';
import { toAudit, toDeviceCode, toPushedRequest } from '../rows.ts';
import type { AuditEvent, AuditQuery, DeviceCodeRecord, Page, PushedRequestRecord } from '../types.ts';
import { devicePoll, UPDATE_DEVICE_POLL } from '../updates.ts';
import { getAs, type SqlDriver, type StoreContext, write } from './driver.ts';

/** See `AuthStore.listAudit`. */
export async function listAudit(db: SqlDriver, query?: AuditQuery): Promise<Page<AuditEvent>> {
  const { offset, limit } = paging(query);
  const { clause, params } = auditWhere(query ?? {});
  const [count, rows] = await Promise.all([
    db.get(`SELECT count(*) AS n FROM audit_events ${clause}`, ...params),
    db.all(
      `SELECT * FROM audit_events ${clause} ORDER BY time DESC, id DESC LIMIT ? OFFSET ?`,
      ...params,
      limit,
      offset,
    ),
  ]);
  return { items: rows.map(toAudit), total: Number(count?.n) };
}

/** See `AuthStore.insertDeviceCode`. */
export function insertDeviceCode(
  db: SqlDriver,
  input: Omit<DeviceCodeRecord, 'status' | 'userId' | 'lastPolledAt'>,
): Promise<DeviceCodeRecord> {
  return write(db, 'device code', { field: 'userCode', value: input.userCode }, async () => {
    const row = await db.get(INSERT_DEVICE_CODE, ...deviceCodeValues(input));
    return toDeviceCode(row!);
  });
}

/** See `AuthStore.findDeviceCodeByUserCode`. */
export function findDeviceCodeByUserCode(
  db: SqlDriver,
  userCode: string,
): Promise<DeviceCodeRecord | undefined> {
  return getAs(toDeviceCode, db, 'SELECT * FROM device_codes WHERE user_code = ?', String(userCode));
}

/** See `AuthStore.pollDeviceCode`: the row is locked for the read and the update. */
export function pollDeviceCode(
  ctx: StoreContext,
  deviceCodeHash: string,
  now: number,
): Promise<{ record: DeviceCodeRecord; slowDown: boolean } | undefined> {
  return ctx.db.transaction(async (db) => {
    const record = await getAs(
      toDeviceCode,
      db,
      `SELECT * FROM device_codes WHERE device_code_hash = ?${db.dialect.forUpdate}`,
      String(deviceCodeHash),
    );
    if (!record) return undefined;
    const { slowDown, params } = devicePoll(record, now);
    await db.run(UPDATE_DEVICE_POLL, ...params);
    return { record, slowDown };
  });
}

/** See `AuthStore.decideDeviceCode`. */
export async function decideDeviceCode(
  db: SqlDriver,
  userCode: string,
  approved: boolean,
  userId: string,
  now: number,
): Promise<boolean> {
  const changed = await db.run(
    `UPDATE device_codes SET status = ?, user_id = ?
      WHERE user_code = ? AND status = 'pending' AND expires_at > ?`,
    approved ? 'approved' : 'denied',
    userId,
    String(userCode),
    now,
  );
  return changed === 1;
}

/** See `AuthStore.consumeDeviceCode`. */
export async function consumeDeviceCode(db: SqlDriver, deviceCodeHash: string): Promise<boolean> {
  const changed = await db.run(
    `UPDATE device_codes SET status = 'used' WHERE device_code_hash = ? AND status = 'approved'`,
    String(deviceCodeHash),
  );
  return changed === 1;
}

/** See `AuthStore.insertPushedRequest`. */
export function insertPushedRequest(
  db: SqlDriver,
  input: Omit<PushedRequestRecord, 'usedAt'>,
): Promise<PushedRequestRecord> {
  return write(db, 'pushed request', { field: 'requestHash', value: '…' }, async () => {
    const row = await db.get(INSERT_PUSHED_REQUEST, ...pushedRequestValues(input, db.dialect.values));
    return toPushedRequest(row!);
  });
}

/** See `AuthStore.findPushedRequest`. */
export function findPushedRequest(
  db: SqlDriver,
  requestHash: string,
): Promise<PushedRequestRecord | undefined> {
  return getAs(
    toPushedRequest,
    db,
    'SELECT * FROM pushed_authorization_requests WHERE request_hash = ?',
    String(requestHash),
  );
}

/** See `AuthStore.consumePushedRequest`. */
export async function consumePushedRequest(
  db: SqlDriver,
  requestHash: string,
  now: number,
): Promise<boolean> {
  const changed = await db.run(
    `UPDATE pushed_authorization_requests SET used_at = ?
      WHERE request_hash = ? AND used_at IS NULL AND expires_at > ?`,
    now,
    String(requestHash),
    now,
  );
  return changed === 1;
}

/**
 * See `AuthStore.claimReplayKey`: one `INSERT … ON CONFLICT` inserts the key or takes over an expired row
 * of the same key; of concurrent claims of one key (from any instance) exactly one changes a row.
 */
export async function claimReplayKey(
  db: SqlDriver,
  kind: string,
  key: string,
  expiresAt: number,
  now: number,
): Promise<boolean> {
  const changed = await db.run(
    `INSERT INTO replay_cache (kind, key, expires_at) VALUES (?, ?, ?)
      ON CONFLICT (kind, key) DO UPDATE SET expires_at = excluded.expires_at WHERE replay_cache.expires_at <= ?`,
    String(kind),
    String(key),
    expiresAt,
    now,
  );
  return changed === 1;
}

/** See `AuthStore.purgeExpired`. */
export function purgeExpired(ctx: StoreContext, now: number): Promise<number> {
  return ctx.db.transaction(async (db) => {
    let total = 0;
    for (const statement of [
      'DELETE FROM refresh_tokens WHERE expires_at <= ?',
      'DELETE FROM authorization_codes WHERE expires_at <= ?',
      'DELETE FROM login_sessions WHERE expires_at <= ?',
      'DELETE FROM signing_keys WHERE expires_at IS NOT NULL AND expires_at <= ?',
      'DELETE FROM replay_cache WHERE expires_at <= ?',
      'DELETE FROM pushed_authorization_requests WHERE expires_at <= ?',
      'DELETE FROM device_codes WHERE expires_at <= ?',
    ])
      total += await db.run(statement, now);
    return total;
  });
}
