/** The Roles view: the list with Delete (not for built-in roles), the editor and the "New role" form. */
import { call, client, type paths } from './api.ts';
import { button, card, el, field, joined, listField, text } from './dom.ts';
import { mfaRequirement } from './mfa.ts';
import { resourceView } from './resource-view.ts';
import { act, confirmThen } from './shell.ts';

/** A role as the API lists it. */
export type Role = paths['/roles/{id}']['get']['responses'][200]['content']['application/json'];
type NewRole = paths['/roles']['post']['requestBody']['content']['application/json'];
type RoleChanges = NonNullable<paths['/roles/{id}']['patch']['requestBody']>['content']['application/json'];

/** The Roles view. */
export const rolesView = resourceView<Role>('roles', {
  noun: 'role(s)',
  attribute: 'role',
  key: (role) => role.name,
  headers: ['Name', 'Description', 'Permissions', 'Denied', 'Parents', 'Kind', 'Actions'],
  cells: (role) => [
    role.name,
    role.description,
    joined(role.permissions),
    joined(role.deniedPermissions),
    joined(role.parentRoles),
    role.isSystem ? 'built-in' : '',
  ],
  actions: (role) =>
    role.isSystem
      ? null
      : button(
          'Delete',
          confirmThen(`Delete role ${role.name}?`, () =>
            act(`Deleted role ${role.name}.`, () =>
              call(client.DELETE('/roles/{id}', { params: { path: { id: role.id } } })),
            ),
          ),
          'danger',
        ),
  editor: roleEditor,
  load: (query) => call(client.GET('/roles', { params: { query } })),
  form: () =>
    card(
      { 'aria-label': 'New role' },
      'New role',
      [
        field('Name', el('input', { name: 'name', required: true, maxlength: 64 })),
        field('Description', el('input', { name: 'description' })),
        field('Permissions', el('input', { name: 'permissions' })),
        field('Denied permissions', el('input', { name: 'deniedPermissions' })),
      ],
      'Create role',
      (data) => {
        const body: NewRole = { name: text(data, 'name'), description: text(data, 'description') };
        const permissions = listField(data, 'permissions');
        const denied = listField(data, 'deniedPermissions');
        if (permissions.length) body.permissions = permissions;
        if (denied.length) body.deniedPermissions = denied;
        act(
          (role) => `Created role ${role.name}.`,
          () => call(client.POST('/roles', { body })),
        );
      },
    ),
});

function roleEditor(role: Role): Node {
  const form = card(
    { 'aria-label': `Edit role ${role.name}` },
    `Edit ${role.name}`,
    [
      field('Name', el('input', { name: 'name', value: role.name, required: true, disabled: role.isSystem })),
      field('Description', el('input', { name: 'description', value: role.description })),
      field(
        'Permissions',
        el('input', { name: 'permissions', value: joined(role.permissions), disabled: role.isSystem }),
      ),
      field(
        'Denied permissions',
        el('input', {
          name: 'deniedPermissions',
          value: joined(role.deniedPermissions),
          disabled: role.isSystem,
        }),
      ),
      field(
        'Parent roles',
        el('input', { name: 'parentRoles', value: joined(role.parentRoles), disabled: role.isSystem }),
      ),
    ],
    'Save role',
    (data) => {
      const body: RoleChanges = { description: text(data, 'description') };
      if (!role.isSystem) {
        body.name = text(data, 'name');
        body.permissions = listField(data, 'permissions');
        body.deniedPermissions = listField(data, 'deniedPermissions');
        body.parentRoles = listField(data, 'parentRoles');
      }
      act(`Saved role ${body.name ?? role.name}.`, () =>
        call(client.PATCH('/roles/{id}', { params: { path: { id: role.id } }, body })),
      );
    },
  );
  return el('div', {}, form, mfaRequirement({ kind: 'role', id: role.id }, `role ${role.name}`));
}
