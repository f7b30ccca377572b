/** Create and edit forms of a creature (`createCreature`, `updateCreature`). */
import { type FormEvent, useEffect, useState } from 'react';
import { useMutation, useQuery } from 'urql';
import type { CreatureChangeSignal } from './App.tsx';
import { ErrorNotice } from './ErrorNotice.tsx';
import {
  CreateCreatureMutation,
  type CreatureDetail,
  type CreatureFields,
  CreatureQuery,
  errorText,
  UpdateCreatureMutation,
} from './graphql.ts';
import { PageHeading } from './PageHeading.tsx';
import { creatureHref, navigate } from './route.ts';

/** The form's text fields, as typed. */
interface Draft {
  name: string;
  classification: string;
  types: string;
  resistant: string;
  weaknesses: string;
  weightMin: string;
  weightMax: string;
  heightMin: string;
  heightMax: string;
  maxCP: string;
  maxHP: string;
  fleeRate: string;
}

const EMPTY: Draft = {
  name: '',
  classification: '',
  types: '',
  resistant: '',
  weaknesses: '',
  weightMin: '',
  weightMax: '',
  heightMin: '',
  heightMax: '',
  maxCP: '',
  maxHP: '',
  fleeRate: '',
};

function fromCreature(c: CreatureDetail): Draft {
  return {
    name: c.name,
    classification: c.classification ?? '',
    types: c.types.join(', '),
    resistant: c.resistant.join(', '),
    weaknesses: c.weaknesses.join(', '),
    weightMin: c.weight?.minimum ?? '',
    weightMax: c.weight?.maximum ?? '',
    heightMin: c.height?.minimum ?? '',
    heightMax: c.height?.maximum ?? '',
    maxCP: c.maxCP?.toString() ?? '',
    maxHP: c.maxHP?.toString() ?? '',
    fleeRate: c.fleeRate?.toString() ?? '',
  };
}

const list = (s: string) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
const text = (s: string) => (s.trim() === '' ? null : s.trim());
/** Numbers go to the server as typed; it rejects what is not a number of the right kind, and we show why. */
const number = (s: string) => (s.trim() === '' ? null : Number(s));
const dimension = (min: string, max: string) =>
  text(min) === null && text(max) === null ? null : { minimum: text(min), maximum: text(max) };

function toInput(d: Draft): CreatureFields {
  return {
    name: d.name.trim(),
    classification: text(d.classification),
    types: list(d.types),
    resistant: list(d.resistant),
    weaknesses: list(d.weaknesses),
    weight: dimension(d.weightMin, d.weightMax),
    height: dimension(d.heightMin, d.heightMax),
    maxCP: number(d.maxCP),
    maxHP: number(d.maxHP),
    fleeRate: number(d.fleeRate),
  };
}

/** The form for `#/new`: creates a creature and opens it. */
export function CreateCreaturePage() {
  const [state, create] = useMutation(CreateCreatureMutation);
  const [error, setError] = useState<string | null>(null);
  const submit = async (draft: Draft) => {
    setError(null);
    const result = await create({ input: toInput(draft) });
    if (result.error) setError(errorText(result.error));
    else if (result.data) navigate(creatureHref(result.data.createCreature.name));
  };
  return (
    <CreatureForm
      title="New creature"
      initial={EMPTY}
      submitLabel="Create creature"
      busy={state.fetching}
      error={error}
      onSubmit={submit}
      onCancel={() => navigate('#/')}
    />
  );
}

/** The form for `#/creatures/<name>/edit`: saves the changes and opens the creature. */
export function EditCreaturePage({ name, change }: { name: string; change: CreatureChangeSignal | null }) {
  const [result] = useQuery({ query: CreatureQuery, variables: { name } });
  const [state, update] = useMutation(UpdateCreatureMutation);
  const [error, setError] = useState<string | null>(null);
  const creature = result.data?.creature;

  useEffect(() => {
    if (change && creature && change.id === creature.id && change.kind === 'DELETED') {
      setError(`${creature.name} was deleted in another browser; saving is no longer possible.`);
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

  const submit = async (draft: Draft) => {
    setError(null);
    const done = await update({ id: creature.id, input: toInput(draft) });
    if (done.error) setError(errorText(done.error));
    else if (done.data) navigate(creatureHref(done.data.updateCreature.name));
  };
  return (
    <CreatureForm
      key={creature.id}
      title={`Edit ${creature.name}`}
      initial={fromCreature(creature)}
      submitLabel="Save changes"
      busy={state.fetching}
      error={error}
      onSubmit={submit}
      onCancel={() => navigate(creatureHref(creature.name))}
    />
  );
}

interface CreatureFormProps {
  title: string;
  initial: Draft;
  submitLabel: string;
  busy: boolean;
  error: string | null;
  onSubmit: (draft: Draft) => void;
  onCancel: () => void;
}

function CreatureForm(props: CreatureFormProps) {
  const [draft, setDraft] = useState(props.initial);
  const field = (
    key: keyof Draft,
    label: string,
    extra: { hint?: string; type?: string; step?: string } = {},
  ) => (
    <label>
      <span>{label}</span>
      <input
        name={key}
        type={extra.type ?? 'text'}
        step={extra.step}
        value={draft[key]}
        placeholder={extra.hint}
        onChange={(e) => setDraft({ ...draft, [key]: e.target.value })}
      />
    </label>
  );
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    props.onSubmit(draft);
  };
  return (
    <form className="creature-form" onSubmit={onSubmit} aria-labelledby="form-title">
      <PageHeading title={props.title} id="form-title">
        {props.title}
      </PageHeading>
      <div className="grid">
        {field('name', 'Name', { hint: 'e.g. Pikachu' })}
        {field('classification', 'Classification', { hint: 'e.g. Mouse Pokémon' })}
        {field('types', 'Types', { hint: 'comma-separated, e.g. Electric' })}
        {field('resistant', 'Resistant to', { hint: 'comma-separated' })}
        {field('weaknesses', 'Weak against', { hint: 'comma-separated' })}
        {field('weightMin', 'Weight (minimum)', { hint: 'e.g. 5.25kg' })}
        {field('weightMax', 'Weight (maximum)', { hint: 'e.g. 6.75kg' })}
        {field('heightMin', 'Height (minimum)', { hint: 'e.g. 0.35m' })}
        {field('heightMax', 'Height (maximum)', { hint: 'e.g. 0.45m' })}
        {field('maxCP', 'Max CP', { type: 'number', step: 'any' })}
        {field('maxHP', 'Max HP', { type: 'number', step: 'any' })}
        {field('fleeRate', 'Flee rate (0–1)', { type: 'number', step: 'any' })}
      </div>
      {props.error && <ErrorNotice error={props.error} />}
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
