/**
 * The list view of one resource of the API (users, roles, clients, permissions): a search on the name / id
 * (the API's `search`), "showing n of total", a table with a row per item, the editor's place and the
 * resource's "new" form.
 */
import { PAGE } from './config.ts';
import { button, type Child, el, field, table } from './dom.ts';
import { show, type View } from './shell.ts';

/** The resources with a list view. */
export type ResourceKind = 'users' | 'roles' | 'clients' | 'permissions';

/** A page of a list endpoint (`GET {BasePath}/api/{kind}?limit&search`). */
export interface ListPage<T> {
  items: T[];
  total: number;
}

/** How one resource is listed, edited and created. */
export interface Resource<T> {
  /** The plural noun of the count, e.g. `user(s)`. */
  noun: string;
  /** The row attribute: each row has `data-{attribute}` = `key(item)`. */
  attribute: string;
  key: (item: T) => string;
  headers: readonly string[];
  /** The texts of the cells before the actions. */
  cells: (item: T) => readonly (string | null | undefined)[];
  /** The buttons of a row after Edit. */
  actions: (item: T) => Child;
  /** The editor shown below the table by a row's Edit button (none: no Edit button). */
  editor?: (item: T) => Node;
  /** The "new" form below. */
  form: () => Node;
  /** One page of the list: `limit` items, filtered by `search` when given. */
  load: (query: { limit: number; search?: string }) => Promise<ListPage<T>>;
}

const searches: Record<ResourceKind, string> = { users: '', roles: '', clients: '', permissions: '' };

function searchBar(kind: ResourceKind, page: ListPage<unknown>, noun: string): HTMLFormElement {
  const form = el(
    'form',
    { class: 'fields', role: 'search', 'aria-label': `Search ${kind}` },
    field('Search', el('input', { name: 'search', type: 'search', value: searches[kind], maxlength: 256 })),
    el('button', { type: 'submit', class: 'secondary', text: 'Search' }),
    el('span', {
      text: `${page.items.length < page.total ? `showing ${page.items.length} of ` : ''}${page.total} ${noun}`,
    }),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    searches[kind] = String(new FormData(form).get('search') ?? '').trim();
    show(kind);
  });
  return form;
}

/** The view of `resource`: search bar, table (cells, then Edit and the actions), editor place, "new" form. */
export function resourceView<T>(kind: ResourceKind, resource: Resource<T>): View {
  return async () => {
    const page = await resource.load(
      searches[kind] ? { limit: PAGE, search: searches[kind] } : { limit: PAGE },
    );
    const editor = resource.editor ? el('div') : null;
    const edit = resource.editor;
    const rows = page.items.map((item) =>
      el(
        'tr',
        { [`data-${resource.attribute}`]: resource.key(item) },
        resource.cells(item).map((text) => el('td', { text })),
        el(
          'td',
          { class: 'actions' },
          edit && editor ? button('Edit', () => editor.replaceChildren(edit(item))) : null,
          resource.actions(item),
        ),
      ),
    );
    return el(
      'div',
      {},
      searchBar(kind, page, resource.noun),
      table(resource.headers, rows),
      editor,
      resource.form(),
    );
  };
}
