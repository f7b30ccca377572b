/**
 * Managed API keys of the shared service. A key is `e2b_` and 40 lowercase hex digits
 * (160 random bits; the shape E2B clients send in `X-API-KEY`), shown once when created. The store keeps
 * only its SHA-256 digest, its id (ULID), a display prefix, its tenant, its permissions (the codes access
 * tokens carry: `sandbox.boxes.read`, `sandbox.boxes.write`, `sandbox.exec`, `sandbox.operator`), and
 * when it expires or was revoked. Keys live in one JSON file (`keys.json` in the server's state
 * directory) written atomically; every lookup notices a change of the file (the `sandbox keys` command
 * writing it beside a running server), so that a key created, revoked or expired applies without a restart.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ulid } from 'ulid';
import { BoxError, notFound } from '../../errors.ts';
import { readJson, stampOf, writeJsonAtomic } from './state-file.ts';
import { isReservedTenant, isTenant } from './tenant.ts';

/** The shape of a managed key: `e2b_` and 40 lowercase hex digits. */
export const MANAGED_KEY_RE = /^e2b_[0-9a-f]{40}$/;

/** Permission codes a key may carry. `sandbox.operator` sees and manages every tenant. */
export const KEY_PERMISSIONS = [
  'sandbox.boxes.read',
  'sandbox.boxes.write',
  'sandbox.exec',
  'sandbox.operator',
] as const;

/** Permissions of a key created without `permissions`: every tenant permission (not `sandbox.operator`). */
export const DEFAULT_KEY_PERMISSIONS: readonly string[] = [
  'sandbox.boxes.read',
  'sandbox.boxes.write',
  'sandbox.exec',
];

/** A key as listed (never its secret nor its digest). Times are RFC 3339. */
export interface ApiKeyInfo {
  /** ULID naming the key (for `revoke`). */
  id: string;
  /** The key's first characters (`e2b_` + 6 hex), to recognise it. */
  prefix: string;
  tenant: string;
  permissions: string[];
  createdAt: string;
  /** When it stops being valid; null: never. */
  expiresAt: string | null;
  /** When it was revoked; null: not revoked. */
  revokedAt: string | null;
}

interface KeyRecord extends ApiKeyInfo {
  /** SHA-256 of the key, hex. */
  hash: string;
}

interface KeyFile {
  version: 1;
  keys: KeyRecord[];
}

/** What creating a key needs. */
export interface CreateKeyOptions {
  /** Tenant id ({@link isTenant}). */
  tenant: string;
  /** Permission codes (subset of {@link KEY_PERMISSIONS}); default {@link DEFAULT_KEY_PERMISSIONS}. */
  permissions?: readonly string[];
  /** Expiry, ms since the epoch; absent: never expires. Must be in the future. */
  expiresAt?: number;
}

function digestHex(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

function publicInfo(record: KeyRecord): ApiKeyInfo {
  const { hash: _hash, ...info } = record;
  return info;
}

/**
 * Checks what a new key asks for: a valid tenant id, not a reserved one (`tenant.ts`) unless the key
 * holds `sandbox.operator`, known permissions, an expiry in the future.
 * @throws BoxError `invalid_option` naming `tenant`, `permissions` or `expires_at` (the field and the rule).
 */
export function checkKeyOptions(options: CreateKeyOptions, now = Date.now()): void {
  if (!isTenant(options.tenant)) {
    throw new BoxError(
      'invalid field tenant: must be 1-128 characters of letters, digits, "_", ".", "@", ":", "|" or "-", starting with a letter or digit',
      { field: 'tenant' },
    );
  }
  if (isReservedTenant(options.tenant) && !options.permissions?.includes('sandbox.operator')) {
    throw new BoxError(
      `invalid field tenant: '${options.tenant}' is reserved for keys holding the sandbox.operator permission`,
      { field: 'tenant' },
    );
  }
  if (options.permissions !== undefined) {
    if (!Array.isArray(options.permissions) || options.permissions.length === 0) {
      throw new BoxError('invalid field permissions: must be a non-empty list of permission codes', {
        field: 'permissions',
      });
    }
    for (const permission of options.permissions) {
      if (!(KEY_PERMISSIONS as readonly string[]).includes(permission)) {
        throw new BoxError(
          `invalid field permissions: '${permission}' is not one of ${KEY_PERMISSIONS.join(', ')}`,
          { field: 'permissions' },
        );
      }
    }
  }
  if (options.expiresAt !== undefined && !(Number.isFinite(options.expiresAt) && options.expiresAt > now)) {
    throw new BoxError('invalid field expires_at: must be a time in the future', { field: 'expires_at' });
  }
}

/** The managed keys of one server (see the module comment). */
export class KeyStore {
  /** Path of the key file. */
  readonly path: string;
  #stamp: string | null = null;
  #records: KeyRecord[] = [];
  #byHash = new Map<string, KeyRecord>();

  /** @param path the key file (created on the first `create`); nothing is read before the first use. */
  constructor(path: string) {
    this.path = path;
  }

  #load(): void {
    const stamp = stampOf(this.path);
    if (stamp === this.#stamp) return;
    const file = readJson<KeyFile>(this.path, { version: 1, keys: [] });
    this.#records = Array.isArray(file.keys) ? file.keys : [];
    this.#byHash = new Map(this.#records.map((record) => [record.hash, record]));
    this.#stamp = stamp;
  }

  #save(): void {
    writeJsonAtomic(this.path, { version: 1, keys: this.#records } satisfies KeyFile);
    this.#stamp = stampOf(this.path);
  }

  /**
   * Creates a key; the answer's `key` is the only time the secret exists outside the caller.
   * @throws BoxError `invalid_option` (see {@link checkKeyOptions}).
   */
  create(options: CreateKeyOptions): { key: string; info: ApiKeyInfo } {
    checkKeyOptions(options);
    this.#load();
    const key = `e2b_${randomBytes(20).toString('hex')}`;
    const record: KeyRecord = {
      id: ulid(),
      prefix: key.slice(0, 10),
      tenant: options.tenant,
      permissions: [...new Set(options.permissions ?? DEFAULT_KEY_PERMISSIONS)],
      createdAt: new Date().toISOString(),
      expiresAt: options.expiresAt === undefined ? null : new Date(options.expiresAt).toISOString(),
      revokedAt: null,
      hash: digestHex(key),
    };
    this.#records.push(record);
    this.#byHash.set(record.hash, record);
    this.#save();
    return { key, info: publicInfo(record) };
  }

  /** Every key (of `tenant` when given), oldest first. */
  list(tenant?: string): ApiKeyInfo[] {
    this.#load();
    return this.#records.filter((r) => tenant === undefined || r.tenant === tenant).map(publicInfo);
  }

  /**
   * Revokes key `id` (of `tenant` when given: another tenant's key is not found); a revoked key stays
   * revoked. @throws BoxError `not_found`.
   */
  revoke(id: string, tenant?: string): ApiKeyInfo {
    this.#load();
    const record = this.#records.find((r) => r.id === id && (tenant === undefined || r.tenant === tenant));
    if (!record) throw notFound(`no API key '${id}'`);
    if (record.revokedAt === null) {
      record.revokedAt = new Date().toISOString();
      this.#save();
    }
    return publicInfo(record);
  }

  /**
   * The valid key `presented` (not revoked, not expired at `now`), or null. The digest is compared in
   * constant time; a string not shaped like a managed key is null without a lookup.
   */
  verify(presented: string, now = Date.now()): ApiKeyInfo | null {
    if (!MANAGED_KEY_RE.test(presented)) return null;
    this.#load();
    const hash = digestHex(presented);
    const record = this.#byHash.get(hash);
    if (!record || !timingSafeEqual(Buffer.from(record.hash, 'hex'), Buffer.from(hash, 'hex'))) return null;
    if (record.revokedAt !== null) return null;
    if (record.expiresAt !== null && Date.parse(record.expiresAt) <= now) return null;
    return publicInfo(record);
  }
}
