/**
 * The {@link Store} on PostgreSQL (driver: `postgres`), for several server instances sharing one
 * database. Each instance keeps every creature in memory, like the SQLite store, and keeps that copy
 * current with the changes all instances commit:
 *
 * - every write takes the lock of the `creature_state` row and increments its `change_seq`: writes
 *   are serialized across instances and each change gets the next number, without gaps, in commit
 *   order. One statement (`store-postgres-sql.ts`) numbers the change, writes it, logs it in
 *   `creature_changes` and sends `NOTIFY creature_changes, '<seq>'` (delivered at commit);
 * - a creature write is validated against this instance's copy (unique names, evolution ids) and
 *   commits only if no other creature change came in between (`creature_version`); otherwise the
 *   instance catches up and tries again, and after three tries it takes the lock first, catches up
 *   and writes in one transaction. This instance's creature writes go one at a time;
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
import { invalidInput, noRecord } from './store-error.ts';
import { MirroredStore } from './store-mirror.ts';
import { CHANGES_CHANNEL, CHANGES_KEPT, migrate } from './store-postgres-schema.ts';
import {
  commitCreatureChangeIf,
  insertMessage,
  isPostgresUrl,
  lockForCreatureChange,
  readState,
  redactUrl,
  updateMessageRow,
  writeLockedCreatureChange,
} from './store-postgres-sql.ts';
import { applyPatch, emptyCreature, messageFields, newMessage, numericId } from './store-rules.ts';

export { isPostgresUrl, redactUrl } from './store-postgres-sql.ts';

/** Options of {@link PostgresStore}. */
export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/database` (or `postgresql://`), with libpq's query options. */
  url: string;
  /** Creatures to seed an empty database with (default: `data/creatures.json`). */
  seed?: readonly Creature[];
  /** Most connections of this instance's pool (default 10), plus one for LISTEN. */
  maxConnections?: number;
  /**
   * Tries of a creature write guarded by `creature_version` before it takes the state row lock first
   * (default 3; 0: always lock first, three statements in a transaction).
   */
  guardedTries?: number;
  /** Interval of the change log poll that backs up notifications, in ms (default 5000). */
  pollIntervalMs?: number;
  /** Called with errors of the background work (notifications, polls); default: ignored. */
  onError?: (err: unknown, context: string) => void;
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
 * it listens. Writes throw `BAD_USER_INPUT` or `NOT_FOUND` `CreatureStoreError`s as {@link Store} describes,
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
  /** Creature changes applied (`creature_state.creature_version` when this copy is current). */
  #creatureVersion = 0;
  /** Highest creature id handed out (`creature_state.last_creature_id` when this copy is current). */
  #lastCreatureId = 0;
  /** This instance's creature writes, one at a time. */
  #creatureWrites: Promise<unknown> = Promise.resolve();

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
    const snapshot = await this.#sql.begin('isolation level repeatable read read only', readState);
    this.#replace(snapshot);
  }

  #replace(snapshot: Awaited<ReturnType<typeof readState>>): void {
    if (this.#loaded && snapshot.seq <= this.#applied) return;
    this.#applied = snapshot.seq;
    this.#creatureVersion = snapshot.creatureVersion;
    this.#lastCreatureId = snapshot.lastCreatureId;
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
      // Inside a write transaction holding the state row lock: what is committed is one change less.
      const state = await readState(q);
      this.#replace({ ...state, seq: state.seq - 1, creatureVersion: state.creatureVersion - 1 });
    }
  }

  /** Applies contiguous log rows in order; rows at or below the last applied change are skipped. */
  #applyRows(rows: readonly ChangeRow[]): void {
    for (const row of rows) {
      const seq = Number(row.seq);
      if (seq <= this.#applied) continue;
      if (seq !== this.#applied + 1) return;
      this.#applied = seq;
      if (row.entity === 'creature') {
        this.#creatureVersion++;
        const n = numericId(row.id);
        if (row.kind === 'created' && Number.isFinite(n))
          this.#lastCreatureId = Math.max(this.#lastCreatureId, n);
      }
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
   * Runs one creature write of this instance (after the ones before it): `work` validates against this
   * copy and builds the change given the next free id; the change commits if no other creature change
   * came in between, else this instance catches up and `work` runs again (a validation error is thrown
   * only when this copy is current). After `guardedTries` tries it locks, catches up, runs
   * `work` and writes in one transaction.
   */
  #writeCreature(work: (nextId: number) => ChangeEvent & { entity: 'creature' }): Promise<Creature> {
    const run = this.#creatureWrites.then(async () => {
      await this.ready();
      for (let i = 0; i < (this.#options.guardedTries ?? 3); i++) {
        const version = this.#creatureVersion;
        let event: ChangeEvent & { entity: 'creature' };
        try {
          event = work(this.#lastCreatureId + 1);
        } catch (err) {
          const [state] = await this.#sql`SELECT creature_version FROM creature_state`;
          if (Number(state?.creature_version) === version) throw err;
          await this.#catchUp(this.#sql);
          continue;
        }
        const last = event.kind === 'created' ? Number(event.id) : this.#lastCreatureId;
        const seq = await commitCreatureChangeIf(this.#sql, version, event, last);
        if (seq !== undefined) {
          await this.#applyOwn(seq, event);
          return event.value;
        }
        await this.#catchUp(this.#sql);
      }
      const { seq, event } = await this.#sql.begin(async (tx) => {
        const locked = await lockForCreatureChange(tx);
        if (locked.seq - 1 > this.#applied) await this.#catchUp(tx, locked.seq - 1);
        const event = work(locked.lastCreatureId + 1);
        await writeLockedCreatureChange(tx, locked.seq, event);
        return { seq: locked.seq, event };
      });
      await this.#applyOwn(seq, event);
      return event.value;
    });
    this.#creatureWrites = run.catch(() => {});
    return run;
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
    if (draft.name == null) return Promise.reject(invalidInput('input.name', 'input.name is required'));
    return this.#writeCreature((next) => {
      const id = String(next).padStart(3, '0');
      return {
        entity: 'creature',
        kind: 'created',
        id,
        value: applyPatch(emptyCreature(id), draft, 'input', this),
      };
    });
  }

  /** Applies a patch to a creature. Throws `NOT_FOUND` for an unknown id, `BAD_USER_INPUT` as create. */
  updateCreature(id: string, patch: CreaturePatch): Promise<Creature> {
    return this.#writeCreature(() => {
      const value = applyPatch(this.existingCreature(id), patch, 'input', this);
      return { entity: 'creature', kind: 'updated', id, value };
    });
  }

  /** Removes a creature and returns it. Throws `NOT_FOUND` for an unknown id. */
  deleteCreature(id: string): Promise<Creature> {
    return this.#writeCreature(() => {
      return { entity: 'creature', kind: 'deleted', id, value: this.existingCreature(id) };
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

  /** Stores a new message with a random UUID id. Throws `BAD_USER_INPUT` for too long fields. */
  async createMessage(draft: MessageDraft): Promise<Message> {
    const message = newMessage(draft, 'input');
    await this.ready();
    const seq = await insertMessage(this.#sql, message);
    await this.#applyOwn(seq, { entity: 'message', kind: 'created', id: message.id, value: message });
    return message;
  }

  /**
   * Replaces the given fields of a message (in the database, so concurrent updates of other fields on
   * other instances are kept). Throws `NOT_FOUND` for an unknown id.
   */
  async updateMessage(id: string, draft: MessageDraft): Promise<Message> {
    const f = messageFields(draft, 'input');
    await this.ready();
    const done = await updateMessageRow(this.#sql, id, f);
    if (!done) throw noRecord(`No message exists with id "${id}"`);
    await this.#applyOwn(done.seq, { entity: 'message', kind: 'updated', id, value: done.message });
    return done.message;
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
