/**
 * Filtering, searching, ordering and paging of the creature list, shared by `Query.creatures` (a plain
 * list) and `Query.creaturesConnection` (a Relay-style connection: GraphQL Cursor Connections
 * Specification, https://relay.dev/graphql/connections.htm). Errors are `BAD_USER_INPUT` GraphQL errors
 * naming the argument and the rule.
 */
import { badUserInput } from './errors.ts';
import { type Creature, nameKey } from './store.ts';

/** Largest page `first:` accepts on both list fields. */
export const MAX_PAGE_SIZE = 500;
/** Most ids `Query.nodes` takes. */
export const MAX_NODES = 100;
/** Page size of `creaturesConnection` without `first:` or `last:`. */
export const DEFAULT_CONNECTION_PAGE = 50;

/** Fields the list can be ordered by (`enum CreatureOrderField`). */
export const CreatureOrderField = {
  NUMBER: 'NUMBER',
  NAME: 'NAME',
  MAX_CP: 'MAX_CP',
  MAX_HP: 'MAX_HP',
} as const;
/** One of {@link CreatureOrderField}. */
export type CreatureOrderField = (typeof CreatureOrderField)[keyof typeof CreatureOrderField];

/** `input CreatureOrder`: a field and a direction (`ASC` or `DESC`). */
export interface CreatureOrder {
  field?: CreatureOrderField | null;
  direction?: 'ASC' | 'DESC' | null;
}

/** The selection arguments both list fields take. */
export interface ListFilter {
  /** Keeps creatures with this type (any case). */
  type?: string | null;
  /** Keeps creatures whose name contains this text, compared case- and accent-insensitively. */
  search?: string | null;
  /** Order; default by number (id order), ascending. */
  orderBy?: CreatureOrder | null;
}

const numberOf = (c: Creature) => (/^\d+$/.test(c.id) ? Number(c.id) : Number.POSITIVE_INFINITY);

/** Sorts with nulls last whatever the direction, then by number so the order is total and stable. */
function comparator(
  order: CreatureOrder | null | undefined,
): ((a: Creature, b: Creature) => number) | undefined {
  const field = order?.field ?? 'NUMBER';
  const sign = order?.direction === 'DESC' ? -1 : 1;
  if (field === 'NUMBER') return sign === 1 ? undefined : (a, b) => numberOf(b) - numberOf(a);
  const key: (c: Creature) => string | number | null =
    field === 'NAME' ? (c) => c.name.toLowerCase() : field === 'MAX_CP' ? (c) => c.maxCP : (c) => c.maxHP;
  return (a, b) => {
    const x = key(a);
    const y = key(b);
    if (x === null || y === null) {
      if (x !== y) return x === null ? 1 : -1;
    } else if (x !== y) {
      return (x < y ? -1 : 1) * sign;
    }
    return numberOf(a) - numberOf(b);
  };
}

/**
 * The creatures of `all` (in id order) that pass `filter`, in its order. `search` matches a substring of
 * the name in lower case or of its {@link nameKey} (so `nidoran-f` finds `Nidoran♀`). Returns `all`
 * itself when nothing filters or reorders.
 */
export function selectCreatures(all: readonly Creature[], filter: ListFilter): readonly Creature[] {
  let list = all;
  if (filter.type != null) {
    const wanted = filter.type.toLowerCase();
    list = list.filter((c) => c.types.some((t) => t.toLowerCase() === wanted));
  }
  if (filter.search != null && filter.search.trim() !== '') {
    if (filter.search.length > 100) throw badUserInput('search must be at most 100 characters');
    const text = filter.search.trim().toLowerCase();
    const key = nameKey(filter.search);
    list = list.filter(
      (c) => c.name.toLowerCase().includes(text) || (key !== '' && nameKey(c.name).includes(key)),
    );
  }
  const compare = comparator(filter.orderBy);
  return compare ? [...list].sort(compare) : list;
}

/** Checks `first:` of the field `field`: null or 0..{@link MAX_PAGE_SIZE}. */
export function checkFirst(field: string, first: number | null | undefined): void {
  if (first != null && (first < 0 || first > MAX_PAGE_SIZE)) {
    throw badUserInput(`${field}(first:) must be between 0 and ${MAX_PAGE_SIZE}, got ${first}`);
  }
}

/** The opaque cursor of a creature in a connection: base64url of `creature:<id>`. */
export function cursorOf(creature: Creature): string {
  return Buffer.from(`creature:${creature.id}`, 'utf8').toString('base64url');
}

/**
 * The index in `list` of the creature a cursor names; `BAD_USER_INPUT` naming `argument` for a foreign
 * cursor.
 */
function indexOf(list: readonly Creature[], cursor: string, argument: 'after' | 'before'): number {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8');
  const id = decoded.startsWith('creature:') ? decoded.slice('creature:'.length) : undefined;
  const index = id === undefined ? -1 : list.findIndex((c) => c.id === id);
  if (index < 0) {
    throw badUserInput(
      `creaturesConnection(${argument}:) is not a cursor of this list: "${cursor}" (use a cursor of the same search, type and orderBy)`,
    );
  }
  return index;
}

/** The index in `list` just after the creature a cursor names; `BAD_USER_INPUT` for a foreign cursor. */
export function indexAfter(list: readonly Creature[], cursor: string): number {
  return indexOf(list, cursor, 'after') + 1;
}

/** The page arguments of `creaturesConnection` (GraphQL Cursor Connections Specification §4.3). */
export interface PageArgs {
  first?: number | null;
  after?: string | null;
  last?: number | null;
  before?: string | null;
}

/** A page of `creaturesConnection` (`type CreatureConnection`). */
export interface CreaturePage {
  totalCount: number;
  edges: { cursor: string; node: Creature }[];
  nodes: Creature[];
  pageInfo: {
    hasNextPage: boolean;
    hasPreviousPage: boolean;
    startCursor: string | null;
    endCursor: string | null;
  };
}

/**
 * One page of a connection over `list`, by the GraphQL Cursor Connections Specification's algorithm
 * (§4.4 "Pagination algorithm"): `after` and `before` cut the list to the creatures between their
 * cursors, then `first` keeps the first ones and `last` the last ones (each 0..{@link MAX_PAGE_SIZE};
 * without either, the first {@link DEFAULT_CONNECTION_PAGE}). `hasNextPage` tells whether creatures follow
 * the page in the whole list, `hasPreviousPage` whether some precede it. `totalCount` counts the whole
 * filtered list. Throws `BAD_USER_INPUT` for a page size out of range or a foreign cursor.
 */
export function pageOf(list: readonly Creature[], args: PageArgs): CreaturePage {
  const { first, after, last, before } = args;
  checkFirst('creaturesConnection', first);
  if (last != null && (last < 0 || last > MAX_PAGE_SIZE)) {
    throw badUserInput(`creaturesConnection(last:) must be between 0 and ${MAX_PAGE_SIZE}, got ${last}`);
  }
  let start = after == null ? 0 : indexAfter(list, after);
  let end = before == null ? list.length : indexOf(list, before, 'before');
  if (end < start) end = start;
  if (first != null || last == null) end = Math.min(end, start + (first ?? DEFAULT_CONNECTION_PAGE));
  if (last != null) start = Math.max(start, end - last);
  const nodes = list.slice(start, end);
  const edges = nodes.map((node) => ({ cursor: cursorOf(node), node }));
  return {
    totalCount: list.length,
    edges,
    nodes,
    pageInfo: {
      hasNextPage: end < list.length,
      hasPreviousPage: start > 0,
      startCursor: edges[0]?.cursor ?? null,
      endCursor: edges.at(-1)?.cursor ?? null,
    },
  };
}
