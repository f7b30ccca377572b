/** The Permissions view: the permission codes with Delete, and the "New permission" form. */
import { call, client, type paths } from './api.ts';
import { button, card, el, field, text } from './dom.ts';
import { resourceView } from './resource-view.ts';
import { act, confirmThen } from './shell.ts';

/** A permission code as the API lists it. */
export type Permission =
  paths['/permissions']['get']['responses'][200]['content']['application/json']['items'][number];

/** The Permissions view. */
export const permissionsView = resourceView<Permission>('permissions', {
  noun: 'permission(s)',
  attribute: 'permission',
  key: (p) => p.code,
  headers: ['Code', 'Description', 'Actions'],
  cells: (p) => [p.code, p.description],
  actions: (p) =>
    button(
      'Delete',
      confirmThen(`Delete permission ${p.code}?`, () =>
        act(`Deleted permission ${p.code}.`, () =>
          call(client.DELETE('/permissions/{code}', { params: { path: { code: p.code } } })),
        ),
      ),
      'danger',
    ),
  load: (query) => call(client.GET('/permissions', { params: { query } })),
  form: () =>
    card(
      { 'aria-label': 'New permission' },
      'New permission',
      [
        field('Code', el('input', { name: 'code', required: true, maxlength: 256 })),
        field('Description', el('input', { name: 'description' })),
      ],
      'Add permission',
      (data) =>
        act(
          (p) => `Added permission ${p.code}.`,
          () =>
            call(
              client.POST('/permissions', {
                body: { code: text(data, 'code'), description: text(data, 'description') },
              }),
            ),
        ),
    ),
});
