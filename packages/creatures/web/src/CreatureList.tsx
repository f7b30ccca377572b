/** The creature list: search by name (as you type), filter by type (a `creatures(type:)` query). */
import type { CreatureSummary } from './graphql.ts';
import { creatureHref } from './route.ts';

/** Props of {@link CreatureList}. */
export interface CreatureListProps {
  creatures: CreatureSummary[] | undefined;
  types: string[];
  type: string;
  onType: (type: string) => void;
  search: string;
  onSearch: (search: string) => void;
  fetching: boolean;
  /** Name of the creature shown in the main column, highlighted in the list. */
  selected: string | undefined;
}

/** The searchable, filterable list of creatures, each a link to its detail. */
export function CreatureList(props: CreatureListProps) {
  const needle = props.search.trim().toLowerCase();
  const shown = (props.creatures ?? []).filter((c) => c.name.toLowerCase().includes(needle));
  const selected = props.selected?.toLowerCase();
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
        <select aria-label="Filter by type" value={props.type} onChange={(e) => props.onType(e.target.value)}>
          <option value="">All types</option>
          {props.types.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </div>
      <p className="count" aria-live="polite">
        {props.creatures === undefined ? 'Loading…' : `${shown.length} of ${props.creatures.length} shown`}
      </p>
      <ul aria-label="Creatures">
        {shown.map((c) => (
          <li key={c.id} className={c.name.toLowerCase() === selected ? 'selected' : undefined}>
            <a href={creatureHref(c.name)}>
              <span className="id">#{c.id}</span> <span className="name">{c.name}</span>
              <span className="types">
                {c.types.map((t) => (
                  <TypeBadge key={t} type={t} />
                ))}
              </span>
            </a>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** A small colored label of an elemental type. */
export function TypeBadge({ type }: { type: string }) {
  return <span className={`type type-${type.toLowerCase()}`}>{type}</span>;
}
