/**
 * The embedded {@link Store}: creatures and messages in one SQLite file (`node:sqlite`), for one server
 * process. Every method is synchronous; each write validates (`store-rules.ts`), commits in one
 * transaction, then updates the in-memory creatures and emits one {@link ChangeEvent}.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  type Creature,
  type CreatureDraft,
  type CreaturePatch,
  loadSeedCreatures,
  type Message,
  type MessageDraft,
} from './store.ts';
import { invalidInput, noRecord } from './store-error.ts';
import { MirroredStore } from './store-mirror.ts';
import { applyPatch, emptyCreature, messageFields, newMessage, numericId } from './store-rules.ts';

/** Options of {@link SqliteStore}. */
export interface SqliteStoreOptions {
  /** SQLite file path, or `':memory:'`. Parent directories are created. */
  path: string;
  /** Creatures to seed an empty database with (default: `data/creatures.json`). */
  seed?: readonly Creature[];
}

/**
 * The SQLite store. Opening creates the tables and seeds an empty database (once: a `seeded` row in
 * `meta` records it). Writes throw `BAD_USER_INPUT` or `NOT_FOUND` `CreatureStoreError`s as {@link Store}
 * describes; the file is opened in WAL mode with a 5 s busy timeout.
 */
export class SqliteStore extends MirroredStore {
  readonly #db: DatabaseSync;

  /** Opens (creating and seeding on first use) the database at `options.path`; throws if it cannot. */
  constructor(options: SqliteStoreOptions) {
    super();
    if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
    this.#db = new DatabaseSync(options.path);
    this.#db.exec(`
      PRAGMA journal_mode = WAL;
      PRAGMA busy_timeout = 5000;
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS creatures (
        id TEXT PRIMARY KEY, name_key TEXT NOT NULL UNIQUE, doc TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS messages (id TEXT PRIMARY KEY, content TEXT, author TEXT);
    `);
    const seeded = this.#db.prepare(`SELECT value FROM meta WHERE key = 'seeded'`).get();
    if (!seeded) {
      const seed = options.seed ?? loadSeedCreatures();
      this.#transaction(() => {
        const insert = this.#db.prepare('INSERT INTO creatures (id, name_key, doc) VALUES (?, ?, ?)');
        for (const c of seed) insert.run(c.id, c.name.toLowerCase(), JSON.stringify(c));
        const last = Math.max(0, ...seed.map((c) => numericId(c.id)).filter(Number.isFinite));
        this.#db.prepare(`INSERT INTO meta (key, value) VALUES ('last_creature_id', ?)`).run(String(last));
        this.#db.prepare(`INSERT INTO meta (key, value) VALUES ('seeded', ?)`).run(new Date().toISOString());
      });
    }
    this.replaceAll(
      this.#db
        .prepare('SELECT doc FROM creatures')
        .all()
        .map((row) => JSON.parse(row.doc as string) as Creature),
    );
  }

  #transaction<T>(work: () => T): T {
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      const result = work();
      this.#db.exec('COMMIT');
      return result;
    } catch (err) {
      this.#db.exec('ROLLBACK');
      throw err;
    }
  }

  /** Resolves at once: the constructor has already opened and loaded the database. */
  ready(): Promise<void> {
    return Promise.resolve();
  }

  /** Whether the database answers (for `/healthz`). */
  healthy(): boolean {
    try {
      return this.#db.prepare('SELECT 1 AS ok').get()?.ok === 1;
    } catch {
      return false;
    }
  }

  /**
   * Adds a creature with the next free numeric id (three digits at least, e.g. "152").
   * Throws `BAD_USER_INPUT` for an empty/too long/taken name, a bad number or an unknown evolution id.
   */
  createCreature(draft: CreatureDraft): Creature {
    if (draft.name == null) throw invalidInput('input.name', 'input.name is required');
    const last = Number(
      (this.#db.prepare(`SELECT value FROM meta WHERE key = 'last_creature_id'`).get()?.value as string) ??
        '0',
    );
    const id = String(last + 1).padStart(3, '0');
    const creature = applyPatch(emptyCreature(id), draft, 'input', this);
    this.#transaction(() => {
      this.#db
        .prepare('INSERT INTO creatures (id, name_key, doc) VALUES (?, ?, ?)')
        .run(id, creature.name.toLowerCase(), JSON.stringify(creature));
      this.#db.prepare(`UPDATE meta SET value = ? WHERE key = 'last_creature_id'`).run(String(last + 1));
    });
    this.applyChange({ entity: 'creature', kind: 'created', id, value: creature });
    return creature;
  }

  /** Applies a patch to a creature. Throws `NOT_FOUND` for an unknown id, `BAD_USER_INPUT` as create. */
  updateCreature(id: string, patch: CreaturePatch): Creature {
    const next = applyPatch(this.existingCreature(id), patch, 'input', this);
    this.#transaction(() => {
      this.#db
        .prepare('UPDATE creatures SET name_key = ?, doc = ? WHERE id = ?')
        .run(next.name.toLowerCase(), JSON.stringify(next), id);
    });
    this.applyChange({ entity: 'creature', kind: 'updated', id, value: next });
    return next;
  }

  /** Removes a creature and returns it. Throws `NOT_FOUND` for an unknown id. */
  deleteCreature(id: string): Creature {
    const old = this.existingCreature(id);
    this.#transaction(() => {
      this.#db.prepare('DELETE FROM creatures WHERE id = ?').run(id);
    });
    this.applyChange({ entity: 'creature', kind: 'deleted', id, value: old });
    return old;
  }

  /** The message with this id, if any. */
  getMessage(id: string): Message | undefined {
    const row = this.#db.prepare('SELECT id, content, author FROM messages WHERE id = ?').get(id);
    return row
      ? { id: row.id as string, content: row.content as string | null, author: row.author as string | null }
      : undefined;
  }

  /** Stores a new message with a random UUID id. Throws `BAD_USER_INPUT` for too long fields. */
  createMessage(draft: MessageDraft): Message {
    const message = newMessage(draft, 'input');
    this.#transaction(() => {
      this.#db
        .prepare('INSERT INTO messages (id, content, author) VALUES (?, ?, ?)')
        .run(message.id, message.content, message.author);
    });
    this.applyChange({ entity: 'message', kind: 'created', id: message.id, value: message });
    return message;
  }

  /** Replaces the given fields of a message. Throws `NOT_FOUND` for an unknown id. */
  updateMessage(id: string, draft: MessageDraft): Message {
    const old = this.getMessage(id);
    if (!old) throw noRecord(`No message exists with id "${id}"`);
    const message: Message = { ...old, ...messageFields(draft, 'input') };
    this.#transaction(() => {
      this.#db
        .prepare('UPDATE messages SET content = ?, author = ? WHERE id = ?')
        .run(message.content, message.author, id);
    });
    this.applyChange({ entity: 'message', kind: 'updated', id, value: message });
    return message;
  }

  /** Closes the database; the store must not be used afterwards. */
  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
