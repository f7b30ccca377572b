/**
 * The creature list: search by name (as you type), filter by type, sort; pages of the `creaturesConnection`
 * query with a "Show more" button at the end. Each row shows the creature's picture, number, name and types.
 */
import { useEffect, useRef, useState } from 'react';
import { useQuery } from 'urql';
import { CreaturePicture } from './CreaturePicture.tsx';
import { ErrorNotice } from './ErrorNotice.tsx';
import {
  type CreatureOrderField,
  CreaturePageQuery,
  type CreaturePageVariables,
  type CreatureSummary,
} from './graphql.ts';
import { creatureHref } from './route.ts';

/** Creatures per page of the list. */
export const PAGE_SIZE = 50;

/** The list's sort orders, as offered in its "Sort by" select. */
const ORDERS: { value: string; label: string; field: CreatureOrderField; direction: 'ASC' | 'DESC' }[] = [
  { value: 'number', label: 'Number', field: 'NUMBER', direction: 'ASC' },
  { value: 'name', label: 'Name', field: 'NAME', direction: 'ASC' },
  { value: 'cp', label: 'Max CP, highest first', field: 'MAX_CP', direction: 'DESC' },
  { value: 'hp', label: 'Max HP, highest first', field: 'MAX_HP', direction: 'DESC' },
];

/** Props of {@link CreatureList}. */
export interface CreatureListProps {
  /** How many creatures there are in all; undefined while loading. */
  total: number | undefined;
  types: string[];
  type: string;
  onType: (type: string) => void;
  search: string;
  onSearch: (search: string) => void;
  /** Changes whenever a creature changed anywhere: the shown pages are fetched again. */
  refresh: number;
  /** Name of the creature shown in the main column, highlighted in the list. */
  selected: string | undefined;
}

/** Returns `value` once it has stayed the same for `ms` milliseconds. */
function useDebounced<T>(value: T, ms: number): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}

/** The searchable, filterable, sortable list of creatures, each a link to its detail. */
export function CreatureList(props: CreatureListProps) {
  const [order, setOrder] = useState('number');
  const [matching, setMatching] = useState<number | undefined>(undefined);
  const search = useDebounced(props.search.trim(), 150);
  const sort = ORDERS.find((o) => o.value === order) ?? ORDERS[0];
  const variables: Omit<CreaturePageVariables, 'after'> = {
    first: PAGE_SIZE,
    search: search || null,
    type: props.type || null,
    orderBy: { field: sort?.field ?? 'NUMBER', direction: sort?.direction ?? 'ASC' },
  };
  const filtered = search !== '' || props.type !== '';
  let count = 'Loading…';
  if (matching !== undefined && props.total !== undefined) {
    count = filtered ? `${matching} of ${props.total} match` : `${props.total} creatures`;
  }
  return (
    <div className="creature-list">
      <div className="filters">
        <input
          type="search"
          aria-label="Search by name"
          placeholder="Search by name"
          value={props.search}
          onChange={(e) => props.onSearch(e.target.value)}
        />
        <div className="filter-row">
          <select
            aria-label="Filter by type"
            value={props.type}
            onChange={(e) => props.onType(e.target.value)}
          >
            <option value="">All types</option>
            {props.types.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
          <select aria-label="Sort by" value={order} onChange={(e) => setOrder(e.target.value)}>
            {ORDERS.map((o) => (
              <option key={o.value} value={o.value}>
                {o.label}
              </option>
            ))}
          </select>
        </div>
      </div>
      <p className="count" aria-live="polite">
        {count}
      </p>
      <Pages
        key={JSON.stringify(variables)}
        variables={variables}
        refresh={props.refresh}
        selected={props.selected?.toLowerCase()}
        onTotal={setMatching}
      />
    </div>
  );
}

interface PagesProps {
  variables: Omit<CreaturePageVariables, 'after'>;
  refresh: number;
  selected: string | undefined;
  onTotal: (total: number) => void;
}

/** The pages loaded so far, one query each (the first has no cursor, the others follow the one before). */
function Pages({ variables, refresh, selected, onTotal }: PagesProps) {
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  return (
    <ul aria-label="Creatures">
      {cursors.map((after, i) => (
        <Page
          key={after ?? ''}
          variables={{ ...variables, after }}
          refresh={refresh}
          selected={selected}
          last={i === cursors.length - 1}
          focusFirst={i > 0}
          onTotal={i === 0 ? onTotal : undefined}
          onMore={(cursor) => setCursors((list) => (list.includes(cursor) ? list : [...list, cursor]))}
        />
      ))}
    </ul>
  );
}

interface PageProps {
  variables: CreaturePageVariables;
  refresh: number;
  selected: string | undefined;
  last: boolean;
  /** Move focus to the page's first creature once it is loaded (it was asked for with "Show more"). */
  focusFirst: boolean;
  onTotal: ((total: number) => void) | undefined;
  onMore: (after: string) => void;
}

function Page({ variables, refresh, selected, last, focusFirst, onTotal, onMore }: PageProps) {
  const [result, reexecute] = useQuery({ query: CreaturePageQuery, variables });
  const firstLink = useRef<HTMLAnchorElement>(null);
  const connection = result.data?.creaturesConnection;
  const seen = useRef(refresh);

  useEffect(() => {
    if (seen.current === refresh) return;
    seen.current = refresh;
    reexecute({ requestPolicy: 'network-only' });
  }, [refresh, reexecute]);

  useEffect(() => {
    if (connection) onTotal?.(connection.totalCount);
  }, [connection, onTotal]);

  const loaded = connection !== undefined;
  useEffect(() => {
    if (loaded && focusFirst) firstLink.current?.focus();
  }, [loaded, focusFirst]);

  if (result.error) {
    return (
      <li>
        <ErrorNotice error={result.error} />
      </li>
    );
  }
  if (!connection) return null;
  return (
    <>
      {connection.edges.map(({ node: c }, i) => (
        <li key={c.id} className={c.name.toLowerCase() === selected ? 'selected' : undefined}>
          <a
            href={creatureHref(c.name)}
            ref={i === 0 ? firstLink : undefined}
            aria-current={c.name.toLowerCase() === selected ? 'page' : undefined}
          >
            <CreaturePicture creature={c} size={36} />
            <span className="row-main">
              <span className="name">{c.name}</span>{' '}
              <span className="types">
                {c.types.map((t) => (
                  <TypeBadge key={t} type={t} />
                ))}
              </span>
            </span>{' '}
            <span className="id">#{c.id}</span>
          </a>
        </li>
      ))}
      {last && connection.pageInfo.hasNextPage && connection.pageInfo.endCursor && (
        <li className="more">
          <button type="button" onClick={() => onMore(connection.pageInfo.endCursor ?? '')}>
            Show more creatures
          </button>
        </li>
      )}
    </>
  );
}

/** A small colored label of an elemental type. */
export function TypeBadge({ type }: { type: string }) {
  return <span className={`type type-${type.toLowerCase()}`}>{type}</span>;
}

/** A creature's classification ("Unclassified" without one) and its type badges, as two paragraphs. */
export function CreatureKind({ creature }: { creature: Pick<CreatureSummary, 'classification' | 'types'> }) {
  return (
    <>
      <p className="classification">{creature.classification ?? 'Unclassified'}</p>
      <p className="types">
        {creature.types.map((t) => (
          <TypeBadge key={t} type={t} />
        ))}
      </p>
    </>
  );
}
