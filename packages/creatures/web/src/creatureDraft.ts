/**
 * The creature form's state and its conversions: a {@link Draft} holds the fields as typed (numbers as
 * text without their unit), {@link fromCreature} fills one from a creature, {@link toInput} turns one into
 * the mutation's input (measures get their unit, the flee rate goes from percent to a fraction),
 * {@link localErrors} finds what the browser can check before sending, and {@link fieldKey} names the
 * form field that shows a server error about an input path.
 */
import type { AttackDraft } from './FormControls.tsx';
import { attackDraft } from './FormControls.tsx';
import type { FormErrors } from './formErrors.ts';
import type { Attack, CreatureDetail, CreatureFields, CreatureLink } from './graphql.ts';

/** The form's state: text as typed (numbers without their unit), lists as chosen. */
export interface Draft {
  name: string;
  classification: string;
  types: string[];
  resistant: string[];
  weaknesses: string[];
  weightMin: string;
  weightMax: string;
  heightMin: string;
  heightMax: string;
  maxCP: string;
  maxHP: string;
  /** Percent, 0–100. */
  fleeRate: string;
  fast: AttackDraft[];
  special: AttackDraft[];
  previous: CreatureLink[];
  evolutions: CreatureLink[];
  reqAmount: string;
  reqName: string;
}

/** The draft of a new creature: every field empty. */
export const EMPTY_DRAFT: Draft = {
  name: '',
  classification: '',
  types: [],
  resistant: [],
  weaknesses: [],
  weightMin: '',
  weightMax: '',
  heightMin: '',
  heightMax: '',
  maxCP: '',
  maxHP: '',
  fleeRate: '',
  fast: [],
  special: [],
  previous: [],
  evolutions: [],
  reqAmount: '',
  reqName: '',
};

/** The number of a measure such as "6.75kg" ("6.75"), or "" when there is none. */
const amount = (measure: string | null | undefined) => {
  const n = Number.parseFloat(measure ?? '');
  return Number.isFinite(n) ? String(n) : '';
};
const attacksOf = (list: Attack[]) => list.map((a) => attackDraft(a.name, a.type, String(a.damage)));

/** The draft of an existing creature, to edit it. */
export function fromCreature(c: CreatureDetail): Draft {
  return {
    name: c.name,
    classification: c.classification ?? '',
    types: c.types,
    resistant: c.resistant,
    weaknesses: c.weaknesses,
    weightMin: amount(c.weight?.minimum),
    weightMax: amount(c.weight?.maximum),
    heightMin: amount(c.height?.minimum),
    heightMax: amount(c.height?.maximum),
    maxCP: c.maxCP?.toString() ?? '',
    maxHP: c.maxHP?.toString() ?? '',
    fleeRate: c.fleeRate === null ? '' : String(Math.round(c.fleeRate * 10_000) / 100),
    fast: attacksOf(c.attacks.fast),
    special: attacksOf(c.attacks.special),
    previous: c.previousEvolutions.map(({ id, name }) => ({ id, name })),
    evolutions: c.evolutions.map(({ id, name }) => ({ id, name })),
    reqAmount: c.evolutionRequirements?.amount.toString() ?? '',
    reqName: c.evolutionRequirements?.name ?? '',
  };
}

const text = (s: string) => (s.trim() === '' ? null : s.trim());
/** Numbers go to the server as typed; it rejects what is not a number of the right kind, and we show why. */
const number = (s: string) => (s.trim() === '' ? null : Number(s));
const measure = (s: string, unit: string) => (s.trim() === '' ? null : `${s.trim()}${unit}`);
const dimension = (min: string, max: string, unit: string) =>
  text(min) === null && text(max) === null
    ? null
    : { minimum: measure(min, unit), maximum: measure(max, unit) };
const attacks = (list: AttackDraft[]): Attack[] =>
  list.map((a) => ({
    name: a.name.trim(),
    type: a.type,
    damage: a.damage.trim() === '' ? Number.NaN : Number(a.damage),
  }));

/** The mutation input of a draft (`createCreature`, `updateCreature`). */
export function toInput(d: Draft): CreatureFields {
  const fleeRate = number(d.fleeRate);
  const reqAmount = number(d.reqAmount);
  return {
    name: d.name.trim(),
    classification: text(d.classification),
    types: d.types,
    resistant: d.resistant,
    weaknesses: d.weaknesses,
    weight: dimension(d.weightMin, d.weightMax, 'kg'),
    height: dimension(d.heightMin, d.heightMax, 'm'),
    maxCP: number(d.maxCP),
    maxHP: number(d.maxHP),
    fleeRate: fleeRate === null ? null : fleeRate / 100,
    attacks: { fast: attacks(d.fast), special: attacks(d.special) },
    evolutionIds: d.evolutions.map((c) => c.id),
    previousEvolutionIds: d.previous.map((c) => c.id),
    evolutionRequirements:
      reqAmount === null && text(d.reqName) === null
        ? null
        : { amount: reqAmount ?? Number.NaN, name: d.reqName.trim() },
  };
}

/** Checks what the browser can check before sending: numbers that are no numbers, percent out of range. */
export function localErrors(d: Draft): FormErrors {
  const fields: Record<string, string> = {};
  const notNumber = (key: string, value: string, label: string) => {
    if (value.trim() !== '' && !Number.isFinite(Number(value))) fields[key] = `${label} must be a number`;
  };
  const f = Number(d.fleeRate);
  if (d.fleeRate.trim() !== '' && (!Number.isFinite(f) || f < 0 || f > 100))
    fields.fleeRate = 'Flee rate must be between 0 and 100 %';
  for (const [key, label] of [
    ['weightMin', 'Weight'],
    ['weightMax', 'Weight'],
    ['heightMin', 'Height'],
    ['heightMax', 'Height'],
  ] as const)
    notNumber(key, d[key], label);
  for (const kind of ['fast', 'special'] as const) {
    d[kind].forEach((a, i) => {
      if (a.damage.trim() === '') fields[`${kind}.${i}.damage`] = 'Damage is required';
      if (a.name.trim() === '') fields[`${kind}.${i}.name`] = 'Name is required';
    });
  }
  if ((d.reqAmount.trim() === '') !== (d.reqName.trim() === ''))
    fields[d.reqAmount.trim() === '' ? 'reqAmount' : 'reqName'] =
      'Give both the amount and what it is, or neither';
  return { fields, general: [] };
}

/** The form field key that shows an error about the server's input path `segments`. */
export function fieldKey(segments: string[]): string | null {
  const [head, second, third, fourth] = segments;
  switch (head) {
    case 'name':
    case 'classification':
    case 'types':
    case 'resistant':
    case 'weaknesses':
    case 'maxCP':
    case 'maxHP':
    case 'fleeRate':
      return head;
    case 'weight':
    case 'height':
      return `${head}${second === 'maximum' ? 'Max' : 'Min'}`;
    case 'attacks':
      if (second !== 'fast' && second !== 'special') return null;
      if (third === undefined) return second;
      return `${second}.${third}.${fourth === 'type' || fourth === 'damage' ? fourth : 'name'}`;
    case 'evolutionIds':
      return 'evolutions';
    case 'previousEvolutionIds':
      return 'previous';
    case 'evolutionRequirements':
      return second === 'name' ? 'reqName' : 'reqAmount';
    default:
      return null;
  }
}
