/**
 * Persistence of creatures and messages in an embedded SQLite database (`node:sqlite`), with the
 * creatures mirrored in memory for fast reads. Every write of a creature or a message goes through this
 * class, which validates it, commits it in one transaction, updates the mirror and then emits one
 * {@link ChangeEvent} on {@link Store.events} — the single place a subscription transport can listen to.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter, on } from 'node:events';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { GraphQLError } from 'graphql';
import { PACKAGE_ROOT } from './package-root.ts';

/** A range of a measure, both ends as strings with their unit (`"5.25kg"`). */
export interface Dimension {
  minimum: string | null;
  maximum: string | null;
}
/** One attack; `damage` is the base power. */
export interface Attack {
  name: string;
  type: string;
  damage: number;
}
/** A reference to another creature by id; `name` is the name when the data file was generated. */
export interface CreatureRef {
  id: string;
  name: string;
}
/** A creature as stored and as in `data/creatures.json`. */
export interface Creature {
  id: string;
  name: string;
  classification: string | null;
  types: string[];
  resistant: string[];
  weaknesses: string[];
  weight: Dimension | null;
  height: Dimension | null;
  fleeRate: number | null;
  maxCP: number | null;
  maxHP: number | null;
  attacks: { fast: Attack[]; special: Attack[] };
  evolutions: CreatureRef[];
  evolutionRequirements: { amount: number; name: string } | null;
  previousEvolutions: CreatureRef[];
}
/** Changes to a creature (GraphQL `CreatureUpdateInput`): present fields replace, absent ones stay. */
export interface CreaturePatch {
  name?: string | null;
  classification?: string | null;
  types?: string[] | null;
  resistant?: string[] | null;
  weaknesses?: string[] | null;
  weight?: Partial<Dimension> | null;
  height?: Partial<Dimension> | null;
  fleeRate?: number | null;
  maxCP?: number | null;
  maxHP?: number | null;
  attacks?: { fast?: Attack[] | null; special?: Attack[] | null } | null;
  evolutionIds?: string[] | null;
  evolutionRequirements?: { amount: number; name: string } | null;
  previousEvolutionIds?: string[] | null;
}
/** A new creature (GraphQL `CreatureInput`): a {@link CreaturePatch} with a required name. */
export interface CreatureDraft extends CreaturePatch {
  name: string;
}
/** A message of the spec's mutation example. */
export interface Message {
  id: string;
  content: string | null;
  author: string | null;
}
/** Fields of a message to create or update (GraphQL `MessageInput`). */
export interface MessageDraft {
  content?: string | null;
  author?: string | null;
}
/**
 * One committed change, emitted as the `'change'` event of {@link Store.events} after the write is
 * durable. `value` is the entity after the change (before it, for `deleted`).
 */
export type ChangeEvent =
  | { entity: 'creature'; kind: 'created' | 'updated' | 'deleted'; id: string; value: Creature }
  | { entity: 'message'; kind: 'created' | 'updated'; id: string; value: Message };

/** Options of {@link Store}. */
export interface StoreOptions {
  /** SQLite file path, or `':memory:'`. Parent directories are created. */
  path: string;
  /** Creatures to seed an empty database with (default: `data/creatures.json`). */
  seed?: readonly Creature[];
}

/** Longest accepted name, classification, type, attack name or message author (characters). */
export const MAX_TEXT = 100;
/** Longest accepted message content (characters). */
export const MAX_CONTENT = 10_000;
/** Most entries accepted in a list field of an input (types, attacks, evolution ids). */
export const MAX_LIST = 50;

/** The path of the data file of the 151 creatures shipped with the package. */
export const DATA_FILE = join(PACKAGE_ROOT, 'data', 'creatures.json');

/** Reads the bundled data file of the 151 creatures (shape {@link Creature}). */
export function loadSeedCreatures(): Creature[] {
  return JSON.parse(readFileSync(DATA_FILE, 'utf8')) as Creature[];
}

function notFound(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'NOT_FOUND' } });
}
function bad(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });
}

function text(field: string, value: string, max = MAX_TEXT, allowEmpty = false): string {
  const trimmed = value.trim();
  if (!allowEmpty && trimmed === '') throw bad(`${field} must not be empty`);
  if (trimmed.length > max) throw bad(`${field} must be at most ${max} characters, got ${trimmed.length}`);
  return trimmed;
}
function textList(field: string, values: string[]): string[] {
  if (values.length > MAX_LIST) throw bad(`${field} must have at most ${MAX_LIST} entries`);
  return values.map((v, i) => text(`${field}[${i}]`, v));
}
function count(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 0) throw bad(`${field} must be a whole number ≥ 0, got ${value}`);
  return value;
}
function attacks(field: string, values: Attack[]): Attack[] {
  if (values.length > MAX_LIST) throw bad(`${field} must have at most ${MAX_LIST} entries`);
  return values.map((a, i) => ({
    name: text(`${field}[${i}].name`, a.name),
    type: text(`${field}[${i}].type`, a.type),
    damage: count(`${field}[${i}].damage`, a.damage),
  }));
}
function dimension(field: string, value: Partial<Dimension> | null): Dimension | null {
  if (value == null) return null;
  return {
    minimum: value.minimum == null ? null : text(`${field}.minimum`, value.minimum),
    maximum: value.maximum == null ? null : text(`${field}.maximum`, value.maximum),
  };
}
/**
 * The loose form of a creature name used for alias lookups: Unicode-decomposed with accents dropped,
 * `♀`/`♂` read as `f`/`m`, lower case, letters and digits only. `Nidoran♀`, `Nidoran-F` and `nidoran f`
 * all give `nidoranf`; `Mr. Mime` and `mr mime` give `mrmime`; `Farfetch’d` gives `farfetchd`.
 */
export function nameKey(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .replace(/♀/g, 'f')
    .replace(/♂/g, 'm')
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '');
}

/**
 * The stored id a client's creature id stands for, or the input unchanged when it is no known form:
 * a number without leading zeros (`"25"` → `"025"`, as an `ID` literal `25` arrives), or a Relay-style
 * global id, base64 of `<Type>:<number>` (`"UG9rZW1vbjowMjU="` is `Pokemon:025` → `"025"`), the form
 * the original tutorial's server hands out.
 */
export function normalizeCreatureId(id: string): string {
  const trimmed = id.trim();
  if (/^\d{1,15}$/.test(trimmed)) return String(Number(trimmed)).padStart(3, '0');
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed) && trimmed.length >= 8) {
    const decoded = Buffer.from(trimmed, 'base64').toString('utf8');
    const match = /^[A-Za-z]+:(\d+)$/.exec(decoded);
    if (match) return normalizeCreatureId(match[1]!);
  }
  return trimmed;
}

const numericId = (id: string) => (/^\d+$/.test(id) ? Number(id) : Number.POSITIVE_INFINITY);
const byIdOrder = (a: Creature, b: Creature) => numericId(a.id) - numericId(b.id) || a.id.localeCompare(b.id);

/**
 * The creature and message store. Reads are served from memory; writes validate (throwing a
 * `GraphQLError` with code `BAD_USER_INPUT` or `NOT_FOUND` naming the field and rule), commit to SQLite
 * in a transaction, update memory and emit a {@link ChangeEvent} — in that order, so a failed write
 * changes nothing.
 */
export class Store {
  /** Emits `'change'` with a {@link ChangeEvent} after every committed write. */
  readonly events = new EventEmitter<{ change: [ChangeEvent] }>();
  readonly #db: DatabaseSync;
  #list: Creature[] = [];
  readonly #byId = new Map<string, Creature>();
  readonly #byName = new Map<string, Creature>();
  /** {@link nameKey} → creature, rebuilt lazily after a write (null: stale). */
  #byAlias: Map<string, Creature> | null = null;

  /** Opens (creating and seeding on first use) the database at `options.path`. */
  constructor(options: StoreOptions) {
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
    for (const row of this.#db.prepare('SELECT doc FROM creatures').all()) {
      this.#remember(JSON.parse(row.doc as string) as Creature);
    }
    this.#list.sort(byIdOrder);
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

  #remember(c: Creature): void {
    const old = this.#byId.get(c.id);
    if (old) {
      this.#byName.delete(old.name.toLowerCase());
      this.#list[this.#list.indexOf(old)] = c;
    } else {
      this.#list.push(c);
    }
    this.#byId.set(c.id, c);
    this.#byName.set(c.name.toLowerCase(), c);
    this.#byAlias = null;
  }

  /** All creatures in id order (do not mutate the array). */
  listCreatures(): readonly Creature[] {
    return this.#list;
  }
  /** The creature with this id, if any (exact stored id, e.g. `"025"`). */
  getCreature(id: string): Creature | undefined {
    return this.#byId.get(id);
  }
  /**
   * The creature a client's id names: the stored id, or a form {@link normalizeCreatureId} maps to it
   * (`"25"`, base64 `Pokemon:025`).
   */
  findCreature(id: string): Creature | undefined {
    return this.#byId.get(id) ?? this.#byId.get(normalizeCreatureId(id));
  }
  /**
   * The creature with this name compared case-insensitively (surrounding spaces ignored), or else the
   * one whose {@link nameKey} equals the name's (aliases such as `Nidoran-F` for `Nidoran♀`; on a tie
   * the lowest id wins).
   */
  getCreatureByName(name: string): Creature | undefined {
    const exact = this.#byName.get(name.trim().toLowerCase());
    if (exact) return exact;
    const key = nameKey(name);
    if (key === '') return undefined;
    if (!this.#byAlias) {
      const aliases = new Map<string, Creature>();
      for (const c of this.#list) {
        const k = nameKey(c.name);
        if (!aliases.has(k)) aliases.set(k, c);
      }
      this.#byAlias = aliases;
    }
    return this.#byAlias.get(key);
  }
  /** The current creatures the references point at, skipping deleted ones. */
  resolveRefs(refs: readonly CreatureRef[]): Creature[] {
    const out: Creature[] = [];
    for (const r of refs) {
      const c = this.#byId.get(r.id);
      if (c) out.push(c);
    }
    return out;
  }
  /** Whether the database answers (for `/healthz`). */
  healthy(): boolean {
    try {
      return this.#db.prepare('SELECT 1 AS ok').get()?.ok === 1;
    } catch {
      return false;
    }
  }

  #refs(field: string, ids: string[], self: string | undefined): CreatureRef[] {
    if (ids.length > MAX_LIST) throw bad(`${field} must have at most ${MAX_LIST} entries`);
    return ids.map((id, i) => {
      if (id === self) throw bad(`${field}[${i}] must not be the creature itself`);
      const c = this.#byId.get(id);
      if (!c) throw bad(`${field}[${i}] names no creature: "${id}"`);
      return { id: c.id, name: c.name };
    });
  }

  #apply(base: Creature, patch: CreaturePatch, prefix: string): Creature {
    const next: Creature = { ...base, attacks: { ...base.attacks } };
    if (patch.name !== undefined) {
      if (patch.name === null) throw bad(`${prefix}.name must not be null`);
      next.name = text(`${prefix}.name`, patch.name);
      const holder = this.#byName.get(next.name.toLowerCase());
      if (holder && holder.id !== base.id) {
        throw bad(`${prefix}.name must be unique: "${next.name}" is taken by creature ${holder.id}`);
      }
    }
    if (patch.classification !== undefined) {
      next.classification =
        patch.classification === null ? null : text(`${prefix}.classification`, patch.classification);
    }
    for (const key of ['types', 'resistant', 'weaknesses'] as const) {
      const v = patch[key];
      if (v !== undefined) next[key] = v === null ? [] : textList(`${prefix}.${key}`, v);
    }
    if (patch.weight !== undefined) next.weight = dimension(`${prefix}.weight`, patch.weight);
    if (patch.height !== undefined) next.height = dimension(`${prefix}.height`, patch.height);
    if (patch.fleeRate !== undefined) {
      const f = patch.fleeRate;
      if (f !== null && !(f >= 0 && f <= 1))
        throw bad(`${prefix}.fleeRate must be between 0 and 1, got ${f}`);
      next.fleeRate = f;
    }
    if (patch.maxCP !== undefined)
      next.maxCP = patch.maxCP === null ? null : count(`${prefix}.maxCP`, patch.maxCP);
    if (patch.maxHP !== undefined)
      next.maxHP = patch.maxHP === null ? null : count(`${prefix}.maxHP`, patch.maxHP);
    if (patch.attacks !== undefined) {
      const a = patch.attacks;
      if (a === null) next.attacks = { fast: [], special: [] };
      else {
        if (a.fast !== undefined)
          next.attacks.fast = a.fast === null ? [] : attacks(`${prefix}.attacks.fast`, a.fast);
        if (a.special !== undefined) {
          next.attacks.special = a.special === null ? [] : attacks(`${prefix}.attacks.special`, a.special);
        }
      }
    }
    if (patch.evolutionIds !== undefined) {
      next.evolutions = this.#refs(`${prefix}.evolutionIds`, patch.evolutionIds ?? [], base.id);
    }
    if (patch.previousEvolutionIds !== undefined) {
      next.previousEvolutions = this.#refs(
        `${prefix}.previousEvolutionIds`,
        patch.previousEvolutionIds ?? [],
        base.id,
      );
    }
    if (patch.evolutionRequirements !== undefined) {
      const r = patch.evolutionRequirements;
      next.evolutionRequirements =
        r === null
          ? null
          : {
              amount: count(`${prefix}.evolutionRequirements.amount`, r.amount),
              name: text(`${prefix}.evolutionRequirements.name`, r.name),
            };
    }
    return next;
  }

  #emit(event: ChangeEvent): void {
    this.#version++;
    this.events.emit('change', event);
  }

  #version = 0;
  /** Count of committed writes since the store was opened (changes whenever the data changes). */
  get version(): number {
    return this.#version;
  }

  /**
   * Adds a creature with the next free numeric id (three digits at least, e.g. "152").
   * Throws `BAD_USER_INPUT` for an empty/too long/taken name, a bad number or an unknown evolution id.
   */
  createCreature(draft: CreatureDraft): Creature {
    if (draft.name == null) throw bad('input.name is required');
    const last = Number(
      (this.#db.prepare(`SELECT value FROM meta WHERE key = 'last_creature_id'`).get()?.value as string) ??
        '0',
    );
    const id = String(last + 1).padStart(3, '0');
    const empty: Creature = {
      id,
      name: '',
      classification: null,
      types: [],
      resistant: [],
      weaknesses: [],
      weight: null,
      height: null,
      fleeRate: null,
      maxCP: null,
      maxHP: null,
      attacks: { fast: [], special: [] },
      evolutions: [],
      evolutionRequirements: null,
      previousEvolutions: [],
    };
    const creature = this.#apply(empty, draft, 'input');
    this.#transaction(() => {
      this.#db
        .prepare('INSERT INTO creatures (id, name_key, doc) VALUES (?, ?, ?)')
        .run(id, creature.name.toLowerCase(), JSON.stringify(creature));
      this.#db.prepare(`UPDATE meta SET value = ? WHERE key = 'last_creature_id'`).run(String(last + 1));
    });
    this.#remember(creature);
    this.#list.sort(byIdOrder);
    this.#byAlias = null;
    this.#emit({ entity: 'creature', kind: 'created', id, value: creature });
    return creature;
  }

  /** Applies a patch to a creature. Throws `NOT_FOUND` for an unknown id, `BAD_USER_INPUT` as create. */
  updateCreature(id: string, patch: CreaturePatch): Creature {
    const base = this.#byId.get(id);
    if (!base) throw notFound(`No creature exists with id "${id}"`);
    const next = this.#apply(base, patch, 'input');
    this.#transaction(() => {
      this.#db
        .prepare('UPDATE creatures SET name_key = ?, doc = ? WHERE id = ?')
        .run(next.name.toLowerCase(), JSON.stringify(next), id);
    });
    this.#remember(next);
    this.#emit({ entity: 'creature', kind: 'updated', id, value: next });
    return next;
  }

  /** Removes a creature and returns it. Throws `NOT_FOUND` for an unknown id. */
  deleteCreature(id: string): Creature {
    const old = this.#byId.get(id);
    if (!old) throw notFound(`No creature exists with id "${id}"`);
    this.#transaction(() => {
      this.#db.prepare('DELETE FROM creatures WHERE id = ?').run(id);
    });
    this.#byId.delete(id);
    this.#byName.delete(old.name.toLowerCase());
    this.#list = this.#list.filter((c) => c !== old);
    this.#byAlias = null;
    this.#emit({ entity: 'creature', kind: 'deleted', id, value: old });
    return old;
  }

  /** The message with this id, if any. */
  getMessage(id: string): Message | undefined {
    const row = this.#db.prepare('SELECT id, content, author FROM messages WHERE id = ?').get(id);
    return row
      ? { id: row.id as string, content: row.content as string | null, author: row.author as string | null }
      : undefined;
  }

  #messageFields(draft: MessageDraft, prefix: string): MessageDraft {
    const out: MessageDraft = {};
    if (draft.content !== undefined) {
      out.content =
        draft.content === null ? null : text(`${prefix}.content`, draft.content, MAX_CONTENT, true);
    }
    if (draft.author !== undefined) {
      out.author = draft.author === null ? null : text(`${prefix}.author`, draft.author, MAX_TEXT, true);
    }
    return out;
  }

  /** Stores a new message with a random UUID id. Throws `BAD_USER_INPUT` for too long fields. */
  createMessage(draft: MessageDraft): Message {
    const f = this.#messageFields(draft, 'input');
    const message: Message = { id: randomUUID(), content: f.content ?? null, author: f.author ?? null };
    this.#transaction(() => {
      this.#db
        .prepare('INSERT INTO messages (id, content, author) VALUES (?, ?, ?)')
        .run(message.id, message.content, message.author);
    });
    this.#emit({ entity: 'message', kind: 'created', id: message.id, value: message });
    return message;
  }

  /** Replaces the given fields of a message. Throws `NOT_FOUND` for an unknown id. */
  updateMessage(id: string, draft: MessageDraft): Message {
    const old = this.getMessage(id);
    if (!old) throw notFound(`No message exists with id "${id}"`);
    const f = this.#messageFields(draft, 'input');
    const message: Message = { ...old, ...f };
    this.#transaction(() => {
      this.#db
        .prepare('UPDATE messages SET content = ?, author = ? WHERE id = ?')
        .run(message.content, message.author, id);
    });
    this.#emit({ entity: 'message', kind: 'updated', id, value: message });
    return message;
  }

  /**
   * An async iterator over future change events, for a subscription transport (e.g. GraphQL over SSE).
   * Ends when `signal` aborts.
   */
  async *changes(signal?: AbortSignal): AsyncGenerator<ChangeEvent> {
    try {
      for await (const [event] of on(this.events, 'change', { signal })) yield event as ChangeEvent;
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    }
  }

  /** Closes the database; the store must not be used afterwards. */
  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
