/**
 * Passkeys (WebAuthn Level 3 public-key credentials) of both stores: the credential id, the COSE public key,
 * the signature counter (§6.1.1), transports, whether it is multi-device and backed up (a synced passkey),
 * a name the user chose, and when it was made and last used. Nothing secret is stored (the private key
 * never leaves the authenticator). One implementation over the stores' `?`-placeholder runners
 * (`./factors.ts` {@link SqlRunner}); tables from SQLite migration 9 ({@link SQLITE_PASSKEY_TABLES}) and
 * PostgreSQL migration 7 ({@link PG_PASSKEY_TABLES}).
 */
import type { FactorRow, SqlRunner } from './factors.ts';
import { num } from './rows.ts';

/** A stored passkey. */
export interface PasskeyRecord {
  /** Credential id, base64url (WebAuthn `credential.id`). */
  readonly id: string;
  readonly userId: string;
  /** COSE public key, base64url. */
  readonly publicKey: string;
  /** Signature counter last seen (0 for authenticators without one). */
  readonly counter: number;
  /** `AuthenticatorTransport` values the browser reported (e.g. `internal`, `hybrid`, `usb`). */
  readonly transports: readonly string[];
  /** `singleDevice` or `multiDevice` (a passkey that may sync). */
  readonly deviceType: string;
  /** True when the credential is backed up (synced): a software-held key (`amr` `swk`). */
  readonly backedUp: boolean;
  /** Name shown to the user, 1-64 characters. */
  readonly name: string;
  /** ms epoch. */
  readonly createdAt: number;
  readonly lastUsedAt: number | null;
}

/** Input of {@link PasskeyStore.add}. */
export type NewPasskey = Omit<PasskeyRecord, 'lastUsedAt'>;

/** Longest passkey name, characters. */
export const MAX_PASSKEY_NAME = 64;
/** Most passkeys one user may register. */
export const MAX_PASSKEYS_PER_USER = 20;

/** Passkey storage (see the module comment). Times are ms since the epoch. */
export interface PasskeyStore {
  /** Stores a new credential. @throws the store's ConflictError-mapped error when the id exists. */
  add(passkey: NewPasskey): Promise<void>;
  /** The credential with that id, or undefined. */
  get(id: string): Promise<PasskeyRecord | undefined>;
  /** The user's credentials, oldest first. */
  list(userId: string): Promise<PasskeyRecord[]>;
  /** Renames one of the user's credentials. @returns false when the user has no such credential. */
  rename(userId: string, id: string, name: string): Promise<boolean>;
  /** Removes one of the user's credentials. @returns false when the user has no such credential. */
  remove(userId: string, id: string): Promise<boolean>;
  /**
   * Records a use: sets the counter to `next` only if it is still `previous` (one atomic compare-and-set,
   * so two uses racing with one counter value cannot both pass). @returns true when it was set.
   */
  recordUse(id: string, previous: number, next: number, now: number): Promise<boolean>;
}

/** Tables of SQLite migration 9. */
export const SQLITE_PASSKEY_TABLES = `
CREATE TABLE webauthn_credentials (
  credential_id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  public_key TEXT NOT NULL,
  counter INTEGER NOT NULL DEFAULT 0,
  transports TEXT NOT NULL DEFAULT '[]',
  device_type TEXT NOT NULL,
  backed_up INTEGER NOT NULL DEFAULT 0 CHECK (backed_up IN (0, 1)),
  name TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER
) STRICT;
CREATE INDEX webauthn_credentials_user ON webauthn_credentials(user_id);
`;

/** Tables of PostgreSQL migration 7 (the same layout; `transports` is JSON text in both). */
export const PG_PASSKEY_TABLES = `
CREATE TABLE webauthn_credentials (
  credential_id text COLLATE "C" PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  public_key text NOT NULL,
  counter bigint NOT NULL DEFAULT 0,
  transports text NOT NULL DEFAULT '[]',
  device_type text NOT NULL,
  backed_up integer NOT NULL DEFAULT 0 CHECK (backed_up IN (0, 1)),
  name text NOT NULL,
  created_at bigint NOT NULL,
  last_used_at bigint
);
CREATE INDEX webauthn_credentials_user ON webauthn_credentials(user_id);
`;

function transportsOf(raw: unknown): string[] {
  try {
    const value = JSON.parse(String(raw));
    return Array.isArray(value) ? value.filter((t): t is string => typeof t === 'string') : [];
  } catch {
    return [];
  }
}

function toPasskey(row: FactorRow): PasskeyRecord {
  return {
    id: String(row.credential_id),
    userId: String(row.user_id),
    publicKey: String(row.public_key),
    counter: Number(row.counter),
    transports: transportsOf(row.transports),
    deviceType: String(row.device_type),
    backedUp: Number(row.backed_up) === 1,
    name: String(row.name),
    createdAt: Number(row.created_at),
    lastUsedAt: num(row.last_used_at),
  };
}

/** {@link PasskeyStore} over a store's {@link SqlRunner}. */
export class SqlPasskeyStore implements PasskeyStore {
  readonly #db: SqlRunner;

  constructor(db: SqlRunner) {
    this.#db = db;
  }

  async add(p: NewPasskey): Promise<void> {
    await this.#db.run(
      `INSERT INTO webauthn_credentials (credential_id, user_id, public_key, counter, transports, device_type,
        backed_up, name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      p.id,
      p.userId,
      p.publicKey,
      p.counter,
      JSON.stringify(p.transports),
      p.deviceType,
      p.backedUp ? 1 : 0,
      p.name,
      p.createdAt,
    );
  }

  async get(id: string): Promise<PasskeyRecord | undefined> {
    const row = await this.#db.get('SELECT * FROM webauthn_credentials WHERE credential_id = ?', id);
    return row ? toPasskey(row) : undefined;
  }

  async list(userId: string): Promise<PasskeyRecord[]> {
    const rows = await this.#db.all(
      'SELECT * FROM webauthn_credentials WHERE user_id = ? ORDER BY created_at, credential_id',
      userId,
    );
    return rows.map(toPasskey);
  }

  async rename(userId: string, id: string, name: string): Promise<boolean> {
    return (
      (await this.#db.run(
        'UPDATE webauthn_credentials SET name = ? WHERE user_id = ? AND credential_id = ?',
        name,
        userId,
        id,
      )) === 1
    );
  }

  async remove(userId: string, id: string): Promise<boolean> {
    return (
      (await this.#db.run(
        'DELETE FROM webauthn_credentials WHERE user_id = ? AND credential_id = ?',
        userId,
        id,
      )) === 1
    );
  }

  async recordUse(id: string, previous: number, next: number, now: number): Promise<boolean> {
    return (
      (await this.#db.run(
        'UPDATE webauthn_credentials SET counter = ?, last_used_at = ? WHERE credential_id = ? AND counter = ?',
        next,
        now,
        id,
        previous,
      )) === 1
    );
  }
}
