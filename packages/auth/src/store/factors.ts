/**
 * Second-factor state of both stores: TOTP factors (RFC 6238; the seed sealed by `../mfa/seal.ts`, never in
 * clear), recovery codes (SHA-256 hashes, single use) and the administrators' two-factor requirements per
 * user, role or client. The statements use `?` placeholders and portable SQL, so one implementation
 * ({@link SqlFactorStore}) runs over the SQLite store and the PostgreSQL store alike (passkeys too,
 * `./passkeys.ts`); each store passes
 * its query functions ({@link SqlRunner}). The tables come from SQLite migration 7
 * ({@link SQLITE_FACTOR_TABLES}) and PostgreSQL migration 5 ({@link PG_FACTOR_TABLES}).
 */

import { type AccountStore, SqlAccountStore } from './account.ts';
import { type PasskeyStore, SqlPasskeyStore } from './passkeys.ts';
import { num } from './rows.ts';

/** A user's TOTP factor. */
export interface TotpFactorRecord {
  readonly userId: string;
  /** The seed sealed with the server's MFA key (`../mfa/seal.ts`, AES-256-GCM bound to the user id). */
  readonly sealedSecret: string;
  /** Highest RFC 6238 time step (`T`, 30 s units since the epoch) accepted so far, or null before the first use. */
  readonly lastStep: number | null;
  /** When it was enrolled (ms epoch). */
  readonly createdAt: number;
  /** Last successful use (ms epoch), or null. */
  readonly lastUsedAt: number | null;
}

/** What an administrator's requirement names: a user (id), a role (id) or a client (client id). */
export type MfaTargetKind = 'user' | 'role' | 'client';
/** The {@link MfaTargetKind} values. */
export const MFA_TARGET_KINDS: readonly MfaTargetKind[] = Object.freeze(['user', 'role', 'client']);

/** One requirement: users it names (directly, by role or by client) must sign in with a second factor. */
export interface MfaRequirementRecord {
  readonly targetKind: MfaTargetKind;
  readonly targetId: string;
  /** ms epoch. */
  readonly createdAt: number;
}

/** A user's second-factor summary (no secrets). */
export interface FactorSummary {
  /** TOTP enrolment time (ms epoch), or null without a TOTP factor. */
  readonly totpEnrolledAt: number | null;
  readonly totpLastUsedAt: number | null;
  /** Recovery codes not yet used. */
  readonly recoveryCodesLeft: number;
}

/** Second-factor storage (see the module comment). All times are ms since the epoch. */
export interface FactorStore {
  /** The user's TOTP factor, or undefined. */
  getTotp(userId: string): Promise<TotpFactorRecord | undefined>;
  /**
   * Sets (or replaces) the user's TOTP factor; `lastStep` is the step of the code that confirmed it, so that
   * code cannot be used again. @throws the store's error when the user does not exist (foreign key).
   */
  setTotp(userId: string, sealedSecret: string, lastStep: number, now: number): Promise<void>;
  /** Removes the TOTP factor and the recovery codes. @returns true when a TOTP factor existed. */
  removeTotp(userId: string): Promise<boolean>;
  /**
   * Claims time step `step` for the user: true only when it is later than every step accepted before
   * (one atomic update), so a code is never accepted twice, on any instance (RFC 6238 §5.2).
   */
  claimTotpStep(userId: string, step: number, now: number): Promise<boolean>;
  /** Replaces the user's recovery codes with `codeHashes` (SHA-256, base64url). */
  replaceRecoveryCodes(userId: string, codeHashes: readonly string[], now: number): Promise<void>;
  /** Marks an unused recovery code used. @returns true when it existed and was unused (one atomic update). */
  useRecoveryCode(userId: string, codeHash: string, now: number): Promise<boolean>;
  /** TOTP and recovery-code state without secrets. */
  summary(userId: string): Promise<FactorSummary>;
  /**
   * True when a requirement names the user, one of the roles assigned to the user, or `clientId`.
   */
  isMfaRequired(userId: string, clientId: string | null): Promise<boolean>;
  /** Adds a requirement (idempotent). */
  requireMfa(kind: MfaTargetKind, targetId: string, now: number): Promise<void>;
  /** Removes a requirement. @returns true when it existed. */
  unrequireMfa(kind: MfaTargetKind, targetId: string): Promise<boolean>;
  /** All requirements, by kind then target id. */
  listMfaRequirements(): Promise<MfaRequirementRecord[]>;
  /** The users' passkeys (`./passkeys.ts`). */
  readonly passkeys: PasskeyStore;
  /** Self-service link tokens and the users' sessions (`./account.ts`). */
  readonly account: AccountStore;
}

/** A row as the drivers return it. */
export type FactorRow = Record<string, unknown>;

/** The query functions of a store (statements with `?` placeholders). */
export interface SqlRunner {
  get(sql: string, ...params: (string | number | null)[]): Promise<FactorRow | undefined>;
  all(sql: string, ...params: (string | number | null)[]): Promise<FactorRow[]>;
  /** @returns the number of rows changed. */
  run(sql: string, ...params: (string | number | null)[]): Promise<number>;
}

/** Tables of SQLite migration 7. */
export const SQLITE_FACTOR_TABLES = `
CREATE TABLE totp_factors (
  user_id TEXT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  sealed_secret TEXT NOT NULL,
  last_step INTEGER,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER
) STRICT;

CREATE TABLE recovery_codes (
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  code_hash TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  used_at INTEGER,
  PRIMARY KEY (user_id, code_hash)
) STRICT, WITHOUT ROWID;

CREATE TABLE mfa_requirements (
  target_kind TEXT NOT NULL CHECK (target_kind IN ('user', 'role', 'client')),
  target_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (target_kind, target_id)
) STRICT, WITHOUT ROWID;
`;

/** Tables of PostgreSQL migration 5 (the same layout in PostgreSQL types). */
export const PG_FACTOR_TABLES = `
CREATE TABLE totp_factors (
  user_id text PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  sealed_secret text NOT NULL,
  last_step bigint,
  created_at bigint NOT NULL,
  last_used_at bigint
);

CREATE TABLE recovery_codes (
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  code_hash text NOT NULL,
  created_at bigint NOT NULL,
  used_at bigint,
  PRIMARY KEY (user_id, code_hash)
);

CREATE TABLE mfa_requirements (
  target_kind text NOT NULL CHECK (target_kind IN ('user', 'role', 'client')),
  target_id text COLLATE "C" NOT NULL,
  created_at bigint NOT NULL,
  PRIMARY KEY (target_kind, target_id)
);
`;

/** {@link FactorStore} over a store's {@link SqlRunner}. */
export class SqlFactorStore implements FactorStore {
  readonly #db: SqlRunner;
  readonly passkeys: PasskeyStore;
  readonly account: AccountStore;

  constructor(db: SqlRunner) {
    this.#db = db;
    this.passkeys = new SqlPasskeyStore(db);
    this.account = new SqlAccountStore(db);
  }

  async getTotp(userId: string): Promise<TotpFactorRecord | undefined> {
    const row = await this.#db.get('SELECT * FROM totp_factors WHERE user_id = ?', userId);
    if (!row) return undefined;
    return {
      userId: String(row.user_id),
      sealedSecret: String(row.sealed_secret),
      lastStep: num(row.last_step),
      createdAt: Number(row.created_at),
      lastUsedAt: num(row.last_used_at),
    };
  }

  async setTotp(userId: string, sealedSecret: string, lastStep: number, now: number): Promise<void> {
    await this.#db.run(
      `INSERT INTO totp_factors (user_id, sealed_secret, last_step, created_at, last_used_at)
        VALUES (?, ?, ?, ?, NULL)
        ON CONFLICT (user_id) DO UPDATE SET sealed_secret = excluded.sealed_secret,
          last_step = excluded.last_step, created_at = excluded.created_at, last_used_at = NULL`,
      userId,
      sealedSecret,
      lastStep,
      now,
    );
  }

  async removeTotp(userId: string): Promise<boolean> {
    const removed = await this.#db.run('DELETE FROM totp_factors WHERE user_id = ?', userId);
    await this.#db.run('DELETE FROM recovery_codes WHERE user_id = ?', userId);
    return removed > 0;
  }

  async claimTotpStep(userId: string, step: number, now: number): Promise<boolean> {
    const changed = await this.#db.run(
      `UPDATE totp_factors SET last_step = ?, last_used_at = ?
        WHERE user_id = ? AND (last_step IS NULL OR last_step < ?)`,
      step,
      now,
      userId,
      step,
    );
    return changed === 1;
  }

  async replaceRecoveryCodes(userId: string, codeHashes: readonly string[], now: number): Promise<void> {
    await this.#db.run('DELETE FROM recovery_codes WHERE user_id = ?', userId);
    if (codeHashes.length === 0) return;
    const values = codeHashes.map(() => '(?, ?, ?)').join(', ');
    await this.#db.run(
      `INSERT INTO recovery_codes (user_id, code_hash, created_at) VALUES ${values}`,
      ...codeHashes.flatMap((hash) => [userId, hash, now]),
    );
  }

  async useRecoveryCode(userId: string, codeHash: string, now: number): Promise<boolean> {
    const changed = await this.#db.run(
      'UPDATE recovery_codes SET used_at = ? WHERE user_id = ? AND code_hash = ? AND used_at IS NULL',
      now,
      userId,
      codeHash,
    );
    return changed === 1;
  }

  async summary(userId: string): Promise<FactorSummary> {
    const totp = await this.getTotp(userId);
    const left = await this.#db.get(
      'SELECT COUNT(*) AS n FROM recovery_codes WHERE user_id = ? AND used_at IS NULL',
      userId,
    );
    return {
      totpEnrolledAt: totp?.createdAt ?? null,
      totpLastUsedAt: totp?.lastUsedAt ?? null,
      recoveryCodesLeft: Number(left?.n ?? 0),
    };
  }

  async isMfaRequired(userId: string, clientId: string | null): Promise<boolean> {
    const row = await this.#db.get(
      `SELECT 1 AS required FROM mfa_requirements
        WHERE (target_kind = 'user' AND target_id = ?)
          OR (target_kind = 'client' AND target_id = ?)
          OR (target_kind = 'role' AND target_id IN (SELECT role_id FROM user_roles WHERE user_id = ?))
        LIMIT 1`,
      userId,
      clientId,
      userId,
    );
    return row !== undefined;
  }

  async requireMfa(kind: MfaTargetKind, targetId: string, now: number): Promise<void> {
    await this.#db.run(
      `INSERT INTO mfa_requirements (target_kind, target_id, created_at) VALUES (?, ?, ?)
        ON CONFLICT (target_kind, target_id) DO NOTHING`,
      kind,
      targetId,
      now,
    );
  }

  async unrequireMfa(kind: MfaTargetKind, targetId: string): Promise<boolean> {
    return (
      (await this.#db.run(
        'DELETE FROM mfa_requirements WHERE target_kind = ? AND target_id = ?',
        kind,
        targetId,
      )) > 0
    );
  }

  async listMfaRequirements(): Promise<MfaRequirementRecord[]> {
    const rows = await this.#db.all('SELECT * FROM mfa_requirements ORDER BY target_kind, target_id');
    return rows.map((row) => ({
      targetKind: String(row.target_kind) as MfaTargetKind,
      targetId: String(row.target_id),
      createdAt: Number(row.created_at),
    }));
  }
}
