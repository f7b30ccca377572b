/**
 * OAuth clients (with their OpenID Connect settings, extension metadata and registration access token)
 * and user consent (spec 001 "Client", RFC 7591/7592), for both databases. These functions read and
 * write the database; the store caches `getClient` in front of them (`../sql-store.ts`).
 */
import { NotFoundError } from '../../errors.ts';
import { clientMetadata } from '../client-metadata.ts';
import { type ClientOidcValues, clientPatchValues, newClientValues, paging } from '../inputs.ts';
import { clientValues, INSERT_CLIENT } from '../inserts.ts';
import { CLIENT_SELECT, grantedScopes, toClient, toConsent } from '../rows.ts';
import type {
  ChangeOptions,
  ClientMetadata,
  ClientPatch,
  ClientRecord,
  ConsentRecord,
  ListQuery,
  NewClient,
  Page,
} from '../types.ts';
import {
  BUMP_CLIENT,
  CLIENT_LIST,
  clientUpdateValues,
  UPDATE_CLIENT,
  UPSERT_CLIENT_METADATA,
  UPSERT_REGISTRATION_TOKEN,
} from '../updates.ts';
import * as v from '../validation.ts';
import { change, getAs, page, type SqlDriver, type StoreContext } from './driver.ts';

/** The client with that id (case-sensitive), or undefined. */
export async function client(db: SqlDriver, clientId: string): Promise<ClientRecord | undefined> {
  if (typeof clientId !== 'string') return undefined;
  return getAs(toClient, db, `${CLIENT_SELECT} WHERE c.client_id = ?`, clientId);
}

/** Writes the OpenID Connect settings of a client (inside the caller's transaction; undefined: kept). */
async function setClientOidc(db: SqlDriver, clientId: string, values: ClientOidcValues): Promise<void> {
  const { typed, values: encode } = db.dialect;
  await db.run(
    `UPDATE clients SET post_logout_redirect_uris = coalesce(${typed('jsonb')}, post_logout_redirect_uris),
      backchannel_logout_uri = CASE WHEN ? THEN backchannel_logout_uri ELSE ${typed('text')} END,
      require_consent = coalesce(${typed('boolean')}, require_consent) WHERE client_id = ?`,
    values.postLogoutRedirectUris === undefined ? null : encode.list(values.postLogoutRedirectUris),
    encode.bool(values.backchannelLogoutUri === undefined),
    values.backchannelLogoutUri ?? null,
    values.requireConsent === undefined ? null : encode.bool(values.requireConsent),
    clientId,
  );
}

/** See `AuthStore.createClient`. */
export async function createClient(
  ctx: StoreContext,
  input: NewClient,
  options?: ChangeOptions,
): Promise<ClientRecord> {
  const values = newClientValues(input);
  const { clientId } = values;
  const now = ctx.now();
  return change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (db) => {
    await db.run(INSERT_CLIENT, ...clientValues(values, now, db.dialect.values));
    await setClientOidc(db, clientId, values.oidc);
    return (await client(db, clientId))!;
  });
}

/** See `AuthStore.listClients`. */
export function listClients(db: SqlDriver, query?: ListQuery): Promise<Page<ClientRecord>> {
  return page(db, query, CLIENT_LIST, toClient);
}

/** See `AuthStore.updateClient`. */
export async function updateClient(
  ctx: StoreContext,
  clientId: string,
  patch: ClientPatch,
  options?: ChangeOptions,
): Promise<ClientRecord> {
  const values = clientPatchValues(patch);
  return change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (db) => {
    const { forUpdate } = db.dialect;
    if (forUpdate) await db.get(`SELECT 1 FROM clients WHERE client_id = ?${forUpdate}`, clientId);
    const current = await client(db, clientId);
    if (!current) throw new NotFoundError('client', clientId);
    const params = clientUpdateValues(current, values, patch.secretHash, ctx.now(), db.dialect.values);
    await db.run(UPDATE_CLIENT, ...params);
    await setClientOidc(db, clientId, values.oidc);
    return (await client(db, clientId))!;
  });
}

/** See `AuthStore.deleteClient`. */
export async function deleteClient(
  ctx: StoreContext,
  clientId: string,
  options?: ChangeOptions,
): Promise<void> {
  await change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (db) => {
    if ((await db.run('DELETE FROM clients WHERE client_id = ?', clientId)) === 0)
      throw new NotFoundError('client', clientId);
  });
}

/** See `AuthStore.setClientMetadata`. */
export async function setClientMetadata(
  ctx: StoreContext,
  clientId: string,
  metadata: ClientMetadata,
  options?: ChangeOptions,
): Promise<ClientRecord> {
  const value = clientMetadata(metadata);
  return change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (db) => {
    if ((await db.run(BUMP_CLIENT, ctx.now(), clientId)) === 0) throw new NotFoundError('client', clientId);
    await db.run(UPSERT_CLIENT_METADATA, clientId, db.dialect.values.json({ ...value }));
    return (await client(db, clientId))!;
  });
}

/** See `AuthStore.setRegistrationAccessToken`. */
export async function setRegistrationAccessToken(
  ctx: StoreContext,
  clientId: string,
  tokenHash: string,
  now: number,
): Promise<void> {
  await change(ctx, 'client', { field: 'clientId', value: clientId }, undefined, async (db) => {
    if (!(await client(db, clientId))) throw new NotFoundError('client', clientId);
    await db.run(UPSERT_REGISTRATION_TOKEN, clientId, tokenHash, now);
  });
}

/** See `AuthStore.findRegistrationAccessToken`. */
export async function findRegistrationAccessToken(
  db: SqlDriver,
  clientId: string,
): Promise<string | undefined> {
  const row = await db.get(
    'SELECT access_token_hash FROM client_registrations WHERE client_id = ?',
    String(clientId),
  );
  return row ? String(row.access_token_hash) : undefined;
}

/** See `AuthStore.listSessionClients`. */
export async function listSessionClients(db: SqlDriver, sid: string): Promise<ClientRecord[]> {
  const rows = await db.all(
    `${CLIENT_SELECT} WHERE c.client_id IN (SELECT client_id FROM session_clients WHERE session_id = ?)
      ORDER BY c.client_id`,
    String(sid),
  );
  return rows.map(toClient);
}

/** See `AuthStore.getConsent`. */
export function getConsent(
  db: SqlDriver,
  userId: string,
  clientId: string,
): Promise<ConsentRecord | undefined> {
  return getAs(
    toConsent,
    db,
    'SELECT * FROM consents WHERE user_id = ? AND client_id = ?',
    String(userId),
    String(clientId),
  );
}

/** See `AuthStore.grantConsent`: the union with the scopes granted before, under the row's lock. */
export async function grantConsent(
  ctx: StoreContext,
  userId: string,
  clientId: string,
  scopes: readonly string[],
  options?: ChangeOptions,
): Promise<ConsentRecord> {
  const granted = v.scopes(scopes, 'scopes');
  const now = ctx.now();
  return change(ctx, 'consent', { field: 'clientId', value: clientId }, options, async (db) => {
    const { forUpdate, consentScopesOnConflict, values } = db.dialect;
    const current = await db.get(
      `SELECT scopes FROM consents WHERE user_id = ? AND client_id = ?${forUpdate}`,
      userId,
      clientId,
    );
    const union = grantedScopes(current, granted);
    const row = await db.get(
      `INSERT INTO consents (user_id, client_id, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = ${consentScopesOnConflict},
          updated_at = excluded.updated_at
        RETURNING *`,
      userId,
      clientId,
      values.list(union),
      now,
      now,
    );
    return toConsent(row!);
  });
}

/** See `AuthStore.listConsents`. */
export async function listConsents(
  db: SqlDriver,
  query: { userId?: string; clientId?: string; offset?: number; limit?: number } = {},
): Promise<Page<ConsentRecord>> {
  const { offset, limit } = paging(query);
  const text = db.dialect.typed('text');
  const where = `WHERE (${text} IS NULL OR user_id = ?) AND (${text} IS NULL OR client_id = ?)`;
  const user = query.userId ?? null;
  const clientId = query.clientId ?? null;
  const [count, rows] = await Promise.all([
    db.get(`SELECT count(*) AS n FROM consents ${where}`, user, user, clientId, clientId),
    db.all(
      `SELECT * FROM consents ${where} ORDER BY updated_at DESC, client_id LIMIT ? OFFSET ?`,
      user,
      user,
      clientId,
      clientId,
      limit,
      offset,
    ),
  ]);
  return { items: rows.map(toConsent), total: Number(count?.n) };
}

/** See `AuthStore.revokeConsent`. */
export async function revokeConsent(
  ctx: StoreContext,
  userId: string,
  clientId: string,
  options?: ChangeOptions,
): Promise<void> {
  await change(ctx, 'consent', { field: 'clientId', value: clientId }, options, async (db) => {
    if ((await db.run('DELETE FROM consents WHERE user_id = ? AND client_id = ?', userId, clientId)) === 0)
      throw new NotFoundError('consent', `${userId}/${clientId}`);
  });
}
