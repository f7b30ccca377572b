/**
 * Create and edit forms of a creature (`createCreature`, `updateCreature`): types as a multi-select,
 * measures as number fields with their unit, flee rate in percent, attack and evolution editors. The
 * server validates; each of its errors is shown next to the field it names (see `formErrors.ts`) and focus
 * moves to the first field in error.
 */
import { type FormEvent, useEffect, useMemo, useRef, useState } from 'react';
import { useMutation, useQuery } from 'urql';
import type { CreatureChangeSignal } from './App.tsx';
import { type Draft, EMPTY_DRAFT, fieldKey, fromCreature, localErrors, toInput } from './creatureDraft.ts';
import { ErrorNotice } from './ErrorNotice.tsx';
import { typeChoices } from './elementTypes.ts';
import { AttackEditor, EvolutionEditor, Field, TypeChooser } from './FormControls.tsx';
import { type FormErrors, formErrors, NO_ERRORS } from './formErrors.ts';
import {
  AllCreaturesQuery,
  CreateCreatureMutation,
  CreatureQuery,
  UpdateCreatureMutation,
} from './graphql.ts';
import { PageHeading } from './PageHeading.tsx';
import { creatureHref, navigate } from './route.ts';

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
      initial={EMPTY_DRAFT}
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
