/**
 * The in-memory copy of the creatures that both stores serve reads from, and the change feed: every
 * change a store applies goes through {@link MirroredStore.applyChange}, which updates the copy, counts
 * the version and emits the {@link ChangeEvent} — one path, so the copy and the events never disagree.
 */
import { EventEmitter, on } from 'node:events';
import {
  type Awaitable,
  type ChangeEvent,
  type Creature,
  type CreatureDraft,
  type CreaturePatch,
  type CreatureRef,
  type Message,
  type MessageDraft,
  nameKey,
  normalizeCreatureId,
  type Store,
} from './store.ts';
import { noRecord } from './store-error.ts';
import type { CreatureLookup } from './store-rules.ts';
import { byIdOrder } from './store-rules.ts';

/**
 * The read half of a {@link Store}: creatures in memory (by id, by lower-case name, by {@link nameKey}),
 * the `events` emitter and the version. Subclasses load the creatures with {@link replaceAll}, apply
 * committed changes with {@link applyChange} and implement the writes.
 */
export abstract class MirroredStore implements Store, CreatureLookup {
  /** Emits `'change'` with a {@link ChangeEvent} for every applied change. */
  readonly events = new EventEmitter<{ change: [ChangeEvent] }>();
  #list: Creature[] = [];
  readonly #byId = new Map<string, Creature>();
  readonly #byName = new Map<string, Creature>();
  /** Exact stored name → creature: a lookup by a name as stored makes no lower-case copy. */
  readonly #byExactName = new Map<string, Creature>();
  /** {@link nameKey} → creature, rebuilt lazily after a change (null: stale). */
  #byAlias: Map<string, Creature> | null = null;
  #version = 0;

  /** Count of changes applied since the store was opened (changes whenever the data changes). */
  get version(): number {
    return this.#version;
  }

  /** The creature with this id; throws `NOT_FOUND` when there is none. */
  protected existingCreature(id: string): Creature {
    const creature = this.getCreature(id);
    if (!creature) throw noRecord(`No creature exists with id "${id}"`);
    return creature;
  }

  /**
   * Replaces every creature in memory: at load time (emitting nothing), or with `emitDifferences` after
   * missing changes, emitting one event per creature that differs (`created`, `updated` or `deleted`:
   * the net effect of what was missed, so caches and subscribers still learn of it).
   */
  protected replaceAll(creatures: Iterable<Creature>, emitDifferences = false): void {
    const before = new Map(this.#byId);
    this.#list = [];
    this.#byId.clear();
    this.#byName.clear();
    this.#byExactName.clear();
    for (const c of creatures) this.#remember(c);
    this.#list.sort(byIdOrder);
    this.#byAlias = null;
    this.#version++;
    if (!emitDifferences) return;
    const differences: ChangeEvent[] = [];
    for (const c of this.#list) {
      const old = before.get(c.id);
      if (!old) differences.push({ entity: 'creature', kind: 'created', id: c.id, value: c });
      else if (JSON.stringify(old) !== JSON.stringify(c)) {
        differences.push({ entity: 'creature', kind: 'updated', id: c.id, value: c });
      }
    }
    for (const [id, old] of before) {
      if (!this.#byId.has(id)) differences.push({ entity: 'creature', kind: 'deleted', id, value: old });
    }
    for (const event of differences) {
      this.#version++;
      this.events.emit('change', event);
    }
  }

  /** Updates the creatures in memory for a committed change, counts the version and emits the event. */
  protected applyChange(event: ChangeEvent): void {
    if (event.entity === 'creature') {
      if (event.kind === 'deleted') this.#forget(event.id);
      else {
        const isNew = !this.#byId.has(event.id);
        this.#remember(event.value);
        if (isNew) this.#list.sort(byIdOrder);
      }
      this.#byAlias = null;
    }
    this.#version++;
    this.events.emit('change', event);
  }

  #remember(c: Creature): void {
    const old = this.#byId.get(c.id);
    if (old) {
      this.#byName.delete(old.name.toLowerCase());
      this.#byExactName.delete(old.name);
      this.#list[this.#list.indexOf(old)] = c;
    } else {
      this.#list.push(c);
    }
    this.#byId.set(c.id, c);
    this.#byName.set(c.name.toLowerCase(), c);
    this.#byExactName.set(c.name, c);
  }

  #forget(id: string): void {
    const old = this.#byId.get(id);
    if (!old) return;
    this.#byId.delete(id);
    if (this.#byName.get(old.name.toLowerCase()) === old) this.#byName.delete(old.name.toLowerCase());
    if (this.#byExactName.get(old.name) === old) this.#byExactName.delete(old.name);
    this.#list = this.#list.filter((c) => c !== old);
  }

  /** The creature whose name is exactly `name` in lower case (for the unique-name rule). */
  holderOfName(name: string): Creature | undefined {
    return this.#byName.get(name.toLowerCase());
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
    const exact = this.#byExactName.get(name) ?? this.#byName.get(name.trim().toLowerCase());
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

  abstract ready(): Promise<void>;
  abstract healthy(): Awaitable<boolean>;
  abstract getMessage(id: string): Awaitable<Message | undefined>;
  abstract createCreature(draft: CreatureDraft): Awaitable<Creature>;
  abstract updateCreature(id: string, patch: CreaturePatch): Awaitable<Creature>;
  abstract deleteCreature(id: string): Awaitable<Creature>;
  abstract createMessage(draft: MessageDraft): Awaitable<Message>;
  abstract updateMessage(id: string, draft: MessageDraft): Awaitable<Message>;
  abstract close(): Awaitable<void>;
}
