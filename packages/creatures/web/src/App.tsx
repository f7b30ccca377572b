/**
 * The page: a skip link, the site header, then the main content (home, a creature, or a form), the creature
 * list with search and type filter, and the message board. In the DOM (and so in Tab order and on a phone)
 * the main content comes first; on a wide screen the list is shown to its left and the board to its right.
 * Changes made in any browser arrive over the `creatureChanged` subscription and refresh what is shown.
 */
import {
  type MouseEvent,
  type RefObject,
  useCallback,
  useEffect,
  useMemo,
  useRef,
  useState,
  useSyncExternalStore,
} from 'react';
import { useQuery, useSubscription } from 'urql';
import { CreatureDetailView } from './CreatureDetail.tsx';
import { CreateCreaturePage, EditCreaturePage } from './CreatureForm.tsx';
import { CreatureList } from './CreatureList.tsx';
import { ErrorNotice } from './ErrorNotice.tsx';
import {
  AllCreaturesQuery,
  type ChangeKind,
  CreatureChangedSubscription,
  getLiveStatus,
  onLiveStatus,
} from './graphql.ts';
import { Home } from './Home.tsx';
import { MessageBoard } from './Messages.tsx';
import { useRoute } from './route.ts';

/** The last creature change seen on the subscription, with a sequence number so equal changes re-trigger. */
export interface CreatureChangeSignal {
  seq: number;
  kind: ChangeKind;
  id: string;
  name: string;
  /** When the page received it. */
  at: Date;
}

/** Most changes kept for the home page's "recent changes". */
const RECENT_CHANGES = 8;

/** The whole page. */
export function App() {
  const route = useRoute();
  const [type, setType] = useState('');
  const [search, setSearch] = useState('');
  const [all, refetchAll] = useQuery({ query: AllCreaturesQuery });
  const [changes] = useSubscription({ query: CreatureChangedSubscription });
  const [recent, setRecent] = useState<CreatureChangeSignal[]>([]);
  const change = recent[0] ?? null;
  const live = useSyncExternalStore(onLiveStatus, getLiveStatus);
  const mainRef = useRef<HTMLElement>(null);
  const listRef = useRef<HTMLElement>(null);

  useEffect(() => {
    const event = changes.data?.creatureChanged;
    if (!event) return;
    setRecent((previous) =>
      [{ seq: (previous[0]?.seq ?? 0) + 1, at: new Date(), ...event }, ...previous].slice(0, RECENT_CHANGES),
    );
    refetchAll({ requestPolicy: 'network-only' });
  }, [changes.data, refetchAll]);

  const types = useMemo(() => {
    const found = new Set<string>();
    for (const creature of all.data?.creatures ?? []) for (const t of creature.types) found.add(t);
    return [...found].sort();
  }, [all.data]);

  /** Filters the list by a type and moves focus to the list (from the home page's type overview). */
  const showType = useCallback((t: string) => {
    setType(t);
    setSearch('');
    listRef.current?.scrollIntoView({ block: 'start' });
    listRef.current?.focus({ preventScroll: true });
  }, []);

  /** A skip link's click: focuses its target without touching the hash, which holds the route. */
  const skipTo = (target: RefObject<HTMLElement | null>) => (e: MouseEvent) => {
    e.preventDefault();
    target.current?.scrollIntoView({ block: 'start' });
    target.current?.focus({ preventScroll: true });
  };

  const selected = route.page === 'creature' || route.page === 'edit' ? route.name : undefined;

  return (
    <div className={`app page-${route.page}`}>
      <nav className="skip-links" aria-label="Skip links">
        {/* biome-ignore lint/a11y/useValidAnchor: the hash holds the route, so a skip link's click focuses its target itself */}
        <a href="#content" onClick={skipTo(mainRef)}>
          Skip to content
        </a>
        {/* biome-ignore lint/a11y/useValidAnchor: as above */}
        <a href="#creature-list" onClick={skipTo(listRef)}>
          Skip to creature list
        </a>
      </nav>
      <header className="top">
        <a className="brand" href="#/">
          <span aria-hidden="true" className="brand-mark" />
          Creatures
        </a>
        <nav aria-label="Site">
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
      <div className="columns">
        <main id="content" className="main-column" ref={mainRef} tabIndex={-1}>
          {route.page === 'home' && (
            <Home creatures={all.data?.creatures} types={types} recent={recent} onType={showType} />
          )}
          {route.page === 'new' && <CreateCreaturePage />}
          {route.page === 'creature' && (
            <CreatureDetailView key={route.name} name={route.name} change={change} />
          )}
          {route.page === 'edit' && <EditCreaturePage key={route.name} name={route.name} change={change} />}
        </main>
        <aside
          id="creature-list"
          className="list-column"
          aria-labelledby="list-title"
          ref={listRef}
          tabIndex={-1}
        >
          <h2 id="list-title" className="column-title">
            All creatures
          </h2>
          <CreatureList
            total={all.data?.creatures.length}
            types={types}
            type={type}
            onType={setType}
            search={search}
            onSearch={setSearch}
            refresh={change?.seq ?? 0}
            selected={selected}
          />
          {all.error && <ErrorNotice error={all.error} />}
        </aside>
        <aside className="messages-column" aria-labelledby="messages-title">
          <MessageBoard />
        </aside>
      </div>
    </div>
  );
}
