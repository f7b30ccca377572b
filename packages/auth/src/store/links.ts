/**
 * Links between local users and their accounts at upstream OpenID providers (identity brokering): one row
 * per (provider, upstream `sub`), at most one link per provider and user. The statements use `?`
 * placeholders and portable SQL, so {@link SqlLinkStore} runs over both stores' query functions; the
 * table comes from SQLite migration 8 ({@link SQLITE_LINK_TABLES}) and PostgreSQL migration 6
 * ({@link PG_LINK_TABLES}). A link goes with its user (foreign key, `ON DELETE CASCADE`).
 */
import type { SqlRunner } from './factors.ts';
import { strOrNull } from './rows.ts';

/** A user's link to an upstream account. */
export interface UserLinkRecord {
  /** Id of the configured upstream provider. */
  readonly providerId: string;
  /** The upstream account's `sub` (OIDC Core §2), unique per provider. */
  readonly subject: string;
  readonly userId: string;
  /** The upstream e-mail address at the last sign-in, or null. */
  readonly email: string | null;
  /** ms epoch. */
  readonly createdAt: number;
  /** Last sign-in through the link (ms epoch). */
  readonly lastUsedAt: number;
}

/** A local user found by e-mail address (case-insensitive). */
export interface UserByEmail {
  readonly id: string;
  readonly emailVerified: boolean;
}

/** Link storage. All times are ms since the epoch. */
export interface LinkStore {
  /** The link of an upstream account, or undefined. */
  findLink(providerId: string, subject: string): Promise<UserLinkRecord | undefined>;
  /**
   * Links an upstream account to a user. @returns false (nothing written) when the upstream account or
   * the user's link to this provider exists already.
   */
  createLink(link: Omit<UserLinkRecord, 'lastUsedAt'>): Promise<boolean>;
  /** Records a sign-in through a link (time and e-mail). */
  touchLink(providerId: string, subject: string, email: string | null, now: number): Promise<void>;
  /** A user's links, by provider id. */
  listLinks(userId: string): Promise<UserLinkRecord[]>;
  /** Removes a user's link to a provider. @returns true when it existed. */
  deleteLink(userId: string, providerId: string): Promise<boolean>;
  /** Local users with this e-mail address (case-insensitive), at most 2 (more than one is ambiguous). */
  findUsersByEmail(email: string): Promise<UserByEmail[]>;
}

/** A row as the drivers return it. */
type Row = Record<string, unknown>;

/** Tables of SQLite migration 8. */
export const SQLITE_LINK_TABLES = `
CREATE TABLE user_links (
  provider_id TEXT NOT NULL,
  subject TEXT NOT NULL,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  email TEXT,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER NOT NULL,
  PRIMARY KEY (provider_id, subject),
  UNIQUE (user_id, provider_id)
) STRICT, WITHOUT ROWID;
`;

/** Tables of PostgreSQL migration 6 (the same layout in PostgreSQL types). */
export const PG_LINK_TABLES = `
CREATE TABLE user_links (
  provider_id text COLLATE "C" NOT NULL,
  subject text COLLATE "C" NOT NULL,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  email text,
  created_at bigint NOT NULL,
  last_used_at bigint NOT NULL,
  PRIMARY KEY (provider_id, subject),
  UNIQUE (user_id, provider_id)
);
`;

function toLink(row: Row): UserLinkRecord {
  return {
    providerId: String(row.provider_id),
    subject: String(row.subject),
    userId: String(row.user_id),
    email: strOrNull(row.email),
    createdAt: Number(row.created_at),
    lastUsedAt: Number(row.last_used_at),
  };
}

const COLUMNS = 'provider_id, subject, user_id, email, created_at, last_used_at';

/** {@link LinkStore} over a store's query functions. */
export class SqlLinkStore implements LinkStore {
  readonly #db: SqlRunner;

  constructor(db: SqlRunner) {
    this.#db = db;
  }

  async findLink(providerId: string, subject: string): Promise<UserLinkRecord | undefined> {
    const row = await this.#db.get(
      `SELECT ${COLUMNS} FROM user_links WHERE provider_id = ? AND subject = ?`,
      providerId,
      subject,
    );
    return row ? toLink(row) : undefined;
  }

  async createLink(link: Omit<UserLinkRecord, 'lastUsedAt'>): Promise<boolean> {
    const changed = await this.#db.run(
      `INSERT INTO user_links (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      link.providerId,
      link.subject,
      link.userId,
      link.email,
      link.createdAt,
      link.createdAt,
    );
    return changed === 1;
  }

  async touchLink(providerId: string, subject: string, email: string | null, now: number): Promise<void> {
    await this.#db.run(
      'UPDATE user_links SET last_used_at = ?, email = ? WHERE provider_id = ? AND subject = ?',
      now,
      email,
      providerId,
      subject,
    );
  }

  async listLinks(userId: string): Promise<UserLinkRecord[]> {
    const rows = await this.#db.all(
      `SELECT ${COLUMNS} FROM user_links WHERE user_id = ? ORDER BY provider_id`,
      userId,
    );
    return rows.map(toLink);
  }

  async deleteLink(userId: string, providerId: string): Promise<boolean> {
    return (
      (await this.#db.run(
        'DELETE FROM user_links WHERE user_id = ? AND provider_id = ?',
        userId,
        providerId,
      )) === 1
    );
  }

  async findUsersByEmail(email: string): Promise<UserByEmail[]> {
    const rows = await this.#db.all(
      'SELECT id, email_verified FROM users WHERE lower(email) = lower(?) ORDER BY id LIMIT 2',
      email,
    );
    return rows.map((row) => ({ id: String(row.id), emailVerified: Number(row.email_verified) === 1 }));
  }
}
