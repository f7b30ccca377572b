/**
 * Controls of the creature form, each with a visible label and its error shown next to it (linked with
 * `aria-describedby`, marked `aria-invalid`): text and number fields (with a unit), a type multi-select
 * (checkboxes), an attack list editor and an evolution list editor.
 */
import { type ReactNode, useState } from 'react';
import type { CreatureLink, CreatureSummary } from './graphql.ts';

/** The error text under a control; `id` is what the control's `aria-describedby` names. */
function FieldError({ id, message }: { id: string; message: string | undefined }) {
  if (!message) return null;
  return (
    <p id={id} className="field-error">
      {message}
    </p>
  );
}

/** Props of {@link Field}. */
export interface FieldProps {
  id: string;
  label: string;
  value: string;
  onChange: (value: string) => void;
  error?: string;
  /** Shown under the label. */
  hint?: string;
  /** `number` for a number field (then `unit`, `step`, `min`, `max` apply). */
  type?: 'text' | 'number';
  unit?: string;
  step?: string;
  min?: number;
  max?: number;
}

/** A labelled text or number input; a number's unit is shown after it and is part of its label. */
export function Field(props: FieldProps) {
  const errorId = `${props.id}-error`;
  const hintId = `${props.id}-hint`;
  const described = [props.hint ? hintId : null, props.error ? errorId : null].filter(Boolean).join(' ');
  return (
    <div className={`field${props.error ? ' invalid' : ''}`}>
      <label htmlFor={props.id}>
        {props.label}
        {props.unit && <span className="visually-hidden"> ({props.unit})</span>}
      </label>
      {props.hint && (
        <p id={hintId} className="hint">
          {props.hint}
        </p>
      )}
      <div className="input-with-unit">
        <input
          id={props.id}
          name={props.id}
          type={props.type ?? 'text'}
          inputMode={props.type === 'number' ? 'decimal' : undefined}
          step={props.step}
          min={props.min}
          max={props.max}
          value={props.value}
          aria-invalid={props.error ? true : undefined}
          aria-describedby={described || undefined}
          onChange={(e) => props.onChange(e.target.value)}
        />
        {props.unit && (
          <span className="unit" aria-hidden="true">
            {props.unit}
          </span>
        )}
      </div>
      <FieldError id={errorId} message={props.error} />
    </div>
  );
}

/** Props of {@link TypeChooser}. */
export interface TypeChooserProps {
  id: string;
  legend: string;
  choices: string[];
  value: string[];
  onChange: (value: string[]) => void;
  error?: string;
}

/** A multi-select of elemental types: a group of checkboxes shown as coloured toggles. */
export function TypeChooser(props: TypeChooserProps) {
  const errorId = `${props.id}-error`;
  const has = (t: string) => props.value.some((v) => v.toLowerCase() === t.toLowerCase());
  const toggle = (t: string) =>
    props.onChange(
      has(t) ? props.value.filter((v) => v.toLowerCase() !== t.toLowerCase()) : [...props.value, t],
    );
  return (
    <fieldset
      id={props.id}
      className={`type-chooser${props.error ? ' invalid' : ''}`}
      aria-describedby={props.error ? errorId : undefined}
      tabIndex={-1}
    >
      <legend>{props.legend}</legend>
      <div className="chips">
        {props.choices.map((t) => (
          <label key={t} className={`chip${has(t) ? ' on' : ''}`}>
            <input type="checkbox" checked={has(t)} onChange={() => toggle(t)} />
            <span className={`type type-${t.toLowerCase()}`}>{t}</span>
          </label>
        ))}
      </div>
      <FieldError id={errorId} message={props.error} />
    </fieldset>
  );
}

/** An attack being edited; `key` keeps React's rows stable while rows are added and removed. */
export interface AttackDraft {
  key: number;
  name: string;
  type: string;
  damage: string;
}

let nextAttackKey = 1;
/** A new {@link AttackDraft} with a fresh key. */
export function attackDraft(name = '', type = 'Normal', damage = ''): AttackDraft {
  return { key: nextAttackKey++, name, type, damage };
}

/** Props of {@link AttackEditor}. */
export interface AttackEditorProps {
  /** `fast` or `special`: the prefix of the rows' ids and error keys (`fast.0.name`). */
  id: string;
  legend: string;
  /** What one attack is called in the buttons, e.g. "fast attack". */
  noun: string;
  attacks: AttackDraft[];
  onChange: (attacks: AttackDraft[]) => void;
  types: string[];
  errors: Record<string, string>;
}

/** Edits a list of attacks: name, type and damage per row; add and remove rows. */
export function AttackEditor(props: AttackEditorProps) {
  const set = (i: number, patch: Partial<AttackDraft>) =>
    props.onChange(props.attacks.map((a, j) => (j === i ? { ...a, ...patch } : a)));
  const remove = (i: number) => props.onChange(props.attacks.filter((_, j) => j !== i));
  const listError = props.errors[props.id];
  return (
    <fieldset id={props.id} className="attack-editor" tabIndex={-1}>
      <legend>{props.legend}</legend>
      {props.attacks.length === 0 ? (
        <p className="empty">None yet.</p>
      ) : (
        <div className="attack-head" aria-hidden="true">
          <span>Name</span>
          <span>Type</span>
          <span>Damage</span>
        </div>
      )}
      <ol>
        {props.attacks.map((a, i) => {
          const row = `${props.id}.${i}`;
          const n = i + 1;
          return (
            <li key={a.key} className="attack-row">
              <Field
                id={`${row}.name`}
                label={`Name of ${props.noun} ${n}`}
                value={a.name}
                onChange={(name) => set(i, { name })}
                error={props.errors[`${row}.name`]}
              />
              <div className={`field${props.errors[`${row}.type`] ? ' invalid' : ''}`}>
                <label htmlFor={`${row}.type`}>{`Type of ${props.noun} ${n}`}</label>
                <select id={`${row}.type`} value={a.type} onChange={(e) => set(i, { type: e.target.value })}>
                  {props.types.map((t) => (
                    <option key={t}>{t}</option>
                  ))}
                </select>
              </div>
              <Field
                id={`${row}.damage`}
                label={`Damage of ${props.noun} ${n}`}
                type="number"
                step="1"
                min={0}
                value={a.damage}
                onChange={(damage) => set(i, { damage })}
                error={props.errors[`${row}.damage`]}
              />
              <button type="button" className="remove" onClick={() => remove(i)}>
                Remove <span className="visually-hidden">{`${props.noun} ${n}`}</span>
              </button>
            </li>
          );
        })}
      </ol>
      <button type="button" onClick={() => props.onChange([...props.attacks, attackDraft()])}>
        Add {props.noun}
      </button>
      <FieldError id={`${props.id}-error`} message={listError} />
    </fieldset>
  );
}

/** Props of {@link EvolutionEditor}. */
export interface EvolutionEditorProps {
  id: string;
  legend: string;
  hint: string;
  value: CreatureLink[];
  onChange: (value: CreatureLink[]) => void;
  /** Every creature, for choosing by name. */
  creatures: CreatureSummary[];
  /** The id of the creature being edited (not offered). */
  self: string | undefined;
  error?: string;
}

/** Edits a list of creatures (evolutions): each with a remove button, and a name field with suggestions to add one. */
export function EvolutionEditor(props: EvolutionEditorProps): ReactNode {
  const [name, setName] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const inputId = `${props.id}-add`;
  const listId = `${props.id}-names`;
  const errorId = `${props.id}-error`;
  const add = () => {
    const wanted = name.trim().toLowerCase();
    const found = props.creatures.find((c) => c.name.toLowerCase() === wanted);
    if (!found) return setProblem(`No creature is called “${name.trim()}”.`);
    if (found.id === props.self) return setProblem('A creature cannot be its own evolution.');
    setProblem(null);
    setName('');
    if (!props.value.some((v) => v.id === found.id))
      props.onChange([...props.value, { id: found.id, name: found.name }]);
  };
  const message = problem ?? props.error;
  return (
    <fieldset id={props.id} className="evolution-editor" tabIndex={-1}>
      <legend>{props.legend}</legend>
      <p className="hint">{props.hint}</p>
      {props.value.length === 0 ? (
        <p className="empty">None.</p>
      ) : (
        <ul className="chips">
          {props.value.map((c) => (
            <li key={c.id} className="chip on">
              {c.name}
              <button
                type="button"
                className="link"
                aria-label={`Remove ${c.name}`}
                onClick={() => props.onChange(props.value.filter((v) => v.id !== c.id))}
              >
                ✕
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="add-row">
        <label htmlFor={inputId} className="visually-hidden">
          {`Add to ${props.legend.toLowerCase()}`}
        </label>
        <input
          id={inputId}
          list={listId}
          placeholder="Creature name"
          value={name}
          aria-invalid={message ? true : undefined}
          aria-describedby={message ? errorId : undefined}
          onChange={(e) => setName(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter') {
              e.preventDefault();
              add();
            }
          }}
        />
        <datalist id={listId}>
          {props.creatures
            .filter((c) => c.id !== props.self)
            .map((c) => (
              <option key={c.id} value={c.name} />
            ))}
        </datalist>
        <button type="button" onClick={add} disabled={name.trim() === ''}>
          Add <span className="visually-hidden">{`to ${props.legend.toLowerCase()}`}</span>
        </button>
      </div>
      <FieldError id={errorId} message={message ?? undefined} />
    </fieldset>
  );
}
