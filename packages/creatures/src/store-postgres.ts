/**
 * The {@link Store} on PostgreSQL (driver: `postgres`), for several server instances sharing one
 * database. Each instance keeps every creature in memory, like the SQLite store, and keeps that copy
 * current with the changes all instances commit:
 *
 * - every write runs in one transaction that takes the lock of the `creature_state` row and increments
 *   its `change_seq`: writes are serialized across instances and each change gets the next number,
 *   without gaps, in commit order. The same transaction writes the change, its entry in the
 *   `creature_changes` log and `NOTIFY creature_changes, '<seq>'` (delivered at commit);
 * - a creature write first reads back, still in its transaction, the changes this instance has not
 *   applied yet, so names and evolution ids are validated against the current data; a message write
 *   depends on nothing else and is one statement (one round trip);
 * - every instance LISTENs on that channel and, for a number above the last one it applied, reads the
 *   log from there and applies each entry in order: the in-memory creatures, the version and one
 *   {@link ChangeEvent} on `events` per change. An entry is applied only when its number is the next
 *   one, so a subscriber sees every change once, in commit order, whichever instance made it;
 * - a poll (default every 5 s) reads the log too, for notifications lost while the listening connection
 *   was down; an instance so far behind that the log no longer holds what it missed reloads all
 *   creatures and emits one event per creature that differs (the net effect; missed message changes
 *   are not replayed).
 *
 * Messages are not kept in memory: `getMessage` reads the database.
 */
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import {
  type ChangeEvent,
  type Creature,
  type CreatureDraft,
  type CreaturePatch,
  loadSeedCreatures,
  type Message,
  type MessageDraft,
} from './store.ts';
import { MirroredStore } from './store-mirror.ts';
import { CHANGES_CHANNEL, CHANGES_KEPT, json, migrate } from './store-postgres-schema.ts';
import { applyPatch, bad, emptyCreature, messageFields, notFound } from './store-rules.ts';

/** Options of {@link PostgresStore}. */
export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/database` (or `postgresql://`), with libpq's query options. */
  url: string;
  /** Creatures to seed an empty database with (default: `data/creatures.json`). */
  seed?: readonly Creature[];
  /** Most connections of this instance's pool (default 10), plus one for LISTEN. */
  maxConnections?: number;
  /** Interval of the change log poll that backs up notifications, in ms (default 5000). */
  pollIntervalMs?: number;
  /** Called with errors of the background work (notifications, polls); default: ignored. */
  onError?: (err: unknown, context: string) => void;
}

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

interface ChangeRow {
  seq: string;
  entity: ChangeEvent['entity'];
  kind: ChangeEvent['kind'];
  id: string;
  value: Creature | Message;
}

/**
 * The PostgreSQL store. The constructor connects lazily; {@link ready} migrates (once, under an advisory
 * lock), seeds an empty database, starts listening and loads the creatures; the server awaits it before
 * it listens. Writes throw `BAD_USER_INPUT` or `NOT_FOUND` `GraphQLError`s as {@link Store} describes,
 * or the driver's `PostgresError` when the database fails.
 */
export class PostgresStore extends MirroredStore {
  readonly #sql: postgres.Sql;
  readonly #options: PostgresStoreOptions;
  /** Number of the last change applied to memory and emitted. */
  #applied = 0;
  #opening: Promise<void> | undefined;
  #loaded = false;
  #closed = false;
  #unlisten: (() => Promise<void>) | undefined;
  #poller: NodeJS.Timeout | undefined;
  #pulling = false;
  #pullAgain = false;

  /** Creates the store for `options.url` without connecting; throws `TypeError` for another URL form. */
  constructor(options: PostgresStoreOptions) {
    super();
    if (!isPostgresUrl(options.url)) {
      throw new TypeError(
        `databaseUrl must start with postgres:// or postgresql://, got ${redactUrl(options.url)}`,
      );
    }
    this.#options = options;
    this.#sql = postgres(options.url, {
      max: options.maxConnections ?? 10,
      onnotice: () => {},
      connection: { application_name: 'creature-server' },
    });
  }

  /** Number of the last change this instance has applied (the `seq` of `creature_changes`). */
  get appliedChange(): number {
    return this.#applied;
  }

  /**
   * Connects, migrates and seeds (once across instances), LISTENs for changes and loads the creatures.
   * Idempotent. Rejects with the driver's error when the database cannot be reached or migrated.
   */
  ready(): Promise<void> {
    this.#opening ??= this.#open();
    return this.#opening;
  }

  async #open(): Promise<void> {
    await migrate(this.#sql, () => this.#options.seed ?? loadSeedCreatures());
    // Listen before loading: a change committed after the snapshot is announced to this listener.
    const listening = await this.#sql.listen(
      CHANGES_CHANNEL,
      (payload) => {
        if (Number(payload) > this.#applied) this.#pull();
      },
      () => this.#pull(),
    );
    this.#unlisten = listening.unlisten;
    await this.#reload();
    this.#loaded = true;
    this.#pull();
    this.#poller = setInterval(() => this.#pull(), this.#options.pollIntervalMs ?? 5000);
    this.#poller.unref();
  }

  /**
   * Replaces the creatures in memory with the database's when the database is ahead of memory, reading
   * the creatures and `change_seq` from one snapshot (repeatable read).
   */
  async #reload(): Promise<void> {
    const snapshot = await this.#sql.begin('isolation level repeatable read read only', async (tx) => {
      const [state] = await tx`SELECT change_seq FROM creature_state`;
      const docs = await tx`SELECT doc FROM creatures`;
      return { seq: Number(state?.change_seq ?? 0), creatures: docs.map((r) => r.doc as Creature) };
    });
    if (this.#loaded && snapshot.seq <= this.#applied) return;
    this.#applied = snapshot.seq;
    this.replaceAll(snapshot.creatures, this.#loaded);
  }

  /**
   * Reads the change log after the last applied change and applies it; reloads everything when the log
   * no longer starts right after it. `upTo` bounds the read (a write transaction reads what precedes
   * its own change).
   */
  async #catchUp(q: postgres.Sql | postgres.TransactionSql, upTo = Number.MAX_SAFE_INTEGER): Promise<void> {
    const from = this.#applied;
    const rows = await q<ChangeRow[]>`
      SELECT seq, entity, kind, id, value FROM creature_changes
      WHERE seq > ${from} AND seq <= ${upTo} ORDER BY seq`;
    if (rows.length === 0 || Number(rows[0]!.seq) === from + 1) {
      this.#applyRows(rows);
      return;
    }
    this.#options.onError?.(
      new Error(`change log starts at ${rows[0]!.seq}, after ${from}: reloading all creatures`),
      'catch-up',
    );
    if ('begin' in q) await this.#reload();
    else {
      const [state] = await q`SELECT change_seq FROM creature_state`;
      // Inside a write transaction the state row is locked by it: what is committed is change_seq - 1.
      const committed = Number(state?.change_seq ?? 0) - 1;
      const docs = await q`SELECT doc FROM creatures`;
      if (committed > this.#applied) {
        this.#applied = committed;
        this.replaceAll(
          docs.map((r) => r.doc as Creature),
          true,
        );
      }
    }
  }

  /** Applies contiguous log rows in order; rows at or below the last applied change are skipped. */
  #applyRows(rows: readonly ChangeRow[]): void {
    for (const row of rows) {
      const seq = Number(row.seq);
      if (seq <= this.#applied) continue;
      if (seq !== this.#applied + 1) return;
      this.#applied = seq;
      this.applyChange({ entity: row.entity, kind: row.kind, id: row.id, value: row.value } as ChangeEvent);
    }
  }

  /** Catches up in the background; calls while one runs make it run once more afterwards. */
  #pull(): void {
    if (!this.#loaded || this.#closed) return;
    if (this.#pulling) {
      this.#pullAgain = true;
      return;
    }
    this.#pulling = true;
    void (async () => {
      do {
        this.#pullAgain = false;
        try {
          await this.#catchUp(this.#sql);
        } catch (err) {
          if (!this.#closed) this.#options.onError?.(err, 'change log read');
        }
      } while (this.#pullAgain && !this.#closed);
      this.#pulling = false;
    })();
  }

  /**
   * Runs one creature write in a transaction: takes the `creature_state` row lock and the next change
   * number (and, for `creates`, the next creature id), catches up with earlier changes this instance
   * has not applied, lets `work` validate and build the change, then writes the row, logs the change
   * and announces it in one statement, commits, and applies it here.
   */
  async #writeCreature(
    creates: boolean,
    work: (nextId: number) => {
      event: ChangeEvent & { entity: 'creature' };
      write: (tx: postgres.TransactionSql) => postgres.PendingQuery<postgres.Row[]>;
    },
  ): Promise<Creature> {
    await this.ready();
    const { seq, event } = await this.#sql.begin(async (tx) => {
      const [state] = await tx`UPDATE creature_state
        SET change_seq = change_seq + 1, last_creature_id = last_creature_id + ${creates ? 1 : 0}
        RETURNING change_seq, last_creature_id`;
      const seq = Number(state!.change_seq);
      if (seq - 1 > this.#applied) await this.#catchUp(tx, seq - 1);
      const { event, write } = work(Number(state!.last_creature_id));
      await tx`WITH w AS (${write(tx)}),
        c AS (INSERT INTO creature_changes (seq, entity, kind, id, value)
          VALUES (${seq}, 'creature', ${event.kind}, ${event.id}, ${tx.json(json(event.value))}))
        SELECT pg_notify(${CHANGES_CHANNEL}, ${String(seq)})`;
      return { seq, event };
    });
    await this.#applyOwn(seq, event);
    return event.value;
  }

  /**
   * Applies a change this instance has just committed: at once when it is the next one, else after
   * reading the changes before it (the listener may also have applied it already: then nothing).
   * Every 100th change also trims the change log to its newest {@link CHANGES_KEPT} entries.
   */
  async #applyOwn(seq: number, event: ChangeEvent): Promise<void> {
    if (seq === this.#applied + 1) this.#applyRows([{ seq: String(seq), ...event } as ChangeRow]);
    else if (seq > this.#applied) await this.#catchUp(this.#sql);
    if (seq % 100 === 0) {
      this.#sql`DELETE FROM creature_changes WHERE seq <= ${seq - CHANGES_KEPT}`.catch((err: unknown) =>
        this.#options.onError?.(err, 'change log trim'),
      );
    }
  }

  /** Whether the database answers within 2 s (for `/healthz`). */
  async healthy(): Promise<boolean> {
    if (this.#closed || !this.#loaded) return false;
    try {
      const answer = this.#sql`SELECT 1 AS ok`;
      const timeout = new Promise<never>((_, reject) => {
        setTimeout(() => reject(new Error('health check timed out')), 2000).unref();
      });
      const [row] = await Promise.race([answer, timeout]);
      return row?.ok === 1;
    } catch {
      return false;
    }
  }

  /**
   * Adds a creature with the next free numeric id (three digits at least, e.g. "152").
   * Throws `BAD_USER_INPUT` for an empty/too long/taken name, a bad number or an unknown evolution id.
   */
  createCreature(draft: CreatureDraft): Promise<Creature> {
    if (draft.name == null) return Promise.reject(bad('input.name is required'));
    return this.#writeCreature(true, (next) => {
      const id = String(next).padStart(3, '0');
      const creature = applyPatch(emptyCreature(id), draft, 'input', this);
      return {
        event: { entity: 'creature', kind: 'created', id, value: creature },
        write: (tx) => tx`INSERT INTO creatures (id, name_key, doc)
          VALUES (${id}, ${creature.name.toLowerCase()}, ${tx.json(json(creature))})`,
      };
    });
  }

  /** Applies a patch to a creature. Throws `NOT_FOUND` for an unknown id, `BAD_USER_INPUT` as create. */
  updateCreature(id: string, patch: CreaturePatch): Promise<Creature> {
    return this.#writeCreature(false, () => {
      const base = this.getCreature(id);
      if (!base) throw notFound(`No creature exists with id "${id}"`);
      const next = applyPatch(base, patch, 'input', this);
      return {
        event: { entity: 'creature', kind: 'updated', id, value: next },
        write: (
          tx,
        ) => tx`UPDATE creatures SET name_key = ${next.name.toLowerCase()}, doc = ${tx.json(json(next))}
          WHERE id = ${id}`,
      };
    });
  }

  /** Removes a creature and returns it. Throws `NOT_FOUND` for an unknown id. */
  deleteCreature(id: string): Promise<Creature> {
    return this.#writeCreature(false, () => {
      const old = this.getCreature(id);
      if (!old) throw notFound(`No creature exists with id "${id}"`);
      return {
        event: { entity: 'creature', kind: 'deleted', id, value: old },
        write: (tx) => tx`DELETE FROM creatures WHERE id = ${id}`,
      };
    });
  }

  /** The message with this id, if any (read from the database). */
  async getMessage(id: string): Promise<Message | undefined> {
    await this.ready();
    const [row] = await this.#sql<
      Message[]
    >`SELECT id, content, author FROM creature_messages WHERE id = ${id}`;
    return row ? { id: row.id, content: row.content, author: row.author } : undefined;
  }

  /**
   * Stores a new message with a random UUID id. Throws `BAD_USER_INPUT` for too long fields. One
   * statement numbers, writes, logs and announces it (no validation depends on other changes).
   */
  async createMessage(draft: MessageDraft): Promise<Message> {
    const f = messageFields(draft, 'input');
    const message: Message = { id: randomUUID(), content: f.content ?? null, author: f.author ?? null };
    await this.ready();
    const [row] = await this.#sql`
      WITH s AS (UPDATE creature_state SET change_seq = change_seq + 1 RETURNING change_seq),
      m AS (INSERT INTO creature_messages (id, content, author)
        VALUES (${message.id}, ${message.content}, ${message.author})),
      c AS (INSERT INTO creature_changes (seq, entity, kind, id, value)
        SELECT change_seq, 'message', 'created', ${message.id}, ${this.#sql.json(json(message))} FROM s
        RETURNING seq)
      SELECT seq, pg_notify(${CHANGES_CHANNEL}, seq::text) FROM c`;
    await this.#applyOwn(Number(row!.seq), {
      entity: 'message',
      kind: 'created',
      id: message.id,
      value: message,
    });
    return message;
  }

  /**
   * Replaces the given fields of a message (in the database, so concurrent updates of other fields on
   * other instances are kept). Throws `NOT_FOUND` for an unknown id.
   */
  async updateMessage(id: string, draft: MessageDraft): Promise<Message> {
    const f = messageFields(draft, 'input');
    await this.ready();
    // `m` joins `s`, so the state row is locked before the message row (one lock order: no deadlock).
    const [row] = await this.#sql<{ seq: string; value: Message }[]>`
      WITH s AS (UPDATE creature_state SET change_seq = change_seq + 1
        WHERE EXISTS (SELECT 1 FROM creature_messages WHERE id = ${id}) RETURNING change_seq),
      m AS (UPDATE creature_messages
        SET content = CASE WHEN ${f.content !== undefined} THEN ${f.content ?? null}::text ELSE content END,
          author = CASE WHEN ${f.author !== undefined} THEN ${f.author ?? null}::text ELSE author END
        FROM s WHERE creature_messages.id = ${id} RETURNING creature_messages.id, content, author),
      c AS (INSERT INTO creature_changes (seq, entity, kind, id, value)
        SELECT s.change_seq, 'message', 'updated', m.id,
          jsonb_build_object('id', m.id, 'content', m.content, 'author', m.author)
        FROM s, m RETURNING seq, value)
      SELECT seq, value, pg_notify(${CHANGES_CHANNEL}, seq::text) FROM c`;
    if (!row) throw notFound(`No message exists with id "${id}"`);
    const message: Message = { id: row.value.id, content: row.value.content, author: row.value.author };
    await this.#applyOwn(Number(row.seq), { entity: 'message', kind: 'updated', id, value: message });
    return message;
  }

  /** Stops listening and polling and closes the connections (waiting up to 5 s for running queries). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#poller);
    await this.#unlisten?.().catch(() => {});
    await this.#sql.end({ timeout: 5 });
  }
}
