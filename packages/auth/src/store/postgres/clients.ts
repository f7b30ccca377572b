/**
 * OAuth clients (with their OpenID Connect settings, extension metadata and registration access token)
 * and user consent of the PostgreSQL store (spec 001 "Client", RFC 7591/7592). These functions read and
 * write the database; the store caches `getClient` in front of them (`./client-cache.ts`).
 */
import { NotFoundError } from '../../errors.ts';
import { clientMetadata } from '../client-metadata.ts';
import { type ClientOidcValues, clientPatchValues, newClientValues, paging } from '../inputs.ts';
import { clientValues, INSERT_CLIENT, POSTGRES_VALUES } from '../inserts.ts';
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
import { all, change, get, getAs, type PgContext, page, type Q, run } from './db.ts';

/** The client with that id (case-sensitive), or undefined. */
export async function client(q: Q, clientId: string): Promise<ClientRecord | undefined> {
  if (typeof clientId !== 'string') return undefined;
  return getAs(toClient, q, `${CLIENT_SELECT} WHERE c.client_id = ?`, clientId);
}

/** Writes the OpenID Connect settings of a client (inside the caller's transaction; undefined: kept). */
async function setClientOidc(q: Q, clientId: string, values: ClientOidcValues): Promise<void> {
  await run(
    q,
    `UPDATE clients SET post_logout_redirect_uris = coalesce(?::jsonb, post_logout_redirect_uris),
      backchannel_logout_uri = CASE WHEN ? THEN backchannel_logout_uri ELSE ?::text END,
      require_consent = coalesce(?::boolean, require_consent) WHERE client_id = ?`,
    values.postLogoutRedirectUris === undefined ? null : values.postLogoutRedirectUris,
    values.backchannelLogoutUri === undefined,
    values.backchannelLogoutUri ?? null,
    values.requireConsent ?? null,
    clientId,
  );
}

/** See `AuthStore.createClient`. */
export async function createClient(
  ctx: PgContext,
  input: NewClient,
  options?: ChangeOptions,
): Promise<ClientRecord> {
  const values = newClientValues(input);
  const { clientId } = values;
  const now = ctx.now();
  return change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (q) => {
    await run(q, INSERT_CLIENT, ...clientValues(values, now, POSTGRES_VALUES));
    await setClientOidc(q, clientId, values.oidc);
    return (await client(q, clientId))!;
  });
}

/** See `AuthStore.listClients`. */
export function listClients(q: Q, query?: ListQuery): Promise<Page<ClientRecord>> {
  return page(q, query, CLIENT_LIST, toClient);
}

/** See `AuthStore.updateClient`. */
export async function updateClient(
  ctx: PgContext,
  clientId: string,
  patch: ClientPatch,
  options?: ChangeOptions,
): Promise<ClientRecord> {
  const values = clientPatchValues(patch);
  return change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (q) => {
    await get(q, 'SELECT 1 FROM clients WHERE client_id = ? FOR UPDATE', clientId);
    const current = await client(q, clientId);
    if (!current) throw new NotFoundError('client', clientId);
    const params = clientUpdateValues(current, values, patch.secretHash, ctx.now(), POSTGRES_VALUES);
    await run(q, UPDATE_CLIENT, ...params);
    await setClientOidc(q, clientId, values.oidc);
    return (await client(q, clientId))!;
  });
}

/** See `AuthStore.deleteClient`. */
export async function deleteClient(ctx: PgContext, clientId: string, options?: ChangeOptions): Promise<void> {
  await change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (q) => {
    if ((await run(q, 'DELETE FROM clients WHERE client_id = ?', clientId)) === 0)
      throw new NotFoundError('client', clientId);
  });
}

/** See `AuthStore.setClientMetadata`. */
export async function setClientMetadata(
  ctx: PgContext,
  clientId: string,
  metadata: ClientMetadata,
  options?: ChangeOptions,
): Promise<ClientRecord> {
  const value = clientMetadata(metadata);
  return change(ctx, 'client', { field: 'clientId', value: clientId }, options, async (q) => {
    const bumped = await run(q, BUMP_CLIENT, ctx.now(), clientId);
    if (bumped === 0) throw new NotFoundError('client', clientId);
    await run(q, UPSERT_CLIENT_METADATA, clientId, { ...value });
    return (await client(q, clientId))!;
  });
}

/** See `AuthStore.setRegistrationAccessToken`. */
export async function setRegistrationAccessToken(
  ctx: PgContext,
  clientId: string,
  tokenHash: string,
  now: number,
): Promise<void> {
  await change(ctx, 'client', { field: 'clientId', value: clientId }, undefined, async (q) => {
    if (!(await client(q, clientId))) throw new NotFoundError('client', clientId);
    await run(q, UPSERT_REGISTRATION_TOKEN, clientId, tokenHash, now);
  });
}

/** See `AuthStore.findRegistrationAccessToken`. */
export async function findRegistrationAccessToken(q: Q, clientId: string): Promise<string | undefined> {
  const row = await get(
    q,
    'SELECT access_token_hash FROM client_registrations WHERE client_id = ?',
    String(clientId),
  );
  return row ? String(row.access_token_hash) : undefined;
}

/** See `AuthStore.listSessionClients`. */
export async function listSessionClients(q: Q, sid: string): Promise<ClientRecord[]> {
  return (
    await all(
      q,
      `${CLIENT_SELECT} WHERE c.client_id IN (SELECT client_id FROM session_clients WHERE session_id = ?)
        ORDER BY c.client_id`,
      String(sid),
    )
  ).map(toClient);
}

/** See `AuthStore.getConsent`. */
export function getConsent(q: Q, userId: string, clientId: string): Promise<ConsentRecord | undefined> {
  return getAs(
    toConsent,
    q,
    'SELECT * FROM consents WHERE user_id = ? AND client_id = ?',
    String(userId),
    String(clientId),
  );
}

/** See `AuthStore.grantConsent`: the union with the scopes granted before, under the row's lock. */
export async function grantConsent(
  ctx: PgContext,
  userId: string,
  clientId: string,
  scopes: readonly string[],
  options?: ChangeOptions,
): Promise<ConsentRecord> {
  const granted = v.scopes(scopes, 'scopes');
  const now = ctx.now();
  return change(ctx, 'consent', { field: 'clientId', value: clientId }, options, async (q) => {
    const current = await get(
      q,
      'SELECT scopes FROM consents WHERE user_id = ? AND client_id = ? FOR UPDATE',
      userId,
      clientId,
    );
    const union = grantedScopes(current, granted);
    const row = await get(
      q,
      `INSERT INTO consents (user_id, client_id, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (user_id, client_id) DO UPDATE SET
          scopes = (SELECT coalesce(jsonb_agg(DISTINCT s ORDER BY s), '[]'::jsonb)
            FROM jsonb_array_elements_text(consents.scopes || excluded.scopes) AS s),
          updated_at = excluded.updated_at
        RETURNING *`,
      userId,
      clientId,
      union,
      now,
      now,
    );
    return toConsent(row!);
  });
}

/** See `AuthStore.listConsents`. */
export async function listConsents(
  q: Q,
  query: { userId?: string; clientId?: string; offset?: number; limit?: number } = {},
): Promise<Page<ConsentRecord>> {
  const { offset, limit } = paging(query);
  const where = 'WHERE (?::text IS NULL OR user_id = ?) AND (?::text IS NULL OR client_id = ?)';
  const user = query.userId ?? null;
  const clientId = query.clientId ?? null;
  const [count, rows] = await Promise.all([
    get(q, `SELECT count(*) AS n FROM consents ${where}`, user, user, clientId, clientId),
    all(
      q,
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
  ctx: PgContext,
  userId: string,
  clientId: string,
  options?: ChangeOptions,
): Promise<void> {
  await change(ctx, 'consent', { field: 'clientId', value: clientId }, options, async (q) => {
    if ((await run(q, 'DELETE FROM consents WHERE user_id = ? AND client_id = ?', userId, clientId)) === 0)
      throw new NotFoundError('consent', `${userId}/${clientId}`);
  });
}
