/**
 * The validation rules every {@link Store} applies to writes, independent of the database: text lengths,
 * whole numbers, list sizes, unique names, evolution references. A broken rule throws a `CreatureStoreError`
 * (`store-error.ts`) with code `BAD_USER_INPUT` whose `field` and message name the field
 * (`input.attacks.fast[2].damage`) and the rule.
 */
import { randomUUID } from 'node:crypto';
import {
  type Attack,
  type Creature,
  type CreaturePatch,
  type CreatureRef,
  type Dimension,
  MAX_CONTENT,
  MAX_LIST,
  MAX_TEXT,
  type Message,
  type MessageDraft,
  type Store,
} from './store.ts';
import { invalidInput } from './store-error.ts';

function text(field: string, value: string, max = MAX_TEXT, allowEmpty = false): string {
  const trimmed = value.trim();
  if (!allowEmpty && trimmed === '') throw invalidInput(field, `${field} must not be empty`);
  if (trimmed.length > max)
    throw invalidInput(field, `${field} must be at most ${max} characters, got ${trimmed.length}`);
  return trimmed;
}
function textList(field: string, values: string[]): string[] {
  if (values.length > MAX_LIST) throw invalidInput(field, `${field} must have at most ${MAX_LIST} entries`);
  return values.map((v, i) => text(`${field}[${i}]`, v));
}
function count(field: string, value: number): number {
  if (!Number.isInteger(value) || value < 0)
    throw invalidInput(field, `${field} must be a whole number ≥ 0, got ${value}`);
  return value;
}
function attacks(field: string, values: Attack[]): Attack[] {
  if (values.length > MAX_LIST) throw invalidInput(field, `${field} must have at most ${MAX_LIST} entries`);
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

/** The lookups {@link applyPatch} checks names and evolution ids against (the store's current creatures). */
export type CreatureLookup = Pick<Store, 'getCreature'> & {
  /** The creature holding exactly this name, compared in lower case. */
  holderOfName(name: string): Creature | undefined;
};

function refs(field: string, ids: string[], self: string | undefined, lookup: CreatureLookup): CreatureRef[] {
  if (ids.length > MAX_LIST) throw invalidInput(field, `${field} must have at most ${MAX_LIST} entries`);
  return ids.map((id, i) => {
    if (id === self) throw invalidInput(`${field}[${i}]`, `${field}[${i}] must not be the creature itself`);
    const c = lookup.getCreature(id);
    if (!c) throw invalidInput(`${field}[${i}]`, `${field}[${i}] names no creature: "${id}"`);
    return { id: c.id, name: c.name };
  });
}

/** A creature with this id and every other field empty (the base of a created creature). */
export function emptyCreature(id: string): Creature {
  return {
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
}

/**
 * `base` with the patch applied (a new object; `base` is not changed). Field names in errors start with
 * `prefix` (`input`). Throws `BAD_USER_INPUT` for a null, empty, too long or taken name, a bad number, a
 * too long list or an evolution id naming no creature (or the creature itself).
 */
export function applyPatch(
  base: Creature,
  patch: CreaturePatch,
  prefix: string,
  lookup: CreatureLookup,
): Creature {
  const next: Creature = { ...base, attacks: { ...base.attacks } };
  if (patch.name !== undefined) {
    if (patch.name === null) throw invalidInput(`${prefix}.name`, `${prefix}.name must not be null`);
    next.name = text(`${prefix}.name`, patch.name);
    const holder = lookup.holderOfName(next.name);
    if (holder && holder.id !== base.id) {
      throw invalidInput(
        `${prefix}.name`,
        `${prefix}.name must be unique: "${next.name}" is taken by creature ${holder.id}`,
      );
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
      throw invalidInput(`${prefix}.fleeRate`, `${prefix}.fleeRate must be between 0 and 1, got ${f}`);
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
    next.evolutions = refs(`${prefix}.evolutionIds`, patch.evolutionIds ?? [], base.id, lookup);
  }
  if (patch.previousEvolutionIds !== undefined) {
    next.previousEvolutions = refs(
      `${prefix}.previousEvolutionIds`,
      patch.previousEvolutionIds ?? [],
      base.id,
      lookup,
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

/**
 * The validated fields of a message draft (trimmed; absent fields stay absent). Throws `BAD_USER_INPUT`
 * for content over {@link MAX_CONTENT} or an author over {@link MAX_TEXT} characters.
 */
export function messageFields(draft: MessageDraft, prefix: string): MessageDraft {
  const out: MessageDraft = {};
  if (draft.content !== undefined) {
    out.content = draft.content === null ? null : text(`${prefix}.content`, draft.content, MAX_CONTENT, true);
  }
  if (draft.author !== undefined) {
    out.author = draft.author === null ? null : text(`${prefix}.author`, draft.author, MAX_TEXT, true);
  }
  return out;
}

/**
 * A new message from a draft: a random UUID id and the validated fields ({@link messageFields}, absent
 * fields null). Throws `BAD_USER_INPUT` as {@link messageFields}.
 */
export function newMessage(draft: MessageDraft, prefix: string): Message {
  const f = messageFields(draft, prefix);
  return { id: randomUUID(), content: f.content ?? null, author: f.author ?? null };
}

/** The numeric value of a numeric id (`"025"` → 25), or +∞ for any other id. */
export const numericId = (id: string): number => (/^\d+$/.test(id) ? Number(id) : Number.POSITIVE_INFINITY);

/** Id order: numeric ids by value first, other ids after them by string order. */
export const byIdOrder = (a: Creature, b: Creature): number =>
  numericId(a.id) - numericId(b.id) || a.id.localeCompare(b.id);
