/**
 * Create and edit forms of a creature (`createCreature`, `updateCreature`): types as a multi-select,
 * measures as number fields with their unit, flee rate in percent, attack and evolution editors. The
 * server validates; each of its errors is shown next to the field it names (see `formErrors.ts`) and focus
 * moves to the first field in error.
 */
import { type FormEvent, useEffect, useMemo, useRef, useState } from 'react';
import { useMutation, useQuery } from 'urql';
import type { CreatureChangeSignal } from './App.tsx';
import { ErrorNotice } from './ErrorNotice.tsx';
import { typeChoices } from './elementTypes.ts';
import {
  type AttackDraft,
  AttackEditor,
  attackDraft,
  EvolutionEditor,
  Field,
  TypeChooser,
} from './FormControls.tsx';
import { type FormErrors, formErrors, NO_ERRORS } from './formErrors.ts';
import {
  AllCreaturesQuery,
  type Attack,
  CreateCreatureMutation,
  type CreatureDetail,
  type CreatureFields,
  type CreatureLink,
  CreatureQuery,
  UpdateCreatureMutation,
} from './graphql.ts';
import { PageHeading } from './PageHeading.tsx';
import { creatureHref, navigate } from './route.ts';

/** The form's state: text as typed (numbers without their unit), lists as chosen. */
interface Draft {
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

const EMPTY: Draft = {
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

/** The number fields of the measures grid (all at least 0): draft field, label, unit, step and maximum. */
const NUMBER_FIELDS: readonly {
  key: 'weightMin' | 'weightMax' | 'heightMin' | 'heightMax' | 'maxCP' | 'maxHP' | 'fleeRate';
  label: string;
  step: string;
  unit?: string;
  max?: number;
}[] = [
  { key: 'weightMin', label: 'Weight, minimum', step: 'any', unit: 'kg' },
  { key: 'weightMax', label: 'Weight, maximum', step: 'any', unit: 'kg' },
  { key: 'heightMin', label: 'Height, minimum', step: 'any', unit: 'm' },
  { key: 'heightMax', label: 'Height, maximum', step: 'any', unit: 'm' },
  { key: 'maxCP', label: 'Max CP', step: '1' },
  { key: 'maxHP', label: 'Max HP', step: '1' },
  { key: 'fleeRate', label: 'Flee rate', step: 'any', unit: '%', max: 100 },
];

/** The two attack lists: draft field (also the editor's id), legend and the noun of one row. */
const ATTACK_LISTS = [
  { key: 'fast', legend: 'Fast attacks', noun: 'fast attack' },
  { key: 'special', legend: 'Special attacks', noun: 'special attack' },
] as const;

/** The two evolution lists: draft field (also the editor's id), legend and hint. */
const EVOLUTION_LISTS = [
  { key: 'previous', legend: 'Previous evolutions', hint: 'Earlier stages, earliest first.' },
  { key: 'evolutions', legend: 'Evolutions', hint: 'Later stages, nearest first.' },
] as const;

/** The number of a measure such as "6.75kg" ("6.75"), or "" when there is none. */
const amount = (measure: string | null | undefined) => {
  const n = Number.parseFloat(measure ?? '');
  return Number.isFinite(n) ? String(n) : '';
};
const attacksOf = (list: Attack[]) => list.map((a) => attackDraft(a.name, a.type, String(a.damage)));

function fromCreature(c: CreatureDetail): Draft {
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

function toInput(d: Draft): CreatureFields {
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
function localErrors(d: Draft): FormErrors {
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
function fieldKey(segments: string[]): string | null {
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

/** The form for `#/new`: creates a creature and opens it. */
export function CreateCreaturePage() {
  const [state, create] = useMutation(CreateCreatureMutation);
  const submit = async (draft: Draft): Promise<FormErrors> => {
    const result = await create({ input: toInput(draft) });
    if (result.error) return formErrors(result.error, fieldKey);
    if (result.data) navigate(creatureHref(result.data.createCreature.name));
    return NO_ERRORS;
  };
  return (
    <CreatureForm
      title="New creature"
      initial={EMPTY}
      self={undefined}
      submitLabel="Create creature"
      busy={state.fetching}
      notice={null}
      onSubmit={submit}
      onCancel={() => navigate('#/')}
    />
  );
}

/** The form for `#/creatures/<name>/edit`: saves the changes and opens the creature. */
export function EditCreaturePage({ name, change }: { name: string; change: CreatureChangeSignal | null }) {
  const [result] = useQuery({ query: CreatureQuery, variables: { name } });
  const [state, update] = useMutation(UpdateCreatureMutation);
  const [notice, setNotice] = useState<string | null>(null);
  const creature = result.data?.creature;

  useEffect(() => {
    if (change && creature && change.id === creature.id && change.kind === 'DELETED') {
      setNotice(`${creature.name} was deleted in another browser; saving is no longer possible.`);
    }
  }, [change, creature]);

  if (result.error) return <ErrorNotice error={result.error} />;
  if (!result.data) return <p role="status">Loading {name}…</p>;
  if (!creature) {
    return (
      <>
        <PageHeading title="Not found">{name}</PageHeading>
        <p role="status">There is no creature called “{name}”.</p>
      </>
    );
  }

  const submit = async (draft: Draft): Promise<FormErrors> => {
    const done = await update({ id: creature.id, input: toInput(draft) });
    if (done.error) return formErrors(done.error, fieldKey);
    if (done.data) navigate(creatureHref(done.data.updateCreature.name));
    return NO_ERRORS;
  };
  return (
    <CreatureForm
      key={creature.id}
      title={`Edit ${creature.name}`}
      initial={fromCreature(creature)}
      self={creature.id}
      submitLabel="Save changes"
      busy={state.fetching}
      notice={notice}
      onSubmit={submit}
      onCancel={() => navigate(creatureHref(creature.name))}
    />
  );
}

interface CreatureFormProps {
  title: string;
  initial: Draft;
  /** Id of the creature being edited; undefined when creating. */
  self: string | undefined;
  submitLabel: string;
  busy: boolean;
  /** A message about the whole form from outside (the creature was deleted elsewhere). */
  notice: string | null;
  /** Sends the draft; resolves with the server's errors (none after success). */
  onSubmit: (draft: Draft) => Promise<FormErrors>;
  onCancel: () => void;
}

function CreatureForm(props: CreatureFormProps) {
  const [draft, setDraft] = useState(props.initial);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [all] = useQuery({ query: AllCreaturesQuery });
  const formRef = useRef<HTMLFormElement>(null);
  const creatures = all.data?.creatures ?? [];
  const types = useMemo(() => typeChoices((all.data?.creatures ?? []).flatMap((c) => c.types)), [all.data]);
  const set =
    <K extends keyof Draft>(key: K) =>
    (value: Draft[K]) =>
      setDraft((d) => ({ ...d, [key]: value }));
  const e = errors.fields;
  /** The props that tie a control to one draft field: its id, value, change handler and error. */
  const bind = <K extends keyof Draft>(key: K) => ({
    id: key,
    value: draft[key],
    onChange: set(key),
    error: e[key],
  });

  // Counts requests to focus the first error; the effect runs after React has committed the render that
  // shows the errors (with the same update), so the controls in error are marked by then.
  const [focusRequests, setFocusRequests] = useState(0);
  useEffect(() => {
    if (focusRequests === 0) return;
    const target = formRef.current?.querySelector<HTMLElement>(
      '[aria-invalid="true"], fieldset.invalid, .form-errors',
    );
    target?.focus();
  }, [focusRequests]);

  /** Focuses the first control in error (in document order), or the form-level errors, once they render. */
  const focusFirstError = () => setFocusRequests((n) => n + 1);

  const onSubmit = async (event: FormEvent) => {
    event.preventDefault();
    const local = localErrors(draft);
    const found = Object.keys(local.fields).length > 0 ? local : await props.onSubmit(draft);
    setErrors(found);
    if (Object.keys(found.fields).length > 0 || found.general.length > 0) focusFirstError();
  };

  return (
    <form className="creature-form" onSubmit={onSubmit} aria-labelledby="form-title" noValidate ref={formRef}>
      <PageHeading title={props.title} id="form-title">
        {props.title}
      </PageHeading>
      {(errors.general.length > 0 || props.notice) && (
        <div className="form-errors" tabIndex={-1}>
          <ErrorNotice error={[props.notice, ...errors.general].filter(Boolean).join('\n')} />
        </div>
      )}
      <div className="grid">
        <Field label="Name" {...bind('name')} />
        <Field label="Classification" hint="e.g. Mouse Pokémon" {...bind('classification')} />
      </div>
      <TypeChooser legend="Types" choices={types} {...bind('types')} />
      <div className="grid measures">
        {NUMBER_FIELDS.map(({ key, ...field }) => (
          <Field key={key} type="number" min={0} {...field} {...bind(key)} />
        ))}
      </div>
      <TypeChooser legend="Resistant to" choices={types} {...bind('resistant')} />
      <TypeChooser legend="Weak against" choices={types} {...bind('weaknesses')} />
      {ATTACK_LISTS.map(({ key, ...list }) => (
        <AttackEditor
          key={key}
          id={key}
          {...list}
          attacks={draft[key]}
          onChange={set(key)}
          types={types}
          errors={e}
        />
      ))}
      {EVOLUTION_LISTS.map(({ key, ...list }) => (
        <EvolutionEditor key={key} {...list} {...bind(key)} creatures={creatures} self={props.self} />
      ))}
      <fieldset className="requirement">
        <legend>Evolves with</legend>
        <div className="grid">
          <Field label="Amount" type="number" step="1" min={0} {...bind('reqAmount')} />
          <Field label="Of what" hint="e.g. Pikachu candies" {...bind('reqName')} />
        </div>
      </fieldset>
      <div className="actions">
        <button type="submit" disabled={props.busy}>
          {props.submitLabel}
        </button>
        <button type="button" onClick={props.onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
