/**
 * The page: the creature list with search and type filter on the left, the selected creature (or a form)
 * in the middle, the message board on the right. Changes made in any browser arrive over the
 * `creatureChanged` subscription and refresh what is shown.
 */
import { useEffect, useMemo, useState, useSyncExternalStore } from 'react';
import { useQuery, useSubscription } from 'urql';
import { CreatureDetailView } from './CreatureDetail.tsx';
import { CreateCreaturePage, EditCreaturePage } from './CreatureForm.tsx';
import { CreatureList } from './CreatureList.tsx';
import { ErrorNotice } from './ErrorNotice.tsx';
import {
  type ChangeKind,
  CreatureChangedSubscription,
  CreaturesQuery,
  getLiveStatus,
  onLiveStatus,
} from './graphql.ts';
import { MessageBoard } from './Messages.tsx';
import { useRoute } from './route.ts';

/** The last creature change seen on the subscription, with a sequence number so equal changes re-trigger. */
export interface CreatureChangeSignal {
  seq: number;
  kind: ChangeKind;
  id: string;
  name: string;
}

/** The whole page. */
export function App() {
  const route = useRoute();
  const [type, setType] = useState('');
  const [search, setSearch] = useState('');
  const [list, refetchList] = useQuery({ query: CreaturesQuery, variables: { type: type || null } });
  const [changes] = useSubscription({ query: CreatureChangedSubscription });
  const [change, setChange] = useState<CreatureChangeSignal | null>(null);
  const live = useSyncExternalStore(onLiveStatus, getLiveStatus);

  useEffect(() => {
    const event = changes.data?.creatureChanged;
    if (!event) return;
    setChange((previous) => ({ seq: (previous?.seq ?? 0) + 1, ...event }));
    refetchList({ requestPolicy: 'network-only' });
  }, [changes.data, refetchList]);

  const types = useMemo(() => {
    const all = new Set<string>();
    for (const creature of list.data?.all ?? []) for (const t of creature.types) all.add(t);
    return [...all].sort();
  }, [list.data]);

  const selected = route.page === 'creature' || route.page === 'edit' ? route.name : undefined;

  return (
    <div className="app">
      <header className="top">
        <h1>
          <a href="#/">Creatures</a>
        </h1>
        <nav>
          <a className="button" href="#/new">
            New creature
          </a>
          <a href="/graphql">GraphQL explorer</a>
          <span className={`live ${live}`} title="Live updates from other browsers">
            {live}
          </span>
        </nav>
      </header>
      {changes.error && (
        <div className="banner">
          <ErrorNotice error={changes.error} />
        </div>
      )}
      {change && (
        <output className="change" key={change.seq} aria-live="polite">
          {change.name} was {change.kind.toLowerCase()}
        </output>
      )}
      <main className="columns">
        <aside className="list-column">
          <CreatureList
            creatures={list.data?.creatures}
            types={types}
            type={type}
            onType={setType}
            search={search}
            onSearch={setSearch}
            fetching={list.fetching}
            selected={selected}
          />
          {list.error && <ErrorNotice error={list.error} />}
        </aside>
        <section className="main-column">
          {route.page === 'home' && <Home count={list.data?.all.length} />}
          {route.page === 'new' && <CreateCreaturePage />}
          {route.page === 'creature' && (
            <CreatureDetailView key={route.name} name={route.name} change={change} />
          )}
          {route.page === 'edit' && <EditCreaturePage name={route.name} change={change} />}
        </section>
        <aside className="messages-column">
          <MessageBoard />
        </aside>
      </main>
    </div>
  );
}

function Home({ count }: { count: number | undefined }) {
  return (
    <div className="home">
      <h2>Welcome</h2>
      <p>
        {count === undefined ? 'Loading creatures…' : `${count} creatures`} to browse. Pick one from the list,
        search by name or filter by type. Every change — yours or another browser's — shows up here live.
      </p>
    </div>
  );
}
