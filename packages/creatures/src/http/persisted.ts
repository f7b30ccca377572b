/**
 * Persisted queries for `/graphql`, in two modes:
 *
 * - Automatic Persisted Queries (Apollo's APQ protocol, https://github.com/apollographql/apollo-link-persisted-queries#apollo-engine):
 *   a request carries `extensions.persistedQuery = { version: 1, sha256Hash }`. With the query text the
 *   server checks that the hash is the SHA-256 (hex) of the text and remembers it (LRU); without it the
 *   server uses the remembered text, or answers the error `PersistedQueryNotFound`
 *   (`extensions.code` `PERSISTED_QUERY_NOT_FOUND`) so the client resends the text. Works for GET and POST.
 * - Allow-list (persisted operations, "trusted documents"): only operations of a manifest run. A request
 *   names one by `extensions.persistedQuery.sha256Hash` or `documentId` (GraphQL over HTTP persisted
 *   documents proposal, optionally prefixed `sha256:`), or sends a text whose hash is in the list.
 *   Anything else gets `PERSISTED_QUERY_NOT_IN_LIST`; APQ registration is off.
 *
 * APQ registrations are limited per client (by default 100 new texts per client address a minute, the
 * addresses kept in an LRU of 10,000): past the limit a request with a text still runs, but its text is
 * not kept, so a flood of distinct texts from one client cannot evict every other client's queries.
 *
 * With both off, a request with `extensions.persistedQuery` gets `PERSISTED_QUERY_NOT_SUPPORTED`, so an
 * Apollo client stops hashing.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { LRUCache } from 'lru-cache';
import type { CreatureErrorCode } from '../errors.ts';

/** Options of {@link PersistedQueries}. */
export interface PersistedQueryOptions {
  /** Accept APQ registrations and lookups (default true; ignored in allow-list mode). */
  automatic?: boolean;
  /** Most APQ texts kept (LRU, default 1000). */
  maxEntries?: number;
  /** Most bytes of APQ text kept (UTF-16 estimate, default 8 MiB). */
  maxBytes?: number;
  /** Most APQ texts one client (address) may register per window (default 100; 0: no limit). */
  maxRegistrationsPerClient?: number;
  /** The window of `maxRegistrationsPerClient`, in ms (default 60000). */
  registrationWindowMs?: number;
  /**
   * The allow-list: document id → query text. When given, only these operations run. Ids that are 64 hex
   * digits must be the SHA-256 of their text (checked at start); other ids are taken as they are.
   */
  allowList?: ReadonlyMap<string, string>;
}

/** A request's GraphQL parameters, as they arrive (unchecked). */
export type RequestParams = Record<string, unknown>;

/** A persisted-query failure: the HTTP status for an `application/graphql-response+json` answer, a code and a message. */
export interface PersistedQueryError {
  status: number;
  code: CreatureErrorCode;
  message: string;
}

/** The SHA-256 of a text as 64 lower-case hex digits (the APQ hash). */
export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

const HEX64 = /^[0-9a-f]{64}$/i;

/**
 * Reads an allow-list manifest (JSON): Apollo's persisted query manifest
 * (`{ "format": "apollo-persisted-query-manifest", "operations": [{ "id", "body" }] }`) or a plain
 * object of id → text (Relay's `persisted-queries.json`). Throws naming the file and the rule broken.
 */
export function loadAllowList(file: string): Map<string, string> {
  const json = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  const list = new Map<string, string>();
  const add = (id: unknown, body: unknown) => {
    if (typeof id !== 'string' || typeof body !== 'string' || id === '') {
      throw new Error(`${file}: every operation needs a string id and a string body`);
    }
    list.set(id, body);
  };
  if (json && typeof json === 'object' && Array.isArray((json as { operations?: unknown }).operations)) {
    for (const op of (json as { operations: { id?: unknown; body?: unknown }[] }).operations)
      add(op.id, op.body);
  } else if (json && typeof json === 'object' && !Array.isArray(json)) {
    for (const [id, body] of Object.entries(json)) add(id, body);
  } else {
    throw new Error(`${file}: expected an Apollo persisted query manifest or an object of id → query`);
  }
  return list;
}

/** The persisted-query store of one server; {@link resolve} is called once per operation. */
export class PersistedQueries {
  readonly #automatic: LRUCache<string, string> | undefined;
  readonly #allowList: ReadonlyMap<string, string> | undefined;
  /** SHA-256 (hex) → text of every allow-listed operation. */
  readonly #allowedByHash: Map<string, string> | undefined;
  /** Registrations per client address in the current window (fixed windows, LRU of 10,000 addresses). */
  readonly #registrations: LRUCache<string, { count: number }> | undefined;
  readonly #maxRegistrations: number;
  /**
   * Counters for `/metrics`: APQ lookups that found their text, those that did not, texts registered,
   * and texts not kept because their client was over its registration limit.
   */
  readonly stats = { hits: 0, misses: 0, registered: 0, limited: 0 };

  /** Throws if an allow-list entry with a hex id is not the SHA-256 of its text. */
  constructor(options: PersistedQueryOptions = {}) {
    if (options.allowList) {
      this.#allowList = options.allowList;
      this.#allowedByHash = new Map();
      for (const [id, text] of options.allowList) {
        const hash = sha256Hex(text);
        if (HEX64.test(id) && id.toLowerCase() !== hash) {
          throw new Error(`allow-list entry ${id} is not the SHA-256 of its text (${hash})`);
        }
        this.#allowedByHash.set(hash, text);
      }
    } else if (options.automatic ?? true) {
      this.#automatic = new LRUCache({
        max: options.maxEntries ?? 1000,
        maxSize: options.maxBytes ?? 8 * 1024 * 1024,
        sizeCalculation: (text) => text.length * 2 + 1,
      });
    }
    this.#maxRegistrations = options.maxRegistrationsPerClient ?? 100;
    if (this.#automatic && this.#maxRegistrations > 0) {
      this.#registrations = new LRUCache({ max: 10_000, ttl: options.registrationWindowMs ?? 60_000 });
    }
  }

  /** Whether only allow-listed operations run. */
  get allowListMode(): boolean {
    return this.#allowList !== undefined;
  }

  /**
   * Resolves the query text of one request: returns the parameters to execute (with `query` filled in
   * from the store when the request named a persisted query) or a {@link PersistedQueryError}.
   * Parameters without persisted-query fields are returned as they are (in allow-list mode only when
   * their text is listed). Malformed fields are left for the GraphQL-over-HTTP layer to report.
   * `client` (the client's address) is what registrations are counted by; without it they are not limited.
   */
  resolve(
    params: RequestParams,
    client?: string,
  ): { params: RequestParams } | { error: PersistedQueryError } {
    const extensions = params.extensions;
    const persisted =
      extensions && typeof extensions === 'object' && !Array.isArray(extensions)
        ? (extensions as Record<string, unknown>).persistedQuery
        : undefined;
    const documentId = typeof params.documentId === 'string' ? params.documentId : undefined;
    if (persisted === undefined && documentId === undefined) {
      if (
        this.#allowedByHash &&
        typeof params.query === 'string' &&
        !this.#allowedByHash.has(sha256Hex(params.query))
      ) {
        return notInList();
      }
      return { params };
    }
    let hash: string | undefined;
    if (persisted !== undefined) {
      if (!persisted || typeof persisted !== 'object')
        return badRequest('extensions.persistedQuery must be an object');
      const { version, sha256Hash } = persisted as { version?: unknown; sha256Hash?: unknown };
      if (version !== 1)
        return badRequest(`extensions.persistedQuery.version must be 1, got ${JSON.stringify(version)}`);
      if (typeof sha256Hash !== 'string' || !HEX64.test(sha256Hash)) {
        return badRequest(
          'extensions.persistedQuery.sha256Hash must be 64 hex digits (SHA-256 of the query)',
        );
      }
      hash = sha256Hash.toLowerCase();
    }
    const query = typeof params.query === 'string' ? params.query : undefined;
    if (this.#allowList) {
      const id =
        hash ?? (documentId!.startsWith('sha256:') ? documentId!.slice(7).toLowerCase() : documentId!);
      const listed = this.#allowList.get(id) ?? this.#allowedByHash!.get(id.toLowerCase());
      if (listed === undefined) return notInList();
      if (query !== undefined && query !== listed) return mismatch();
      return { params: { ...params, query: listed } };
    }
    if (!this.#automatic || hash === undefined) {
      return {
        error: { status: 400, code: 'PERSISTED_QUERY_NOT_SUPPORTED', message: 'PersistedQueryNotSupported' },
      };
    }
    if (query !== undefined) {
      if (sha256Hex(query) !== hash) return mismatch();
      if (!this.#automatic.has(hash)) {
        if (this.#mayRegister(client)) {
          this.#automatic.set(hash, query);
          this.stats.registered++;
        } else this.stats.limited++;
      }
      return { params };
    }
    const known = this.#automatic.get(hash);
    if (known === undefined) {
      this.stats.misses++;
      return { error: { status: 400, code: 'PERSISTED_QUERY_NOT_FOUND', message: 'PersistedQueryNotFound' } };
    }
    this.stats.hits++;
    return { params: { ...params, query: known } };
  }

  /** Counts one registration of `client` in its window; false when it is over the limit. */
  #mayRegister(client: string | undefined): boolean {
    if (!this.#registrations || client === undefined) return true;
    const counted = this.#registrations.get(client);
    if (counted === undefined) {
      this.#registrations.set(client, { count: 1 });
      return true;
    }
    return ++counted.count <= this.#maxRegistrations;
  }
}

function badRequest(message: string): { error: PersistedQueryError } {
  return { error: { status: 400, code: 'BAD_REQUEST', message } };
}
function mismatch(): { error: PersistedQueryError } {
  return {
    error: {
      status: 400,
      code: 'PERSISTED_QUERY_HASH_MISMATCH',
      message:
        'The query does not match extensions.persistedQuery.sha256Hash (SHA-256 of the query text, hex)',
    },
  };
}
function notInList(): { error: PersistedQueryError } {
  return {
    error: {
      status: 400,
      code: 'PERSISTED_QUERY_NOT_IN_LIST',
      message: 'This server runs only persisted operations: send the id of an allow-listed operation',
    },
  };
}
