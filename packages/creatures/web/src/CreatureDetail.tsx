/** One creature's full detail: measures, attacks, evolutions as links; edit and delete. */
import { useEffect, useRef, useState } from 'react';
import { useMutation, useQuery } from 'urql';
import type { CreatureChangeSignal } from './App.tsx';
import { CreatureKind, TypeBadge } from './CreatureList.tsx';
import { CreaturePicture } from './CreaturePicture.tsx';
import { ErrorNotice } from './ErrorNotice.tsx';
import { type Attack, CreatureQuery, DeleteCreatureMutation, type Dimension, errorText } from './graphql.ts';
import { PageHeading } from './PageHeading.tsx';
import { creatureHref, navigate } from './route.ts';

/** Shows the creature called `name`; refreshes when `change` concerns it. */
export function CreatureDetailView({ name, change }: { name: string; change: CreatureChangeSignal | null }) {
  const [result, refetch] = useQuery({ query: CreatureQuery, variables: { name } });
  const [deleting, deleteCreature] = useMutation(DeleteCreatureMutation);
  const [confirming, setConfirming] = useState(false);
  const cancelRef = useRef<HTMLButtonElement>(null);
  const deleteRef = useRef<HTMLButtonElement>(null);
  const asked = useRef(false);
  const [deleteError, setDeleteError] = useState<string | null>(null);
  const creature = result.data?.creature;

  useEffect(() => {
    if (!change) return;
    const lower = name.toLowerCase();
    if (change.id === creature?.id || change.name.toLowerCase() === lower) {
      refetch({ requestPolicy: 'network-only' });
    }
  }, [change, creature?.id, name, refetch]);

  // Keyboard focus follows the swap of Delete for "Yes, delete"/"Cancel" and back.
  useEffect(() => {
    if (confirming) cancelRef.current?.focus();
    else if (asked.current) deleteRef.current?.focus();
    asked.current = confirming;
  }, [confirming]);

  if (result.error) return <ErrorNotice error={result.error} />;
  if (!result.data) return <p role="status">Loading {name}…</p>;
  if (!creature) {
    return (
      <div className="detail">
        <PageHeading title="Not found">{name}</PageHeading>
        <p role="status">There is no creature called “{name}”. It may have been renamed or deleted.</p>
        <p>
          <a href="#/">Back to the home page</a>
        </p>
      </div>
    );
  }

  const remove = async () => {
    const done = await deleteCreature({ id: creature.id });
    if (done.error) setDeleteError(errorText(done.error));
    else navigate('#/');
  };

  return (
    <article className="detail" aria-labelledby="creature-name">
      <header className="detail-header">
        <CreaturePicture creature={creature} size={128} />
        <div>
          <PageHeading title={creature.name} id="creature-name">
            {creature.name} <span className="id">#{creature.id}</span>
          </PageHeading>
          <CreatureKind creature={creature} />
        </div>
      </header>
      <div className="detail-actions">
        <div className="actions">
          <a className="button" href={`${creatureHref(creature.name)}/edit`}>
            Edit
          </a>
          {confirming ? (
            <>
              <button type="button" className="danger" onClick={remove} disabled={deleting.fetching}>
                Yes, delete {creature.name}
              </button>
              <button type="button" ref={cancelRef} onClick={() => setConfirming(false)}>
                Cancel
              </button>
            </>
          ) : (
            <button type="button" className="danger" ref={deleteRef} onClick={() => setConfirming(true)}>
              Delete
            </button>
          )}
        </div>
        {deleteError && <ErrorNotice error={deleteError} />}
      </div>

      <dl className="facts">
        <Fact label="Weight" value={range(creature.weight)} />
        <Fact label="Height" value={range(creature.height)} />
        <Fact label="Max CP" value={creature.maxCP} />
        <Fact label="Max HP" value={creature.maxHP} />
        <Fact
          label="Flee rate"
          value={creature.fleeRate === null ? null : `${Math.round(creature.fleeRate * 100)}%`}
        />
        <Fact label="Resistant to" value={creature.resistant.join(', ')} />
        <Fact label="Weak against" value={creature.weaknesses.join(', ')} />
        <Fact
          label="Evolves with"
          value={
            creature.evolutionRequirements &&
            `${creature.evolutionRequirements.amount} ${creature.evolutionRequirements.name}`
          }
        />
      </dl>

      <section aria-label="Attacks" className="attacks">
        <AttackTable title="Fast attacks" attacks={creature.attacks.fast} />
        <AttackTable title="Special attacks" attacks={creature.attacks.special} />
      </section>

      <section aria-label="Evolutions" className="evolutions">
        <h2>Evolutions</h2>
        {creature.previousEvolutions.length === 0 && creature.evolutions.length === 0 ? (
          <p>None.</p>
        ) : (
          <ol className="chain">
            {creature.previousEvolutions.map((e) => (
              <li key={e.id}>
                <a href={creatureHref(e.name)}>{e.name}</a>
              </li>
            ))}
            <li aria-current="page">
              <strong>{creature.name}</strong>
            </li>
            {creature.evolutions.map((e) => (
              <li key={e.id}>
                <a href={creatureHref(e.name)}>{e.name}</a>
              </li>
            ))}
          </ol>
        )}
      </section>
    </article>
  );
}

function range(d: Dimension | null): string | null {
  if (!d || (d.minimum === null && d.maximum === null)) return null;
  return `${d.minimum ?? '?'} – ${d.maximum ?? '?'}`;
}

function Fact({ label, value }: { label: string; value: string | number | null | undefined }) {
  return (
    <div>
      <dt>{label}</dt>
      <dd>{value === null || value === undefined || value === '' ? '—' : value}</dd>
    </div>
  );
}

function AttackTable({ title, attacks }: { title: string; attacks: Attack[] }) {
  return (
    <table>
      <caption>{title}</caption>
      <thead>
        <tr>
          <th scope="col">Name</th>
          <th scope="col">Type</th>
          <th scope="col">Damage</th>
        </tr>
      </thead>
      <tbody>
        {attacks.length === 0 ? (
          <tr>
            <td colSpan={3}>None</td>
          </tr>
        ) : (
          attacks.map((a) => (
            <tr key={`${a.name}-${a.type}`}>
              <td>{a.name}</td>
              <td>
                <TypeBadge type={a.type} />
              </td>
              <td className="number">{a.damage}</td>
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}
