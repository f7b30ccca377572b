/**
 * The PostgreSQL tables of the creature store and their versioned migrations, run under a transaction
 * advisory lock so that several server instances starting at once against one empty database migrate
 * and seed it exactly once (the others wait for the lock, then find the work done).
 *
 * Tables (all named `creature*`, so they can share a database with other services):
 * - `creature_migrations(version, applied_at)`: the migrations applied;
 * - `creature_state`: one row — `change_seq` (the number of the last committed change; every write
 *   takes this row's lock, which orders writes and numbers changes without gaps), `creature_version`
 *   (the number of creature changes), `last_creature_id`, `seeded_at`;
 * - `creatures(id, name_key, doc jsonb)`, `creature_messages(id, content, author)`;
 * - `creature_changes(seq, entity, kind, id, value jsonb, committed_at)`: the change log other
 *   instances read back after a notification on {@link CHANGES_CHANNEL}; the newest
 *   {@link CHANGES_KEPT} entries are kept.
 */
import type postgres from 'postgres';
import type { Creature } from './store.ts';
import { numericId } from './store-rules.ts';

/** The LISTEN/NOTIFY channel a committed change is announced on; the payload is its `seq`. */
export const CHANGES_CHANNEL = 'creature_changes';
/** How many of the newest change log entries are kept; an instance further behind reloads everything. */
export const CHANGES_KEPT = 10_000;
/** Key of the transaction advisory lock held while migrating and seeding (`hashtext` of a fixed name). */
const MIGRATION_LOCK_NAME = 'seed.creatures.migrate';

/** One schema change: applied once, in `version` order, inside the migration transaction. */
interface Migration {
  version: number;
  sql: string;
}

/** The migrations of the creature tables, oldest first. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    sql: `
      CREATE TABLE creature_state (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        change_seq bigint NOT NULL,
        last_creature_id integer NOT NULL,
        seeded_at timestamptz NOT NULL DEFAULT now());
      CREATE TABLE creatures (id text PRIMARY KEY, name_key text NOT NULL UNIQUE, doc jsonb NOT NULL);
      CREATE TABLE creature_messages (id text PRIMARY KEY, content text, author text);
      CREATE TABLE creature_changes (
        seq bigint PRIMARY KEY,
        entity text NOT NULL CHECK (entity IN ('creature', 'message')),
        kind text NOT NULL CHECK (kind IN ('created', 'updated', 'deleted')),
        id text NOT NULL,
        value jsonb NOT NULL,
        committed_at timestamptz NOT NULL DEFAULT now());
    `,
  },
  {
    version: 2,
    // Creature changes only: a creature write commits when no other creature change came in between.
    sql: 'ALTER TABLE creature_state ADD COLUMN creature_version bigint NOT NULL DEFAULT 0;',
  },
];

/**
 * Applies the missing {@link MIGRATIONS} and seeds an unseeded database with `seed`, in one transaction
 * holding the migration advisory lock. Safe to run from several processes at once. Rejects with the
 * driver's `PostgresError` when the database refuses (the transaction then changes nothing).
 */
export async function migrate(sql: postgres.Sql, seed: () => readonly Creature[]): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtext(${MIGRATION_LOCK_NAME}))`;
    await tx`CREATE TABLE IF NOT EXISTS creature_migrations (
      version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
    const done = new Set((await tx`SELECT version FROM creature_migrations`).map((r) => Number(r.version)));
    for (const migration of MIGRATIONS) {
      if (done.has(migration.version)) continue;
      await tx.unsafe(migration.sql);
      await tx`INSERT INTO creature_migrations (version) VALUES (${migration.version})`;
    }
    const [state] = await tx`SELECT seeded_at FROM creature_state`;
    if (state) return;
    const creatures = seed();
    const rows = creatures.map((c) => ({ id: c.id, name_key: c.name.toLowerCase(), doc: tx.json(json(c)) }));
    for (let i = 0; i < rows.length; i += 500) {
      await tx`INSERT INTO creatures ${tx(rows.slice(i, i + 500), 'id', 'name_key', 'doc')}`;
    }
    const last = Math.max(0, ...creatures.map((c) => numericId(c.id)).filter(Number.isFinite));
    await tx`INSERT INTO creature_state (change_seq, last_creature_id) VALUES (0, ${last})`;
  });
}

/** A value as the driver's JSON parameter type wants it (plain JSON data). */
export function json(value: object): postgres.JSONValue {
  return value as unknown as postgres.JSONValue;
}
