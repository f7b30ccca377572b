/**
 * The home page: how many creatures there are, an overview of the types (each filters the list), a random
 * creature to discover, and the changes made by anyone since this page was opened.
 */
import { useMemo, useState } from 'react';
import type { CreatureChangeSignal } from './App.tsx';
import { CreatureKind } from './CreatureList.tsx';
import { CreaturePicture } from './CreaturePicture.tsx';
import type { CreatureSummary } from './graphql.ts';
import { PageHeading } from './PageHeading.tsx';
import { creatureHref } from './route.ts';

/** Props of {@link Home}. */
export interface HomeProps {
  /** Every creature; undefined while loading. */
  creatures: CreatureSummary[] | undefined;
  /** Every type, sorted. */
  types: string[];
  /** Creature changes seen since the page opened, newest first. */
  recent: CreatureChangeSignal[];
  /** Filters the creature list by a type. */
  onType: (type: string) => void;
}

/** The page at `#/`. */
export function Home({ creatures, types, recent, onType }: HomeProps) {
  const counts = useMemo(() => {
    const byType = new Map<string, number>();
    for (const c of creatures ?? []) for (const t of c.types) byType.set(t, (byType.get(t) ?? 0) + 1);
    return byType;
  }, [creatures]);

  return (
    <div className="home">
      <PageHeading title={null}>Creatures</PageHeading>
      <p className="lead">
        {creatures === undefined
          ? 'Loading creatures…'
          : `${creatures.length} creatures across ${types.length} types.`}{' '}
        Browse and search them, edit their details, and talk about them — every change, yours or another
        browser's, shows up here live.
      </p>
      <p className="home-actions">
        <button type="button" onClick={() => onType('')}>
          Browse all creatures
        </button>
        <a className="button secondary" href="#/new">
          Add a creature
        </a>
      </p>

      <RandomCreature creatures={creatures} />

      <section className="type-overview" aria-labelledby="types-title">
        <h2 id="types-title">Types</h2>
        <ul>
          {types.map((t) => (
            <li key={t}>
              <button type="button" className={`type-tile type-${t.toLowerCase()}`} onClick={() => onType(t)}>
                <span className="type-name">{t}</span>
                <span className="type-count">
                  {counts.get(t) ?? 0} <span className="visually-hidden">creatures, show them</span>
                </span>
              </button>
            </li>
          ))}
        </ul>
      </section>

      <section className="recent" aria-labelledby="recent-title">
        <h2 id="recent-title">Recent changes</h2>
        {recent.length === 0 ? (
          <p className="empty">No creature has changed since you opened this page.</p>
        ) : (
          <ul>
            {recent.map((c) => (
              <li key={c.seq}>
                <time dateTime={c.at.toISOString()}>{c.at.toLocaleTimeString()}</time>{' '}
                {c.kind === 'DELETED' ? c.name : <a href={creatureHref(c.name)}>{c.name}</a>} was{' '}
                {c.kind.toLowerCase()}
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  );
}

function RandomCreature({ creatures }: { creatures: CreatureSummary[] | undefined }) {
  const [seed, setSeed] = useState(() => Math.random());
  if (!creatures || creatures.length === 0) return null;
  const creature = creatures[Math.floor(seed * creatures.length)] ?? creatures[0];
  if (!creature) return null;
  return (
    <section className="random" aria-labelledby="random-title">
      <h2 id="random-title">Meet a creature</h2>
      <div className="random-card">
        <CreaturePicture creature={creature} size={96} />
        <div>
          <p className="random-name">
            <a href={creatureHref(creature.name)}>{creature.name}</a>{' '}
            <span className="id">#{creature.id}</span>
          </p>
          <CreatureKind creature={creature} />
        </div>
      </div>
      <button type="button" onClick={() => setSeed(Math.random())}>
        Show another
      </button>
    </section>
  );
}
