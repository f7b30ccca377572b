/**
 * The statements of {@link PostgresStore}'s writes (tables: `store-postgres-schema.ts`). Each change is
 * one statement that numbers it (`creature_state.change_seq`, whose row lock orders all writes), writes
 * the row, logs the change in `creature_changes` and announces it with `pg_notify` — so the state row
 * stays locked only while PostgreSQL runs that statement and commits, never across round trips.
 */
import type postgres from 'postgres';
import type { ChangeEvent, Creature, Message, MessageDraft } from './store.ts';
import { CHANGES_CHANNEL, json } from './store-postgres-schema.ts';

/** True for a `postgres://` or `postgresql://` URL, the form {@link PostgresStore} takes. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/** The URL with its password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
  }
}

/** A query tag: the pool's `sql` or a transaction's. */
type Query = postgres.Sql | postgres.TransactionSql;
/** A statement fragment to embed in another (`sql\`…\`` not awaited). */
type Fragment = postgres.PendingQuery<postgres.Row[]>;

/** The row write of a creature change; it reads `s` (one row: the change number) so it runs after it. */
function creatureWrite(q: Query, event: ChangeEvent & { entity: 'creature' }): Fragment {
  const c = event.value;
  if (event.kind === 'created') {
    return q`INSERT INTO creatures (id, name_key, doc)
      SELECT ${c.id}, ${c.name.toLowerCase()}, ${q.json(json(c))} FROM s`;
  }
  if (event.kind === 'updated') {
    return q`UPDATE creatures SET name_key = ${c.name.toLowerCase()}, doc = ${q.json(json(c))}
      FROM s WHERE creatures.id = ${c.id}`;
  }
  return q`DELETE FROM creatures USING s WHERE creatures.id = ${c.id}`;
}

/**
 * The statement of a creature change: `s` yields the change number (`numbering`), then the row write,
 * the log entry and the notification. Answers one row `{ seq }`, or none when `numbering` yields none.
 */
function creatureChange(
  q: Query,
  numbering: Fragment,
  event: ChangeEvent & { entity: 'creature' },
): Fragment {
  return q`WITH s AS (${numbering}),
    w AS (${creatureWrite(q, event)}),
    c AS (INSERT INTO creature_changes (seq, entity, kind, id, value)
      SELECT change_seq, 'creature', ${event.kind}, ${event.id}, ${q.json(json(event.value))} FROM s
      RETURNING seq)
    SELECT seq, pg_notify(${CHANGES_CHANNEL}, seq::text) FROM c`;
}

/**
 * Commits a creature change unless another creature change committed since this instance's copy was at
 * `creatureVersion` (`creature_state.creature_version`). Answers its change number, or undefined when
 * the guard failed (nothing was written). `lastCreatureId` is stored for a creation.
 */
export async function commitCreatureChangeIf(
  sql: postgres.Sql,
  creatureVersion: number,
  event: ChangeEvent & { entity: 'creature' },
  lastCreatureId: number,
): Promise<number | undefined> {
  const numbering = sql`UPDATE creature_state SET change_seq = change_seq + 1,
      creature_version = creature_version + 1, last_creature_id = ${lastCreatureId}
    WHERE creature_version = ${creatureVersion} RETURNING change_seq`;
  const [row] = await creatureChange(sql, numbering, event);
  return row ? Number(row.seq) : undefined;
}

/**
 * Takes the state row lock in transaction `tx` and numbers a creature change. Answers the change number
 * and the committed `creature_version` and `last_creature_id` (before this change).
 */
export async function lockForCreatureChange(
  tx: postgres.TransactionSql,
): Promise<{ seq: number; creatureVersion: number; lastCreatureId: number }> {
  const [state] = await tx`UPDATE creature_state
    SET change_seq = change_seq + 1, creature_version = creature_version + 1
    RETURNING change_seq, creature_version, last_creature_id`;
  return {
    seq: Number(state!.change_seq),
    creatureVersion: Number(state!.creature_version) - 1,
    lastCreatureId: Number(state!.last_creature_id),
  };
}

/** Writes, logs and announces creature change `seq` in the transaction of {@link lockForCreatureChange}. */
export async function writeLockedCreatureChange(
  tx: postgres.TransactionSql,
  seq: number,
  event: ChangeEvent & { entity: 'creature' },
): Promise<void> {
  if (event.kind === 'created') {
    await tx`UPDATE creature_state SET last_creature_id = ${Number(event.id)}`;
  }
  await creatureChange(tx, tx`SELECT ${seq}::bigint AS change_seq`, event);
}

/** Stores a new message, logs and announces it; answers its change number. */
export async function insertMessage(sql: postgres.Sql, message: Message): Promise<number> {
  const [row] = await sql`
    WITH s AS (UPDATE creature_state SET change_seq = change_seq + 1 RETURNING change_seq),
    m AS (INSERT INTO creature_messages (id, content, author)
      VALUES (${message.id}, ${message.content}, ${message.author})),
    c AS (INSERT INTO creature_changes (seq, entity, kind, id, value)
      SELECT change_seq, 'message', 'created', ${message.id}, ${sql.json(json(message))} FROM s
      RETURNING seq)
    SELECT seq, pg_notify(${CHANGES_CHANNEL}, seq::text) FROM c`;
  return Number(row!.seq);
}

/**
 * Replaces the given fields of message `id` in the database (concurrent updates of other fields are
 * kept), logs and announces the change. Answers the change number and the message, or undefined when
 * no message has this id (then nothing is numbered).
 */
export async function updateMessageRow(
  sql: postgres.Sql,
  id: string,
  fields: MessageDraft,
): Promise<{ seq: number; message: Message } | undefined> {
  // `m` joins `s`, so the state row is locked before the message row (one lock order: no deadlock).
  const [row] = await sql<{ seq: string; value: Message }[]>`
    WITH s AS (UPDATE creature_state SET change_seq = change_seq + 1
      WHERE EXISTS (SELECT 1 FROM creature_messages WHERE id = ${id}) RETURNING change_seq),
    m AS (UPDATE creature_messages
      SET content = CASE WHEN ${fields.content !== undefined} THEN ${fields.content ?? null}::text ELSE content END,
        author = CASE WHEN ${fields.author !== undefined} THEN ${fields.author ?? null}::text ELSE author END
      FROM s WHERE creature_messages.id = ${id} RETURNING creature_messages.id, content, author),
    c AS (INSERT INTO creature_changes (seq, entity, kind, id, value)
      SELECT s.change_seq, 'message', 'updated', m.id,
        jsonb_build_object('id', m.id, 'content', m.content, 'author', m.author)
      FROM s, m RETURNING seq, value)
    SELECT seq, value, pg_notify(${CHANGES_CHANNEL}, seq::text) FROM c`;
  if (!row) return undefined;
  const { content, author } = row.value;
  return { seq: Number(row.seq), message: { id: row.value.id, content, author } };
}

/** The creature documents and the state counters, read in one transaction or snapshot. */
export async function readState(q: Query): Promise<{
  seq: number;
  creatureVersion: number;
  lastCreatureId: number;
  creatures: Creature[];
}> {
  const [state] = await q`SELECT change_seq, creature_version, last_creature_id FROM creature_state`;
  const docs = await q`SELECT doc FROM creatures`;
  return {
    seq: Number(state?.change_seq ?? 0),
    creatureVersion: Number(state?.creature_version ?? 0),
    lastCreatureId: Number(state?.last_creature_id ?? 0),
    creatures: docs.map((r) => r.doc as Creature),
  };
}
