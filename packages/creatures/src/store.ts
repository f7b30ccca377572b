/**
 * The creature server's data model and the contract of its persistence: the {@link Store} interface
 * that the server, the resolvers and the subscription transports use, whichever database is behind it.
 * Two implementations share it: `SqliteStore` (`store-sqlite.ts`, an embedded `node:sqlite` file, the
 * default) and `PostgresStore` (`store-postgres.ts`, one PostgreSQL database shared by several server
 * instances). Both keep the creatures mirrored in memory (`store-mirror.ts`) and validate writes with
 * the same rules (`store-rules.ts`).
 */
import type { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
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

/** A value or a promise of it: what a {@link Store} method returns when one implementation is synchronous. */
export type Awaitable<T> = T | Promise<T>;

/**
 * The store of creatures and messages, as the server and the resolvers see it.
 *
 * Creature reads are synchronous: every implementation keeps the creatures in memory and keeps that copy
 * current with the database (for PostgreSQL, with the changes other instances commit too). Message reads
 * and every write may be asynchronous. Writes validate their input (throwing a `CreatureStoreError` (`store-error.ts`) with
 * code `BAD_USER_INPUT` whose `field` and message name the field and the rule, or `NOT_FOUND` for an
 * unknown id; the resolvers answer it as a `GraphQLError` with that `extensions.code`), commit, update the in-memory copy
 * and emit one {@link ChangeEvent} on {@link Store.events} — in that order, so a failed write changes
 * nothing and emits nothing.
 */
export interface Store {
  /**
   * Emits `'change'` with a {@link ChangeEvent} once for every committed write, in commit order. For a
   * database shared by several instances, that includes the writes of the other instances.
   */
  readonly events: EventEmitter<{ change: [ChangeEvent] }>;
  /** Count of changes applied since the store was opened (changes whenever the data changes). */
  readonly version: number;
  /**
   * Resolves once the store can serve: the database is reachable, migrated, seeded and loaded. Rejects
   * with the database's error otherwise. The server awaits it before it starts listening.
   */
  ready(): Promise<void>;
  /** All creatures in id order (do not mutate the array). */
  listCreatures(): readonly Creature[];
  /** The creature with this id, if any (exact stored id, e.g. `"025"`). */
  getCreature(id: string): Creature | undefined;
  /** The creature a client's id names: the stored id or a form {@link normalizeCreatureId} maps to it. */
  findCreature(id: string): Creature | undefined;
  /** The creature with this name (case-insensitive), or else the one whose {@link nameKey} matches. */
  getCreatureByName(name: string): Creature | undefined;
  /** The current creatures the references point at, skipping deleted ones. */
  resolveRefs(refs: readonly CreatureRef[]): Creature[];
  /** Whether the database answers (for `/healthz`). */
  healthy(): Awaitable<boolean>;
  /** The message with this id, if any. */
  getMessage(id: string): Awaitable<Message | undefined>;
  /** Adds a creature with the next free numeric id (three digits at least, e.g. "152"). */
  createCreature(draft: CreatureDraft): Awaitable<Creature>;
  /** Applies a patch to a creature; `NOT_FOUND` for an unknown id. */
  updateCreature(id: string, patch: CreaturePatch): Awaitable<Creature>;
  /** Removes a creature and returns it; `NOT_FOUND` for an unknown id. */
  deleteCreature(id: string): Awaitable<Creature>;
  /** Stores a new message with a random UUID id. */
  createMessage(draft: MessageDraft): Awaitable<Message>;
  /** Replaces the given fields of a message; `NOT_FOUND` for an unknown id. */
  updateMessage(id: string, draft: MessageDraft): Awaitable<Message>;
  /** An async iterator over future change events; ends when `signal` aborts. */
  changes(signal?: AbortSignal): AsyncGenerator<ChangeEvent>;
  /** Closes the database connection(s); the store must not be used afterwards. */
  close(): Awaitable<void>;
}
