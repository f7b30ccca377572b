/**
 * The PostgreSQL store's cache of client records for `getClient` (the token endpoint's per-request
 * lookup), kept coherent across instances by notifications: a trigger announces every change of a client
 * at commit (`CLIENTS_CHANNEL`, `./schema.ts`) and every instance drops that entry when the notification
 * arrives (milliseconds after the commit). The cache serves only while the notification connection is
 * listening (it is emptied on every (re)connect, since notifications sent meanwhile are lost), and an
 * entry lives at most `ttlMs` whatever happens, which bounds the staleness if a notification is ever lost.
 */
import { freezeClient } from '../rows.ts';
import type { ClientRecord } from '../types.ts';

interface Entry {
  readonly record: ClientRecord | undefined;
  /** `performance.now()` when the read that produced it started. */
  readonly at: number;
}

/** See the module comment. */
export class ClientCache {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #limit: number;
  /** Bumped by every invalidation: a read that overlapped one is not cached. */
  #generation = 0;
  #live = false;

  /** @param ttlMs longest life of an entry, ms (default 5000); @param limit entries before a reset (default 1024). */
  constructor(ttlMs = 5000, limit = 1024) {
    this.#ttlMs = ttlMs;
    this.#limit = limit;
  }

  /** The notification connection is (again) listening: start caching from empty. */
  listening(): void {
    this.#entries.clear();
    this.#generation++;
    this.#live = true;
  }

  /** Stops caching (the store closes). */
  stop(): void {
    this.#live = false;
    this.#entries.clear();
  }

  /** Drops one client's entry (after a change announced or made here), or all of them. */
  invalidate(clientId?: string): void {
    this.#generation++;
    if (clientId === undefined) this.#entries.clear();
    else this.#entries.delete(clientId);
  }

  /**
   * The cached record of `clientId`, or `load()`'s answer (cached when no invalidation happened while it
   * ran). Returned records and their arrays are frozen.
   */
  async get(
    clientId: string,
    load: () => Promise<ClientRecord | undefined>,
  ): Promise<ClientRecord | undefined> {
    const now = performance.now();
    const hit = this.#live ? this.#entries.get(clientId) : undefined;
    if (hit && now - hit.at < this.#ttlMs) return hit.record;
    const generation = this.#generation;
    const record = await load();
    if (record) freezeClient(record);
    if (this.#live && generation === this.#generation) {
      if (this.#entries.size >= this.#limit) this.#entries.clear();
      this.#entries.set(clientId, { record, at: now });
    }
    return record;
  }
}
