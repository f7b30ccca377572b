import { NotFoundError } from '../../errors.ts';
import { clientMetadata } from '../client-metadata.ts';
import { type ClientOidcValues, clientPatchValues, newClientValues, paging } from '../inputs.ts';
import { clientValues, INSERT_CLIENT, SQLITE_VALUES } from '../inserts.ts';
import { CLIENT_SELECT, freezeClient, grantedScopes, toClient, toConsent } from '../rows.ts';
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
import { SqliteUsers } from './users.ts';

/** Entries of the client cache (clients and misses); it is emptied when full. */
const CLIENT_CACHE_LIMIT = 1024;

/** Clients and consent on {@link SqliteUsers}. */
export abstract class SqliteClients extends SqliteUsers {
  /**
   * Parsed client records (and misses) by id for {@link SqliteAuthStore.getClient}, the token endpoint's
   * per-request lookup. Valid while `PRAGMA data_version` is unchanged (it changes when another connection
   * commits) and cleared by this store's own client writes.
   */
  readonly #clientCache = new Map<string, ClientRecord | undefined>();
  #clientCacheVersion: number | undefined;

  // ── clients ──

  /** The client with that id (read from the database, not the cache), or undefined. */
  protected clientRecord(clientId: string): ClientRecord | undefined {
    return this.sqlGetAs(toClient, `${CLIENT_SELECT} WHERE c.client_id = ?`, clientId);
  }

  async createClient(input: NewClient, options?: ChangeOptions): Promise<ClientRecord> {
    const values = newClientValues(input);
    const { clientId, oidc } = values;
    const now = this.clock();
    this.#clientCache.clear();
    return this.change('client', { field: 'clientId', value: clientId }, options, () => {
      this.sqlRun(INSERT_CLIENT, ...clientValues(values, now, SQLITE_VALUES));
      this.#setClientOidc(clientId, oidc);
      return this.clientRecord(clientId)!;
    });
  }

  /** Cached (see `#clientCache`): the returned record and its arrays are frozen. */
  async getClient(clientId: string): Promise<ClientRecord | undefined> {
    if (typeof clientId !== 'string') return undefined;
    const dataVersion = Number(this.sqlGet('PRAGMA data_version')?.data_version);
    if (dataVersion !== this.#clientCacheVersion) {
      this.#clientCache.clear();
      this.#clientCacheVersion = dataVersion;
    }
    if (this.#clientCache.has(clientId)) return this.#clientCache.get(clientId);
    const client = this.clientRecord(clientId);
    if (client) freezeClient(client);
    if (this.#clientCache.size >= CLIENT_CACHE_LIMIT) this.#clientCache.clear();
    this.#clientCache.set(clientId, client);
    return client;
  }

  async listClients(query?: ListQuery): Promise<Page<ClientRecord>> {
    return this.page(query, CLIENT_LIST, toClient);
  }

  async updateClient(clientId: string, patch: ClientPatch, options?: ChangeOptions): Promise<ClientRecord> {
    const values = clientPatchValues(patch);
    const oidc = values.oidc;
    this.#clientCache.clear();
    return this.change('client', { field: 'clientId', value: clientId }, options, () => {
      const current = this.clientRecord(clientId);
      if (!current) throw new NotFoundError('client', clientId);
      const params = clientUpdateValues(current, values, patch.secretHash, this.clock(), SQLITE_VALUES);
      this.sqlRun(UPDATE_CLIENT, ...params);
      this.#setClientOidc(clientId, oidc);
      return this.clientRecord(clientId)!;
    });
  }

  async deleteClient(clientId: string, options?: ChangeOptions): Promise<void> {
    this.#clientCache.clear();
    this.change('client', { field: 'clientId', value: clientId }, options, () => {
      if (this.sqlRun('DELETE FROM clients WHERE client_id = ?', clientId) === 0)
        throw new NotFoundError('client', clientId);
    });
  }

  // ── consent ──

  async getConsent(userId: string, clientId: string): Promise<ConsentRecord | undefined> {
    return this.sqlGetAs(
      toConsent,
      'SELECT * FROM consents WHERE user_id = ? AND client_id = ?',
      String(userId),
      String(clientId),
    );
  }

  async grantConsent(
    userId: string,
    clientId: string,
    scopes: readonly string[],
    options?: ChangeOptions,
  ): Promise<ConsentRecord> {
    const granted = v.scopes(scopes, 'scopes');
    const now = this.clock();
    return this.change('consent', { field: 'clientId', value: clientId }, options, () => {
      const current = this.sqlGet(
        'SELECT scopes FROM consents WHERE user_id = ? AND client_id = ?',
        userId,
        clientId,
      );
      const union = grantedScopes(current, granted);
      const row = this.sqlGet(
        `INSERT INTO consents (user_id, client_id, scopes, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
          ON CONFLICT (user_id, client_id) DO UPDATE SET scopes = excluded.scopes, updated_at = excluded.updated_at
          RETURNING *`,
        userId,
        clientId,
        JSON.stringify(union),
        now,
        now,
      );
      return toConsent(row!);
    });
  }

  async listConsents(
    query: { userId?: string; clientId?: string; offset?: number; limit?: number } = {},
  ): Promise<Page<ConsentRecord>> {
    const { offset, limit } = paging(query);
    const where = 'WHERE (? IS NULL OR user_id = ?) AND (? IS NULL OR client_id = ?)';
    const user = query.userId ?? null;
    const client = query.clientId ?? null;
    const total = Number(
      this.sqlGet(`SELECT count(*) AS n FROM consents ${where}`, user, user, client, client)?.n,
    );
    const items = this.sqlAll(
      `SELECT * FROM consents ${where} ORDER BY updated_at DESC, client_id LIMIT ? OFFSET ?`,
      user,
      user,
      client,
      client,
      limit,
      offset,
    ).map(toConsent);
    return { items, total };
  }

  async revokeConsent(userId: string, clientId: string, options?: ChangeOptions): Promise<void> {
    this.change('consent', { field: 'clientId', value: clientId }, options, () => {
      if (this.sqlRun('DELETE FROM consents WHERE user_id = ? AND client_id = ?', userId, clientId) === 0)
        throw new NotFoundError('consent', `${userId}/${clientId}`);
    });
  }

  /** Writes the OpenID Connect settings of a client (inside the caller's transaction). */
  #setClientOidc(clientId: string, values: ClientOidcValues): void {
    const current = this.sqlGet(
      'SELECT post_logout_redirect_uris, backchannel_logout_uri, require_consent FROM clients WHERE client_id = ?',
      clientId,
    );
    if (!current) return;
    this.sqlRun(
      `UPDATE clients SET post_logout_redirect_uris = ?, backchannel_logout_uri = ?, require_consent = ?
        WHERE client_id = ?`,
      values.postLogoutRedirectUris === undefined
        ? current.post_logout_redirect_uris!
        : JSON.stringify(values.postLogoutRedirectUris),
      values.backchannelLogoutUri === undefined
        ? current.backchannel_logout_uri!
        : values.backchannelLogoutUri,
      values.requireConsent === undefined ? current.require_consent! : values.requireConsent ? 1 : 0,
      clientId,
    );
  }

  // ── OAuth extensions ──

  async setRegistrationAccessToken(clientId: string, tokenHash: string, now: number): Promise<void> {
    this.change('client', { field: 'clientId', value: clientId }, undefined, () => {
      if (!this.clientRecord(clientId)) throw new NotFoundError('client', clientId);
      this.sqlRun(UPSERT_REGISTRATION_TOKEN, clientId, tokenHash, now);
    });
  }

  async findRegistrationAccessToken(clientId: string): Promise<string | undefined> {
    const row = this.sqlGet(
      'SELECT access_token_hash FROM client_registrations WHERE client_id = ?',
      String(clientId),
    );
    return row ? String(row.access_token_hash) : undefined;
  }

  async setClientMetadata(
    clientId: string,
    metadata: ClientMetadata,
    options?: ChangeOptions,
  ): Promise<ClientRecord> {
    const value = clientMetadata(metadata);
    this.#clientCache.clear();
    return this.change('client', { field: 'clientId', value: clientId }, options, () => {
      if (!this.clientRecord(clientId)) throw new NotFoundError('client', clientId);
      this.sqlRun(UPSERT_CLIENT_METADATA, clientId, JSON.stringify(value));
      this.sqlRun(BUMP_CLIENT, this.clock(), clientId);
      return this.clientRecord(clientId)!;
    });
  }
}
