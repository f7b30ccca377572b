/**
 * Self-service state of both stores: single-use, expiring link tokens (password reset, e-mail
 * verification; only their SHA-256 is stored) and the user's login sessions as the account page shows and
 * ends them. One implementation over the stores' `?`-placeholder runners (`./factors.ts` {@link SqlRunner});
 * the token table comes from SQLite migration 10 ({@link SQLITE_ACCOUNT_TABLES}) and PostgreSQL migration 8
 * ({@link PG_ACCOUNT_TABLES}).
 */
import type { SqlRunner } from './factors.ts';
import { num } from './rows.ts';

/** What a link token is for. */
export type AccountTokenPurpose = 'reset' | 'verify_email';

/** A stored link token (without the token itself). */
export interface AccountTokenRecord {
  readonly userId: string;
  readonly purpose: AccountTokenPurpose;
  /** The e-mail address the link was sent to. */
  readonly email: string;
  /** ms epoch. */
  readonly expiresAt: number;
  readonly usedAt: number | null;
}

/** A live login session as the account page lists it. */
export interface AccountSession {
  /** Public session id (OIDC `sid`). */
  readonly sid: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly amr: readonly string[];
}

/** Self-service storage (see the module comment). Times are ms since the epoch. */
export interface AccountStore {
  /** Stores a token hash (SHA-256, base64url). */
  issueToken(
    tokenHash: string,
    token: Omit<AccountTokenRecord, 'usedAt'> & { createdAt: number },
  ): Promise<void>;
  /** The token's record (used or not, expired or not), or undefined. */
  findToken(tokenHash: string): Promise<AccountTokenRecord | undefined>;
  /**
   * Uses a token of `purpose`: one atomic update that succeeds only for an unused, unexpired token.
   * @returns its record, or undefined.
   */
  useToken(
    tokenHash: string,
    purpose: AccountTokenPurpose,
    now: number,
  ): Promise<AccountTokenRecord | undefined>;
  /** The user whose e-mail address is `email` (case-insensitive), when exactly one has it. */
  findUserIdByEmail(email: string): Promise<string | undefined>;
  /** The user's live (unrevoked, unexpired) login sessions, newest first. */
  listSessions(userId: string, now: number): Promise<AccountSession[]>;
  /** Revokes one of the user's sessions by its `sid`. @returns true when it was live. */
  revokeSession(userId: string, sid: string, now: number): Promise<boolean>;
  /** Revokes every live session of the user. @returns how many. */
  revokeAllSessions(userId: string, now: number): Promise<number>;
}

/** Tables of SQLite migration 10. */
export const SQLITE_ACCOUNT_TABLES = `
CREATE TABLE account_tokens (
  token_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  purpose TEXT NOT NULL CHECK (purpose IN ('reset', 'verify_email')),
  email TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
) STRICT;
CREATE INDEX account_tokens_user ON account_tokens(user_id);
`;

/** Tables of PostgreSQL migration 8. */
export const PG_ACCOUNT_TABLES = `
CREATE TABLE account_tokens (
  token_hash text COLLATE "C" PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  purpose text NOT NULL CHECK (purpose IN ('reset', 'verify_email')),
  email text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint
);
CREATE INDEX account_tokens_user ON account_tokens(user_id);
`;

const toToken = (row: Record<string, unknown>): AccountTokenRecord => ({
  userId: String(row.user_id),
  purpose: String(row.purpose) as AccountTokenPurpose,
  email: String(row.email),
  expiresAt: Number(row.expires_at),
  usedAt: num(row.used_at),
});

/** {@link AccountStore} over a store's {@link SqlRunner}. */
export class SqlAccountStore implements AccountStore {
  readonly #db: SqlRunner;

  constructor(db: SqlRunner) {
    this.#db = db;
  }

  async issueToken(
    tokenHash: string,
    t: Omit<AccountTokenRecord, 'usedAt'> & { createdAt: number },
  ): Promise<void> {
    await this.#db.run(
      `INSERT INTO account_tokens (token_hash, user_id, purpose, email, created_at, expires_at)
        VALUES (?, ?, ?, ?, ?, ?)`,
      tokenHash,
      t.userId,
      t.purpose,
      t.email,
      t.createdAt,
      t.expiresAt,
    );
  }

  async findToken(tokenHash: string): Promise<AccountTokenRecord | undefined> {
    const row = await this.#db.get('SELECT * FROM account_tokens WHERE token_hash = ?', tokenHash);
    return row ? toToken(row) : undefined;
  }

  async useToken(
    tokenHash: string,
    purpose: AccountTokenPurpose,
    now: number,
  ): Promise<AccountTokenRecord | undefined> {
    const row = await this.#db.get(
      `UPDATE account_tokens SET used_at = ?
        WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ? RETURNING *`,
      now,
      tokenHash,
      purpose,
      now,
    );
    return row ? toToken(row) : undefined;
  }

  async findUserIdByEmail(email: string): Promise<string | undefined> {
    const rows = await this.#db.all('SELECT id FROM users WHERE lower(email) = lower(?) LIMIT 2', email);
    return rows.length === 1 ? String(rows[0]!.id) : undefined;
  }

  async listSessions(userId: string, now: number): Promise<AccountSession[]> {
    const rows = await this.#db.all(
      `SELECT sid, created_at, expires_at, amr FROM login_sessions
        WHERE user_id = ? AND revoked_at IS NULL AND expires_at > ? AND sid IS NOT NULL
        ORDER BY created_at DESC LIMIT 100`,
      userId,
      now,
    );
    return rows.map((row) => {
      const amr = typeof row.amr === 'string' ? (JSON.parse(row.amr) as unknown) : row.amr;
      return {
        sid: String(row.sid),
        createdAt: Number(row.created_at),
        expiresAt: Number(row.expires_at),
        amr: Array.isArray(amr) ? amr.map(String) : [],
      };
    });
  }

  async revokeSession(userId: string, sid: string, now: number): Promise<boolean> {
    return (
      (await this.#db.run(
        'UPDATE login_sessions SET revoked_at = ? WHERE user_id = ? AND sid = ? AND revoked_at IS NULL',
        now,
        userId,
        sid,
      )) === 1
    );
  }

  async revokeAllSessions(userId: string, now: number): Promise<number> {
    return this.#db.run(
      'UPDATE login_sessions SET revoked_at = ? WHERE user_id = ? AND revoked_at IS NULL',
      now,
      userId,
    );
  }
}
